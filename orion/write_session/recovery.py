"""Crash recovery of write sessions: finding orphans, finishing or resuming them, cleaning up.

A write session journals its content under ``<state_dir>/write_sessions/<id>/`` while it
streams (see :mod:`orion.write_session.journal`). When the process dies before the target is
written, the directory stays behind: an *orphan*. This module

* lists them (:func:`scan`), without ever failing on a damaged one;
* handles them when ``orion run`` or ``orion chat`` starts (:func:`startup`): a write that
  already happened is only cleaned up, old orphans are removed, a session marked for
  ``--continue`` is adopted by the new runtime, and the others are offered for recovery;
* implements the ``orion sessions`` commands: :func:`recover_finalize` (the internal
  ``finalizeSession`` without a model), :func:`mark_resume`, :func:`discard`, :func:`clean`
  and :func:`undo`.

A session whose lock names a running process (:meth:`Journal.is_live`) is never touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orion.errors import OrionError
from orion.validation import ValidationRequest, collect_issues
from orion.confined import TEMP_MARK, open_parent
from orion.write_session.journal import (CONTENT, METADATA, STATUS, Journal, mark, marks,
                                         read_state, remove_session, unmark)
from orion.write_session.operations import (apply_operation, backup_path, count_lines, execute)
from orion.write_session.plan import CheckedPlan, PlanRejected, WritePlan, check_plan
from orion.write_session.repair import safe_replacement
from orion.write_session.undo import prune as prune_backups
from orion.write_session.undo import (record_paths, replace_json, undo_record_path,
                                      write_undo_record)
from orion.workspace import PathOutsideWorkspace, resolve_inside

if TYPE_CHECKING:
    from orion.plugins import PluginManager
    from orion.runtime.runtime import Runtime

__all__ = [
    "AmbiguousSession", "Orphan", "RecoveryError", "RecoveryResult", "SessionLive",
    "SessionNotFound", "UndoRefused", "UndoResult", "already_written", "clean", "discard",
    "format_age", "mark_resume", "parse_duration", "recover_finalize", "resolve_id", "scan",
    "startup", "undo",
]

#: Where the sessions live under the state directory.
SESSIONS = "write_sessions"
#: The file ``orion sessions recover ID --continue`` leaves in a session directory: the next
#: ``orion run`` / ``orion chat`` in the workspace adopts the session.
RESUME = "resume"
#: ``orphan_ttl_ms`` when the statechart cannot be loaded.
DEFAULT_TTL_MS = 3_600_000


class RecoveryError(OrionError):
    """A session command that cannot be carried out; the message says why, for people."""


class SessionNotFound(RecoveryError):
    """No session (or undo record) has that id or id prefix."""


class AmbiguousSession(RecoveryError):
    """An id prefix that more than one session starts with."""

    def __init__(self, prefix: str, candidates: list[str]):
        self.prefix, self.candidates = prefix, candidates
        super().__init__(f"session id {prefix!r} is ambiguous: it starts "
                         f"{', '.join(candidates)}; give more characters")


class SessionLive(RecoveryError):
    """The session is owned by a running process."""


class UndoRefused(RecoveryError):
    """The target changed since the session wrote it (or there is nothing to undo)."""


# -- listing ------------------------------------------------------------------------------------


@dataclass
class Orphan:
    """A session directory as found on disk. Everything but ``id``, ``directory``, ``live``,
    ``status`` and ``problems`` may be unknown (None) when the directory is damaged."""

    id: str
    directory: Path
    target_file: str | None = None
    operation: str | None = None
    intent: str | None = None
    conversation_id: str | None = None
    lines: int = 0
    bytes: int = 0
    created_ms: float | None = None
    #: The last time content or state reached the disk (falls back to the creation time).
    last_save_ms: float | None = None
    #: When ``--continue`` marked it, if it was marked.
    resume_ms: float | None = None
    age_ms: float | None = None
    live: bool = False
    #: ``open``, ``finalizing`` (its saved state holds the finalizing record: the write may have
    #: happened), ``resume`` (marked by ``orion sessions recover ID --continue``) or
    #: ``degraded`` (its journal went memory-only: the disk holds a part at most).
    status: str = "open"
    #: The lifecycle state of the last snapshot, e.g. ``session_active.awaiting_content``.
    state: str | None = None
    continuations: int = 0
    corrections: int = 0
    finalizing: dict[str, Any] | None = None
    degraded: str | None = None
    #: Where the content was written when neither the journal nor the target took it.
    rescued: str | None = None
    #: How many bytes the session had received when its journal failed (None: it did not).
    received_bytes: int | None = None
    #: The issues that blocked its write (status ``blocked``), as ``line:col: code: message``.
    blocked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict, repr=False)
    saved_state: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def short(self) -> str:
        return self.id[:8]

    @property
    def last_activity_ms(self) -> float | None:
        """The later of the last save and the ``--continue`` mark: what the TTL counts from."""
        times = [t for t in (self.last_save_ms, self.resume_ms) if t is not None]
        return max(times) if times else None

    @property
    def complete(self) -> bool:
        """Whether the model had finished the content (DONE seen) before the crash."""
        tags = self.saved_state.get("tags")
        if isinstance(tags, list):
            return self.finalizing is not None or bool({"finalizing", "correcting"} & set(tags))
        # A journal saved before sessions recorded their tags: the built-in chart's names.
        return self.finalizing is not None or (self.state or "").endswith(
            ("finalizing", "needs_corrections"))

    def plan(self) -> WritePlan:
        """The write plan, rebuilt from ``metadata.json``; :class:`RecoveryError` if it
        cannot be."""
        if not self.metadata:
            raise RecoveryError(f"write session {self.short} has no usable metadata.json "
                                f"({'; '.join(self.problems) or 'empty'}); it cannot be "
                                f"recovered, only discarded")
        try:
            return WritePlan.model_validate(_raw_plan(self.metadata))
        except ValueError as exc:
            raise RecoveryError(f"write session {self.short}: metadata.json holds no valid "
                                f"write plan ({_first_line(exc)})") from exc

    def describe(self, now_ms: float | None = None) -> str:
        """``docs/guide.md (120 lines, saved 5 min ago)``."""
        target = self.target_file or "an unknown file"
        age = self.age_ms if now_ms is None or self.last_save_ms is None \
            else now_ms - self.last_save_ms
        saved = f", saved {format_age(age)}" if age is not None else ""
        return f"{target} ({_lines(self.lines)}{saved})"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "directory": str(self.directory), "target_file": self.target_file,
            "operation": self.operation, "intent": self.intent,
            "conversation_id": self.conversation_id, "lines": self.lines, "bytes": self.bytes,
            "created_ms": self.created_ms, "last_save_ms": self.last_save_ms,
            "age_ms": self.age_ms, "live": self.live, "status": self.status,
            "state": self.state, "continuations": self.continuations,
            "corrections": self.corrections, "degraded": self.degraded,
            "rescued": self.rescued, "received_bytes": self.received_bytes,
            "blocked": list(self.blocked), "problems": list(self.problems)}


def sessions_dir(state_dir: str | os.PathLike[str]) -> Path:
    return Path(state_dir) / SESSIONS


def scan(state_dir: str | os.PathLike[str], *, now_ms: float | None = None) -> list[Orphan]:
    """Every session directory under ``<state_dir>/write_sessions/``, oldest save first. A
    damaged directory is listed with its ``problems``; this never raises for one."""
    root = sessions_dir(state_dir)
    now = _wall_ms() if now_ms is None else now_ms
    try:
        entries = [p for p in root.iterdir() if p.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [load(path, now_ms=now) for path in entries]
    found.sort(key=lambda o: (o.last_save_ms is None, o.last_save_ms or 0.0, o.id))
    return found


def load(directory: Path, *, now_ms: float | None = None) -> Orphan:
    """One session directory as an :class:`Orphan` (never raises for its contents)."""
    now = _wall_ms() if now_ms is None else now_ms
    orphan = Orphan(id=directory.name, directory=directory)
    problems = orphan.problems
    metadata, problem = _read_json(directory / METADATA)
    if problem:
        problems.append(problem)
    elif not isinstance(metadata, dict):
        problems.append(f"{METADATA} is not a JSON object")
    else:
        orphan.metadata = metadata
        orphan.target_file = _str(metadata.get("target_file"))
        orphan.operation = _str(metadata.get("operation"))
        orphan.intent = _str(metadata.get("intent"))
        orphan.conversation_id = _str(metadata.get("conversation_id"))
        orphan.created_ms = _number(metadata.get("created_at"))
        if metadata.get("session_id") not in (None, orphan.id):
            problems.append(f"{METADATA} names session {metadata.get('session_id')!r}, not "
                            f"{orphan.id!r}")
        try:
            WritePlan.model_validate(_raw_plan(metadata))
        except ValueError as exc:
            problems.append(f"{METADATA} holds no valid write plan ({_first_line(exc)})")
    state, problem = read_state(directory)
    if problem:
        problems.append(problem)
    if state is not None:
        orphan.saved_state = state
        orphan.last_save_ms = _number(state.get("last_save_ms"))
        orphan.degraded = _str(state.get("degraded"))
        orphan.continuations = _int(state.get("continuations"))
        orphan.corrections = _int(state.get("corrections"))
        snapshot = state.get("snapshot")
        if isinstance(snapshot, dict):
            orphan.state = _str(snapshot.get("state"))
        record = state.get("finalizing")
        if isinstance(record, dict):
            orphan.finalizing = record
    try:
        with open(directory / CONTENT, "rb") as f:
            data = f.read()
        orphan.bytes, orphan.lines = len(data), data.count(b"\n")
    except FileNotFoundError:
        pass
    except OSError as exc:
        problems.append(f"{CONTENT} cannot be read: {exc.strerror or exc}")
    _load_status(orphan)
    resume = directory / RESUME
    if resume.exists():
        orphan.status = "resume"
        marked, _ = _read_json(resume)
        orphan.resume_ms = _number(marked.get("marked_at_ms")) if isinstance(marked, dict) \
            else None
        if orphan.resume_ms is None:
            orphan.resume_ms = _mtime_ms(resume)
    elif orphan.finalizing is not None:
        orphan.status = "finalizing"
    elif orphan.degraded is not None:
        orphan.status = "degraded"  # its journal went memory-only: the notes say why
    _load_blocked(orphan)
    if orphan.last_save_ms is None:
        orphan.last_save_ms = orphan.created_ms if orphan.created_ms is not None \
            else _mtime_ms(directory)
    activity = orphan.last_activity_ms
    orphan.age_ms = None if activity is None else max(0.0, now - activity)
    orphan.live = Journal.is_live(directory)
    return orphan


def _load_blocked(orphan: Orphan) -> None:
    """A session whose write a validator's rule blocked: the issues, and the status
    ``blocked`` unless another status says more."""
    blocked = orphan.saved_state.get("blocked")
    if orphan.saved_state.get("status") == "blocked" and isinstance(blocked, list):
        orphan.blocked = [str(issue) for issue in blocked]
        if orphan.status == "open":
            orphan.status = "blocked"


def _load_status(orphan: Orphan) -> None:
    """The reserved ``degraded`` file: why the journal went memory-only, how much it had
    received, where the content was rescued to."""
    try:
        text = (orphan.directory / STATUS).read_bytes().strip()
    except OSError:
        return
    if not text:
        return
    try:
        record = json.loads(text)
    except ValueError:
        return
    if not isinstance(record, dict):
        return
    orphan.degraded = _str(record.get("reason")) or orphan.degraded or "the disk failed"
    orphan.rescued = _str(record.get("rescued"))
    received = record.get("bytes")
    if isinstance(received, int) and received > orphan.bytes:
        orphan.received_bytes = received


def resolve_id(state_dir: str | os.PathLike[str], session_id: str, *,
               now_ms: float | None = None) -> Orphan:
    """The session whose id is ``session_id`` or starts with it."""
    prefix = session_id.strip()
    orphans = scan(state_dir, now_ms=now_ms)
    return _pick(prefix, {o.id: o for o in orphans}, "write session", sessions_dir(state_dir))


def _pick(prefix: str, items: dict[str, Any], what: str, where: Path) -> Any:
    if not prefix or "/" in prefix or "\\" in prefix:
        raise SessionNotFound(f"invalid session id {prefix!r}")
    if prefix in items:
        return items[prefix]
    matches = sorted(key for key in items if key.startswith(prefix))
    if len(matches) > 1:
        raise AmbiguousSession(prefix, matches)
    if not matches:
        known = ", ".join(sorted(k[:8] for k in items)) or "none"
        raise SessionNotFound(f"no {what} {prefix!r} in {where} (known: {known})")
    return items[matches[0]]


# -- the finalizing record: did the write already happen? --------------------------------------


def _unchecked_plan(plan: WritePlan, workspace: Path, state_dir: Path) -> CheckedPlan:
    """A :class:`CheckedPlan` for :func:`apply_operation` without :func:`check_plan`'s rules
    (create's target exists once it was written)."""
    root = Path(workspace).resolve()
    target = resolve_inside(root, plan.target_file)
    return CheckedPlan(plan, root, target, target.relative_to(root).as_posix(), target.exists(),
                       None, Path(state_dir).resolve())


def _content_candidates(raw: bytes, relative: str,
                        plugins: PluginManager | None) -> Iterable[bytes]:
    """What the session may have written: the journal as it is, normalized by the
    ``normalize_content`` hook, and either after the safe replacement."""
    yield raw
    normalized = raw
    if plugins is not None:
        result = plugins.hook.normalize_content(path=relative, content=raw)
        if result is not None:
            normalized = result
            yield normalized
    for data in {raw, normalized}:
        yield safe_replacement(data)[0]


def already_written(orphan: Orphan, workspace: str | os.PathLike[str],
                    state_dir: str | os.PathLike[str],
                    plugins: PluginManager | None = None) -> bool:
    """Whether a session that crashed while finalizing had written its target: the target
    holds what the recorded content makes of the recorded pre-image (the backup; "absent" for
    a new file). False when there is no finalizing record or it cannot be confirmed."""
    record = orphan.finalizing
    if not record:
        return False
    try:
        plan = orphan.plan()
        checked = _unchecked_plan(plan, Path(workspace), Path(state_dir))
        current = checked.target.read_bytes() if checked.target.is_file() else None
    except (RecoveryError, PathOutsideWorkspace, OSError):
        return False
    if current is None:
        return False
    after_sha = record.get("after_sha256")
    if isinstance(after_sha, str):  # recorded by newer sessions: the bytes to be written
        return _sha(current) == after_sha
    before_sha = record.get("before_sha256")
    if before_sha is None:
        pre = None
    else:
        backup = backup_path(state_dir=Path(state_dir), session_id=orphan.id,
                             relative=checked.relative)
        # execute() saves the backup before it writes: no backup (or another one), no write.
        try:
            pre = backup.read_bytes()
        except OSError:
            return False
        if _sha(pre) != before_sha:
            return False
    try:
        raw = (orphan.directory / CONTENT).read_bytes()
    except OSError:
        raw = b""
    wanted = record.get("content_sha256")
    for content in _content_candidates(raw, checked.relative, plugins):
        if _sha(content) != wanted:
            continue
        try:
            return apply_operation(checked, pre, content) == current
        except PlanRejected:
            return False
    return False


def _write_undo_record(state_dir: Path, orphan: Orphan, relative: str, operation: str,
                       data: bytes, status: str, written_at_ms: float) -> Path:
    """The record ``orion sessions undo`` reads (the format of the session's own)."""
    backup = backup_path(state_dir=state_dir, session_id=orphan.id, relative=relative)
    return write_undo_record(state_dir, session_id=orphan.id, relative=relative,
                             operation=operation, sha256=_sha(data),
                             backup=backup if backup.is_file() else None,
                             written_at_ms=written_at_ms, status=status)


def _finish_cleanup(orphan: Orphan, workspace: Path, state_dir: Path, status: str,
                    now_ms: float) -> str:
    """The write happened: add the undo record if the crash left none, drop the journal."""
    plan = orphan.plan()
    checked = _unchecked_plan(plan, workspace, state_dir)
    if not undo_record_path(state_dir, orphan.id).exists():
        _write_undo_record(state_dir, orphan, checked.relative, plan.operation.value,
                           checked.target.read_bytes(), status,
                           orphan.last_save_ms if orphan.last_save_ms is not None else now_ms)
    remove_session(orphan.directory)
    remove_temp_leftovers(checked.target.parent)
    return checked.relative


# -- startup ------------------------------------------------------------------------------------


@dataclass
class StartupAction:
    """What :func:`startup` did with one orphan: ``repaired``, ``expired``, ``adopted``,
    ``offered`` or ``failed``, and the notice it gave."""

    session_id: str
    action: str
    notice: str


#: Up to this many orphans are named at start, a line each; more are summed up in one line.
NAMED_AT_START = 3


def startup(runtime: Runtime) -> list[StartupAction]:
    """Handle the orphans of the runtime's state directory when ``orion run`` or ``orion chat``
    starts; every action is also a notice for the reporter. Live sessions and this runtime's
    own are skipped. The caller lets the runtime answer a prompt an adopted session queued
    (``await runtime.pump()``).

    Start-up does not grow with the number of orphans: one listing of ``write_sessions/``
    finds the sessions marked for ``--continue`` or caught while writing their target (those
    are opened and handled), a stat per session finds the ones past ``orphan_ttl_ms`` (opened
    and removed), and the rest are named a line each when there are a few, or counted in one
    line pointing at ``orion sessions list``."""
    from orion.write_session.manager import manager_for

    manager = manager_for(runtime)
    owned = {session.id for session in manager.sessions}
    try:
        ttl = int(runtime.definition("write_session").settings.get("orphan_ttl_ms",
                                                                    DEFAULT_TTL_MS))
    except OrionError:
        ttl = DEFAULT_TTL_MS
    now = runtime.clock.now_ms()
    actions: list[StartupAction] = []
    _housekeeping(runtime)
    try:
        directories, marked = marks(sessions_dir(runtime.state_dir))
    except (FileNotFoundError, NotADirectoryError):
        return actions
    except OSError as exc:
        runtime.reporter.notice(f"could not look for orphaned write sessions: {exc}")
        return actions
    entries = {entry.name: entry for entry in directories if entry.name not in owned}
    flagged = (marked["resume"] | marked["finalizing"]) & entries.keys()
    named = [load(Path(entries[name].path), now_ms=now) for name in sorted(flagged)]
    rest = [entry for name, entry in entries.items() if name not in flagged]
    if ttl > 0:  # a stat each: only directories untouched for longer than the TTL are opened
        expired = set()
        for entry in rest:
            if _older_than(entry, now - ttl):
                orphan = load(Path(entry.path), now_ms=now)
                if orphan.age_ms is not None and orphan.age_ms > ttl:
                    named.append(orphan)
                    expired.add(entry.name)
        rest = [entry for entry in rest if entry.name not in expired]
    if len(rest) <= NAMED_AT_START:
        named += [load(Path(entry.path), now_ms=now) for entry in rest]
        rest = []
    named.sort(key=lambda o: (o.last_save_ms is None, o.last_save_ms or 0.0, o.id))
    for orphan in named:
        if orphan.live:
            continue
        try:
            action = _startup_one(runtime, manager, orphan, ttl, now)
        except (OrionError, OSError, ValueError) as exc:
            action = StartupAction(orphan.id, "failed",
                                   f"could not check write session {orphan.short}: {exc}")
        actions.append(action)
        runtime.reporter.notice(action.notice)
        _trace(runtime, orphan, action)
    if rest:
        action = _summed_up(runtime, rest, now)
        actions.append(action)
        runtime.reporter.notice(action.notice)
    runtime.drain_outboxes()
    return actions


def _older_than(entry: os.DirEntry[str], limit_ms: float) -> bool:
    """Whether a session directory was last changed before ``limit_ms`` (wall clock). The
    journal renames or creates a file in it at least once per flush interval while it
    writes, so this never misses a session that is past its TTL."""
    try:
        return entry.stat().st_mtime * 1000.0 < limit_ms
    except OSError:
        return False


def _summed_up(runtime: Runtime, rest: list[os.DirEntry[str]], now: float) -> StartupAction:
    """One line for many orphans, naming the newest (the one most likely wanted)."""
    def changed(entry: os.DirEntry[str]) -> float:
        try:
            return entry.stat().st_mtime
        except OSError:
            return 0.0

    newest = load(Path(max(rest, key=changed).path), now_ms=now)
    count = len(rest)
    notice = (f"{count} write sessions from other runs are kept in "
              f"{sessions_dir(runtime.state_dir)}; the newest is {newest.short} for "
              f"{newest.describe(now)}. `orion sessions list` shows them all, "
              f"`orion sessions recover ID` writes or continues one, `orion sessions clean` "
              "removes old ones")
    from orion.trace.events import Kind, TraceEvent

    runtime.tracer.emit(TraceEvent(
        Kind.RECOVERY, f"offered {count} write sessions", runtime.clock.now_ms(),
        runtime.conversation.id, "", {"orion.action": "offered", "orion.sessions": count}))
    return StartupAction("", "offered", notice)


def _housekeeping(runtime: Runtime) -> None:
    """At start: temp files a killed write left beside its target go, and backups beyond
    ``keep_backups`` are pruned. A failure here only costs a notice."""
    try:
        removed = sweep_temp_leftovers(runtime.workspace, runtime.state_dir)
    except OSError as exc:
        runtime.reporter.notice(f"could not look for leftover temp files: {exc}")
        removed = []
    if removed:
        runtime.reporter.notice(f"removed {len(removed)} temp file(s) an interrupted write left "
                                f"behind: {', '.join(removed[:5])}"
                                + (" ..." if len(removed) > 5 else ""))
    try:
        keep = int(runtime.definition("write_session").settings.get("keep_backups", 100))
    except OrionError:
        keep = 100
    try:
        open_ids = {entry.name for entry in os.scandir(sessions_dir(runtime.state_dir))}
    except OSError:
        open_ids = set()
    try:
        prune_backups(runtime.state_dir, keep, open_sessions=open_ids)
    except OSError as exc:
        runtime.reporter.notice(f"could not prune old backups: {exc}")


#: Directories the leftover sweep never enters: Orion's state, version control, and trees of
#: generated files that are large and never a write's target.
SWEEP_SKIPPED = frozenset({".git", ".hg", ".svn", ".orion", "node_modules", ".venv", "venv",
                           "__pycache__", ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
#: The sweep looks at most at this many directories (a huge tree costs a bounded listing).
SWEEP_MAX_DIRS = 5000
#: A temp file without a pid in its name (an older Orion) is removed once it is this old.
LEGACY_TEMP_AGE_S = 600
_TEMP_PID = re.compile(r"(\d+)-[0-9a-f]+")


def remove_temp_leftovers(directory: Path) -> list[str]:
    """Remove the ``.NAME.orion-tmp-PID-RANDOM`` files in ``directory`` whose process is gone
    (a write in progress in another running process is left alone); their names."""
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not name.startswith(".") or TEMP_MARK not in name:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            match = _TEMP_PID.fullmatch(name.rsplit(TEMP_MARK, 1)[1])
            if match is not None:
                if _pid_alive(int(match.group(1))):
                    continue
            elif time.time() - entry.stat(follow_symlinks=False).st_mtime < LEGACY_TEMP_AGE_S:
                continue
            os.unlink(entry.path)
        except OSError:
            continue
        removed.append(name)
    return removed


def sweep_temp_leftovers(workspace: Path, state_dir: Path) -> list[str]:
    """:func:`remove_temp_leftovers` in every directory of the workspace, listing names only
    (no file is read), never entering :data:`SWEEP_SKIPPED` directories, the state directory
    or a symbolic link, and at most :data:`SWEEP_MAX_DIRS` directories. Paths removed,
    relative to the workspace."""
    root = Path(workspace).resolve()
    state = Path(state_dir).resolve()
    removed: list[str] = []
    pending = [root]
    seen = 0
    while pending and seen < SWEEP_MAX_DIRS:
        directory = pending.pop()
        seen += 1
        relative = directory.relative_to(root)
        removed += [(relative / name).as_posix() for name in remove_temp_leftovers(directory)]
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.name in SWEEP_SKIPPED:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    path = Path(entry.path)
                    if path != state:
                        pending.append(path)
            except OSError:
                continue
    return removed


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, it belongs to someone else
    return True


def _startup_one(runtime: Runtime, manager: Any, orphan: Orphan, ttl: int,
                 now: float) -> StartupAction:
    workspace, state_dir = runtime.workspace, runtime.state_dir
    if orphan.finalizing and already_written(orphan, workspace, state_dir, runtime.plugins):
        relative = _finish_cleanup(orphan, workspace, state_dir, "repaired", now)
        return StartupAction(orphan.id, "repaired", f"repaired session {orphan.short}: "
                                                    f"{relative} was already written")
    if ttl > 0 and orphan.age_ms is not None and orphan.age_ms > ttl:
        remove_session(orphan.directory)
        return StartupAction(orphan.id, "expired",
                             f"removed orphaned write session {orphan.short} for "
                             f"{orphan.describe(now)}: older than {format_duration(ttl)}")
    if orphan.status == "resume" and not orphan.problems:
        try:
            session = manager.adopt(orphan)
        except OrionError as exc:
            (orphan.directory / RESUME).unlink(missing_ok=True)
            unmark(orphan.directory, "resume")
            return StartupAction(orphan.id, "failed",
                                 f"could not continue write session {orphan.short} for "
                                 f"{orphan.describe(now)}: {exc}. " + _offer(orphan))
        return StartupAction(orphan.id, "adopted",
                             f"continuing write session {orphan.short} for "
                             f"{orphan.describe(now)} ({session.state})")
    if orphan.blocked:
        return StartupAction(orphan.id, "offered",
                             f"write session {orphan.short} for {orphan.describe(now)} was "
                             f"blocked ({'; '.join(orphan.blocked[:3])}): fix its content, "
                             f"then {_offer(orphan)}")
    if orphan.problems:
        return StartupAction(orphan.id, "offered",
                             f"damaged write session {orphan.short} "
                             f"({'; '.join(orphan.problems)}): orion sessions discard "
                             f"{orphan.short}")
    return StartupAction(orphan.id, "offered", f"orphaned write session {orphan.short} for "
                                               f"{orphan.describe(now)}: {_offer(orphan)}")


def _offer(orphan: Orphan) -> str:
    return (f"orion sessions recover {orphan.short} --finalize | --continue, or orion sessions "
            f"discard {orphan.short}")


def _trace(runtime: Runtime, orphan: Orphan, action: StartupAction) -> None:
    from orion.trace.events import Kind, TraceEvent

    runtime.tracer.emit(TraceEvent(
        Kind.RECOVERY, f"{action.action} {orphan.target_file or orphan.short}",
        runtime.clock.now_ms(), runtime.conversation.id, orphan.id,
        {"orion.action": action.action, "orion.target": orphan.target_file or "",
         "orion.lines": orphan.lines, "orion.bytes": orphan.bytes,
         "orion.status": orphan.status}))


# -- orion sessions recover ID --finalize ------------------------------------------------------


@dataclass
class RecoveryResult:
    """What :func:`recover_finalize` did. ``status`` is ``recovered`` (the target was written
    now) or ``repaired`` (it had been written before the crash; only cleaned up)."""

    session_id: str
    target_file: str
    status: str
    report: str
    bytes: int = 0
    lines: int = 0
    sha256: str = ""
    backup: str | None = None
    complete: bool = True
    replaced: int = 0
    issues: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def recover_finalize(workspace: str | os.PathLike[str], state_dir: str | os.PathLike[str],
                     session_id: str, plugins: PluginManager, *,
                     settings: dict[str, Any] | None = None) -> RecoveryResult:
    """Write a session's journaled content to its target without a model: the internal
    ``finalizeSession(session_id, journal_path)``. The plan is rebuilt from the metadata and
    checked again, the content normalized and validated; with no model to ask for
    corrections, the safe replacement removes invalid UTF-8 and control characters, and what
    other issues remain are reported. The target is written once, atomically, with a backup
    and an undo record; then the journal is removed. Idempotent: when the finalizing record
    shows the target already written, only the cleanup is done."""
    workspace, state_dir = Path(workspace).resolve(), Path(state_dir).resolve()
    orphan = resolve_id(state_dir, session_id)
    if orphan.live:
        raise SessionLive(f"write session {orphan.short} is owned by a running process; "
                          "finish it there (or stop that process first)")
    plan = orphan.plan()
    now = _wall_ms()
    if orphan.finalizing and already_written(orphan, workspace, state_dir, plugins):
        relative = _finish_cleanup(orphan, workspace, state_dir, "repaired", now)
        data = (workspace / relative).read_bytes()
        return RecoveryResult(orphan.id, relative, "repaired",
                              f"{relative} was already written by session {orphan.short}; "
                              "cleaned up", len(data), count_lines(data), _sha(data))
    _refuse_a_second_edit(orphan, plan, workspace, state_dir)
    if orphan.received_bytes is not None:
        where = (f"; the whole content was written to {orphan.rescued}" if orphan.rescued
                 else "")
        raise RecoveryError(
            f"write session {orphan.short} holds only {orphan.bytes} of the "
            f"{orphan.received_bytes} bytes it received: its journal could not be written "
            f"({orphan.degraded}){where}. Nothing written; discard it with orion sessions "
            f"discard {orphan.short} once the content is safe")
    try:
        checked = check_plan(plan, workspace=workspace, state_dir=state_dir)
    except PlanRejected as exc:
        raise RecoveryError(f"cannot write {plan.target_file} for session {orphan.short}: "
                            f"{exc}") from exc
    if settings is None:
        settings = workspace_settings(workspace, plugins)
    journal = Journal.open(orphan.directory, now_ms=_wall_ms)
    try:
        content = journal.content()
        if not content.strip():
            raise RecoveryError(f"write session {orphan.short} saved no content, so there is "
                                f"nothing to write to {checked.relative}; discard it with "
                                f"orion sessions discard {orphan.short}")
        normalized = plugins.hook.normalize_content(path=checked.relative, content=content)
        if normalized is not None:
            content = normalized
        request = ValidationRequest(checked.relative, content, dict(settings))
        issues = collect_issues(plugins, request)
        replaced = 0
        if issues:
            content, changes = safe_replacement(content, settings.get("safe_replacement", ""))
            replaced = len(changes)
            if replaced:
                issues = collect_issues(plugins, ValidationRequest(checked.relative, content,
                                                                   dict(settings)))
        _refuse_blocked(orphan, checked.relative, issues, journal.directory / CONTENT)
        before = checked.target.read_bytes() if checked.exists else None
        after = apply_operation(checked, before, content)
        mark(journal.directory, "finalizing")
        journal.flush({**journal.state, "status": "recovering", "finalizing": {
            "content_sha256": _sha(content),
            "before_sha256": _sha(before) if before is not None else None,
            "after_sha256": _sha(after)}})
        result = execute(checked, content, state_dir=state_dir, session_id=orphan.id)
    except BaseException:
        journal.close()
        raise
    _write_undo_record(state_dir, orphan, result.relative, plan.operation.value,
                       result.path.read_bytes(), "recovered", _wall_ms())
    journal.remove()
    remove_temp_leftovers(result.path.parent)
    report = result.report
    if not orphan.complete:
        report += " (the model had not finished: the content may be incomplete)"
    if replaced:
        report += f"; the safe replacement changed {replaced} place(s)"
    return RecoveryResult(orphan.id, result.relative, "recovered", report, result.bytes,
                          result.lines, result.sha256,
                          str(result.backup) if result.backup else None, orphan.complete,
                          replaced, [str(issue) for issue in issues])


def _refuse_blocked(orphan: Orphan, relative: str, issues: list[Any], content: Path) -> None:
    """A validator's rule that the content still breaks keeps it from being written."""
    blocking = [issue for issue in issues if issue.blocking]
    if blocking:
        raise RecoveryError(
            f"write session {orphan.short} is blocked: {len(blocking)} issue(s) keep "
            f"{relative} from being written ({'; '.join(map(str, blocking[:3]))}). Nothing "
            f"written; fix {content} and recover again, or orion sessions discard "
            f"{orphan.short}")


def _refuse_a_second_edit(orphan: Orphan, plan: WritePlan, workspace: Path,
                          state_dir: Path) -> None:
    """An append or insert must not run twice. A session that crashed while finalizing, whose
    target is neither its recorded pre-image nor what the write makes of it, may have written
    and then been edited: refuse, unless the session itself recorded that its write failed."""
    record = orphan.finalizing
    if not record or plan.operation.value not in ("append", "insert"):
        return
    if orphan.saved_state.get("status") == "failed":
        return
    try:
        current = _unchecked_plan(plan, workspace, state_dir).target.read_bytes()
    except (OSError, PathOutsideWorkspace):
        return
    if _sha(current) != record.get("before_sha256"):
        raise RecoveryError(
            f"{plan.target_file} changed since session {orphan.short} began writing it, so "
            f"the {plan.operation.value} may have happened already; nothing written. Check the "
            f"file, then discard the session (orion sessions discard {orphan.short}) or add "
            "the content by hand")


def workspace_settings(workspace: Path, plugins: PluginManager) -> dict[str, Any]:
    """The ``write_session`` settings of the workspace (``orion.yaml`` and the environment
    applied), or ``{}`` when the statechart cannot be loaded."""
    from orion.config import load_config
    from orion.errors import ConfigError, StatechartError
    from orion.statechart.catalog import Catalog

    try:
        config = load_config(workspace)
        definition = Catalog(plugins, config).definition(  # as Runtime.definition finds it
            "write_session", overrides=config.overrides("write_session"),
            overrides_origin=config.origin("write_session"))
        return dict(definition.settings)
    except (ConfigError, StatechartError):
        pass
    return {}


# -- the other commands -------------------------------------------------------------------------


def mark_resume(state_dir: str | os.PathLike[str], session_id: str, *,
                now_ms: float | None = None) -> Orphan:
    """Mark a session for ``--continue``: the next ``orion run`` or ``orion chat`` in the
    workspace adopts it and asks the model to go on after the last saved line."""
    orphan = resolve_id(state_dir, session_id, now_ms=now_ms)
    if orphan.live:
        raise SessionLive(f"write session {orphan.short} is owned by a running process; it "
                          "continues there")
    if orphan.problems:
        raise RecoveryError(f"write session {orphan.short} cannot be continued: "
                            f"{'; '.join(orphan.problems)}")
    orphan.plan()
    _replace_json(orphan.directory / RESUME,
                  {"marked_at_ms": _wall_ms() if now_ms is None else now_ms})
    mark(orphan.directory, "resume")
    orphan.status = "resume"
    return orphan


def discard(state_dir: str | os.PathLike[str], session_id: str) -> Orphan:
    """Remove a session directory (its content is lost). Refuses a live session."""
    orphan = resolve_id(state_dir, session_id)
    if orphan.live:
        raise SessionLive(f"write session {orphan.short} is owned by a running process; "
                          "it cannot be discarded from here")
    remove_session(orphan.directory, strict=True)
    return orphan


def clean(state_dir: str | os.PathLike[str], older_than_ms: float,
          now_ms: float | None = None) -> list[Orphan]:
    """Remove every session that is not live and whose last save (or ``--continue`` mark) is
    more than ``older_than_ms`` before ``now_ms``; return them."""
    now = _wall_ms() if now_ms is None else now_ms
    removed = []
    for orphan in scan(state_dir, now_ms=now):
        if orphan.live or orphan.age_ms is None or orphan.age_ms <= older_than_ms:
            continue
        if Journal.is_live(orphan.directory):  # taken over since the scan
            continue
        remove_session(orphan.directory)
        removed.append(orphan)
    return removed


@dataclass
class UndoResult:
    session_id: str
    target_file: str
    #: ``restored`` (the pre-image is back) or ``deleted`` (the session had created the file).
    action: str
    report: str


def undo(workspace: str | os.PathLike[str], state_dir: str | os.PathLike[str],
         session_id: str, *, now_ms: float | None = None) -> UndoResult:
    """Put the target back as it was before the session wrote it, if nothing changed it since:
    restore the backup atomically, or delete a file the session created. Refuses with
    :class:`UndoRefused` otherwise."""
    workspace, state_dir = Path(workspace).resolve(), Path(state_dir).resolve()
    path = _pick(session_id.strip(), record_paths(state_dir), "undo record of a write session",
                 state_dir / "undo")
    full_id = path.stem if path.name != "undo.json" else path.parent.name
    short = full_id[:8]
    record, problem = _read_json(path)
    if problem or not isinstance(record, dict):
        raise RecoveryError(f"the undo record of session {short} is damaged: "
                            f"{problem or 'not a JSON object'}")
    relative = record.get("target_file")
    if not isinstance(relative, str):
        raise RecoveryError(f"the undo record of session {short} names no target file")
    if record.get("undone"):
        raise UndoRefused(f"session {short} was already undone; nothing undone")
    try:
        target = resolve_inside(workspace, relative)
    except PathOutsideWorkspace as exc:
        raise RecoveryError(f"the undo record of session {short} names {relative!r}, which is "
                            f"not inside {workspace}: {exc}") from exc
    backup_name = record.get("backup")
    backup = None
    if not (backup_name is None and record.get("operation") == "create"):
        backup = Path(backup_name) if isinstance(backup_name, str) else backup_path(
            state_dir=state_dir, session_id=full_id, relative=relative)
        if not backup.is_file():
            raise UndoRefused(f"the backup of {relative} from session {short} is missing "
                              f"({backup}); nothing undone")
    # Read, compare and put back under the directory's lock, through directory descriptors:
    # another Orion process cannot write in between, and no swapped link redirects the undo.
    with open_parent(workspace, target.relative_to(workspace).as_posix()) as parent, \
            parent.locked():
        current = parent.read()
        if current is None or _sha(current) != record.get("sha256"):
            what = "was deleted" if current is None else "changed"
            raise UndoRefused(f"{relative} {what} since session {short} wrote it; nothing "
                              "undone")
        if backup is None:
            parent.unlink()
            action, report = "deleted", f"deleted {relative} (session {short} had created it)"
        else:
            parent.replace(backup.read_bytes(), mode=backup.stat().st_mode & 0o7777)
            action, report = ("restored",
                              f"restored {relative} as it was before session {short}")
    record.update(undone=True, undone_at_ms=_wall_ms() if now_ms is None else now_ms)
    _replace_json(path, record)
    return UndoResult(full_id, relative, action, report)


# -- durations ----------------------------------------------------------------------------------

_UNITS_MS = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0,
             "w": 604_800_000.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+")


def parse_duration(text: str) -> float:
    """``1h``, ``30m``, ``1h30m``, ``2d``, ``500ms`` or ``0`` as milliseconds; ValueError
    otherwise."""
    compact = text.replace(" ", "").lower() if isinstance(text, str) else ""
    if compact in ("0", "0.0"):
        return 0.0
    if compact and _DURATION.fullmatch(compact):
        return sum(float(n) * _UNITS_MS[unit] for n, unit in _PART.findall(compact))
    raise ValueError(f"invalid duration {text!r}: expected e.g. 30m, 1h, 2d, 1h30m or 0")


def format_duration(ms: float) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            value = ms / size
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) \
                else f"{value:.1f} {unit}"
    return f"{ms:.0f} ms"


def format_age(ms: float | None) -> str:
    """``5 min ago``; ``just now`` under a second."""
    if ms is None:
        return "at an unknown time"
    if ms < 1000:
        return "just now"
    return f"{format_duration(ms)} ago"


# -- helpers ------------------------------------------------------------------------------------


def _wall_ms() -> float:
    return time.time() * 1000.0


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _read_json(path: Path) -> tuple[Any, str | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path.name} cannot be read: {getattr(exc, 'strerror', None) or exc}"
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, f"{path.name} is not valid JSON ({exc})"


def _replace_json(path: Path, data: Any) -> None:
    replace_json(path, data)


def _mtime_ms(path: Path) -> float | None:
    try:
        return path.stat().st_mtime * 1000.0
    except OSError:
        return None


def _raw_plan(metadata: dict[str, Any]) -> dict[str, Any]:
    raw = metadata.get("plan")
    if isinstance(raw, dict):
        return raw
    return {k: metadata.get(k) for k in ("intent", "target_file", "operation")}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0

