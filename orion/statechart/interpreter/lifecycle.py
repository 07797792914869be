"""A running lifecycle: one cheap instance per session, over a compiled :class:`Definition`.

Triggers run to completion: a trigger sent while another is being processed (from an action,
or from a timer callback) is queued and processed right after it, in order. Which transition a
trigger takes, and which states it exits and enters, is :mod:`orion.statechart.interpreter.semantics`.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orion.clock import Clock, TimerHandle
from orion.errors import ActionError, SnapshotError, TriggerNotAllowed, UnknownTrigger
from orion.statechart.interpreter.semantics import CompiledTransition, done_event, exit_path

if TYPE_CHECKING:
    from orion.plugins import PluginManager
    from orion.statechart.interpreter.definition import Definition

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
    index: int  # position in the state's ``after`` list
    trigger: str
    deadline_ms: float
    handle: TimerHandle = field(repr=False)


class TimerSnapshot(BaseModel):
    model_config = ConfigDict(extra="forbid")
    state: str
    trigger: str
    deadline_ms: float = Field(allow_inf_nan=False)
    #: Position in the state's ``after`` list; ``None`` means its first timer of ``trigger``.
    index: int | None = Field(default=None, ge=0)


class Snapshot(BaseModel):
    """The JSON form of a lifecycle: enough to resume it in another process."""

    model_config = ConfigDict(extra="forbid")
    format: int = SNAPSHOT_FORMAT
    definition: str
    definition_hash: str
    id: str = Field(min_length=1)
    state: str
    finished: bool = False
    context: dict[str, Any]
    timers: list[TimerSnapshot]


class Lifecycle:
    __slots__ = ("definition", "id", "state", "context", "clock", "plugins", "finished", "host",
                 "_timers", "_queue", "_busy", "_current", "_hook")

    def __init__(self, definition: Definition, *, clock: Clock, plugins: PluginManager,
                 instance_id: str | None = None, context: dict[str, Any] | None = None):
        self.definition = definition
        self.id = instance_id or uuid.uuid4().hex
        self.clock = clock
        self.plugins = plugins
        self.context: dict[str, Any] = definition.initial_context  # a fresh copy each time
        if context:
            # Copy the caller's containers too: two instances created from one dict must not
            # share an ``outbox`` list, and the caller's dict must not change under it.
            self.context.update(_copy_data(context))
        self.state = definition.initial_leaf
        self.finished = False
        #: Whatever runs this lifecycle (the runtime), for plugins that need it; not snapshotted.
        self.host: Any = None
        self._timers: dict[str, list[_Timer]] = {}
        self._queue: deque[tuple[str, CompiledTransition | None, dict[str, Any]]] = deque()
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

    def has_tag(self, tag: str) -> bool:
        """Whether the active state or an ancestor carries ``tag`` (XState's ``hasTag``). Code
        asks this instead of comparing state names, so a chart may rename its states."""
        return tag in self.definition.tags.get(self.state, ())

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
        # Starting runs to completion as well: a trigger sent by an entry action (or a
        # started observer) waits until every initial state is entered.
        self._to_completion(self._enter_initial)
        return self

    def _enter_initial(self) -> None:
        errors: list[ActionError] = []
        self._enter_states(self.definition.lineage(self.state), errors)
        self._hook.lifecycle_started(lifecycle=self, host=self.host)
        if self.state in self.definition.finals:
            self._finish()
        _raise_first(errors)

    def trigger(self, trigger: str, **payload: Any) -> bool | None:
        """Process ``trigger``. Returns whether a transition was taken (``False`` when every
        guard said no), or ``None`` when queued behind the trigger being processed.

        Raises :class:`UnknownTrigger` for a name the statechart does not define, and
        :class:`TriggerNotAllowed` when no transition of the active states (or the finished
        lifecycle) answers it. A queued trigger never raises: see :meth:`_step`.
        """
        if trigger not in self.definition.triggers:
            raise UnknownTrigger(self.name, trigger, self.state, sorted(self.definition.triggers))
        return self._send(trigger, None, payload, direct=True)

    send = trigger

    def _send(self, trigger: str, timer: CompiledTransition | None, payload: dict[str, Any],
              *, direct: bool = False) -> bool | None:
        """Process ``trigger`` (a timer's passes the one delayed transition it takes)."""
        if self._busy:
            self._queue.append((trigger, timer, payload))
            return None
        return self._to_completion(lambda: self._step(trigger, timer, payload, direct=direct))

    def _to_completion(self, first: Callable[[], Any]) -> Any:
        """Run ``first``, then every trigger it (or what follows it) queued, in order. When an
        action fails, the triggers still queued are discarded (each reported) and the error
        is raised."""
        self._busy = True
        try:
            result = first()
            while self._queue:
                self._step(*self._queue.popleft())
        except ActionError:
            while self._queue:
                trigger, _, payload = self._queue.popleft()
                self._discard(trigger, payload, "an action failed before it was processed")
            raise
        finally:
            self._queue.clear()
            self._busy = False
        return result

    def _step(self, trigger: str, timer: CompiledTransition | None, payload: dict[str, Any],
              direct: bool = False) -> bool:
        """One macrostep. A ``direct`` trigger (the caller's own ``trigger()``) raises when no
        transition answers it; a queued one is discarded and reported instead, because the call
        that queued it has already completed (SCXML discards such events silently)."""
        if self.finished:
            if direct:
                raise TriggerNotAllowed(self.name, trigger, self.state, [])
            self._discard(trigger, payload, "the lifecycle has finished")
            return False
        if timer is not None:
            if not self.is_in(timer.source or ""):
                self._discard(trigger, payload, f"its timer's state {timer.source!r} was exited")
                return False
            candidates = [timer]
        else:
            candidates = self.definition.candidates(self.state, trigger)
        if not candidates:
            if direct:
                raise TriggerNotAllowed(self.name, trigger, self.state, self.allowed_triggers())
            self._discard(trigger, payload, f"no transition answers it in {self.state!r}")
            return False
        record = Transition(self.name, self.id, trigger, self.state, None, payload,
                            self.clock.now_ms())
        self._current = record
        started = time.perf_counter()
        chosen = next((t for t in candidates if self._enabled(t)), None)
        if chosen is None:
            if not direct:
                self._discard(trigger, payload, f"every guard said no in {self.state!r}")
            return False
        # Transition actions run before any state is exited (Orion differs from SCXML here):
        # one that fails leaves the lifecycle exactly as it was.
        for action in chosen.actions:
            action(self)
        errors: list[ActionError] = []
        if chosen.dest is not None:
            for path in exit_path(self.state, chosen.domain):
                self._exit(path, errors)
            self._enter_states(chosen.enter, errors)
        record.dest = self.state
        record.duration_ms = (time.perf_counter() - started) * 1000.0
        self._hook.lifecycle_transition(lifecycle=self, transition=record, host=self.host)
        if self.state in self.definition.finals:
            self._finish()
        _raise_first(errors)
        return True

    def _enabled(self, transition: CompiledTransition) -> bool:
        return all(g(self) for g in transition.guards) \
            and not any(g(self) for g in transition.unless)

    def _discard(self, trigger: str, payload: dict[str, Any], reason: str) -> None:
        self._hook.lifecycle_event_discarded(lifecycle=self, trigger=trigger, payload=payload,
                                             reason=reason, host=self.host)

    def _finish(self) -> None:
        self.finished = True
        for path in list(self._timers):
            self._cancel_timers(path)
        self._hook.lifecycle_finished(lifecycle=self, host=self.host)

    # -- exiting and entering states ----------------------------------------------------------
    #
    # A failing exit or entry action does not stop the transition (as in SCXML, where an error
    # abandons the rest of that block of executable content and raises ``error.execution``):
    # the rest of that state's actions are skipped, every other state is still exited or
    # entered, and the first error is raised once the configuration is complete. So the active
    # states are always one path from a top-level state to ``self.state``, and exactly the
    # active states have their timers armed.

    def _enter_states(self, paths: Iterable[str], errors: list[ActionError]) -> None:
        for path in paths:
            self.state = path
            for index, (trigger, delay) in enumerate(self.definition.timers.get(path, ())):
                self._arm(path, index, trigger, self.clock.now_ms() + delay)
            _run(self.definition.entry.get(path, ()), self, errors)
            done = done_event(self.definition.nodes, path)
            if done is not None:
                self._queue.append((done, None, {}))

    def _exit(self, path: str, errors: list[ActionError]) -> None:
        # The state is still active while its exit actions run; its timers go with it after.
        _run(self.definition.exit.get(path, ()), self, errors)
        self._cancel_timers(path)
        parent = self.definition.nodes[path].parent
        self.state = parent if parent is not None else ""

    def _arm(self, path: str, index: int, trigger: str, deadline: float) -> None:
        timer = _Timer(path, index, trigger, deadline, None)  # type: ignore[arg-type]
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
        # The timer's own delayed transition, even when a deeper state or another of this
        # state's timers uses the same trigger name (every ``after`` defaults to ``timeout``).
        self._send(timer.trigger, self.definition.timer_transitions[(timer.state, timer.index)],
                   {})

    # -- snapshots ----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """A JSON-safe dict: state, context, pending timers as absolute deadlines, and the
        definition's name and hash. Raises :class:`SnapshotError` for non-JSON context.

        Built as plain data (the :class:`Snapshot` model checks it on :meth:`restore`): a
        write session takes one at every checkpoint."""
        problem = _json_problem(self.context, "context")
        if problem is not None:
            raise SnapshotError(f"{self.name}: cannot snapshot lifecycle {self.id}: {problem}")
        return {"format": SNAPSHOT_FORMAT, "definition": self.name,
                "definition_hash": self.definition.hash, "id": self.id, "state": self.state,
                "finished": self.finished, "context": _json_copy(self.context),
                "timers": [{"state": t.state, "trigger": t.trigger,
                            "deadline_ms": float(t.deadline_ms), "index": t.index}
                           for ts in self._timers.values() for t in ts]}

    @classmethod
    def restore(cls, definition: Definition, data: dict[str, Any], *, clock: Clock,
                plugins: PluginManager) -> Lifecycle:
        """Resume from :meth:`snapshot`: re-arm timers at their deadlines (a deadline already
        passed fires at once) without re-running entry actions."""
        if not isinstance(data, dict):
            raise SnapshotError(f"invalid snapshot: expected a JSON object (dict), "
                                f"got {type(data).__name__}")
        try:
            snap = Snapshot.model_validate(data)
        except ValidationError as exc:
            raise SnapshotError(f"invalid snapshot of {definition.name!r}: {exc}") from exc
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
                                f"{definition.name!r} (its states: "
                                f"{', '.join(sorted(definition.leaves))})")
        final = snap.state in definition.finals
        if snap.finished != final:
            raise SnapshotError(f"snapshot of {definition.name!r} says finished="
                                f"{snap.finished} but state {snap.state!r} is "
                                f"{'' if final else 'not '}a final state")
        problem = _json_problem(snap.context, "context")
        if problem is not None:
            raise SnapshotError(f"invalid snapshot of {definition.name!r}: {problem}")
        lifecycle = cls(definition, clock=clock, plugins=plugins, instance_id=snap.id)
        # A detached copy: the caller's dict (and other instances restored from it) must not
        # share lists or dicts with this lifecycle.
        lifecycle.context = json.loads(json.dumps(snap.context, allow_nan=False))
        lifecycle.state = snap.state
        lifecycle.finished = snap.finished
        armed: list[tuple[float, str, int, str]] = []
        for timer in snap.timers:
            if not lifecycle.is_in(timer.state):
                raise SnapshotError(f"snapshot timer for {timer.state!r} but the state is "
                                    f"{snap.state!r}")
            triggers = [t for t, _ in definition.timers.get(timer.state, ())]
            if timer.index is None:
                index = triggers.index(timer.trigger) if timer.trigger in triggers else None
            else:
                index = timer.index if timer.index < len(triggers) \
                    and triggers[timer.index] == timer.trigger else None
            if index is None:
                raise SnapshotError(f"snapshot timer {timer.trigger!r}"
                                    + ("" if timer.index is None else f" (#{timer.index})")
                                    + f" is not a timer of state {timer.state!r} in "
                                    f"{definition.name!r}")
            armed.append((timer.deadline_ms, timer.state, index, timer.trigger))
        # Earliest deadline first: overdue timers all fire "now", and must still fire in the
        # order they fell due (a clock breaks ties between equal deadlines by arming order).
        for deadline, state, index, trigger in sorted(armed, key=lambda a: a[0]):
            lifecycle._arm(state, index, trigger, deadline)
        return lifecycle


def _run(actions: Any, lifecycle: Lifecycle, errors: list[ActionError]) -> None:
    """Run one state's entry or exit actions; the first that fails ends the block."""
    for action in actions:
        try:
            action(lifecycle)
        except ActionError as exc:
            errors.append(exc)
            return


def _raise_first(errors: list[ActionError]) -> None:
    if errors:
        first = errors[0]
        for later in errors[1:]:
            first.add_note(f"then: {later}")
        raise first


def _copy_data(value: Any) -> Any:
    """A copy of the dicts, lists and tuples in ``value``; anything else is shared as is."""
    if isinstance(value, dict):
        return {k: _copy_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_copy_data(v) for v in value)
    return value


def _json_copy(value: Any) -> Any:
    """A detached copy of JSON data (checked by :func:`_json_problem`), tuples as lists: what a
    JSON round trip would give, without the text in between."""
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_copy(v) for v in value]
    return value


def _json_problem(value: Any, where: str, _path: frozenset[int] = frozenset()) -> str | None:
    """Why ``value`` would not survive a JSON round trip unchanged, or ``None``.

    Stricter than :func:`json.dumps`: it rejects non-string object keys, which ``json`` would
    silently turn into strings (so ``context["counts"][1]`` would vanish after a restore).
    Tuples are accepted and come back as lists."""
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} is {value!r}, which JSON cannot hold"
    if isinstance(value, (dict, list, tuple)):
        if id(value) in _path:
            return f"{where} contains itself (a circular reference)"
        inner = _path | {id(value)}
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    return (f"{where} has the key {key!r} of type {type(key).__name__}; "
                            "JSON object keys must be strings")
                problem = _json_problem(item, f"{where}[{key!r}]", inner)
                if problem is not None:
                    return problem
        else:
            for i, item in enumerate(value):
                problem = _json_problem(item, f"{where}[{i}]", inner)
                if problem is not None:
                    return problem
        return None
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{where} is a {type(value).__name__} ({shown}), which is not JSON data"
