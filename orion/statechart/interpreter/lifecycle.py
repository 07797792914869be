"""A running lifecycle: one cheap instance per session, the model its definition's
``transitions`` machine drives (:mod:`orion.statechart.interpreter.semantics`).

The lifecycle holds what is its own: the active leaf (``state``, the machine's model
attribute), the context, the armed timers, the queue of events waiting for the current one
(run to completion), and its listeners. :meth:`Lifecycle.trigger` returns a :class:`Step`:
what the event did, and what every event it queued did after it.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orion.clock import Clock, TimerHandle
from orion.errors import (ActionError, GuardError, MacrostepLimit, TriggerNotAllowed, UnknownTag,
                          UnknownTrigger)
from orion.hooks.renames import renamed
from orion.statechart.interpreter import snapshot as snapshots
from orion.statechart.interpreter.listeners import Listeners
from orion.statechart.interpreter.semantics import (
    LifecycleEventData,
    LifecycleMachine,
    LifecycleState,
    raise_first,
)
from orion.statechart.interpreter.snapshot import SNAPSHOT_FORMAT, Snapshot, TimerSnapshot

if TYPE_CHECKING:
    from orion.statechart.interpreter.definition import Definition

_NO_TAGS: frozenset[str] = frozenset()

#: How many queued events (each a microstep: raised completion events, triggers sent by
#: actions, listeners or timers) one trigger may process before it comes to rest. A chart whose
#: events lead back to themselves would otherwise never return; docs/statecharts.md#limits.
MAX_MICROSTEPS = 10_000

__all__ = ["SNAPSHOT_FORMAT", "Lifecycle", "Snapshot", "Step", "TimerSnapshot", "Transition"]


@dataclass(slots=True)
class Transition:
    """One processed trigger, as guards, actions and observers see it."""

    lifecycle: str
    instance_id: str
    trigger: str
    source: str
    dest: str | None
    payload: dict[str, Any]
    at_ms: float
    duration_ms: float = 0.0
    result: Any = None  # what the ``finalize`` action's plugin returned, if it ran


@dataclass(slots=True, eq=False)
class Step:
    """What one :meth:`Lifecycle.trigger` did, run to completion: its own transition and those
    of the events it queued (raised completion events, triggers sent by actions), in order.

    True when the trigger itself took a transition, false when every guard said no."""

    trigger: str
    taken: bool = False
    #: Every transition taken, the trigger's own first.
    transitions: list[Transition] = field(default_factory=list)
    #: The states exited and entered, in order (innermost first when exiting).
    exited: list[str] = field(default_factory=list)
    entered: list[str] = field(default_factory=list)
    tags_gained: frozenset[str] = frozenset()
    tags_lost: frozenset[str] = frozenset()
    #: What the actions asked the model (:meth:`Lifecycle.prompt`).
    prompts: list[str] = field(default_factory=list)
    #: ``(trigger, reason)`` of every queued event nothing answered.
    discarded: list[tuple[str, str]] = field(default_factory=list)
    #: The active leaf afterwards.
    state: str = ""

    def __bool__(self) -> bool:
        return self.taken


@dataclass(slots=True, eq=False)  # identity: two timers may share a deadline
class _Timer:
    state: str
    index: int  # position in the state's ``after`` list
    trigger: str
    deadline_ms: float
    handle: TimerHandle | None = field(default=None, repr=False)


class Lifecycle:
    __slots__ = ("definition", "machine", "id", "state", "context", "clock", "plugins",
                 "finished", "host", "listeners", "_timers", "_queue", "_busy", "_current",
                 "_step", "_event")

    def __init__(self, definition: Definition, *, clock: Clock, listeners: Listeners,
                 instance_id: str | None = None, context: dict[str, Any] | None = None,
                 host: Any = None):
        self.definition = definition
        #: The ``transitions`` machine that runs this lifecycle (shared by its definition's
        #: instances): its states, events and transitions are ``transitions`` objects.
        self.machine: LifecycleMachine = definition.machine
        self.id = instance_id or uuid.uuid4().hex
        self.clock = clock
        #: The plugin manager whose guards and actions the definition runs (``None`` when it
        #: was given its callables directly).
        self.plugins = definition.plugins
        self.context: dict[str, Any] = definition.initial_context  # a fresh copy each time
        if context:
            # Copy the caller's containers too: two instances created from one dict must not
            # share a list, and the caller's dict must not change under it.
            self.context.update(snapshots.copy_data(context))
        self.state = ""  # no state is active before start() or a restore
        self.finished = False
        #: Whatever runs this lifecycle (the runtime), for plugins that need it; not snapshotted.
        self.host: Any = host
        self.listeners = listeners
        self._timers: dict[str, list[_Timer]] = {}
        self._queue: deque[Callable[[], Any]] = deque()
        self._busy = False
        self._current: Transition | None = None
        self._step: Step | None = None
        #: The event being processed (the library hands its result check only the answer).
        self._event: LifecycleEventData | None = None

    #: ``host`` under its name before 0.1.0 (a guard or action written then reads it).
    owner = renamed("Lifecycle", "owner", settable=True)

    # -- reading ------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def settings(self):
        return self.definition.settings

    @property
    def current(self) -> Transition | None:
        """The transition being processed (inside guards and actions), else the last one."""
        return self._current

    def is_in(self, path: str) -> bool:
        """Whether ``path`` is active: the current state or one of its ancestors."""
        return self.state == path or self.state.startswith(path + ".")

    def has_tag(self, tag: str) -> bool:
        """Whether the active state or an ancestor carries ``tag`` (XState's ``hasTag``). Code
        asks this instead of comparing state names, so a chart may rename its states.

        Raises :class:`UnknownTag` for a tag no state of the chart has, as :meth:`trigger`
        raises for an unknown trigger: a misspelled tag would otherwise be false forever."""
        if tag in self.definition.tags.get(self.state, _NO_TAGS):
            return True
        if tag not in self.definition.all_tags:
            raise UnknownTag(self.name, tag, sorted(self.definition.all_tags))
        return False

    def allowed_triggers(self) -> list[str]:
        return [] if self.finished else self.definition.allowed_triggers(self.state)

    def may_trigger(self, trigger: str, **payload: Any) -> bool:
        """Whether :meth:`trigger` would take a transition now (``transitions``'
        ``may_trigger``): some candidate's guards pass. Only guards run, as the library runs
        only conditions: no action, no state change, no listener. A guard that raises raises
        :class:`GuardError` (guards fail closed); an unknown trigger raises
        :class:`UnknownTrigger`, as :meth:`trigger` does."""
        definition = self.definition
        if trigger not in definition.triggers and not definition.knows(trigger):
            raise UnknownTrigger(self.name, trigger, self.state, sorted(definition.triggers))
        if self.finished:
            return False
        candidates = self.machine.candidates(self.state, trigger)
        if not candidates:
            return False
        event_data = LifecycleEventData(self.machine, self, payload)
        before = self._current
        # Guards read the transition being considered, as they do when it is taken.
        self._current = Transition(self.name, self.id, trigger, self.state, None, payload,
                                   self.clock.now_ms())
        try:
            for transition in candidates:
                event_data.transition = transition
                if all(condition.check(event_data) for condition in transition.conditions):
                    return True
            return False
        finally:
            self._current = before

    def pending_timers(self) -> list[tuple[str, str, float]]:
        """``(state, trigger, deadline_ms)`` for every armed timer."""
        return [(t.state, t.trigger, t.deadline_ms) for ts in self._timers.values() for t in ts]

    def __repr__(self) -> str:
        return f"<Lifecycle {self.name} {self.id[:8]} state={self.state!r}>"

    # -- driving ------------------------------------------------------------------------------

    def start(self) -> Lifecycle:
        """Enter the initial states, outermost first, running their entry actions. Starting
        runs to completion as well: an event sent by an entry action (or a listener of the
        start) waits until every initial state is entered."""
        self._current = Transition(self.name, self.id, "start", "",
                                   self.definition.initial_leaf, {}, self.clock.now_ms())
        self.machine.start(self)
        return self

    def trigger(self, trigger: str, **payload: Any) -> Step | None:
        """Process ``trigger``. Returns a :class:`Step` (true when a transition was taken,
        false when every guard said no), or ``None`` when queued behind the event being
        processed.

        Raises :class:`UnknownTrigger` for a name no transition of the statechart answers, and
        :class:`TriggerNotAllowed` when none of the active states' (or the finished
        lifecycle) does. A queued event never raises: it is discarded and reported."""
        definition = self.definition
        if trigger not in definition.triggers and not definition.knows(trigger):
            raise UnknownTrigger(self.name, trigger, self.state, sorted(definition.triggers))
        return self.machine.trigger_event(self, trigger, **payload)

    send = trigger

    def prompt(self, text: str) -> None:
        """Ask the model ``text``: reported to the listeners (the runtime puts it into the
        conversation) and to the :class:`Step` of the trigger being processed."""
        if self._step is not None:
            self._step.prompts.append(text)
        for listener in self.listeners.prompt:
            listener(self, text)

    def listen(self, *listeners: Any) -> Lifecycle:
        """Add listeners (objects with any of :class:`~.listeners.Listener`'s methods)."""
        self.listeners = self.listeners + listeners
        return self

    # -- what the machine calls back ---------------------------------------------------------

    def _run(self, first: Callable[[], Any], trigger: str) -> Step:
        """Run ``first`` (processing ``trigger``), then every event it (or what follows it)
        queued, in order. When an action fails, the events still queued are discarded (each
        reported) and the error is raised."""
        self._busy = True
        step = self._step = Step(trigger)
        before = self.state
        try:
            step.taken = bool(first())
            for _ in range(MAX_MICROSTEPS):
                if not self._queue:
                    break
                self._queue.popleft()()
            else:
                if self._queue:
                    raise MacrostepLimit(self.name, trigger, self.state, MAX_MICROSTEPS,
                                         [queued.args[1]  # type: ignore[attr-defined]
                                          for queued in self._queue])
        except (ActionError, GuardError, MacrostepLimit) as exc:
            reason = ("the trigger did not come to rest" if isinstance(exc, MacrostepLimit)
                      else "a guard failed before it was processed"
                      if isinstance(exc, GuardError)
                      else "an action failed before it was processed")
            while self._queue:
                queued, name = self._queue.popleft().args  # type: ignore[attr-defined]
                self._discard(name, queued.kwargs, reason)
            raise
        finally:
            self._queue.clear()
            self._busy = False
            self._step = None
        step.state = after = self.state
        if after != before:
            step.tags_gained, step.tags_lost = self.definition.tag_changes(before, after)
        return step

    def _begin(self, event_data: LifecycleEventData, trigger: str) -> None:
        """A transition may be taken: the record guards and actions see as ``transition``."""
        self._current = Transition(self.name, self.id, trigger, self.state, None,
                                   event_data.kwargs, self.clock.now_ms())
        event_data.started = time.perf_counter()

    def _taken(self, event_data: LifecycleEventData) -> None:
        record = self._current
        assert record is not None
        record.dest = self.state
        record.duration_ms = (time.perf_counter() - event_data.started) * 1000.0
        if self._step is not None:
            self._step.transitions.append(record)
        for listener in self.listeners.transition:
            listener(self, record)
        if self.state in self.definition.finals:
            self._finish()

    def _started(self, errors: list[ActionError]) -> None:
        for listener in self.listeners.started:
            listener(self)
        if self.state in self.definition.finals:
            self._finish()
        raise_first(errors)

    def _unanswered(self, event_data: LifecycleEventData, trigger: str, reason: str, *,
                    allowed: list[str] | None = None) -> bool:
        """No transition answered ``trigger``: the caller of ``trigger()`` is told; a queued
        event is discarded and reported, because the call that queued it has completed
        (SCXML discards such events silently)."""
        if event_data.direct:
            raise TriggerNotAllowed(self.name, trigger, self.state,
                                    self.allowed_triggers() if allowed is None else allowed)
        self._discard(trigger, event_data.kwargs, reason)
        return False

    def _discard(self, trigger: str, payload: dict[str, Any], reason: str) -> None:
        if self._step is not None:
            self._step.discarded.append((trigger, reason))
        for listener in self.listeners.discarded:
            listener(self, trigger, payload, reason)

    def _guard_failed(self, guard: str, owner: str, error: BaseException) -> None:
        for listener in self.listeners.guard_failed:
            listener(self, guard, owner, error)

    def _action_failed(self, action: str, owner: str, error: BaseException) -> None:
        for listener in self.listeners.action_failed:
            listener(self, action, owner, error)

    def _raise_event(self, trigger: str) -> None:
        self.machine.raise_event(self, trigger)

    def _finish(self) -> None:
        self.finished = True
        for path in list(self._timers):
            self._cancel_timers(path)
        for listener in self.listeners.finished:
            listener(self)

    # -- entering and exiting states ----------------------------------------------------------

    def _enter(self, state: LifecycleState) -> None:
        self.state = state.path
        if self._step is not None:
            self._step.entered.append(state.path)
        if state.timers:
            now = self.clock.now_ms()
            for index, (trigger, delay) in enumerate(state.timers):
                self._arm(state.path, index, trigger, now + delay)

    def _exit(self, state: LifecycleState) -> None:
        self._cancel_timers(state.path)
        self.state = state.parent_path
        if self._step is not None:
            self._step.exited.append(state.path)

    # -- timers -------------------------------------------------------------------------------

    def _arm(self, path: str, index: int, trigger: str, deadline: float) -> None:
        timer = _Timer(path, index, trigger, deadline)
        timer.handle = self.clock.call_at(deadline, lambda: self._fire(timer))
        self._timers.setdefault(path, []).append(timer)

    def _armed(self) -> Iterable[tuple[str, int, str, float]]:
        return [(t.state, t.index, t.trigger, t.deadline_ms)
                for ts in self._timers.values() for t in ts]

    def _cancel_timers(self, path: str) -> None:
        for timer in self._timers.pop(path, ()):
            if timer.handle is not None:
                timer.handle.cancel()

    def _fire(self, timer: _Timer) -> Step | None:
        armed = self._timers.get(timer.state)
        if not armed or timer not in armed:
            return None  # cancelled after the clock had already picked it up
        armed.remove(timer)
        if not armed:
            del self._timers[timer.state]
        return self.machine.fire(self, self.definition.timer_transitions[(timer.state,
                                                                          timer.index)])

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """A JSON-safe dict: state, context, pending timers as absolute deadlines, and the
        definition's name and hash. Raises :class:`SnapshotError` for non-JSON context."""
        return snapshots.take(self)

    @classmethod
    def restore(cls, definition: Definition, data: dict[str, Any], *, clock: Clock,
                listeners: Iterable[Any] | None = None, plugins: Any = None,
                host: Any = None) -> Lifecycle:
        """Resume from :meth:`snapshot`: re-arm timers at their deadlines (a deadline already
        passed fires at once) without re-running entry actions. Its listeners are chosen as
        :meth:`Definition.create` chooses them."""
        snap, timers = snapshots.checked(definition, data)
        lifecycle = cls(definition, clock=clock, instance_id=snap.id, host=host,
                        listeners=definition.listeners(host, listeners, plugins))
        # A detached copy: the caller's dict (and other instances restored from it) must not
        # share lists or dicts with this lifecycle.
        lifecycle.context = snapshots.detached(snap.context)
        lifecycle.state = snap.state
        lifecycle.finished = snap.finished
        for deadline, state, index, trigger in timers:
            lifecycle._arm(state, index, trigger, deadline)
        return lifecycle
