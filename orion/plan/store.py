"""Plans in ``<state dir>/orion.db``: the one place a plan lives.

The schema is the ``orion.plans`` migration set of :class:`sqlite_utils.Migrations`. A plan's
Markdown is its only canonical content. The database itself enforces that at most one plan is
active: ``active`` is 1 or NULL, under a unique partial index. Whether plan work is on is not
stored separately: it is on exactly while a plan is active, so the two can never disagree.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlite_utils import Database, Migrations

from orion.errors import OrionError

DB_NAME = "orion.db"
BUSY_TIMEOUT_MS = 5000  # a plan write waits for a trace batch; it never drops


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


class PlanStoreError(OrionError):
    pass


migrations = Migrations("orion.plans")


@migrations(name="001_plans")
def _m001_plans(db: Database) -> None:
    statuses = ", ".join(f"'{s.value}'" for s in Status)
    db.execute(f"""
        CREATE TABLE IF NOT EXISTS plans (
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL DEFAULT '',
            markdown TEXT,
            status TEXT NOT NULL CHECK (status IN ({statuses})),
            revision INTEGER NOT NULL DEFAULT 0 CHECK (revision >= 0),
            supersedes TEXT REFERENCES plans(id),
            active INTEGER CHECK (active IS NULL OR active = 1),
            created_ms REAL NOT NULL,
            updated_ms REAL NOT NULL
        )""")
    # At most one active plan, by construction: the index admits one row with active = 1.
    db.execute("CREATE UNIQUE INDEX IF NOT EXISTS plans_one_active ON plans(active) "
               "WHERE active = 1")
    db.execute("CREATE INDEX IF NOT EXISTS plans_created ON plans(created_ms)")


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
    def from_row(cls, row: dict[str, Any]) -> Plan:
        return cls(row["id"], row["title"], row["markdown"], Status(row["status"]),
                   row["revision"], row["supersedes"], row["active"] == 1, row["created_ms"],
                   row["updated_ms"])

    def summary(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "status": self.status.value,
                "revision": self.revision, "active": self.active,
                "supersedes": self.supersedes, "bytes": len((self.markdown or "").encode())}


class PlanStore:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = Database(self.path)
        self.db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self.db.enable_wal()
        migrations.apply(self.db)

    @classmethod
    def for_state_dir(cls, state_dir: str | Path) -> PlanStore:
        return cls(Path(state_dir) / DB_NAME)

    def close(self) -> None:
        self.db.close()

    # -- reading ------------------------------------------------------------------------------

    def active(self) -> Plan | None:
        rows = list(self.db.query("SELECT * FROM plans WHERE active = 1"))
        return Plan.from_row(rows[0]) if rows else None

    def get(self, plan_id: str) -> Plan | None:
        rows = list(self.db.query("SELECT * FROM plans WHERE id = ?", [plan_id]))
        return Plan.from_row(rows[0]) if rows else None

    def history(self, limit: int = 50) -> list[Plan]:
        return [Plan.from_row(row) for row in self.db.query(
            "SELECT * FROM plans ORDER BY created_ms DESC, rowid DESC LIMIT ?", [limit])]

    def rows(self) -> list[dict[str, Any]]:
        """Every row as stored, for tests that prove nothing changed."""
        return list(self.db.query("SELECT * FROM plans ORDER BY rowid"))

    # -- writing (each a transaction) ---------------------------------------------------------

    def create(self, title: str = "") -> Plan:
        now = _now_ms()
        plan_id = uuid.uuid4().hex
        with self.db.atomic():
            if self.active() is not None:
                raise PlanStoreError("a plan is already active")
            self.db.execute(
                "INSERT INTO plans (id, title, markdown, status, revision, supersedes, active, "
                "created_ms, updated_ms) VALUES (?, ?, NULL, ?, 0, NULL, 1, ?, ?)",
                [plan_id, title, Status.COLLECTING.value, now, now])
        return self._must(plan_id)

    def set_content(self, plan_id: str, markdown: str, title: str | None) -> Plan:
        """COLLECTING or READY: store the draft (READY, revision + 1). EXECUTING: a new
        revision in READY supersedes the plan. Terminal: refused."""
        now = _now_ms()
        with self.db.atomic():
            plan = self._must(plan_id)
            if plan.status.terminal or not plan.active:
                raise PlanStoreError(f"plan {plan_id[:8]} is {plan.status.value}; it takes no "
                                     "new drafts")
            if plan.status is Status.EXECUTING:
                new_id = uuid.uuid4().hex
                self.db.execute("UPDATE plans SET status = ?, active = NULL, updated_ms = ? "
                                "WHERE id = ?", [Status.SUPERSEDED.value, now, plan_id])
                self.db.execute(
                    "INSERT INTO plans (id, title, markdown, status, revision, supersedes, "
                    "active, created_ms, updated_ms) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)",
                    [new_id, title if title is not None else plan.title, markdown,
                     Status.READY.value, plan.revision + 1, plan_id, now, now])
                plan_id = new_id
            else:
                self.db.execute(
                    "UPDATE plans SET markdown = ?, title = ?, status = ?, revision = ?, "
                    "updated_ms = ? WHERE id = ?",
                    [markdown, title if title is not None else plan.title, Status.READY.value,
                     plan.revision + 1, now, plan_id])
        return self._must(plan_id)

    def set_status(self, plan_id: str, status: Status, *, deactivate: bool = False) -> Plan:
        with self.db.atomic():
            self._must(plan_id)
            self.db.execute(
                "UPDATE plans SET status = ?, updated_ms = ?"
                + (", active = NULL" if deactivate else "") + " WHERE id = ?",
                [status.value, _now_ms(), plan_id])
        return self._must(plan_id)

    def _must(self, plan_id: str) -> Plan:
        plan = self.get(plan_id)
        if plan is None:
            raise PlanStoreError(f"no plan {plan_id!r}")
        return plan


def _now_ms() -> float:
    return time.time() * 1000.0
