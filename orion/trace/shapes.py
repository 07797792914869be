"""Trace events of a known shape, made safe once per shape.

A lifecycle step records the same kinds of span again and again: a transition (its lifecycle,
trigger, source and destination, and a payload) and the phase it ends. Their kind, name and
fixed attributes are the same every time the lifecycle takes that transition, so the JSON-safe
encoding (:func:`orion.trace.encoding.encode_event`) and the content filter
(:func:`orion.trace.content.content_free`) of those parts run once per shape and are reused;
per step only the payload is encoded and filtered (nothing, when it is empty), and the ids are
checked against a cache. Whenever the result could differ from the full path's (a payload that
holds content, which would change what the name may show, or an id that is not id-shaped) the
event takes the full path: the events are the same either way (a test compares them).
"""

from __future__ import annotations

import functools
from typing import Any

from orion.trace.content import CACHED, ID, _fits, _Filter, content_free, shape_of
from orion.trace.encoding import encode_event, json_safe
from orion.trace.events import Kind, TraceEvent, make_event

#: Shapes remembered; a long chat has a few dozen (lifecycles x transitions).
MAX_SHAPES = 1024
_PAYLOAD = "orion.payload"
_PAYLOAD_SHAPE = shape_of(_PAYLOAD)


@functools.lru_cache(maxsize=CACHED)
def plain_id(value: str) -> bool:
    """Whether the filter keeps ``value`` as it is (an id under 129 characters)."""
    return type(value) is str and (not value or (len(value) <= 128 and _fits(ID, value)))


_UNKNOWN = object()


class Shapes:
    """The safe kind, name and fixed attributes of each shape seen (see the module doc)."""

    def __init__(self, max_text: int) -> None:
        self.max_text = max_text
        #: Per shape, its safe parts; ``None`` for a shape whose fixed attributes hold content.
        self._known: dict[tuple[Any, ...], tuple[str, str, dict[str, Any]] | None] = {}
        #: A transition's name and fixed attributes, by its raw parts.
        self._transitions: dict[tuple[Any, ...], tuple[str, dict[str, str | None]]] = {}

    def transition(self, lifecycle: str, trigger: str, source: str, dest: str | None,
                   payload: Any, at_ms: float, conversation_id: str, session_id: str,
                   duration_ms: float, trace_id: str, span_id: str, parent_id: str,
                   links: tuple[str, ...], blobs: dict[str, str] | None) -> TraceEvent:
        """A transition's span (:func:`orion.trace.events.transition`'s shape)."""
        key = (lifecycle, trigger, source, dest)
        known = self._transitions.get(key)
        if known is None:
            known = self._transitions[key] = (
                f"{lifecycle} {trigger}", {"orion.lifecycle": lifecycle, "orion.event": trigger,
                                           "orion.source": source, "orion.dest": dest})
            if len(self._transitions) > MAX_SHAPES:
                self._transitions.clear()
        return self.event(Kind.TRANSITION, known[0], known[1], payload, at_ms, conversation_id,
                          session_id, duration_ms, trace_id, span_id, parent_id, links, blobs,
                          key)

    def event(self, kind: str, name: str, fixed: dict[str, str | None], payload: Any,
              at_ms: float, conversation_id: str, session_id: str, duration_ms: float,
              trace_id: str, span_id: str, parent_id: str, links: tuple[str, ...],
              blobs: dict[str, str] | None, key: tuple[Any, ...] | None = None) -> TraceEvent:
        """The safe, content-free event: ``fixed`` (strings or ``None``) are the shape's attributes,
        ``payload`` (``None`` for none) goes under ``orion.payload``. The times and span ids
        are the recorder's own (finite numbers, hex)."""
        known = (self._shape(kind, name, fixed, key)
                 if plain_id(conversation_id) and plain_id(session_id) else None)
        if known is not None:
            safe_kind, safe_name, attributes = known
            if payload is None or (not payload and type(payload) is dict):
                attributes = attributes.copy() if payload is None else {**attributes,
                                                                        _PAYLOAD: {}}
                return make_event(safe_kind, safe_name, at_ms, conversation_id, session_id,
                                  attributes, duration_ms, trace_id, span_id, parent_id, links)
            walk = _Filter(blobs, self.max_text)
            value = walk.value(json_safe(payload, max_text=self.max_text, blobs=blobs),
                               _PAYLOAD_SHAPE)
            if not walk.content:  # nothing that could change what the name may show
                return make_event(safe_kind, safe_name, at_ms, conversation_id, session_id,
                                  {**attributes, _PAYLOAD: value}, duration_ms, trace_id,
                                  span_id, parent_id, links)
        attributes = dict(fixed)
        if payload is not None:
            attributes[_PAYLOAD] = payload
        raw = TraceEvent(kind, name, at_ms, conversation_id, session_id, attributes,
                         duration_ms, trace_id, span_id, parent_id, links)
        return content_free(encode_event(raw, max_text=self.max_text, blobs=blobs),
                            blobs=blobs, max_text=self.max_text)

    def safe(self, kind: str, name: str,
             fixed: dict[str, Any]) -> tuple[str, str, dict[str, Any]] | None:
        """The safe kind, name and attributes of a shape whose attributes are all ids (names
        of states, lifecycles, triggers); ``None`` when one of them is content."""
        return self._shape(kind, name, fixed, None)

    def _shape(self, kind: str, name: str, fixed: dict[str, str | None],
               key: tuple[Any, ...] | None) -> tuple[str, str, dict[str, Any]] | None:
        if key is None:
            key = (kind, name, *fixed.items())
        known = self._known.get(key, _UNKNOWN)
        if known is _UNKNOWN:
            safe = content_free(encode_event(TraceEvent(kind, name, 0.0, "", "", dict(fixed)),
                                             max_text=self.max_text), max_text=self.max_text)
            # A fixed attribute that is content (hashed) makes the name depend on it, and
            # its text would belong in every batch's blobs: such shapes take the full path.
            plain = all(v is None or type(v) is str for v in safe.attributes.values())
            known = (safe.kind, safe.name, safe.attributes) if plain else None
            if len(self._known) >= MAX_SHAPES:
                self._known.clear()
            self._known[key] = known
        return known  # type: ignore[return-value]
