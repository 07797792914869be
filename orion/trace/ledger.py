"""What a process has handed to its trace writer and not yet accounted for in ``orion.db``.

A writer thread stores the batches after the step that made them has moved on, so a process
killed outright (SIGKILL, the kernel's out-of-memory killer, a power cut) takes the batches
still queued with it. "Told saved means saved" holds for traces as this: what is lost is
counted, never silently gone. Each process that writes traces keeps one small file beside
the database, ``orion.db-unstored.<pid>``, holding how many of its events are neither stored
nor counted as dropped in the database yet (one ``pwrite`` per batch, no fsync: a process
that dies leaves the kernel's copy, which survives everything but a power cut). A normal exit
removes it. The next store that opens the database (any process: a run, ``orion traces``)
claims the files of processes that are gone, adds their counts to the ``dropped`` counter and
says so in one warning.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from orion.workspace.processes import process_alive

#: The ledger's name is the database's followed by this and the writing process's id.
MARK = "-unstored."
_WIDTH = 20


def ledger_path(database: Path, pid: int | None = None) -> Path:
    return database.with_name(f"{database.name}{MARK}{os.getpid() if pid is None else pid}")


class Ledger:
    """This process's count of unstored events for one database file (best effort: a file
    that cannot be written leaves the count in memory only, as before there was a ledger)."""

    def __init__(self, database: Path) -> None:
        self.path = ledger_path(database)
        self._fd: int | None = None
        self.count = 0

    def note(self, count: int) -> None:
        if count == self.count:
            return
        self.count = count
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            os.pwrite(self._fd, f"{count:0{_WIDTH}d}\n".encode("ascii"), 0)
        except OSError:
            pass

    def close(self) -> None:
        """Everything was accounted for: the file goes."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        with contextlib.suppress(OSError):
            self.path.unlink()


def claim(database: Path) -> list[tuple[int, int]]:
    """The ledgers of processes that ended before storing everything, as ``(pid, events)``;
    each is removed once claimed (renamed first, so two claimants never count one twice)."""
    found: list[tuple[int, int]] = []
    try:
        candidates = list(database.parent.glob(f"{database.name}{MARK}*"))
    except OSError:
        return found
    for path in candidates:
        suffix = path.name[len(database.name) + len(MARK):]
        if not suffix.isdigit():
            continue
        pid = int(suffix)
        if process_alive(pid):
            continue
        taken = path.with_name(f"{path.name}.claimed.{os.getpid()}")
        try:
            path.rename(taken)
            text = taken.read_text(encoding="ascii").strip()
            taken.unlink()
        except OSError:
            continue
        count = int(text) if text.isdigit() else 0
        if count:
            found.append((pid, count))
    return found
