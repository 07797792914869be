"""The SQLite store's records of a batch: one per span, except that a transition's record holds
the phase it ends (its span id, parent, start, duration, name and attributes), so a lifecycle
step is one row, not two. The ``trace_events`` view gives the phase back as a span of its own
(:mod:`orion.trace.store`).

Built on the store's writer thread. A step of a known shape with an empty payload (the usual
one) costs a cache lookup and a tuple: its name and attributes were made safe and encoded to
JSON once for that shape. Any other step takes the events' path
(:func:`orion.trace.batch.step_events`) and is folded from them; a phase that does not share
its transition's trace, conversation and links (a phase cut by a new conversation) is stored
as a row of its own. The rows are what the events would be: a test reads both back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from orion.trace.batch import (P_CONVERSATION, P_LINKS, P_PARENT, P_SPAN, P_START, P_STATE,
                               P_TRACE, S_CONVERSATION, S_DEST, S_DURATION, S_ID, S_LIFECYCLE,
                               S_LINKS, S_PARENT, S_PAYLOAD, S_PHASE, S_PHASE_MS, S_SOURCE,
                               S_SPAN, S_START, S_TRACE, S_TRIGGER, Step, TraceBatch,
                               phase_fixed, phase_name, step_events)
from orion.trace.events import Kind, TraceEvent
from orion.trace.shapes import Shapes, plain_id

#: The phase columns of a record without one.
NO_PHASE = ("", "", None, None, None, None)
_PAYLOAD = "orion.payload"

Dumps = Callable[[Any], str]
#: A run of records, their values flat (as a multi-row INSERT binds them): ``(False, values)``
#: of events in :func:`orion.trace.store.event_values`' layout, or ``(True, values)`` of
#: records with their phase (the store's ``INSERT_RECORD``).
Run = tuple[bool, list[Any]]


def links_text(links: Iterable[Any]) -> str:
    return " ".join(map(str, links)) if links else ""


def event_row(event: TraceEvent, dumps: Dumps) -> tuple[Any, ...]:
    """A span's columns, in the store's order (without the phase)."""
    return (event.kind, event.name, event.at_ms, event.duration_ms, event.conversation_id,
            event.session_id, dumps(event.attributes or {}), event.trace_id, event.span_id,
            event.parent_id, links_text(event.links))


def folded(events: Sequence[TraceEvent], dumps: Dumps) -> list[tuple[Any, ...]]:
    """The records of a step's spans: one when the phase folds into its transition."""
    if len(events) == 2:
        phase, transition = events
        if (phase.kind == Kind.PHASE and phase.trace_id == transition.trace_id
                and phase.conversation_id == transition.conversation_id
                and phase.session_id == transition.session_id
                and tuple(phase.links) == tuple(transition.links)):
            return [event_row(transition, dumps) + (
                phase.span_id, phase.parent_id, phase.at_ms, phase.duration_ms, phase.name,
                dumps(phase.attributes or {}))]
    return [event_row(event, dumps) + NO_PHASE for event in events]


class StepRows:
    """A shapes cache's records of steps (one per thread that stores: the writer's)."""

    def __init__(self, shapes: Shapes, dumps: Dumps) -> None:
        self.shapes = shapes
        self.dumps = dumps
        #: Per step shape (lifecycle, trigger, source, dest, the phase's state, conversation,
        #: lifecycle id): the safe kind and name, the JSON attributes (empty payload), the
        #: phase's safe name and JSON attributes; ``False`` for a shape that holds content.
        self._known: dict[tuple[Any, ...], tuple[str, str, str, str, str] | bool] = {}

    def rows(self, step: Step) -> tuple[Any, ...]:
        """The step's records' values, one record after the other."""
        payload, phase = step[S_PAYLOAD], step[S_PHASE]
        if type(payload) is dict and not payload and (phase is None or (
                phase[P_TRACE] == step[S_TRACE] and phase[P_LINKS] == step[S_LINKS]
                and phase[P_CONVERSATION] == step[S_CONVERSATION])):
            key = (step[S_LIFECYCLE], step[S_TRIGGER], step[S_SOURCE], step[S_DEST],
                   None if phase is None else phase[P_STATE], step[S_CONVERSATION], step[S_ID])
            known = self._known.get(key)
            if known is None:
                known = self._learn(key)
            if known:
                kind, name, attributes, phase_name_, phase_attributes = known  # type: ignore[misc]
                links = step[S_LINKS]
                head = (kind, name, step[S_START], step[S_DURATION], step[S_CONVERSATION],
                        step[S_ID], attributes, step[S_TRACE], f"{step[S_SPAN]:016x}",
                        step[S_PARENT], " ".join(links) if links else "")
                if phase is None:
                    return head + NO_PHASE
                return head + (f"{phase[P_SPAN]:016x}", phase[P_PARENT], phase[P_START],
                               step[S_PHASE_MS], phase_name_, phase_attributes)
        return sum(folded(step_events(step, self.shapes, None), self.dumps), ())

    def _learn(self, key: tuple[Any, ...]) -> tuple[str, str, str, str, str] | bool:
        lifecycle, trigger, source, dest, state, conversation, session = key
        known: tuple[str, str, str, str, str] | bool = False
        if plain_id(conversation) and plain_id(session):
            shapes = self.shapes
            fixed = {"orion.lifecycle": lifecycle, "orion.event": trigger,
                     "orion.source": source, "orion.dest": dest}
            transition = shapes.safe(Kind.TRANSITION, f"{lifecycle} {trigger}", fixed)
            phase = None if state is None else shapes.safe(
                Kind.PHASE, phase_name(lifecycle, state), phase_fixed(lifecycle, state))
            if transition is not None and (state is None or (
                    phase is not None and phase[0] == Kind.PHASE)):
                known = (transition[0], transition[1],
                         self.dumps({**transition[2], _PAYLOAD: {}}),
                         "" if phase is None else phase[1],
                         "" if phase is None else self.dumps(phase[2]))
        if len(self._known) >= 1024:  # a long chat has a few dozen shapes: a bound
            self._known.clear()
        self._known[key] = known
        return known


def runs(parts: Sequence[Sequence[TraceEvent]], dumps: Dumps,
         event_values: Callable[[Sequence[TraceEvent]], list[Any]],
         step_rows: Callable[[Shapes], StepRows]) -> list[Run]:
    """The records of the batches ``parts``, in order, as runs of one layout each."""
    out: list[Run] = []
    for part in parts:
        if type(part) is TraceBatch:
            _batch_runs(part, out, dumps, event_values, step_rows(part.shapes))
        else:
            out.append((False, event_values(part)))
    return out


def _batch_runs(batch: TraceBatch, out: list[Run], dumps: Dumps,
                event_values: Callable[[Sequence[TraceEvent]], list[Any]],
                maker: StepRows) -> None:
    built = batch.item_events() if batch.built() else None  # capture on, or a plugin read it
    pending: list[TraceEvent] = []
    rows: list[Any] = []
    # Consecutive events and consecutive steps each make one run; one of the two lists is
    # empty at any time.
    for index, item in enumerate(batch.items):
        if type(item) is tuple:
            if pending:
                out.append((False, event_values(pending)))
                pending = []
            rows += maker.rows(item) if built is None else sum(folded(built[index], dumps), ())
        else:
            if rows:
                out.append((True, rows))
                rows = []
            pending.append(item)
    if pending:
        out.append((False, event_values(pending)))
    if rows:
        out.append((True, rows))
