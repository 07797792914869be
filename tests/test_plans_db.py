"""Plans in ``plans.db``, traces in ``orion.db``: a run that touches every plan path leaves no
plan text and no user message in ``orion.db`` (its bytes are scanned), and a workspace of an
earlier Orion, whose ``orion.db`` holds the plans, moves them to ``plans.db`` at the first
start: value for value, once, one process at a time, and safe against a SIGKILL at any of its
statements.

Everything is real: the ``orion`` command in subprocesses, SQLite files in ``tmp_path``, two
processes starting at once, SIGKILLs, and a lock held by another process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from pathlib import Path

import pytest
import yaml

from orion.plan.store import COLUMNS, REVISION_COLUMNS, PlanStore, _m001_plans
from orion.workspace.statedb import PLANS_DB, TRACES_DB

ORION = str(Path(sys.executable).parent / "orion")
#: No content capture, whatever the environment running the tests says.
ENV = {key: value for key, value in os.environ.items()
       if key != "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"}
TABLES = {"plans": COLUMNS, "plan_revisions": tuple(REVISION_COLUMNS.split(", "))}


def orion(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ORION, *args], capture_output=True, text=True, timeout=timeout,
                          env=ENV)


def raw_rows(database: Path, table: str, *, but: str = "") -> list[tuple] | None:
    """Every row of ``table`` as stored (each value's type and bytes, so text that is not
    UTF-8 compares too; without column ``but``), sorted; ``None`` when the file or the table
    is not there."""
    if not database.exists():
        return None
    with closing(sqlite3.connect(database)) as db:
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                      (table,)).fetchone() is None:
            return None
        values = ", ".join(f"typeof({c}), hex({c})" for c in TABLES[table] if c != but)
        return sorted(db.execute(f"SELECT {values} FROM {table}").fetchall())


def plan_rows(database: Path) -> dict[str, list[tuple] | None]:
    return {table: raw_rows(database, table) for table in TABLES}


def plan_sets(database: Path) -> list[str]:
    with closing(sqlite3.connect(database)) as db:
        return [name for (name,) in db.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = 'orion.plans'")]


def trace_rows(workspace: Path) -> list[tuple]:
    with closing(sqlite3.connect(workspace / ".orion" / TRACES_DB)) as db:
        return db.execute("SELECT * FROM trace_events ORDER BY id").fetchall()


def bytes_of(state: Path, database: str) -> bytes:
    """The database file and its sidecars (``-wal``, ``-shm``), as they are on disk."""
    return b"".join(path.read_bytes() for path in sorted(state.iterdir())
                    if path.name.startswith(database) and path.is_file())


# == a run leaves no plan text in orion.db ========================================================

#: What the user and the model write: each text holds a token found nowhere else.
TITLE, NEW_TITLE, SECOND_TITLE = "Zanzibar-title-0417", "Okapi-title-3308", "Quokka-title-8120"
DRAFTS = [f"# Release\n\n1. Quixotic-markdown-{n}: build and tag.\n"
          for n in (2291, 2292, 2293, 2294)]
MESSAGES = [f"Marmalade-user-{n}: please go on." for n in (5530, 5531, 5532, 5533)]
DAMAGED_TEXT = "Tangerine-damaged-6644"
TOKENS = [TITLE, NEW_TITLE, SECOND_TITLE, DAMAGED_TEXT,
          *(f"Quixotic-markdown-{n}" for n in (2291, 2292, 2293, 2294)),
          *(f"Marmalade-user-{n}" for n in (5530, 5531, 5532, 5533))]


def set_content(markdown: str, **more) -> dict:
    return {"model": {"tool_calls": [{"name": "plan_set_content",
                                      "arguments": {"plan_markdown": markdown, **more}}]}}


#: Plan on, two drafts (the second replaces the first), approval, a revision while executing
#: (a new plan supersedes the approved one), its approval, /plan done; then a second plan,
#: drafted with a new title and abandoned with /reset.
EVERY_PLAN_PATH = {"files": {"notes.md": "Ship on Friday.\n"}, "conversation": [
    {"user": f"/plan on {TITLE}"},
    {"user": MESSAGES[0]},
    {"model": {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.md"}}]}},
    set_content(DRAFTS[0]), {"expect": '"revision": 1'},
    {"model": {"text": "Stored."}},
    {"user": MESSAGES[1]},
    set_content(DRAFTS[1], expected_revision=1, title=NEW_TITLE), {"expect": '"revision": 2'},
    {"model": {"text": "Updated."}},
    {"user": "/plan approve"},
    {"user": MESSAGES[2]},
    {"model": {"tool_calls": [{"name": "plan_get", "arguments": {}}]}},
    {"expect": "Quixotic-markdown-2292"},
    set_content(DRAFTS[2]), {"expect": '"revision": 3'},
    {"model": {"text": "Revised."}},
    {"user": "/plan approve"},
    {"user": "/plan show"},
    {"user": "/plan diff 1 3"},
    {"user": "/plan done"},
    {"user": f"/plan on {SECOND_TITLE}"},
    {"user": MESSAGES[3]},
    set_content(DRAFTS[3]), {"expect": '"revision": 1'},
    {"model": {"text": "Stored."}},
    {"user": "/reset"},
]}


@pytest.mark.slow
def test_a_run_through_every_plan_path_leaves_no_plan_text_in_orion_db(tmp_path):
    ws, state = tmp_path / "ws", tmp_path / "ws" / ".orion"
    ws.mkdir()
    script = tmp_path / "plans.yaml"
    script.write_text(yaml.safe_dump(EVERY_PLAN_PATH, sort_keys=False))
    first = orion("run", str(script), "--workspace", str(ws))
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    # Held open from here, so that no Orion process is the last to close a database and
    # removes its WAL: the sidecars are scanned as the runs left them.
    holders = [sqlite3.connect(state / name) for name in (TRACES_DB, PLANS_DB)]
    try:
        for holder in holders:
            holder.execute("SELECT count(*) FROM sqlite_master").fetchone()
        again = orion("run", str(script), "--workspace", str(ws))  # a second, beside the first
        assert again.returncode == 0, again.stderr[-3000:]
        # A damaged row (a hand edit), named by plan history and dropped.
        with closing(sqlite3.connect(state / PLANS_DB)) as db:
            (damaged,) = db.execute("SELECT id FROM plans WHERE status = 'CANCELLED' "
                                    "ORDER BY created_ms LIMIT 1").fetchone()
            db.execute("UPDATE plans SET markdown = CAST(? || X'ff' AS TEXT) WHERE id = ?",
                       (DAMAGED_TEXT, damaged))
            db.commit()
        history = orion("plan", "history", "--workspace", str(ws), "--json")
        assert history.returncode == 0 and f"plan {damaged[:8]} is damaged in plans.db" in \
            history.stderr, history.stderr
        completed = next(p for p in json.loads(history.stdout) if p["status"] == "COMPLETED")
        for command in (["show", completed["id"][:8]], ["revisions", completed["id"][:8]],
                        ["diff", "1", "3", "--plan", completed["id"][:8]],
                        ["drop", damaged[:8]]):
            done = orion("plan", *command, "--workspace", str(ws))
            assert done.returncode == 0, (command, done.stderr)
        traces = bytes_of(state, TRACES_DB)
        plans = bytes_of(state, PLANS_DB)
    finally:
        for holder in holders:
            holder.close()
    assert len(trace_rows(ws)) > 50  # the traces are there, in orion.db
    for token in TOKENS:
        assert token.encode() not in traces, f"{token!r} is in orion.db"
    # ... and the plans are in plans.db (this scan can find what it looks for).
    for text in (TITLE, NEW_TITLE, SECOND_TITLE, *DRAFTS):
        assert text.encode() in plans, text
    assert set(os.listdir(state)) >= {TRACES_DB, PLANS_DB}


# == an older workspace: plans in orion.db =========================================================

OLD_TITLE = "Papaya-old-title-1201"
OLD_DRAFTS = [f"# Old plan\n\n1. Papaya-old-draft-{n}.\n" for n in range(1301, 1305)]


def old_workspace(root: Path) -> Path:
    """A workspace as an earlier Orion left it: traces of a real run and four plans in
    ``orion.db`` (the plan store's own schema and code, on that file), one row damaged by
    hand; no ``plans.db``."""
    ws = root / "ws"
    ws.mkdir(parents=True)
    assert orion("run", "hello", "--workspace", str(ws)).returncode == 0
    state = ws / ".orion"
    for path in state.iterdir():
        if path.name.startswith(PLANS_DB):
            path.unlink()
    store = PlanStore(state / TRACES_DB)  # where plans were kept
    first = store.create(OLD_TITLE)
    store.set_content(first.id, OLD_DRAFTS[0], None)
    store.set_content(first.id, OLD_DRAFTS[1], None)
    store.approve(first.id)
    revised = store.set_content(first.id, OLD_DRAFTS[2], None)  # supersedes the first
    store.approve(revised.id)
    store.end(revised.id)
    damaged = store.create("Damaged")
    store.set_content(damaged.id, "# Damaged\n", None)
    store.end(damaged.id, cancel=True)
    active = store.create("Active")
    store.set_content(active.id, OLD_DRAFTS[3], None)
    store.close()
    with closing(sqlite3.connect(state / TRACES_DB)) as db:
        db.execute("PRAGMA ignore_check_constraints = ON")  # what Orion itself never does
        db.execute("UPDATE plans SET status = 'PAUSED', markdown = CAST(X'2320ff0a' AS TEXT) "
                   "WHERE id = ?", (damaged.id,))
        db.commit()
    return ws


@pytest.fixture(scope="module")
def old(tmp_path_factory) -> Path:
    return old_workspace(tmp_path_factory.mktemp("old"))


def copy_of(old: Path, to: Path) -> Path:
    return Path(shutil.copytree(old, to / "ws", symlinks=True))


MOVED = "moved 4 plans from orion.db to plans.db"


def assert_moved(ws: Path, before: dict) -> None:
    """Every plan and draft is in plans.db as it was in orion.db; orion.db holds traces only
    and none of their text, in its file or its sidecars."""
    state = ws / ".orion"
    assert plan_rows(state / PLANS_DB) == before
    assert plan_rows(state / TRACES_DB) == {"plans": None, "plan_revisions": None}
    assert plan_sets(state / TRACES_DB) == []
    traces = bytes_of(state, TRACES_DB)
    for text in (OLD_TITLE, *OLD_DRAFTS):
        assert text.encode() not in traces, text


@pytest.mark.slow
def test_the_first_start_moves_every_plan_once_value_for_value(old, tmp_path):
    ws = copy_of(old, tmp_path)
    state = ws / ".orion"
    before, traces = plan_rows(state / TRACES_DB), trace_rows(ws)
    assert len(before["plans"]) == 4 and len(before["plan_revisions"]) == 5
    assert OLD_DRAFTS[0].encode() in bytes_of(state, TRACES_DB)  # the scan below can fail
    history = orion("plan", "history", "--workspace", str(ws), "--json")
    assert history.returncode == 0, history.stderr
    assert history.stderr.count(MOVED) == 1, history.stderr
    assert_moved(ws, before)
    assert trace_rows(ws) == traces  # the traces stay, row for row
    # The damaged row moved as it was: named, and dropped from plans.db.
    assert "is damaged in plans.db (its markdown is not UTF-8 (byte 0xff at offset 2))" in \
        history.stderr
    assert [p["title"] for p in json.loads(history.stdout)] == [
        "Active", OLD_TITLE, OLD_TITLE]
    # Told once: the next start finds nothing to move and changes nothing.
    shown = orion("plan", "show", "--workspace", str(ws))
    assert shown.returncode == 0 and "moved" not in shown.stderr, shown.stderr
    assert "Papaya-old-draft-1304" in shown.stdout  # the active plan is still active
    assert_moved(ws, before)
    revisions = orion("plan", "revisions", "--workspace", str(ws), "--json")
    assert len(json.loads(revisions.stdout)) == 1
    diff = orion("plan", "diff", "1", "3", "--plan", json.loads(history.stdout)[1]["id"],
                 "--workspace", str(ws))
    assert "+1. Papaya-old-draft-1303." in diff.stdout, diff.stderr


@pytest.mark.slow
def test_a_run_in_an_older_workspace_tells_the_user_and_goes_on_with_the_plan(old, tmp_path):
    ws = copy_of(old, tmp_path)
    before = plan_rows(ws / ".orion" / TRACES_DB)
    script = tmp_path / "status.yaml"
    script.write_text("conversation:\n  - user: /plan\n")
    done = orion("run", str(script), "--workspace", str(ws))
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert said.count(MOVED) == 1 and "Plan work is active: plan 'Active', READY" in said, said
    assert_moved(ws, before)


#: An ``orion`` command that starts when told: it loads Orion, says it is ready (``argv[1]``
#: touched) and waits for ``argv[2]``, so that two of them open the plan store at one moment.
AT_ONCE = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from orion.cli import main

    ready, go, *command = sys.argv[1:]
    Path(ready).touch()
    for _ in range(30000):  # bounded: the test gives the go long before
        if Path(go).exists():
            break
        time.sleep(0.001)
    sys.argv = ["orion", *command]
    main()
""")


@pytest.mark.slow
def test_two_processes_starting_at_once_in_an_older_workspace_both_succeed(old, tmp_path):
    """Both open the plan store at the same moment: one moves the plans (and says so), the
    other waits for the set-up lock and finds them in plans.db. Two ``orion run``, or two
    ``orion plan history``; bounded: eight pairs."""
    starter = tmp_path / "at_once.py"
    starter.write_text(AT_ONCE)
    script = tmp_path / "status.yaml"
    script.write_text("conversation:\n  - user: /plan\n")
    before = plan_rows(old / ".orion" / TRACES_DB)
    for pair in range(8):
        ws = copy_of(old, tmp_path / f"pair{pair}")
        go = tmp_path / f"go{pair}"
        command = ["run", str(script)] if pair % 2 else ["plan", "history", "--json"]
        ready = [tmp_path / f"ready{pair}-{n}" for n in range(2)]
        procs = [subprocess.Popen([sys.executable, str(starter), str(flag), str(go), *command,
                                   "--workspace", str(ws)], env=ENV, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
                 for flag in ready]
        for _ in range(30000):  # bounded: until both have loaded Orion (or one ended)
            if all(flag.exists() for flag in ready) or any(p.poll() is not None for p in procs):
                break
            time.sleep(0.01)
        go.touch()
        outputs = [(proc.communicate(timeout=300), proc.returncode) for proc in procs]
        for (out, err), code in outputs:
            assert code == 0 and "Traceback" not in err, (out, err)
            for trouble in ("locked", "unavailable", "cannot", "could not"):
                assert trouble not in out + err, (out, err)
        for (out, err), _ in outputs:
            if command[0] == "run":
                assert "Plan work is active: plan 'Active', READY" in out + err
            else:
                assert len(json.loads(out)) == 3
        assert sum((out + err).count(MOVED) for (out, err), _ in outputs) == 1, outputs
        assert_moved(ws, before)


#: ``orion plan history`` with every SQLite statement of the process counted (the statements
#: of the ``sqlite3`` module's connections, as SQLite runs them): the process SIGKILLs itself
#: as statement ``argv[1]`` starts (0: never), and says at exit how many ran.
KILLER = textwrap.dedent("""
    import atexit, os, signal, sqlite3, sys

    kill_at, started = int(sys.argv[1]), 0
    connect = sqlite3.connect

    def starting(statement):
        global started
        started += 1
        if started == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    def traced(*args, **kwargs):
        connection = connect(*args, **kwargs)
        connection.set_trace_callback(starting)
        return connection

    sqlite3.connect = traced
    atexit.register(lambda: print(f"statements: {started}", file=sys.stderr))
    from orion.cli import main
    sys.argv = ["orion", "plan", "history", "--json", "--workspace", sys.argv[2]]
    main()
""")


@pytest.mark.slow
def test_a_kill_at_any_statement_of_the_move_leaves_the_plans_in_one_database_or_both(
        old, tmp_path):
    """Killed before each statement in turn (opening plans.db, its migrations, the copy, the
    removal from orion.db, the checkpoint, the reads), the plans are always complete in
    orion.db or in plans.db, never in neither; the next start completes the move, and the
    user is told of it once at most (exactly once when the kill came before the removal)."""
    killer = tmp_path / "killer.py"
    killer.write_text(KILLER)
    before = plan_rows(old / ".orion" / TRACES_DB)

    def run(kill_at: int, ws: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(killer), str(kill_at), str(ws)],
                              capture_output=True, text=True, timeout=300, env=ENV)

    whole = run(0, copy_of(old, tmp_path / "whole"))
    assert whole.returncode == 0 and MOVED in whole.stderr, whole.stderr
    statements = int(whole.stderr.rsplit("statements: ", 1)[1])
    assert statements > 20
    kept_by = {"orion.db": 0, "plans.db": 0}
    for kill_at in range(1, statements + 1):
        ws = copy_of(old, tmp_path / f"kill{kill_at}")
        state = ws / ".orion"
        killed = run(kill_at, ws)
        assert killed.returncode == -signal.SIGKILL, (kill_at, killed.stderr[-2000:])
        in_orion_db = plan_rows(state / TRACES_DB) == before
        in_plans_db = plan_rows(state / PLANS_DB) == before
        assert in_orion_db or in_plans_db, f"killed at statement {kill_at}: plans in neither"
        kept_by["orion.db" if in_orion_db else "plans.db"] += 1
        after = orion("plan", "history", "--json", "--workspace", str(ws))
        assert after.returncode == 0, (kill_at, after.stderr)
        assert len(json.loads(after.stdout)) == 3
        assert_moved(ws, before)
        told = killed.stderr.count(MOVED) + after.stderr.count(MOVED)
        assert told == 1 if in_orion_db else told <= 1, (kill_at, killed.stderr, after.stderr)
    assert kept_by["orion.db"] > 10 and kept_by["plans.db"] > 0, kept_by  # both sides hit


def test_a_database_from_before_revisions_moves_with_each_plans_last_draft(tmp_path):
    from sqlite_utils import Database, Migrations

    state = tmp_path / "ws" / ".orion"
    state.mkdir(parents=True)
    db = Database(state / TRACES_DB)
    first = Migrations("orion.plans")  # the plan migrations as they were: 001 only
    first(name="001_plans")(_m001_plans)
    first.apply(db)
    db.execute("INSERT INTO plans (id, title, markdown, status, revision, supersedes, active, "
               "created_ms, updated_ms) VALUES ('a1', 'Old', ?, 'COMPLETED', 2, NULL, NULL, "
               "1.0, 2.0), ('b2', 'Empty', NULL, 'CANCELLED', 0, NULL, NULL, 3.0, 3.0)",
               (OLD_DRAFTS[0],))
    db.conn.commit()
    db.close()
    store = PlanStore.for_state_dir(state)
    assert store.notice == "moved 2 plans from orion.db to plans.db"
    [revision] = store.revisions("a1")
    assert (revision.revision, revision.markdown, revision.title, revision.created_ms) == (
        2, OLD_DRAFTS[0], "Old", 2.0)
    assert store.revisions("b2") == [] and len(store.history()) == 2
    store.close()
    assert plan_rows(state / TRACES_DB) == {"plans": None, "plan_revisions": None}


def test_a_plans_table_that_is_not_orions_stays_in_orion_db(tmp_path):
    state = tmp_path / "ws" / ".orion"
    state.mkdir(parents=True)
    with closing(sqlite3.connect(state / TRACES_DB)) as db:
        db.execute("CREATE TABLE plans (name TEXT)")
        db.execute("INSERT INTO plans VALUES ('someone else''s')")
        db.commit()
    store = PlanStore.for_state_dir(state)
    assert store.notice is None and store.history() == []
    store.close()
    with closing(sqlite3.connect(state / TRACES_DB)) as db:
        assert db.execute("SELECT name FROM plans").fetchall() == [("someone else's",)]


@pytest.mark.slow
def test_plans_orion_db_kept_locked_are_moved_later_and_none_is_lost(old, tmp_path):
    """Another process keeps orion.db locked (exclusive) at the first start: the plans cannot
    be moved then; the user is told, and plan work goes on in plans.db (a new plan becomes
    active there). The next start moves them: the plan that was active in orion.db is kept,
    not active, since plans.db has an active plan, and the message names it."""
    ws = copy_of(old, tmp_path)
    state = ws / ".orion"
    before = plan_rows(state / TRACES_DB)
    shutil.copyfile(state / TRACES_DB, tmp_path / "ws-before.db")
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sqlite3, sys, time\n"
         "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
         "c.execute('PRAGMA locking_mode = EXCLUSIVE')\n"
         "c.execute('BEGIN EXCLUSIVE')\n"
         "print('locked', flush=True)\n"
         "time.sleep(120)\n", str(state / TRACES_DB)],
        stdout=subprocess.PIPE, text=True)
    script = tmp_path / "new.yaml"
    script.write_text(yaml.safe_dump({"conversation": [
        {"user": "/plan on New"}, {"user": "Plan."}, set_content("# New\n"),
        {"model": {"text": "Stored."}}]}, sort_keys=False))
    try:
        assert holder.stdout.readline().strip() == "locked"
        # A command that only reads says why it shows no plan, rather than none in silence.
        shown = orion("plan", "show", "--workspace", str(ws))
        locked = orion("run", str(script), "--workspace", str(ws))
    finally:
        holder.kill()
        holder.wait()
    assert shown.returncode == 0 and "cannot be moved to plans.db now (database is locked)" in \
        shown.stderr, shown.stderr
    said = locked.stdout + locked.stderr
    assert locked.returncode == 0, said[-3000:]
    assert ("the plans in orion.db cannot be moved to plans.db now (database is locked); plan "
            "work goes on in plans.db, and the next start tries again") in said, said
    assert "Plan work is on: plan 'New'" in said
    assert plan_rows(state / TRACES_DB) == before  # left as they were
    history = orion("plan", "history", "--json", "--workspace", str(ws))
    [was_active] = [row for row in json.loads(history.stdout) if row["title"] == "Active"]
    assert (f"moved 4 plans from orion.db to plans.db; plan {was_active['id'][:8]} was active "
            "in orion.db and is not active in plans.db, which had an active plan") in \
        history.stderr, history.stderr
    plans = {row["title"]: row for row in json.loads(history.stdout)}
    assert plans["New"]["active"] and not plans["Active"]["active"]
    assert plans["Active"]["status"] == "READY"
    # Every row and draft of orion.db is in plans.db; only that plan's active flag differs.
    assert set(raw_rows(state / PLANS_DB, "plans", but="active")) > set(
        raw_rows(tmp_path / "ws-before.db", "plans", but="active"))
    assert set(raw_rows(state / PLANS_DB, "plan_revisions")) > set(before["plan_revisions"])
    assert plan_rows(state / TRACES_DB) == {"plans": None, "plan_revisions": None}


@pytest.mark.slow
def test_plans_copied_from_a_read_only_orion_db_are_removed_from_it_later(old, tmp_path):
    """orion.db read-only (a read-only bind mount of the file): the plans are copied to
    plans.db and plan work uses them there; the user is told that they could not be removed
    from orion.db, and the next start that can write it removes them."""
    ws = copy_of(old, tmp_path)
    state = ws / ".orion"
    before = plan_rows(state / TRACES_DB)
    traces = state / TRACES_DB
    bound = subprocess.run(["mount", "--bind", str(traces), str(traces)], capture_output=True,
                           text=True)
    if bound.returncode != 0:
        pytest.skip(f"a bind mount is not permitted here: {bound.stderr.strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(traces)], check=True)
        history = orion("plan", "history", "--json", "--workspace", str(ws))
    finally:
        subprocess.run(["umount", "-l", str(traces)], capture_output=True)
    assert history.returncode == 0 and len(json.loads(history.stdout)) == 3, history.stderr
    assert ("copied 4 plans from orion.db to plans.db, but could not remove them from "
            "orion.db (attempt to write a readonly database); plan work uses plans.db, and the "
            "next start removes them") in history.stderr, history.stderr
    assert plan_rows(state / PLANS_DB) == before == plan_rows(state / TRACES_DB)
    again = orion("plan", "history", "--json", "--workspace", str(ws))
    assert again.stderr.count(MOVED) == 1, again.stderr
    assert_moved(ws, before)
