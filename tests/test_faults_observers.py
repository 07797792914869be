"""Observers never block work: whatever is wrong with the state directory's ``orion.db`` (the
traces) or ``plans.db`` (the plans), ``orion run`` still writes every file, says once that
traces or plan work are unavailable, and the other database goes on as if nothing happened;
``orion traces`` / ``orion plan`` answer with one error line.

Every fault is real: the database file is really damaged, replaced or locked by another process.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from faults import DAMAGE, LOCK_HOLDER
from orion.trace.writer import settle_all

ORION = str(Path(sys.executable).parent / "orion")


def orion(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ORION, *args], capture_output=True, text=True, timeout=timeout)


def files_of(workspace: Path) -> dict[str, bytes]:
    return {str(p.relative_to(workspace)): p.read_bytes() for p in sorted(workspace.rglob("*"))
            if p.is_file() and ".orion" not in p.relative_to(workspace).parts}


@pytest.fixture(scope="module")
def healthy(tmp_path_factory) -> dict[str, bytes]:
    """What the shipped `operations` example leaves in a workspace with a sound state dir."""
    workspace = tmp_path_factory.mktemp("healthy")
    proc = orion("run", "operations", "--workspace", str(workspace))
    assert proc.returncode == 0, proc.stderr
    return files_of(workspace)


def plans_of(state_dir: Path) -> list[dict]:
    done = orion("plan", "history", "--json", "--state-dir", str(state_dir))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def trace_count(workspace: Path) -> int:
    settle_all()  # this process's trace writer stores off the step
    with closing(sqlite3.connect(workspace / ".orion" / "orion.db")) as db:
        return db.execute("SELECT count(*) FROM trace_events").fetchone()[0]


def operations_with_damaged(database: str, damage: str, tmp_path: Path,
                            healthy: dict[str, bytes]) -> tuple[Path, str]:
    """The `operations` example run in a workspace whose ``database`` is damaged: it succeeds
    and writes every file as in a sound workspace. Returns the workspace and what was said."""
    workspace = tmp_path / "ws"
    (workspace / ".orion").mkdir(parents=True)
    DAMAGE[damage](workspace / ".orion" / database)
    proc = orion("run", "operations", "--workspace", str(workspace))
    said = proc.stdout + proc.stderr
    assert "Traceback" not in said, said[-3000:]
    assert proc.returncode == 0, said[-3000:]
    assert files_of(workspace) == healthy  # every write happened, byte for byte
    return workspace, said


@pytest.mark.slow
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_orion_db_stops_neither_the_run_nor_a_write_nor_plan_work(damage, tmp_path,
                                                                             healthy):
    workspace, said = operations_with_damaged("orion.db", damage, tmp_path, healthy)
    assert said.count("cannot store traces") <= 1  # said once, not once per request
    # Plans are in plans.db: plan work goes on as if nothing happened (the same state
    # directory, another workspace: the example seeds its own files).
    state = workspace / ".orion"
    planned = orion("run", "plan_mode", "--workspace", str(tmp_path / "planned"),
                    "--state-dir", str(state))
    said = planned.stdout + planned.stderr
    assert planned.returncode == 0 and "Plan work ended: plan 'Release 1.2', COMPLETED" in \
        said, said[-3000:]
    assert "plan work is unavailable" not in said
    assert [plan["status"] for plan in plans_of(state)] == ["COMPLETED", "SUPERSEDED"]


@pytest.mark.slow
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_plans_db_stops_neither_the_run_nor_a_write_nor_traces(damage, tmp_path,
                                                                          healthy):
    workspace, said = operations_with_damaged("plans.db", damage, tmp_path, healthy)
    assert said.count("plan work is unavailable: the plan store") == 1, said[-3000:]
    assert "plans.db cannot be used" in said
    # Traces are in orion.db: stored as if nothing happened.
    assert "cannot store traces" not in said
    assert trace_count(workspace) > 10


@pytest.mark.slow
@pytest.mark.parametrize("database", ["orion.db", "plans.db"])
@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("command", [["traces"], ["traces", "stats"], ["plan", "show"],
                                     ["plan", "history"]], ids=" ".join)
def test_reading_commands_answer_a_damaged_database_with_one_error_line(database, damage,
                                                                         command, tmp_path):
    workspace = tmp_path / "ws"
    (workspace / ".orion").mkdir(parents=True)
    DAMAGE[damage](workspace / ".orion" / database)
    proc = orion(*command, "--workspace", str(workspace))
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    if proc.returncode == 0:  # a wrong schema may read as "nothing recorded": fine, no crash
        # ... and a command never stops on the other command's database.
        assert command[0] == "plan" and database == "orion.db" or \
            command[0] == "traces" and database == "plans.db" or damage == "wrong schema"
        return
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: the state directory's {database} cannot be used"), \
        lines


@pytest.mark.slow
@pytest.mark.parametrize("database", ["orion.db", "plans.db"])
def test_a_database_locked_by_another_process_stops_no_write(database, tmp_path, healthy):
    # Another process holds an exclusive transaction on the database for the whole run.
    workspace = tmp_path / "ws"
    (workspace / ".orion").mkdir(parents=True)
    db = workspace / ".orion" / database
    sqlite3.connect(db).close()
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(db)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        proc = orion("run", "operations", "--workspace", str(workspace), timeout=300)
    finally:
        holder.kill()
        holder.wait()
    said = proc.stdout + proc.stderr
    assert "Traceback" not in said, said[-3000:]
    assert proc.returncode == 0, said[-3000:]
    assert files_of(workspace) == healthy


@pytest.mark.slow
def test_the_run_after_the_damage_is_moved_aside_records_again(tmp_path, healthy):
    # The error message's advice works: move the file aside, and traces and plans come back.
    workspace = tmp_path / "ws"
    (workspace / ".orion").mkdir(parents=True)
    db = workspace / ".orion" / "orion.db"
    DAMAGE["garbage"](db)
    assert orion("traces", "--workspace", str(workspace)).returncode == 1
    shutil.move(db, workspace / "orion.db.damaged")
    proc = orion("run", "hello", "--workspace", str(workspace))
    assert proc.returncode == 0, proc.stderr
    traces = orion("traces", "--workspace", str(workspace))
    assert traces.returncode == 0 and traces.stdout.strip(), traces.stderr


@pytest.mark.slow
def test_two_runs_starting_at_once_in_a_fresh_workspace_both_record(tmp_path):
    # Both set up orion.db (WAL, migrations) at the same moment; SQLite refuses one of two
    # schema writers at once, so the set-up is serialized. Bounded: six pairs.
    for pair in range(6):
        workspace = tmp_path / f"ws{pair}"
        workspace.mkdir()
        procs = [subprocess.Popen([ORION, "run", "hello", "--workspace", str(workspace)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for _ in range(2)]
        outputs = [(proc.communicate(timeout=120)[0], proc.returncode) for proc in procs]
        for output, code in outputs:
            assert code == 0, output
            for trouble in ("locked", "unavailable", "cannot store", "Traceback"):
                assert trouble not in output, output
