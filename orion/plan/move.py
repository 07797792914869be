"""Plans an earlier Orion kept in ``orion.db``, moved to ``plans.db``.

Plans used to live in ``orion.db`` beside the traces (the ``orion.plans`` migration set). The
first plan store opened in such a workspace moves them (:meth:`PlanStore.for_state_dir
<orion.plan.store.PlanStore.for_state_dir>`), under ``plans.db``'s set-up lock, so one process
moves them and the next finds nothing left to move. Two steps, each one transaction:

1. **copy** every row of ``plans`` and ``plan_revisions`` into ``plans.db``, value for value
   (a damaged row moves as it is, for ``orion plan drop`` to remove); a row copied before is
   left as it is, so the copy can run again;
2. **remove** both tables from ``orion.db``, and the set's records in its
   ``_sqlite_migrations``, with ``secure_delete`` so that their pages are overwritten with
   zeros, then truncate ``orion.db``'s WAL: no plan text is left in the file.

A kill before the copy commits leaves ``orion.db`` as it was (``plans.db`` has none of the
plans); between the two, both hold them, and the next start removes them (its copy adds
nothing); after the removal, ``plans.db`` holds them. Never neither. When the copy cannot be
done (an ``orion.db`` that is locked, or damaged where the plans are), the plans stay where
they were, plan work goes on in ``plans.db``, the user is told why, and the next start tries
again: a later copy merges (a plan that was active in ``orion.db`` while ``plans.db`` has an
active plan is kept, not active, and the message names it).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from contextlib import closing
from pathlib import Path

from orion.plan.store import (BUSY_TIMEOUT_MS, COLUMNS, LAST_DRAFTS, REVISION_COLUMNS,
                              migrations)
from orion.workspace.statedb import PLANS_DB, TRACES_DB

log = logging.getLogger("orion.plan")

#: A plan copied active stays active unless ``plans.db`` has an active plan already (then it
#: is kept, not active: there is one active plan at most).
COPY_PLANS = f"""
    INSERT INTO main.plans ({', '.join(COLUMNS)})
    SELECT id, title, markdown, status, revision, supersedes,
           CASE WHEN active = 1 AND EXISTS (SELECT 1 FROM main.plans WHERE active = 1)
                THEN NULL ELSE active END,
           created_ms, updated_ms
    FROM legacy.plans AS l
    WHERE NOT EXISTS (SELECT 1 FROM main.plans AS m WHERE m.id IS l.id)
    ORDER BY rowid"""
COPY_REVISIONS = f"""
    INSERT INTO main.plan_revisions ({REVISION_COLUMNS})
    SELECT {REVISION_COLUMNS} FROM legacy.plan_revisions AS l
    WHERE NOT EXISTS (SELECT 1 FROM main.plan_revisions AS m
                      WHERE m.plan_id IS l.plan_id AND m.revision IS l.revision)
    ORDER BY rowid"""
#: Plans that were active in ``orion.db`` and are not in ``plans.db``.
NOT_ACTIVE_NOW = """
    SELECT l.id FROM legacy.plans AS l JOIN main.plans AS m ON m.id IS l.id
    WHERE l.active = 1 AND m.active IS NOT 1"""


def holds_plans(traces_db: Path) -> bool:
    """Whether ``traces_db`` (a state directory's ``orion.db``) still holds plans to move, for
    a command that only reads. A file that cannot be read holds none, unless another process
    keeps it locked: then it may, and opening the store (which waits for the lock) says so."""
    try:
        if traces_db.stat().st_size == 0:
            return False
        with closing(sqlite3.connect(traces_db, timeout=0)) as conn:
            return conn.execute("SELECT 1 FROM _sqlite_migrations WHERE migration_set = ? "
                                "LIMIT 1", (migrations.name,)).fetchone() is not None
    except sqlite3.Error as exc:
        return _locked(exc)
    except OSError:
        return False


def move_plans(plans_db: Path, traces_db: Path) -> str | None:
    """Move the plans ``traces_db`` still holds into ``plans_db`` (set up already), and say
    what to tell the user: ``None`` when there was nothing to move. Never raises for a
    database problem: the plans then stay where they were, and the message says why."""
    try:
        if os.stat(traces_db).st_size == 0:
            return None  # an empty file is an empty database
    except OSError:
        return None  # no orion.db (or none Orion can look at): nothing to move
    conn = sqlite3.connect(plans_db, isolation_level=None,
                           timeout=BUSY_TIMEOUT_MS / 1000)
    # A damaged id is read for the message, never failed on.
    conn.text_factory = lambda raw: raw.decode("utf-8", "replace")
    try:
        return _move(conn, traces_db)
    finally:
        conn.close()


def _move(conn: sqlite3.Connection, traces_db: Path) -> str | None:
    try:
        conn.execute("ATTACH DATABASE ? AS legacy", (os.fspath(traces_db),))
        tables = _plan_tables(conn)
    except sqlite3.Error as exc:
        if _locked(exc):
            return (f"the plans in {TRACES_DB} cannot be moved to {PLANS_DB} now ({exc}); plan "
                    f"work goes on in {PLANS_DB}, and the next start tries again")
        # Not a database Orion can read (the trace store says so): it holds no plans to move.
        log.debug("%s: not looked at for plans (%s)", traces_db, exc)
        return None
    if tables is None:
        return None
    try:
        moved, kept_inactive = _copy(conn, tables)
    except sqlite3.Error as exc:
        return (f"the plans in {TRACES_DB} could not be moved to {PLANS_DB} ({exc}); they stay "
                f"in {TRACES_DB} as they were, plan work goes on in {PLANS_DB} without them, "
                "and the next start tries again")
    said = f"{moved} plan{'' if moved == 1 else 's'}"
    try:
        _remove(conn, tables)
    except sqlite3.Error as exc:
        return (f"copied {said} from {TRACES_DB} to {PLANS_DB}, but could not remove them from "
                f"{TRACES_DB} ({exc}); plan work uses {PLANS_DB}, and the next start removes "
                "them")
    if not moved:
        return None  # empty tables: nothing the user had is anywhere else now
    told = f"moved {said} from {TRACES_DB} to {PLANS_DB}"
    for plan_id in kept_inactive:
        told += (f"; plan {plan_id[:8]} was active in {TRACES_DB} and is not active in "
                 f"{PLANS_DB}, which had an active plan (`orion plan show {plan_id[:8]}`)")
    return told


def _plan_tables(conn: sqlite3.Connection) -> list[str] | None:
    """The plan tables ``legacy`` holds (``None``: it holds no plans). They are Orion's when
    its ``_sqlite_migrations`` records the set: a ``plans`` table of someone else's is left
    alone."""
    names = {name for (name,) in conn.execute(
        "SELECT name FROM legacy.sqlite_master WHERE type = 'table' AND name IN "
        "('_sqlite_migrations', 'plans', 'plan_revisions')")}
    if "_sqlite_migrations" not in names or conn.execute(
            "SELECT 1 FROM legacy._sqlite_migrations WHERE migration_set = ? LIMIT 1",
            (migrations.name,)).fetchone() is None:
        return None
    return [name for name in ("plans", "plan_revisions") if name in names]


def _copy(conn: sqlite3.Connection, tables: list[str]) -> tuple[int, list[str]]:
    """Step 1: how many plans ``orion.db`` holds (all in ``plans.db`` now), and which of them
    were active there and are not in ``plans.db``."""
    # A row damaged by hand (a status Orion does not know) is moved as it is, not refused (the
    # connection is this move's own).
    conn.execute("PRAGMA ignore_check_constraints = ON")
    # The first statement writes plans.db, so the transaction takes its write lock (waiting
    # for it) before it has read anything there; orion.db is only read.
    conn.execute("BEGIN")
    try:
        if "plans" in tables:
            conn.execute(COPY_PLANS)
        if "plan_revisions" in tables:
            conn.execute(COPY_REVISIONS)
        elif "plans" in tables:  # from before revisions were kept: each plan's last draft
            conn.execute(LAST_DRAFTS.format(plans="legacy.plans"))
        moved, kept_inactive = 0, []
        if "plans" in tables:
            (moved,) = conn.execute("SELECT count(*) FROM legacy.plans").fetchone()
            kept_inactive = [str(plan_id) for (plan_id,) in conn.execute(NOT_ACTIVE_NOW)]
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return moved, kept_inactive


def _remove(conn: sqlite3.Connection, tables: list[str]) -> None:
    """Step 2: the plan tables leave ``orion.db``, their pages overwritten with zeros."""
    conn.execute("PRAGMA legacy.secure_delete = ON")
    conn.execute("BEGIN")
    try:
        for table in reversed(tables):
            conn.execute(f"DROP TABLE legacy.{table}")
        conn.execute("DELETE FROM legacy._sqlite_migrations WHERE migration_set = ?",
                     (migrations.name,))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    try:
        # Older frames of the WAL may still hold plan text. A reader of orion.db at this
        # moment (a trace store) keeps the WAL from being truncated; SQLite then deletes it
        # when the last connection to orion.db closes.
        conn.execute("PRAGMA legacy.wal_checkpoint(TRUNCATE)")
    except sqlite3.Error as exc:
        log.debug("%s: WAL not truncated after the move (%s)", TRACES_DB, exc)


def _locked(exc: sqlite3.Error) -> bool:
    return getattr(exc, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED")
