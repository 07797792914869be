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

from orion.trace.batch import (P_CONVERSATION, P_LINKS, P_LIFECYCLE, P_PARENT, P_SPAN, P_START,
                               P_STATE, P_TRACE, S_CONVERSATION, S_DEST, S_DURATION, S_ID,
                               S_LIFECYCLE, S_LINKS, S_PARENT, S_PAYLOAD, S_PHASE, S_PHASE_MS,
                               S_SOURCE, S_SPAN, S_START, S_TRACE, S_TRIGGER, Step, TraceBatch,
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
        #: Per transition shape: its safe kind, name and JSON attributes (empty payload).
        self._transitions: dict[tuple[Any, ...], tuple[str, str, str] | None] = {}
        #: Per phase shape: its safe name and JSON attributes.
        self._phases: dict[tuple[str, str], tuple[str, str] | None] = {}

    def rows(self, step: Step) -> tuple[Any, ...]:
        """The step's records' values, one record after the other."""
        payload = step[S_PAYLOAD]
        if type(payload) is dict and not payload and plain_id(step[S_CONVERSATION]) \
                and plain_id(step[S_ID]):
            transition = self._transition(step)
            if transition is not None:
                phase = step[S_PHASE]
                if phase is None:
                    tail: tuple[Any, ...] = NO_PHASE
                elif (phase[P_TRACE] == step[S_TRACE] and phase[P_LINKS] == step[S_LINKS]
                      and phase[P_CONVERSATION] == step[S_CONVERSATION]):
                    known = self._phase(phase[P_LIFECYCLE], phase[P_STATE])
                    if known is None:
                        return self._folded(step)
                    tail = (f"{phase[P_SPAN]:016x}", phase[P_PARENT], phase[P_START],
                            step[S_PHASE_MS], *known)
                else:
                    return self._folded(step)
                kind, name, attributes = transition
                links = step[S_LINKS]
                return (kind, name, step[S_START], step[S_DURATION], step[S_CONVERSATION],
                        step[S_ID], attributes, step[S_TRACE], f"{step[S_SPAN]:016x}",
                        step[S_PARENT], " ".join(links) if links else "", *tail)
        return self._folded(step)

    def _folded(self, step: Step) -> tuple[Any, ...]:
        return sum(folded(step_events(step, self.shapes, None), self.dumps), ())

    def _transition(self, step: Step) -> tuple[str, str, str] | None:
        key = (step[S_LIFECYCLE], step[S_TRIGGER], step[S_SOURCE], step[S_DEST])
        known = self._transitions.get(key, False)
        if known is False:
            lifecycle, trigger, source, dest = key
            fixed = {"orion.lifecycle": lifecycle, "orion.event": trigger,
                     "orion.source": source, "orion.dest": dest}
            safe = self.shapes.safe(Kind.TRANSITION, f"{lifecycle} {trigger}", fixed)
            known = None if safe is None else (
                safe[0], safe[1], self.dumps({**safe[2], _PAYLOAD: {}}))
            self._remember(self._transitions, key, known)
        return known  # type: ignore[return-value]

    def _phase(self, lifecycle: str, state: str) -> tuple[str, str] | None:
        key = (lifecycle, state)
        known = self._phases.get(key, False)
        if known is False:
            safe = self.shapes.safe(Kind.PHASE, phase_name(lifecycle, state),
                                    phase_fixed(lifecycle, state))
            known = None if safe is None or safe[0] != Kind.PHASE else (
                safe[1], self.dumps(safe[2]))
            self._remember(self._phases, key, known)
        return known  # type: ignore[return-value]

    @staticmethod
    def _remember(cache: dict[Any, Any], key: Any, value: Any) -> None:
        if len(cache) >= 1024:  # a long chat has a few dozen shapes: a bound, not a policy
            cache.clear()
        cache[key] = value


def runs(parts: Sequence[Sequence[TraceEvent]], dumps: Dumps,
         event_values: Callable[[Sequence[TraceEvent]], list[Any]],
         step_rows: Callable[[Shapes], StepRows]) -> list[Run]:
    """The records of the batches ``parts``, in order, as runs of one layout each."""
    out: list[Run] = []
    for part in parts:
        if type(part) is not TraceBatch:
            out.append((False, event_values(part)))
            continue
        built = part.item_events() if part.built() else None  # capture on, or a plugin read it
        maker = step_rows(part.shapes)
        pending: list[TraceEvent] = []
        rows: list[Any] = []
        # Consecutive events and consecutive steps each make one run; one of the two lists is
        # empty at any time.
        for index, item in enumerate(part.items):
            if type(item) is tuple:
                if pending:
                    out.append((False, event_values(pending)))
                    pending = []
                if built is None:
                    rows += maker.rows(item)
                else:
                    for row in folded(built[index], dumps):
                        rows += row
            else:
                if rows:
                    out.append((True, rows))
                    rows = []
                pending.append(item)
        if pending:
            out.append((False, event_values(pending)))
        if rows:
            out.append((True, rows))
    return out
