"""The trash: where start-up moves a write session past ``orphan_ttl_ms`` instead of deleting it.

An orphan's age is measured by the wall clock and by the second clock (:mod:`orion.clock`), and
the smaller figure counts, so a wall clock stepped ahead within one boot never makes a session
look old. Across a reboot only the wall clock can compare, and it may be wrong then too (a dead
RTC battery, a virtual machine restored from a snapshot). So a session that holds anything
(content, text set aside, messages the user typed) is never deleted on its age: start-up moves
it to ``<state_dir>/trash/<id>/`` and says so, and deletes it from there only after another
``orphan_ttl_ms`` measured by the second clock alone: time in the trash counts only while one
boot's clock measures it (a reboot starts the count again from what was measured), never by
the wall clock. ``mv .orion/trash/<id> .orion/write_sessions/`` brings a session back.

A trashed session directory holds the journal as it was plus ``trashed.json``: when it was
moved (both clocks) and how long it has been measured in the trash so far.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from orion.clock import BootTime
from orion.write_session.journal import (DIR_MODE, read_private, remove_session,
                                         write_private)

__all__ = ["TRASH", "Trashed", "move_to_trash", "sweep_trash", "trash_dir"]

TRASH = "trash"
RECORD = "trashed.json"


def trash_dir(state_dir: str | os.PathLike[str]) -> Path:
    return Path(state_dir) / TRASH


@dataclass
class Trashed:
    """A session deleted from the trash: its id, its target and its lines, for the notice."""

    id: str
    target_file: str | None
    lines: int


def move_to_trash(directory: Path, state_dir: Path, *, now_ms: float,
                  now_boot: BootTime | None) -> Path:
    """Move the session directory into the trash (one rename: the state directory is one file
    system) with its record; its marks in ``write_sessions/`` go. Returns where it is now."""
    trash = trash_dir(state_dir)
    trash.mkdir(mode=DIR_MODE, exist_ok=True)
    dest = trash / directory.name
    if dest.exists():  # the same id trashed before and brought back: the older copy goes
        shutil.rmtree(dest, ignore_errors=True)
    os.rename(directory, dest)
    remove_session(directory)  # only its marks are left of it there
    _save(dest, {"trashed_at_ms": now_ms, "boot": now_boot, "measured_ms": 0.0})
    return dest


def sweep_trash(state_dir: Path, ttl_ms: float, *, now_boot: BootTime | None) -> list[Trashed]:
    """Delete the sessions that have been in the trash for ``ttl_ms`` by the second clock;
    bring the count of the others up to date (a session whose record is of another boot has
    its count carried over to this one). Never raises for a damaged entry; returns what it
    deleted."""
    deleted: list[Trashed] = []
    try:
        entries = [e for e in os.scandir(trash_dir(state_dir)) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return deleted
    for entry in entries:
        directory = Path(entry.path)
        record = _load(directory)
        measured = _number(record.get("measured_ms"))
        then = BootTime.from_json(record.get("boot"))
        elapsed = now_boot.elapsed_since(then) if now_boot is not None else None
        if elapsed is not None:
            measured += max(0.0, elapsed)
        if measured >= ttl_ms:
            deleted.append(_describe(directory))
            shutil.rmtree(directory, ignore_errors=True)
        elif now_boot is not None:
            try:
                _save(directory, {**record, "boot": now_boot, "measured_ms": measured})
            except OSError:
                pass  # counted again from the old record next time: never sooner
    return deleted


def _describe(directory: Path) -> Trashed:
    try:
        metadata = json.loads(read_private(directory / "metadata.json"))
        target = metadata.get("target_file") if isinstance(metadata, dict) else None
    except (OSError, ValueError):
        target = None
    try:
        lines = read_private(directory / "content.txt").count(b"\n")
    except OSError:
        lines = 0
    return Trashed(directory.name, target if isinstance(target, str) else None, lines)


def _load(directory: Path) -> dict:
    try:
        record = json.loads(read_private(directory / RECORD))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _save(directory: Path, record: dict) -> None:
    temp = directory / (RECORD + ".tmp")
    temp.unlink(missing_ok=True)
    write_private(temp, json.dumps(record).encode("utf-8"))
    os.replace(temp, directory / RECORD)


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else 0.0
