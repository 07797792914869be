"""A running lifecycle: one cheap instance per session, over a compiled :class:`Definition`.

Triggers run to completion: a trigger sent while another is being processed (from an action,
or from a timer callback) is queued and processed right after it, in order.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError
from transitions.core import MachineError

from orion.clock import Clock, TimerHandle
from orion.errors import SnapshotError, TriggerNotAllowed, UnknownTrigger

if TYPE_CHECKING:
    from orion.plugins import PluginManager
    from orion.statechart.definition import Definition

SNAPSHOT_FORMAT = 1


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


@dataclass(slots=True, eq=False)  # identity: two timers may share a deadline
class _Timer:
    state: str
    trigger: str
    deadline_ms: float
    handle: TimerHandle = field(repr=False)


class TimerSnapshot(BaseModel):
    model_config = ConfigDict(extra="forbid")
    state: str
    trigger: str
    deadline_ms: float


class Snapshot(BaseModel):
    """The JSON form of a lifecycle: enough to resume it in another process."""

    model_config = ConfigDict(extra="forbid")
    format: int = SNAPSHOT_FORMAT
    definition: str
    definition_hash: str
    id: str
    state: str
    finished: bool = False
    context: dict[str, Any]
    timers: list[TimerSnapshot]


class Lifecycle:
    __slots__ = ("definition", "id", "state", "context", "clock", "plugins", "finished",
                 "_timers", "_queue", "_busy", "_current", "_hook")

    def __init__(self, definition: Definition, *, clock: Clock, plugins: PluginManager,
                 instance_id: str | None = None, context: dict[str, Any] | None = None):
        self.definition = definition
        self.id = instance_id or uuid.uuid4().hex
        self.clock = clock
        self.plugins = plugins
        self.context: dict[str, Any] = dict(definition.initial_context)
        if context:
            self.context.update(context)
        self.state = definition.initial_leaf
        self.finished = False
        self._timers: dict[str, list[_Timer]] = {}
        self._queue: deque[tuple[str, dict[str, Any]]] = deque()
        self._busy = False
        self._current: Transition | None = None
        self._hook = plugins.hook

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

    def allowed_triggers(self) -> list[str]:
        return [] if self.finished else self.definition.allowed_triggers(self.state)

    def pending_timers(self) -> list[tuple[str, str, float]]:
        """``(state, trigger, deadline_ms)`` for every armed timer."""
        return [(t.state, t.trigger, t.deadline_ms) for ts in self._timers.values() for t in ts]

    def __repr__(self) -> str:
        return f"<Lifecycle {self.name} {self.id[:8]} state={self.state!r}>"

    # -- driving ------------------------------------------------------------------------------

    def start(self) -> Lifecycle:
        """Enter the initial states, outermost first, running their entry actions."""
        self._current = Transition(self.name, self.id, "start", "", self.state, {},
                                   self.clock.now_ms())
        for path in self.definition.lineage(self.state):
            self._enter(path)
        self._hook.lifecycle_started(lifecycle=self)
        return self

    def trigger(self, trigger: str, **payload: Any) -> bool | None:
        """Process ``trigger``. Returns whether a transition was taken (``False`` when every
        guard said no), or ``None`` when queued behind the trigger being processed.

        Raises :class:`UnknownTrigger` or :class:`TriggerNotAllowed` (never passes silently).
        """
        if trigger not in self.definition.triggers:
            raise UnknownTrigger(self.name, trigger, self.state, sorted(self.definition.triggers))
        if self._busy:
            self._queue.append((trigger, payload))
            return None
        self._busy = True
        try:
            taken = self._step(trigger, payload)
            while self._queue:
                queued, queued_payload = self._queue.popleft()
                self._step(queued, queued_payload)
        finally:
            self._queue.clear()
            self._busy = False
        return taken

    send = trigger

    def _step(self, trigger: str, payload: dict[str, Any]) -> bool:
        if self.finished:
            raise TriggerNotAllowed(self.name, trigger, self.state, [])
        record = Transition(self.name, self.id, trigger, self.state, None, payload,
                            self.clock.now_ms())
        self._current = record
        started = time.perf_counter()
        try:
            taken = self.definition.machine.trigger_event(self, trigger)
        except MachineError:
            raise TriggerNotAllowed(self.name, trigger, self.state,
                                    self.allowed_triggers()) from None
        if not taken:
            return False
        record.dest = self.state
        record.duration_ms = (time.perf_counter() - started) * 1000.0
        self._hook.lifecycle_transition(lifecycle=self, transition=record)
        if self.state in self.definition.finals:
            self.finished = True
            for path in list(self._timers):
                self._cancel_timers(path)
            self._hook.lifecycle_finished(lifecycle=self)
        return True

    # -- called by the compiled machine -------------------------------------------------------

    def _enter(self, path: str) -> None:
        for trigger, delay in self.definition.timers.get(path, ()):
            self._arm(path, trigger, self.clock.now_ms() + delay)
        for action in self.definition.entry.get(path, ()):
            action(self)

    def _exit(self, path: str) -> None:
        self._cancel_timers(path)
        for action in self.definition.exit.get(path, ()):
            action(self)

    def _arm(self, path: str, trigger: str, deadline: float) -> None:
        timer = _Timer(path, trigger, deadline, None)  # type: ignore[arg-type]
        timer.handle = self.clock.call_at(deadline, lambda: self._fire(timer))
        self._timers.setdefault(path, []).append(timer)

    def _cancel_timers(self, path: str) -> None:
        for timer in self._timers.pop(path, ()):
            timer.handle.cancel()

    def _fire(self, timer: _Timer) -> None:
        armed = self._timers.get(timer.state)
        if not armed or timer not in armed:
            return  # cancelled after the clock had already picked it up
        armed.remove(timer)
        if not armed:
            del self._timers[timer.state]
        self.trigger(timer.trigger)

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """A JSON-safe dict: state, context, pending timers as absolute deadlines, and the
        definition's name and hash. Raises :class:`SnapshotError` for non-JSON context."""
        try:
            context = json.loads(json.dumps(self.context, allow_nan=False))
        except (TypeError, ValueError) as exc:
            bad = [k for k, v in self.context.items() if not _json_ok(v)]
            raise SnapshotError(f"{self.name}: context key(s) {', '.join(map(repr, bad))} "
                                f"are not JSON data: {exc}") from exc
        return Snapshot(definition=self.name, definition_hash=self.definition.hash, id=self.id,
                        state=self.state, finished=self.finished, context=context,
                        timers=[TimerSnapshot(state=s, trigger=t, deadline_ms=d)
                                for s, t, d in self.pending_timers()]).model_dump()

    @classmethod
    def restore(cls, definition: Definition, data: dict[str, Any], *, clock: Clock,
                plugins: PluginManager) -> Lifecycle:
        """Resume from :meth:`snapshot`: re-arm timers at their deadlines (a deadline already
        passed fires at once) without re-running entry actions."""
        try:
            snap = Snapshot.model_validate(data)
        except ValidationError as exc:
            raise SnapshotError(f"invalid snapshot: {exc}") from exc
        if snap.format != SNAPSHOT_FORMAT:
            raise SnapshotError(f"snapshot format {snap.format} is not supported "
                                f"(expected {SNAPSHOT_FORMAT})")
        if snap.definition != definition.name:
            raise SnapshotError(f"snapshot is of statechart {snap.definition!r}, "
                                f"not {definition.name!r}")
        if snap.definition_hash != definition.hash:
            raise SnapshotError(f"snapshot was taken with a different version of statechart "
                                f"{definition.name!r} (hash {snap.definition_hash[:12]}, "
                                f"now {definition.hash[:12]})")
        if snap.state not in definition.leaves:
            raise SnapshotError(f"snapshot state {snap.state!r} is not a state of "
                                f"{definition.name!r}")
        lifecycle = cls(definition, clock=clock, plugins=plugins, instance_id=snap.id)
        lifecycle.context = dict(snap.context)
        lifecycle.state = snap.state
        lifecycle.finished = snap.finished
        for timer in snap.timers:
            if not lifecycle.is_in(timer.state):
                raise SnapshotError(f"snapshot timer for {timer.state!r} but the state is "
                                    f"{snap.state!r}")
            lifecycle._arm(timer.state, timer.trigger, timer.deadline_ms)
        return lifecycle


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False
