"""What ``orion run`` and ``orion chat`` do first with the write sessions of earlier processes.

A write that already happened is only cleaned up, old orphans are removed, a session marked
for ``--continue`` is adopted by the new runtime, and the others are offered for recovery.
Temp files of killed writes are swept, and backups beyond ``keep_backups`` pruned. A session
whose lock names a running process (:meth:`Journal.is_live`) is never touched."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orion.clock import BootTime, since_boot
from orion.errors import OrionError
from orion.write_session.journal import marks, remove_session, unmark
from orion.write_session.undo import prune as prune_backups
from orion.write_session.durations import format_duration
from orion.write_session.interrupted import already_written, finish_cleanup
from orion.write_session.leftovers import sweep_temp_leftovers
from orion.write_session.orphans import RESUME, Orphan, load, sessions_dir
from orion.write_session.trash import move_to_trash, sweep_trash, trash_dir

if TYPE_CHECKING:
    from orion.runtime.runtime import Runtime


#: ``orphan_ttl_ms`` when the statechart cannot be loaded.
DEFAULT_TTL_MS = 3_600_000

# -- startup ------------------------------------------------------------------------------------


@dataclass
class StartupAction:
    """What :func:`startup` did with one orphan: ``repaired``, ``expired`` (removed: it held
    nothing), ``trashed`` (moved to the trash), ``deleted`` (from the trash), ``adopted``,
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
    ttl = _ttl(runtime)
    now, now_boot = runtime.clock.now_ms(), since_boot(runtime.clock)
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
    named = [load(Path(entries[name].path), now_ms=now, now_boot=now_boot)
             for name in sorted(flagged)]
    rest = [entry for name, entry in entries.items() if name not in flagged]
    more, rest = _to_name(rest, ttl, now, now_boot)
    named += more
    named.sort(key=lambda o: (o.last_save_ms is None, o.last_save_ms or 0.0, o.id))
    for orphan in named:
        if not orphan.live:
            _say(runtime, actions, _checked_one(runtime, manager, orphan, ttl, now, now_boot),
                 orphan)
    if rest:
        _say(runtime, actions, _summed_up(runtime, rest, now, now_boot))
    for action in _swept(runtime, ttl, now_boot):
        _say(runtime, actions, action)
    runtime.deliver_prompts()
    return actions


def _ttl(runtime: Runtime) -> int:
    """``orphan_ttl_ms`` of the write-session chart (the default when it cannot be read)."""
    try:
        return int(runtime.definition("write_session").settings.get("orphan_ttl_ms",
                                                                    DEFAULT_TTL_MS))
    except OrionError:
        return DEFAULT_TTL_MS


def _to_name(rest: list[os.DirEntry[str]], ttl: int, now: float, now_boot: BootTime | None
             ) -> tuple[list[Orphan], list[os.DirEntry[str]]]:
    """Of the session directories not flagged: the orphans to handle one by one (past the
    TTL, or all of them when there are few) and the directories left to sum up."""
    named: list[Orphan] = []
    if ttl > 0:  # a stat each: only directories untouched for longer than the TTL are opened
        expired = set()
        for entry in rest:
            if _older_than(entry, now - ttl):
                orphan = load(Path(entry.path), now_ms=now, now_boot=now_boot)
                if orphan.age_ms is not None and orphan.age_ms > ttl:
                    named.append(orphan)
                    expired.add(entry.name)
        rest = [entry for entry in rest if entry.name not in expired]
    if len(rest) <= NAMED_AT_START:
        named += [load(Path(entry.path), now_ms=now, now_boot=now_boot) for entry in rest]
        rest = []
    return named, rest


def _checked_one(runtime: Runtime, manager: Any, orphan: Orphan, ttl: int, now: float,
                 now_boot: BootTime | None) -> StartupAction:
    try:
        return _startup_one(runtime, manager, orphan, ttl, now, now_boot)
    except (OrionError, OSError, ValueError) as exc:
        return StartupAction(orphan.id, "failed",
                             f"could not check write session {orphan.short}: {exc}")


def _swept(runtime: Runtime, ttl: int, now_boot: BootTime | None) -> list[StartupAction]:
    """The sessions deleted from the trash, having been there for the TTL."""
    if ttl <= 0:
        return []
    return [StartupAction(gone.id, "deleted", (
        f"deleted write session {gone.id[:8]} for {gone.target_file or 'an unknown file'}"
        f" ({gone.lines} lines) from {trash_dir(runtime.state_dir)}: it was there "
        f"for {format_duration(ttl)}"))
        for gone in sweep_trash(runtime.state_dir, ttl, now_boot=now_boot)]


def _say(runtime: Runtime, actions: list[StartupAction], action: StartupAction,
         orphan: Orphan | None = None) -> None:
    actions.append(action)
    runtime.reporter.notice(action.notice)
    if orphan is not None:
        _trace(runtime, orphan, action)


def _older_than(entry: os.DirEntry[str], limit_ms: float) -> bool:
    """Whether a session directory was last changed before ``limit_ms`` (wall clock). The
    journal renames or creates a file in it at least once per flush interval while it
    writes, so this never misses a session that is past its TTL."""
    try:
        return entry.stat().st_mtime * 1000.0 < limit_ms
    except OSError:
        return False


def _summed_up(runtime: Runtime, rest: list[os.DirEntry[str]], now: float,
               now_boot: BootTime | None) -> StartupAction:
    """One line for many orphans, naming the newest (the one most likely wanted)."""
    def changed(entry: os.DirEntry[str]) -> float:
        try:
            return entry.stat().st_mtime
        except OSError:
            return 0.0

    newest = load(Path(max(rest, key=changed).path), now_ms=now, now_boot=now_boot)
    count = len(rest)
    notice = (f"{count} write sessions from other runs are kept in "
              f"{sessions_dir(runtime.state_dir)}; the newest is {newest.short} for "
              f"{newest.describe(now, now_boot)}. `orion sessions list` shows them all, "
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


def _startup_one(runtime: Runtime, manager: Any, orphan: Orphan, ttl: int,
                 now: float, now_boot: BootTime | None) -> StartupAction:
    workspace, state_dir = runtime.workspace, runtime.state_dir
    if orphan.finalizing and already_written(orphan, workspace, state_dir, runtime.plugins):
        relative = finish_cleanup(orphan, workspace, state_dir, "repaired", now)
        return StartupAction(orphan.id, "repaired", f"repaired session {orphan.short}: "
                                                    f"{relative} was already written")
    if ttl > 0 and orphan.age_ms is not None and orphan.age_ms > ttl:
        return _expire(runtime, orphan, ttl, now, now_boot)
    if orphan.status == "resume" and not orphan.problems:
        try:
            session = manager.adopt(orphan)
        except OrionError as exc:
            (orphan.directory / RESUME).unlink(missing_ok=True)
            unmark(orphan.directory, "resume")
            return StartupAction(orphan.id, "failed",
                                 f"could not continue write session {orphan.short} for "
                                 f"{orphan.describe(now, now_boot)}: {exc}. " + _offer(orphan))
        return StartupAction(orphan.id, "adopted",
                             f"continuing write session {orphan.short} for "
                             f"{orphan.describe(now, now_boot)} ({session.state})")
    if orphan.blocked:
        return StartupAction(orphan.id, "offered",
                             f"write session {orphan.short} for {orphan.describe(now, now_boot)} was "
                             f"blocked ({'; '.join(orphan.blocked[:3])}): fix its content, "
                             f"then {_offer(orphan)}")
    if orphan.problems:
        return StartupAction(orphan.id, "offered",
                             f"damaged write session {orphan.short} "
                             f"({'; '.join(orphan.problems)}): orion sessions discard "
                             f"{orphan.short}")
    return StartupAction(orphan.id, "offered", f"orphaned write session {orphan.short} for "
                                               f"{orphan.describe(now, now_boot)}: {_offer(orphan)}")


def _expire(runtime: Runtime, orphan: Orphan, ttl: int, now: float,
            now_boot: BootTime | None) -> StartupAction:
    """An orphan past the TTL: one that holds nothing is removed; any other goes to the trash
    (:mod:`orion.write_session.trash`), never deleted on its age alone."""
    described = orphan.describe(now, now_boot)
    if not orphan.has_content:
        remove_session(orphan.directory)
        return StartupAction(orphan.id, "expired",
                             f"removed orphaned write session {orphan.short} for {described}: "
                             f"older than {format_duration(ttl)}, and it held nothing")
    moved = move_to_trash(orphan.directory, runtime.state_dir, now_ms=now, now_boot=now_boot)
    back = sessions_dir(runtime.state_dir)
    return StartupAction(orphan.id, "trashed",
                         f"moved orphaned write session {orphan.short} for {described} to "
                         f"{moved}: older than {format_duration(ttl)}. It is deleted from there "
                         f"after another {format_duration(ttl)}; `mv {moved} {back}/` brings it "
                         "back")


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
