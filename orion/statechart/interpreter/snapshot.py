"""A lifecycle as JSON data, and back: its state, context and pending timers.

``transitions`` keeps a model's state in one attribute and has no notion of timers or of
resuming in another process; this is Orion's. A snapshot names its definition by name and
hash; timers are absolute deadlines on the clock's epoch milliseconds, so they mean the same
moment after a restart.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orion.errors import SnapshotError

if TYPE_CHECKING:
    from orion.statechart.interpreter.definition import Definition
    from orion.statechart.interpreter.lifecycle import Lifecycle

SNAPSHOT_FORMAT = 1


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


def take(lifecycle: Lifecycle) -> dict[str, Any]:
    """The snapshot of ``lifecycle`` as plain data (a write session takes one at every
    checkpoint; :func:`checked` validates it on the way back)."""
    try:
        context = _json_data_copy(lifecycle.context)
    except (_NotJson, RecursionError):
        # Only now is the reason worth its text (a circular reference recurses until Python's
        # limit, where json_problem names it).
        problem = json_problem(lifecycle.context, "context") or "context is not JSON data"
        raise SnapshotError(f"{lifecycle.name}: cannot snapshot lifecycle {lifecycle.id}: "
                            f"{problem}") from None
    return {"format": SNAPSHOT_FORMAT, "definition": lifecycle.name,
            "definition_hash": lifecycle.definition.hash, "id": lifecycle.id,
            "state": lifecycle.state, "finished": lifecycle.finished,
            "context": context,
            "timers": [{"state": state, "trigger": trigger, "deadline_ms": float(deadline),
                        "index": index}
                       for state, index, trigger, deadline in lifecycle._armed()]}


def checked(definition: Definition, data: Any) -> tuple[Snapshot, list[tuple[float, str, int,
                                                                           str]]]:
    """``data`` validated against ``definition``: the snapshot, and its timers as
    ``(deadline, state, index, trigger)``, earliest first. Raises :class:`SnapshotError`."""
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
    problem = json_problem(snap.context, "context")
    if problem is not None:
        raise SnapshotError(f"invalid snapshot of {definition.name!r}: {problem}")
    armed = [(timer.deadline_ms, timer.state, _timer_index(definition, snap, timer),
              timer.trigger) for timer in snap.timers]
    # Earliest deadline first: overdue timers all fire "now", and must still fire in the
    # order they fell due (a clock breaks ties between equal deadlines by arming order).
    return snap, sorted(armed, key=lambda a: a[0])


def _timer_index(definition: Definition, snap: Snapshot, timer: TimerSnapshot) -> int:
    if not (snap.state == timer.state or snap.state.startswith(timer.state + ".")):
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
    return index


def detached(context: dict[str, Any]) -> dict[str, Any]:
    """A copy of a snapshot's context that shares no list or dict with the caller's."""
    return json.loads(json.dumps(context, allow_nan=False))


def copy_data(value: Any) -> Any:
    """A copy of the dicts, lists and tuples in ``value``; anything else is shared as is."""
    if isinstance(value, dict):
        return {k: copy_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(copy_data(v) for v in value)
    return value


def json_copy(value: Any) -> Any:
    """A detached copy of JSON data (checked by :func:`json_problem`), tuples as lists: what a
    JSON round trip would give, without the text in between."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_copy(v) for v in value]
    return value


class _NotJson(Exception):
    """Raised by :func:`_json_data_copy` for what :func:`json_problem` would explain."""


def _json_data_copy(value: Any) -> Any:
    """:func:`json_copy` of data :func:`json_problem` accepts, in one pass that builds no
    text (a write session snapshots at every checkpoint); raises :class:`_NotJson` otherwise."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise _NotJson
    if isinstance(value, dict):
        copied = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotJson
            copied[key] = _json_data_copy(item)
        return copied
    if isinstance(value, (list, tuple)):
        return [_json_data_copy(item) for item in value]
    raise _NotJson


def json_problem(value: Any, where: str, _path: frozenset[int] = frozenset()) -> str | None:
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
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(value, dict) and not isinstance(key, str):
                return (f"{where} has the key {key!r} of type {type(key).__name__}; "
                        "JSON object keys must be strings")
            problem = json_problem(item, f"{where}[{key!r}]" if isinstance(value, dict)
                                   else f"{where}[{key}]", inner)
            if problem is not None:
                return problem
        return None
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{where} is a {type(value).__name__} ({shown}), which is not JSON data"
