"""A renamed name of the public API keeps working for a release: the old name reads (and where
it could be set, sets) what the new one does, with a DeprecationWarning naming the new name and
the release that removes the old one; docs/api.md's deprecations table lists each rename."""

from __future__ import annotations

import asyncio
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from orion.api import Lifecycle, WriteSessionView, write_sessions
from orion.hooks.manager import make_plugin_manager
from orion.models.script import load_script
from orion.models.scripted import ScriptedModel
from orion.hooks.renames import RENAMES
from orion.runtime.runtime import Runtime

DOCS = Path(__file__).resolve().parent.parent / "docs" / "api.md"
ROW = re.compile(r"^\| `(\w+)\.(\w+)` \| `(\w+)\.(\w+)` \| ([\d.]+) \| ([\d.]+) \|", re.M)

WRITE = """
conversation:
  - model:
      tool_calls:
        - name: WritePlanTool_begin
          arguments: {intent: "notes", target_file: docs/notes.md, operation: create}
  - model: {text: "# Notes\\nDONE\\n"}
  - model: {text: "Written."}
"""


@pytest.fixture
def written(tmp_path: Path) -> Iterator[tuple[Runtime, WriteSessionView]]:
    runtime = Runtime(model=ScriptedModel(load_script("s.yaml", text=WRITE).cursor()),
                      plugins=make_plugin_manager(entrypoints=False), workspace=tmp_path)
    asyncio.run(runtime.handle("Write docs/notes.md."))
    [session] = write_sessions(runtime)
    yield runtime, session
    runtime.close()


def _old(obj: object, name: str, owner: str, new: str) -> object:
    with pytest.warns(DeprecationWarning) as caught:
        value = getattr(obj, name)
    [warning] = [w for w in caught if w.category is DeprecationWarning]
    message = str(warning.message)
    assert f"{owner}.{name} is now .{new}" in message and "goes in 0.3.0" in message, message
    assert warning.filename == __file__, "the warning points at the caller's line"
    return value


def test_lifecycle_owner_reads_and_sets_the_host(written: tuple[Runtime, WriteSessionView]
                                                 ) -> None:
    runtime, session = written
    lifecycle = session.lifecycle
    assert isinstance(lifecycle, Lifecycle)
    assert _old(lifecycle, "owner", "Lifecycle", "host") is runtime
    with pytest.warns(DeprecationWarning, match=r"Lifecycle\.owner is now \.host"):
        lifecycle.owner = None
    assert lifecycle.host is None


def test_a_views_plan_and_result_read_what_they_were_in_0_1(
        written: tuple[Runtime, WriteSessionView]) -> None:
    _, session = written
    plan = _old(session, "plan", "WriteSessionView", "file")
    assert plan.relative == session.file == "docs/notes.md"  # type: ignore[attr-defined]
    result = _old(session, "result", "WriteSessionView", "written")
    assert result is not None and session.written


def test_the_new_names_do_not_warn(written: tuple[Runtime, WriteSessionView]) -> None:
    runtime, session = written
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert session.lifecycle.host is runtime and session.file and session.written


def test_docs_list_every_rename_and_nothing_else() -> None:
    rows = {(owner, old, new, since, until)
            for owner, old, owner_again, new, since, until in ROW.findall(DOCS.read_text())
            if owner == owner_again}
    listed = {(r.owner, r.old, r.new, r.since, r.removed_in) for r in RENAMES}
    assert rows == listed, (f"docs/api.md's deprecations table and RENAMES differ"
                            f": only in docs {rows - listed}, only in code {listed - rows}")
