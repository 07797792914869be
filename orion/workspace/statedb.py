"""The state directory's SQLite databases, each shared by every Orion process working in the
workspace: ``orion.db`` holds the traces (sizes, counts, hashes, ids and enums: observability
data a team may copy, attach to a bug report or ship), ``plans.db`` the plans (their Markdown,
titles and revisions: the user's content). Kept apart, a copy of one never carries the other,
and a damaged one never takes the other with it.

Setting a database up (WAL mode, migrations) writes its schema. Two processes starting at once
in a fresh workspace would both read the empty schema and then both try to write it; SQLite
refuses one of them at once with "database is locked" (its busy timeout does not apply to that
deadlock). :func:`setting_up` makes the set-up one process at a time, with an advisory lock on
a sidecar file.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The trace store's database in a state directory (:mod:`orion.trace.store`).
TRACES_DB = "orion.db"
#: The plan store's database in a state directory (:mod:`orion.plan.store`).
PLANS_DB = "plans.db"


@contextmanager
def setting_up(database: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the set-up lock of ``database`` (``<database>.setup.lock``) for the block. Where
    the lock file cannot be created (a read-only state directory), the block runs without it:
    nothing can be set up there anyway, and the database's own error says why."""
    path = Path(f"{os.fspath(database)}.setup.lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
