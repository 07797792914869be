"""A transition's spans built once per shape are the spans the full encoding and content
filter give: same kind, name, attributes, ids, and the same captured texts."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from orion.trace.content import content_free
from orion.trace.encoding import encode_event
from orion.trace.events import TraceEvent
from orion.trace.shapes import Shapes

NAMES = st.sampled_from(["write_session", "plan_mode", "my team's review", "a/b"])
STATES = st.sampled_from(["idle", "session_active.receiving", "paused", "docs/guide.md",
                          "finalizing", "x" * 2000])
IDS = st.sampled_from(["", "3f2a9c1e-77b0-4c3e-9d6e-0a1b2c3d4e5f", "conv-1", "not an id",
                       "é" * 3])
SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
           | st.text(max_size=30) | st.sampled_from(["message_end", "notes.md", "create",
                                                    "Write the guide.", "y" * 1500]))
PAYLOADS = st.none() | st.dictionaries(
    st.sampled_from(["operation", "target_file", "count", "text", "id", "nested", "weird key!"]),
    SCALARS | st.lists(SCALARS, max_size=3)
    | st.dictionaries(st.sampled_from(["kind", "path", "n"]), SCALARS, max_size=3),
    max_size=4)


def _full(kind: str, name: str, fixed: dict[str, Any], payload: Any, ids: tuple[str, str],
          blobs: dict[str, str] | None) -> TraceEvent:
    attributes = dict(fixed)
    if payload is not None:
        attributes["orion.payload"] = payload
    raw = TraceEvent(kind, name, 1.7e12, ids[0], ids[1], attributes, 2.5, "a" * 32, "b" * 16,
                     "c" * 16, ("d" * 32 + "-" + "e" * 16,))
    return content_free(encode_event(raw, blobs=blobs), blobs=blobs)


@settings(max_examples=300, deadline=None)
@given(lifecycle=NAMES, trigger=STATES, source=STATES, dest=STATES | st.none(),
       payload=PAYLOADS, conversation=IDS, session=IDS, capture=st.booleans())
def test_a_shape_s_event_is_the_full_path_s(lifecycle, trigger, source, dest, payload,
                                            conversation, session, capture):
    shapes = Shapes(1024)
    fixed = {"orion.lifecycle": lifecycle, "orion.event": trigger, "orion.source": source,
             "orion.dest": dest}
    name = f"{lifecycle} {trigger}"
    expected_blobs: dict[str, str] | None = {} if capture else None
    expected = _full("transition", name, fixed, payload, (conversation, session),
                     expected_blobs)
    for _ in range(2):  # learned on the first, reused on the second
        blobs: dict[str, str] | None = {} if capture else None
        got = shapes.transition(lifecycle, trigger, source, dest, payload, 1.7e12, conversation, session,
                           2.5, "a" * 32, "b" * 16, "c" * 16,
                           ("d" * 32 + "-" + "e" * 16,), blobs)
        assert got == expected
        assert blobs == expected_blobs

