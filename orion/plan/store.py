"""Plans in ``<state dir>/plans.db``: the one place a plan lives. ``orion.db`` beside it holds
the traces and no plan text; plans an earlier Orion kept there are moved here by the first
store opened (:mod:`orion.plan.move`).

The schema is the ``orion.plans`` migration set of :class:`sqlite_utils.Migrations`. A plan's
Markdown is its only canonical content. The database itself enforces that at most one plan is
active (``active`` is 1 or NULL, under a unique partial index) and that an active plan is never
in a terminal status (a CHECK constraint). Whether plan work is on is not stored separately: it
is on exactly while a plan is active, so the two can never disagree.

Every draft is kept: ``plan_revisions`` holds each stored Markdown under its plan and revision
number, so a draft that replaced another (Variant B) does not lose it. The ``plans`` row holds
the newest one, which is all the model and the context block ever see.

Every write is one ``BEGIN IMMEDIATE`` transaction: it takes the write lock before it reads, so
two processes sharing a workspace (two ``orion chat``) serialize instead of failing on a lock
upgrade, and a check such as "no plan is active" still holds when the write commits.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlite_utils import Database, Migrations

from orion.errors import OrionError
from orion.workspace.statedb import PLANS_DB, TRACES_DB, setting_up

DB_NAME = PLANS_DB
BUSY_TIMEOUT_MS = 5000  # a plan write waits for another session's; it never drops


class Status(StrEnum):
    COLLECTING = "COLLECTING"
    READY = "READY"
    EXECUTING = "EXECUTING"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"
    SUPERSEDED = "SUPERSEDED"

    @property
    def terminal(self) -> bool:
        return self in (Status.COMPLETED, Status.CANCELLED, Status.SUPERSEDED)


LIVE = (Status.COLLECTING, Status.READY, Status.EXECUTING)


class PlanStoreError(OrionError):
    pass


class DamagedPlan(PlanStoreError):
    """A row of plan ``plan_id`` holds what Orion never stores (text that is not UTF-8, an
    unknown status, a revision that is not a number): someone or something edited
    ``plans.db``. Only that plan is unusable; the message says what is wrong and how to drop
    it (``orion plan drop``)."""

    def __init__(self, plan_id: str, problem: str):
        self.plan_id, self.problem = plan_id, problem
        super().__init__(f"plan {plan_id[:8]} is damaged in {DB_NAME} ({problem}); the other "
                         f"plans are not affected. `orion plan drop {plan_id[:8]}` removes it "
                         "and its drafts")


class RevisionConflict(PlanStoreError):
    """``expected_revision`` is not the plan's revision: someone changed it since."""

    def __init__(self, expected: int, current: int):
        super().__init__(f"expected_revision {expected} does not match the plan's current "
                         f"revision {current}; load it with plan_get and try again")
        self.expected, self.current = expected, current


migrations = Migrations("orion.plans")
#: Each plan's draft kept as its revision, from the table ``{plans}``: migration 002, and a move
#: from an ``orion.db`` of before revisions were kept.
LAST_DRAFTS = ("INSERT OR IGNORE INTO plan_revisions (plan_id, revision, title, markdown, "
               "created_ms) SELECT id, revision, title, markdown, updated_ms FROM {plans} "
               "WHERE markdown IS NOT NULL AND revision >= 1")


@migrations(name="001_plans")
def _m001_plans(db: Database) -> None:
    statuses = ", ".join(f"'{s.value}'" for s in Status)
    live = ", ".join(f"'{s.value}'" for s in LIVE)
    # IF NOT EXISTS: two processes opening a new file at once must not break each other.
    db.execute(f"""
        CREATE TABLE IF NOT EXISTS plans (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL DEFAULT '',
            markdown TEXT,
            status TEXT NOT NULL CHECK (status IN ({statuses})),
            revision INTEGER NOT NULL DEFAULT 0 CHECK (revision >= 0),
            supersedes TEXT REFERENCES plans(id),
            active INTEGER CHECK (active IS NULL OR (active = 1 AND status IN ({live}))),
            created_ms REAL NOT NULL,
            updated_ms REAL NOT NULL
        )""")
    # At most one active plan, by construction: the index admits one row with active = 1.
    db.execute("CREATE UNIQUE INDEX IF NOT EXISTS plans_one_active ON plans(active) "
               "WHERE active = 1")
    db.execute("CREATE INDEX IF NOT EXISTS plans_created ON plans(created_ms)")


@migrations(name="002_plan_revisions")
def _m002_plan_revisions(db: Database) -> None:
    db.execute("""
        CREATE TABLE IF NOT EXISTS plan_revisions (
            plan_id TEXT NOT NULL REFERENCES plans(id),
            revision INTEGER NOT NULL CHECK (revision >= 1),
            title TEXT NOT NULL DEFAULT '',
            markdown TEXT NOT NULL,
            created_ms REAL NOT NULL,
            PRIMARY KEY (plan_id, revision)
        )""")
    # A database from before revisions were kept has only each plan's last draft: that one
    # becomes its revision, the earlier ones are gone.
    db.execute(LAST_DRAFTS.format(plans="plans"))


COLUMNS = ("id", "title", "markdown", "status", "revision", "supersedes", "active",
           "created_ms", "updated_ms")
SELECT = f"SELECT {', '.join(COLUMNS)} FROM plans"


class Garbled:
    """A TEXT value of ``plans.db`` that is not UTF-8, as read (the connection's text factory
    returns it instead of failing the whole query, so one damaged row spoils only itself)."""

    __slots__ = ("raw", "reason")

    def __init__(self, raw: bytes, reason: UnicodeDecodeError):
        self.raw, self.reason = raw, reason

    def __str__(self) -> str:
        return self.raw.decode("utf-8", "replace")

    def describe(self, column: str) -> str:
        bad = self.raw[self.reason.start]
        return f"its {column} is not UTF-8 (byte 0x{bad:02x} at offset {self.reason.start})"


def _text(raw: bytes) -> str | Garbled:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Garbled(raw, exc)


def _problem(row: tuple, columns: tuple[str, ...],
             kinds: dict[str, tuple[type, ...]]) -> str | None:
    """What is wrong with ``row`` (``None``: nothing): text that is not UTF-8, or a value of
    another kind than its column holds."""
    for column, value in zip(columns, row):
        if isinstance(value, Garbled):
            return value.describe(column)
        kind = kinds.get(column)
        if kind is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            return f"its {column} {value!r} is not {_KIND_NAMES[kind]}"
    return None


def _status_problem(value: Any) -> str | None:
    if value in Status.__members__:
        return None
    return f"its status {value!r} is none of {', '.join(Status.__members__)}"


_TEXT, _TEXT_OR_NULL, _WHOLE, _NUMBER = (str,), (str, type(None)), (int,), (int, float)
_KIND_NAMES = {_TEXT: "text", _TEXT_OR_NULL: "text", _WHOLE: "a whole number",
               _NUMBER: "a number"}
_PLAN_KINDS = {"id": _TEXT, "title": _TEXT, "markdown": _TEXT_OR_NULL, "revision": _WHOLE,
               "supersedes": _TEXT_OR_NULL, "created_ms": _NUMBER, "updated_ms": _NUMBER}


@dataclass(frozen=True)
class Plan:
    id: str
    title: str
    markdown: str | None
    status: Status
    revision: int
    supersedes: str | None
    active: bool
    created_ms: float
    updated_ms: float

    @classmethod
    def from_row(cls, row: dict[str, Any] | tuple) -> Plan:
        if isinstance(row, dict):
            row = tuple(row[name] for name in COLUMNS)
        problem = _problem(row, COLUMNS, _PLAN_KINDS) or _status_problem(row[3])
        if problem is not None:
            raise DamagedPlan(str(row[0]), problem)
        (plan_id, title, markdown, status, revision, supersedes, active, created_ms,
         updated_ms) = row
        return cls(plan_id, title, markdown, Status(status), revision, supersedes, active == 1,
                   created_ms, updated_ms)

    @property
    def bytes(self) -> int:
        return len((self.markdown or "").encode("utf-8", "surrogatepass"))

    def summary(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "status": self.status.value,
                "revision": self.revision, "active": self.active,
                "supersedes": self.supersedes, "bytes": self.bytes}


@dataclass(frozen=True)
class Revision:
    """One stored draft: plan ``plan_id`` as ``plan_set_content`` left it at ``revision``."""

    plan_id: str
    revision: int
    title: str
    markdown: str
    created_ms: float

    @classmethod
    def from_row(cls, row: tuple) -> Revision:
        problem = _problem(row, _REVISION_COLUMNS, _REVISION_KINDS)
        if problem is not None:
            raise DamagedPlan(str(row[0]), f"revision {row[1]}: {problem}")
        return cls(*row)

    def summary(self) -> dict[str, Any]:
        return {"plan_id": self.plan_id, "revision": self.revision, "title": self.title,
                "created_ms": self.created_ms,
                "bytes": len(self.markdown.encode("utf-8", "surrogatepass"))}


REVISION_COLUMNS = "plan_id, revision, title, markdown, created_ms"
_REVISION_COLUMNS = tuple(REVISION_COLUMNS.split(", "))
_REVISION_KINDS = {"plan_id": _TEXT, "revision": _WHOLE, "title": _TEXT, "markdown": _TEXT,
                   "created_ms": _NUMBER}

#: The ids of every plan in the line of revisions that holds plan ``?``: back along
#: ``supersedes`` to the first plan, and forward to the newest (each plan is superseded by one
#: plan at most, so the line is a chain).
LINE = """
    WITH RECURSIVE back(id, supersedes) AS (
        SELECT id, supersedes FROM plans WHERE id = :plan
        UNION SELECT p.id, p.supersedes FROM plans p JOIN back b ON p.id = b.supersedes),
    forward(id) AS (
        SELECT id FROM plans WHERE id = :plan
        UNION SELECT p.id FROM plans p JOIN forward f ON p.supersedes = f.id)
    SELECT id FROM back UNION SELECT id FROM forward"""


class PlanStore:
    """The plans of database ``path``. With ``moves_from`` (a state directory's ``orion.db``,
    as :meth:`for_state_dir` gives it), plans an earlier Orion kept there are moved in first,
    under the set-up lock; :attr:`notice` says what was done."""

    def __init__(self, path: str | Path, *, moves_from: str | Path | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = Database(self.path)
        self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        #: What opening the store has to tell the user (plans moved from ``orion.db``, or why
        #: they could not be), once; ``None``: nothing.
        self.notice: str | None = None
        with setting_up(self.path):
            self.db.enable_wal()
            migrations.apply(self.db)
            if moves_from is not None:
                from orion.plan.move import move_plans  # it reads this module's schema

                self.notice = move_plans(self.path, Path(moves_from))
        self._conn = self.db.conn
        # Text that is not UTF-8 comes back as Garbled instead of failing the query: one
        # damaged row is then one damaged plan (DamagedPlan), not an unusable database.
        self._conn.text_factory = _text
        #: Writes this store committed; callers that cache a read compare it.
        self.writes = 0

    @classmethod
    def for_state_dir(cls, state_dir: str | Path) -> PlanStore:
        """The store of a workspace: ``<state_dir>/plans.db``, with the plans ``orion.db``
        still holds moved in."""
        return cls(Path(state_dir) / DB_NAME, moves_from=Path(state_dir) / TRACES_DB)

    @classmethod
    def existing(cls, state_dir: str | Path) -> PlanStore | None:
        """The store of ``state_dir`` if it has plans (its ``plans.db`` exists, or its
        ``orion.db`` holds plans to move), else ``None`` (for commands that only read, such as
        ``orion plan show``: they must not create a state directory or a database)."""
        from orion.plan.move import holds_plans  # it reads this module's schema

        state = Path(state_dir)
        # orion.db first: another process moving the plans creates plans.db before it removes
        # them from orion.db, so when orion.db no longer holds them, plans.db is there. The
        # other order could look at plans.db just before it is made and at orion.db just after
        # the plans left it, and find no plans at all.
        if holds_plans(state / TRACES_DB) or (state / DB_NAME).exists():
            return cls.for_state_dir(state)
        return None

    def close(self) -> None:
        self.db.close()

    # -- reading (plain statements on the connection: the hot path of every turn) -------------

    def active(self) -> Plan | None:
        row = self._conn.execute(f"{SELECT} WHERE active = 1").fetchone()
        return Plan.from_row(row) if row else None

    def get(self, plan_id: str) -> Plan | None:
        row = self._conn.execute(f"{SELECT} WHERE id = ?", (plan_id,)).fetchone()
        return Plan.from_row(row) if row else None

    def history(self, limit: int = 50) -> list[Plan]:
        """The newest plans first; a damaged plan is left out (:meth:`damaged` lists them)."""
        plans = []
        for row in self._conn.execute(f"{SELECT} ORDER BY created_ms DESC, rowid DESC LIMIT ?",
                                      (limit,)):
            try:
                plans.append(Plan.from_row(row))
            except DamagedPlan:
                continue
        return plans

    def damaged(self) -> list[DamagedPlan]:
        """Every damaged plan (a row of ``plans``, or one of its drafts), what is wrong with
        it and how to drop it."""
        found: dict[str, DamagedPlan] = {}
        for row in self._conn.execute(SELECT):
            try:
                Plan.from_row(row)
            except DamagedPlan as exc:
                found.setdefault(exc.plan_id, exc)
        for row in self._conn.execute(f"SELECT {REVISION_COLUMNS} FROM plan_revisions"):
            try:
                Revision.from_row(row)
            except DamagedPlan as exc:
                found.setdefault(exc.plan_id, exc)
        return list(found.values())

    def drop(self, prefix: str) -> tuple[str, int]:
        """Remove plan ``prefix`` (its id or the start of it) and its drafts, damaged or not;
        plans it superseded or that supersede it lose the link. Refuses an active plan that
        is not damaged (``/plan done`` ends it). Returns its id and how many drafts went."""
        if not prefix:
            raise PlanStoreError("no plan ''")
        with self._write() as conn:
            ids = [str(row[0]) for row in conn.execute(
                "SELECT id FROM plans WHERE substr(id, 1, length(:p)) = :p LIMIT 2",
                {"p": prefix})]
            if not ids:
                raise PlanStoreError(f"no plan {prefix!r}")
            if len(ids) > 1:
                raise PlanStoreError(f"plan id {prefix!r} is ambiguous: give more characters")
            plan_id = ids[0]
            try:
                plan = Plan.from_row(conn.execute(f"{SELECT} WHERE id = ?",
                                                  (plan_id,)).fetchone())
            except DamagedPlan:
                plan = None
            if plan is not None and plan.active:
                raise PlanStoreError(f"plan {plan_id[:8]} is active and not damaged; end it "
                                     "with /plan done first")
            conn.execute("UPDATE plans SET supersedes = NULL WHERE supersedes = ?", (plan_id,))
            drafts = conn.execute("DELETE FROM plan_revisions WHERE plan_id = ?",
                                  (plan_id,)).rowcount
            conn.execute("DELETE FROM plans WHERE id = ?", (plan_id,))
        return plan_id, drafts

    def find(self, prefix: str) -> Plan:
        """The plan whose id is or starts with ``prefix`` (as ``orion plan history`` shows
        ids, 8 characters). Raises :class:`PlanStoreError` when none or several match."""
        rows = self._conn.execute(f"{SELECT} WHERE substr(id, 1, length(:p)) = :p LIMIT 2",
                                  {"p": prefix}).fetchall()
        if not rows or not prefix:
            raise PlanStoreError(f"no plan {prefix!r}")
        if len(rows) > 1:
            raise PlanStoreError(f"plan id {prefix!r} is ambiguous: give more characters")
        return Plan.from_row(rows[0])

    def revisions(self, plan_id: str) -> list[Revision]:
        """Every draft stored in the line of revisions that holds ``plan_id`` (the plan and
        the plans it superseded or was superseded by), oldest first."""
        return [Revision.from_row(row) for row in self._conn.execute(
            f"SELECT {REVISION_COLUMNS} FROM plan_revisions WHERE plan_id IN ({LINE}) "
            "ORDER BY revision", {"plan": plan_id})]

    def revision(self, plan_id: str, number: int) -> Revision | None:
        """Revision ``number`` of the line of revisions that holds ``plan_id``."""
        row = self._conn.execute(
            f"SELECT {REVISION_COLUMNS} FROM plan_revisions WHERE plan_id IN ({LINE}) "
            "AND revision = :number", {"plan": plan_id, "number": number}).fetchone()
        return Revision.from_row(row) if row else None

    def rows(self) -> list[dict[str, Any]]:
        """Every row as stored, for tests that prove nothing changed."""
        return list(self.db.query("SELECT * FROM plans ORDER BY rowid"))

    # -- writing (each one BEGIN IMMEDIATE transaction) ---------------------------------------

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        if conn.in_transaction:
            raise PlanStoreError("a plan write cannot run inside another transaction")
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        self.writes += 1

    def create(self, title: str = "") -> Plan:
        now = _now_ms()
        plan_id = uuid.uuid4().hex
        with self._write() as conn:
            if self.active() is not None:
                raise PlanStoreError("a plan is already active")
            conn.execute(
                "INSERT INTO plans (id, title, markdown, status, revision, supersedes, active, "
                "created_ms, updated_ms) VALUES (?, ?, NULL, ?, 0, NULL, 1, ?, ?)",
                (plan_id, title, Status.COLLECTING.value, now, now))
        return self._must(plan_id)

    def set_content(self, plan_id: str, markdown: str, title: str | None, *,
                    expected_revision: int | None = None) -> Plan:
        """Store a draft of the active plan ``plan_id``. COLLECTING or READY: the Markdown is
        replaced, the plan is READY and its revision goes up by one. EXECUTING: a new plan,
        READY, one revision up, supersedes it (the old one becomes SUPERSEDED and inactive,
        the new one active), in one transaction. Terminal or inactive: refused. Either way
        the draft is also kept in ``plan_revisions``, so none is lost when the next replaces
        it. ``expected_revision``, when given, must be the plan's revision."""
        now = _now_ms()
        with self._write() as conn:
            plan = self._must(plan_id)
            if plan.status.terminal or not plan.active:
                raise PlanStoreError(f"plan {plan_id[:8]} is {plan.status.value}"
                                     f"{'' if plan.active else ' and not active'}; it takes no "
                                     "new drafts")
            if expected_revision is not None and expected_revision != plan.revision:
                raise RevisionConflict(expected_revision, plan.revision)
            new_title = title if title is not None else plan.title
            if plan.status is Status.EXECUTING:
                new_id = uuid.uuid4().hex
                conn.execute("UPDATE plans SET status = ?, active = NULL, updated_ms = ? "
                             "WHERE id = ?", (Status.SUPERSEDED.value, now, plan_id))
                conn.execute(
                    "INSERT INTO plans (id, title, markdown, status, revision, supersedes, "
                    "active, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)",
                    (new_id, new_title, markdown, Status.READY.value, plan.revision + 1,
                     plan_id, now, now))
                plan_id = new_id
            else:
                conn.execute(
                    "UPDATE plans SET markdown = ?, title = ?, status = ?, revision = ?, "
                    "updated_ms = ? WHERE id = ?",
                    (markdown, new_title, Status.READY.value, plan.revision + 1, now, plan_id))
            # Kept in the same transaction: a draft in ``plans`` is always one of the revisions.
            conn.execute(f"INSERT INTO plan_revisions ({REVISION_COLUMNS}) "
                         "VALUES (?, ?, ?, ?, ?)",
                         (plan_id, plan.revision + 1, new_title, markdown, now))
        return self._must(plan_id)

    def approve(self, plan_id: str) -> Plan:
        """READY and active: the plan is EXECUTING."""
        with self._write() as conn:
            plan = self._must(plan_id)
            if plan.status is not Status.READY or not plan.active:
                raise PlanStoreError(f"plan {plan_id[:8]} is {plan.status.value}; approval "
                                     "needs an active READY plan")
            conn.execute("UPDATE plans SET status = ?, updated_ms = ? WHERE id = ?",
                         (Status.EXECUTING.value, _now_ms(), plan_id))
        return self._must(plan_id)

    def end(self, plan_id: str, *, cancel: bool = False) -> Plan:
        """End the active plan: EXECUTING becomes COMPLETED, COLLECTING or READY CANCELLED
        (and any status CANCELLED with ``cancel``: work abandoned, as by ``/reset``); it is no
        longer active. A plan that is not active is returned as it is."""
        with self._write() as conn:
            plan = self._must(plan_id)
            if not plan.active:
                return plan
            ended = (Status.COMPLETED if plan.status is Status.EXECUTING and not cancel
                     else Status.CANCELLED)
            conn.execute("UPDATE plans SET status = ?, active = NULL, updated_ms = ? "
                         "WHERE id = ?", (ended.value, _now_ms(), plan_id))
        return self._must(plan_id)

    def set_status(self, plan_id: str, status: Status, *, deactivate: bool = False) -> Plan:
        """Set a status directly (no lifecycle rules: for repairs and tests)."""
        with self._write() as conn:
            self._must(plan_id)
            conn.execute(
                "UPDATE plans SET status = ?, updated_ms = ?"
                + (", active = NULL" if deactivate else "") + " WHERE id = ?",
                (status.value, _now_ms(), plan_id))
        return self._must(plan_id)

    def _must(self, plan_id: str) -> Plan:
        plan = self.get(plan_id)
        if plan is None:
            raise PlanStoreError(f"no plan {plan_id!r}")
        return plan


def _now_ms() -> float:
    return time.time() * 1000.0
