"""A flushed batch of trace events, as the ``store_traces`` hook receives it.

A lifecycle step is on the hot path of every write, so the recorder keeps one plain tuple per
transition (:data:`Step`: what the step knew, no dict built, nothing encoded) and a tuple per
open phase (:data:`Phase`). A :class:`TraceBatch` is a ``Sequence[TraceEvent]`` over them: a
plugin that reads it gets the spans a transition makes (the phase it ends, then the
transition), built once, on first use, with the encoding and content filter of each span's
fixed parts done once per shape (:mod:`orion.trace.shapes`). The SQLite store does not read
them: its writer thread turns each step into one record, the phase folded in
(:mod:`orion.trace.records`), so nothing of a step is built or encoded on the thread that
stepped.

With content capture on, the events are built when the batch is made: the texts they leave out
go to the batch's blobs, which the hook receives complete.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any, overload

from orion.trace.events import Kind, TraceEvent
from orion.trace.shapes import Shapes

#: A transition as the recorder keeps it (indexes below): lifecycle name and id, trigger,
#: source, dest, payload, start (epoch ms), duration (ms), the parent's trace id, span id and
#: conversation, the span id (an int, formatted when read), links, the phase it ends
#: (a :data:`Phase` or ``None``) and that phase's duration (ms).
Step = tuple[Any, ...]
#: An open phase: lifecycle name, state, trace id, span id (an int), parent span id, start
#: (epoch ms), start (``perf_counter``), conversation, links, lifecycle id.
Phase = tuple[Any, ...]

(S_LIFECYCLE, S_ID, S_TRIGGER, S_SOURCE, S_DEST, S_PAYLOAD, S_START, S_DURATION, S_TRACE,
 S_PARENT, S_CONVERSATION, S_SPAN, S_LINKS, S_PHASE, S_PHASE_MS) = range(15)
(P_LIFECYCLE, P_STATE, P_TRACE, P_SPAN, P_PARENT, P_START, P_STARTED, P_CONVERSATION, P_LINKS,
 P_ID) = range(10)


def span_hex(span_id: int) -> str:
    return f"{span_id:016x}"


def phase_name(lifecycle: str, state: str) -> str:
    """``write_session receiving``: the lifecycle and the state's own name."""
    return f"{lifecycle} {state.rsplit('.', 1)[-1]}"


def phase_fixed(lifecycle: str, state: str) -> dict[str, Any]:
    """A phase span's attributes."""
    return {"orion.lifecycle": lifecycle, "orion.phase": state}


def step_events(step: Step, shapes: Shapes, blobs: dict[str, str] | None) -> list[TraceEvent]:
    """The spans of one step: the phase it ends (if any), then the transition."""
    out = []
    phase = step[S_PHASE]
    if phase is not None:
        out.append(phase_event(phase, step[S_PHASE_MS], shapes, blobs))
    out.append(shapes.transition(
        step[S_LIFECYCLE], step[S_TRIGGER], step[S_SOURCE], step[S_DEST], step[S_PAYLOAD],
        step[S_START], step[S_CONVERSATION], step[S_ID], step[S_DURATION], step[S_TRACE],
        span_hex(step[S_SPAN]), step[S_PARENT], step[S_LINKS], blobs))
    return out


def phase_event(phase: Phase, duration_ms: float, shapes: Shapes,
                blobs: dict[str, str] | None, continues: bool = False) -> TraceEvent:
    lifecycle, state = phase[P_LIFECYCLE], phase[P_STATE]
    fixed = phase_fixed(lifecycle, state)
    key: tuple[Any, ...] = (Kind.PHASE, lifecycle, state)
    if continues:  # cut at the end of its turn: it goes on in the next
        fixed["orion.phase.continues"] = True
        key = (*key, True)
    return shapes.event(Kind.PHASE, phase_name(lifecycle, state), fixed, None,  # type: ignore[arg-type]
                        phase[P_START], phase[P_CONVERSATION], phase[P_ID], duration_ms,
                        phase[P_TRACE], span_hex(phase[P_SPAN]), phase[P_PARENT],
                        phase[P_LINKS], blobs, key)


class TraceBatch(Sequence[TraceEvent]):
    """The events of one flush: recorded events (:class:`TraceEvent`, already safe) and steps
    (:data:`Step`), in the order they happened. ``len`` is the number of spans."""

    __slots__ = ("items", "spans", "shapes", "blobs", "_events", "_flat", "_lock")

    def __init__(self, items: list[Any], spans: int, shapes: Shapes,
                 blobs: dict[str, str] | None) -> None:
        self.items = items
        self.spans = spans
        self.shapes = shapes
        #: The captured texts (content capture on), else ``None``.
        self.blobs = blobs
        self._events: list[list[TraceEvent]] | None = None
        self._flat: list[TraceEvent] | None = None
        self._lock = threading.Lock()
        if blobs is not None:
            self.item_events()

    def item_events(self) -> list[list[TraceEvent]]:
        """Each item's spans (built once, whichever thread asks first)."""
        events = self._events
        if events is None:
            with self._lock:
                events = self._events
                if events is None:
                    shapes, blobs = self.shapes, self.blobs
                    events = self._events = [
                        step_events(item, shapes, blobs) if type(item) is tuple else [item]
                        for item in self.items]
        return events

    def built(self) -> bool:
        """Whether the spans were built already (content capture, or a plugin read them)."""
        return self._events is not None

    def events(self) -> list[TraceEvent]:
        """The spans, in order."""
        flat = self._flat
        if flat is None:
            flat = self._flat = [event for spans in self.item_events() for event in spans]
        return flat

    def __len__(self) -> int:
        return self.spans

    def __iter__(self) -> Iterator[TraceEvent]:
        return iter(self.events())

    @overload
    def __getitem__(self, index: int) -> TraceEvent: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[TraceEvent]: ...

    def __getitem__(self, index: int | slice) -> TraceEvent | Sequence[TraceEvent]:
        return self.events()[index]

    def __repr__(self) -> str:
        return f"<TraceBatch of {self.spans} spans>"
