"""Undo records: what ``orion sessions undo`` and ``orion sessions history`` read once a
write is done and its journal is gone.

Every write (a write session's, a ``WritePlanTool_execute``, a recovery) leaves
``<state_dir>/undo/<id>.json``: the target, the operation, the SHA-256 it was written with and
where its pre-image was kept (``<state_dir>/backups/<id>/<relative path>``, none for a created
file). Records and backups live in different trees, so a workspace file named ``undo.json``
has a backup that never meets a record. Older state directories kept the record as
``backups/<id>/undo.json``; those are still read.

:func:`prune` keeps the newest ``keep_backups`` records with their backups, at start and
(:func:`prune_after_write`) after every write, so a long day of writes keeps ``keep_backups``
of them, not all. An append keeps no copy of the file: its backup is the range it appended
(``appends/<id>.json``: the file's old length and the SHA-256 of those bytes), which is all
an undo needs.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orion.workspace.confined import temp_name

__all__ = ["UNDO", "UndoRecord", "prune", "prune_after_write", "records", "undo_record_path",
           "write_undo_record"]

UNDO = "undo"
BACKUPS = "backups"
SET_ASIDE = "set_aside"  # the text a session set aside (orion.write_session.set_aside)
APPENDS = "appends"  # the range an append added (orion.write_session.operations)
SESSIONS = "write_sessions"
LEGACY_NAME = "undo.json"


def undo_record_path(state_dir: Path, session_id: str) -> Path:
    return Path(state_dir) / UNDO / f"{session_id}.json"


def write_undo_record(state_dir: Path, *, session_id: str, relative: str, operation: str,
                      sha256: str, backup: Path | None, written_at_ms: float,
                      status: str = "written", set_aside: int = 0) -> Path:
    """Write the record atomically (temp file and rename); ``OSError`` when the disk refuses.
    ``set_aside``: lines of the session's text set aside, not written (``orion sessions
    show`` prints them)."""
    path = undo_record_path(state_dir, session_id)
    replace_json(path, {"session_id": session_id, "target_file": relative,
                        "operation": operation, "sha256": sha256,
                        "backup": str(backup) if backup else None,
                        "written_at_ms": written_at_ms, "status": status,
                        "set_aside": set_aside})
    return path


def replace_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(temp_name(path.name))
    try:
        # Compact: with an indent, json builds its encoder from closures that refer to each
        # other, and each record would leave a reference cycle for the cyclic collector.
        temp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def trusted_backup(state_dir: Path, session_id: str, record: dict[str, Any]) -> Path | None:
    """Where the pre-image of the write ``record`` describes is kept, as Orion names it from
    the session's id and target (FS-15): ``backups/<id>/<target>`` or, for an append,
    ``appends/<id>.json``. The record's own ``backup`` field is a claim, never a path to
    follow: it only says whether there is one. None when the record names none or its
    target is no relative path."""
    from orion.write_session.operations import append_range_path, backup_path

    claimed, relative = record.get("backup"), record.get("target_file")
    if not isinstance(claimed, str) or not isinstance(relative, str):
        return None
    try:
        if record.get("operation") == "append" and Path(claimed).name == f"{session_id}.json":
            return append_range_path(Path(state_dir), session_id)
        return backup_path(state_dir=Path(state_dir), session_id=session_id, relative=relative)
    except ValueError:
        return None


def _state_dir_of(path: Path) -> Path:
    """The state directory of an undo record's file (``undo/<id>.json``, or a legacy
    ``backups/<id>/undo.json``)."""
    return path.parent.parent.parent if path.name == LEGACY_NAME else path.parent.parent


@dataclass
class UndoRecord:
    id: str
    path: Path
    data: dict[str, Any]

    @property
    def written_at_ms(self) -> float:
        value = self.data.get("written_at_ms")
        return float(value) if isinstance(value, int | float) else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "target_file": self.data.get("target_file"),
                "operation": self.data.get("operation"),
                "written_at_ms": self.data.get("written_at_ms"),
                "status": "undone" if self.data.get("undone") else self.data.get("status",
                                                                                  "written"),
                "backup": _shown(trusted_backup(_state_dir_of(self.path), self.id,
                                                self.data)),
                "record": str(self.path),
                "set_aside": self.data.get("set_aside") or 0}


def _shown(path: Path | None) -> str | None:
    return str(path) if path is not None else None


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def record_paths(state_dir: Path) -> dict[str, Path]:
    """Every undo record by session id (the new location wins over a legacy one). Cheap: only
    names are listed, nothing is read."""
    found: dict[str, Path] = {}
    try:
        for entry in os.scandir(Path(state_dir) / BACKUPS):
            legacy = Path(entry.path) / LEGACY_NAME
            if entry.is_dir(follow_symlinks=False) and legacy.is_file():
                data = _load(legacy)
                # Only a record: a backed-up workspace file named undo.json is no record.
                if data is not None and data.get("session_id") == entry.name:
                    found[entry.name] = legacy
    except (FileNotFoundError, NotADirectoryError):
        pass
    try:
        for entry in os.scandir(Path(state_dir) / UNDO):
            if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
                found[entry.name[:-len(".json")]] = Path(entry.path)
    except (FileNotFoundError, NotADirectoryError):
        pass
    return found


def records(state_dir: Path) -> list[UndoRecord]:
    """Every readable undo record, newest write first."""
    found = []
    for session_id, path in record_paths(state_dir).items():
        data = _load(path)
        if data is not None:
            found.append(UndoRecord(session_id, path, data))
    # Writes of one `orion run` share its virtual time: the order they were recorded in (the
    # record file's change time) tells them apart.
    found.sort(key=lambda r: (r.written_at_ms, _changed_ns(r.path), r.id), reverse=True)
    return found


def _changed_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def prune(state_dir: Path, keep: int, *,
          open_sessions: AbstractSet[str] = frozenset()) -> list[str]:
    """Remove all but the newest ``keep`` undo records with their backups (``keep`` 0: keep
    everything); a session whose journal is still there (``open_sessions``) keeps its backup.
    Returns the ids removed."""
    if keep <= 0:
        return []
    removed = []
    for record in records(state_dir)[keep:]:
        if record.id in open_sessions:
            continue
        shutil.rmtree(Path(state_dir) / BACKUPS / record.id, ignore_errors=True)
        shutil.rmtree(Path(state_dir) / SET_ASIDE / record.id, ignore_errors=True)
        (Path(state_dir) / APPENDS / f"{record.id}.json").unlink(missing_ok=True)
        record.path.unlink(missing_ok=True)
        removed.append(record.id)
    return removed


def prune_after_write(state_dir: Path, keep: int) -> list[str]:
    """:func:`prune` after a write: a listing of names when there are at most ``keep``
    records (the usual case once pruned), the records read only when one is too many. Sessions
    whose journal is still there keep their backups. Never raises for the disk (a record left
    over is pruned next time); returns the ids removed."""
    if keep <= 0:
        return []
    try:
        if len(record_paths(state_dir)) <= keep:
            return []
        try:
            open_ids = {entry.name for entry in os.scandir(Path(state_dir) / SESSIONS)}
        except OSError:
            open_ids = set()
        return prune(state_dir, keep, open_sessions=open_ids)
    except OSError:
        return []
