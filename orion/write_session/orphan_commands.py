"""The other session commands: ``--continue``, ``discard``, ``clean``, ``undo`` and ``show``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orion.clock import BootTime, kernel_boot_time
from orion.workspace.confined import open_parent
from orion.write_session.journal import Journal, mark, remove_session
from orion.write_session.operations import (AppendedRange, append_range_path, backup_path,
                                            read_append_range)
from orion.write_session.set_aside import SetAside, archived, archived_ids
from orion.write_session.undo import record_paths, replace_json
from orion.workspace import PathOutsideWorkspace, resolve_inside

from orion.write_session.orphans import (RESUME, Orphan, RecoveryError, SessionLive, UndoRefused,
                                         pick, read_json, resolve_id, scan, sessions_dir,
                                         sha_of, wall_ms)


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
    replace_json(orphan.directory / RESUME,
                 {"marked_at_ms": wall_ms() if now_ms is None else now_ms,
                  "marked_at_boot": kernel_boot_time()})
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
          now_ms: float | None = None, now_boot: BootTime | None = None) -> list[Orphan]:
    """Remove every session that is not live and whose last save (or ``--continue`` mark) is
    more than ``older_than_ms`` ago (its age as :func:`scan` gives it, from ``now_ms`` and
    ``now_boot``: the real clocks by default); return them."""
    removed = []
    for orphan in scan(state_dir, now_ms=now_ms, now_boot=now_boot):
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


def _undo_record(path: Path, short: str,
                 workspace: Path) -> tuple[dict[str, Any], str, Path]:
    """The undo record at ``path``, the target it names and where that is, or the refusal."""
    record, problem = read_json(path)
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
    return record, relative, target


def _pre_image_source(state_dir: Path, full_id: str, short: str, relative: str,
                      record: dict[str, Any]) -> tuple[Path | None, AppendedRange | None]:
    """Where the undo finds the file as it was: the backup (Orion's name for it, never the
    record's word: FS-15), the range an append added, or neither for a created file. A range
    record that is not one is refused by name: its bytes are never taken for a backup."""
    operation = record.get("operation")
    if operation == "append":
        ranges = append_range_path(state_dir, full_id)
        if ranges.exists():
            appended = read_append_range(ranges)
            if appended is None:
                raise UndoRefused(f"the record of what session {short} appended to {relative} "
                                  f"is damaged ({ranges}); nothing undone")
            return None, appended
    if record.get("backup") is None and operation == "create":
        return None, None
    backup = backup_path(state_dir=state_dir, session_id=full_id, relative=relative)
    if not backup.is_file():
        raise UndoRefused(f"the backup of {relative} from session {short} is missing "
                          f"({backup}); nothing undone")
    return backup, None


def undo(workspace: str | os.PathLike[str], state_dir: str | os.PathLike[str],
         session_id: str, *, now_ms: float | None = None) -> UndoResult:
    """Put the target back as it was before the session wrote it, if nothing changed it since:
    restore the backup atomically, or delete a file the session created. Refuses with
    :class:`UndoRefused` otherwise."""
    workspace, state_dir = Path(workspace).resolve(), Path(state_dir).resolve()
    path = pick(session_id.strip(), record_paths(state_dir), "undo record of a write session",
                 state_dir / "undo")
    full_id = path.stem if path.name != "undo.json" else path.parent.name
    short = full_id[:8]
    record, relative, target = _undo_record(path, short, workspace)
    backup, appended = _pre_image_source(state_dir, full_id, short, relative, record)
    # Read, compare and put back under the directory's lock, through directory descriptors:
    # another Orion process cannot write in between, and no swapped link redirects the undo.
    with open_parent(workspace, target.relative_to(workspace).as_posix()) as parent, \
            parent.locked():
        current = parent.read()
        if current is None or sha_of(current) != record.get("sha256"):
            what = "was deleted" if current is None else "changed"
            raise UndoRefused(f"{relative} {what} since session {short} wrote it; nothing "
                              "undone")
        if appended is not None:  # the append is taken off the end again
            pre = appended.pre_image(current)
            info = parent.stat()
            if pre is None or info is None:
                raise UndoRefused(f"{relative} no longer starts with the bytes session {short} "
                                  "appended to; nothing undone")
            parent.replace(pre, mode=info.st_mode & 0o7777)
            action, report = ("restored",
                              f"restored {relative} as it was before session {short}")
        elif backup is None:
            parent.unlink()
            action, report = "deleted", f"deleted {relative} (session {short} had created it)"
        else:
            parent.replace(backup.read_bytes(), mode=backup.stat().st_mode & 0o7777)
            action, report = ("restored",
                              f"restored {relative} as it was before session {short}")
    record.update(undone=True, undone_at_ms=wall_ms() if now_ms is None else now_ms)
    replace_json(path, record)
    return UndoResult(full_id, relative, action, report)


@dataclass
class Shown:
    """What ``orion sessions show ID`` prints: a session (still journaled, or finished) and the
    text it set aside, part by part."""

    id: str
    target_file: str | None
    #: ``live`` (its journal is owned by a running process), an orphan's status (``open``,
    #: ``blocked``, ``resume``...; see :class:`Orphan`) or the status of its finished write
    #: (``written``, ``written_with_set_aside``, ``incomplete``...).
    status: str
    set_aside: SetAside
    #: Messages the user typed while it was open, not sent yet (an open session only).
    held: list[str]
    #: The issues that blocked its write (status ``blocked``).
    blocked: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"id": self.id, "target_file": self.target_file, "status": self.status,
                "set_aside_lines": self.set_aside.lines, "held": list(self.held),
                "blocked": list(self.blocked),
                "parts": [dict(vars(part)) for part in self.set_aside.parts],
                "refused": list(self.set_aside.problems)}


def show(state_dir: str | os.PathLike[str], session_id: str) -> Shown:
    """The session ``session_id`` (or a unique prefix of it) with its text set aside: from
    its journal while there is one, else from the archive its write left and its undo
    record."""
    state = Path(state_dir)
    journals = {orphan.id: orphan for orphan in scan(state)}
    records = record_paths(state)
    ids = {*journals, *archived_ids(state), *records}
    full = pick(session_id.strip(), {i: i for i in ids}, "write session", sessions_dir(state))
    orphan = journals.get(full)
    if orphan is not None:
        return Shown(full, orphan.target_file, "live" if orphan.live else orphan.status,
                     SetAside.of_journal(orphan.directory), orphan.held, orphan.blocked)
    record, _ = read_json(records[full]) if full in records else (None, None)
    if not isinstance(record, dict):  # an archive without a write: the session was abandoned
        record = {"status": "abandoned"}
    parts = archived(state, full) or SetAside(state / "set_aside" / full)
    return Shown(full, record.get("target_file") or parts.target,
                 str(record.get("status") or "written"), parts, [])
