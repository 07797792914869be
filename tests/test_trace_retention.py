"""Traces do not grow without end: ``trace.keep_days`` (default 30) removes older events as a
runtime starts, counted back from the newest event so a clock step ages nothing; the removal is
announced with its count, and ``orion traces prune`` does it on demand. Real ``orion.db`` files
and real ``orion`` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

from orion.trace.events import Kind, TraceEvent
from orion.trace.recorder import DAY_MS
from orion.trace.store import TraceStore

ORION = str(Path(sys.executable).parent / "orion")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ORION_", "OPENAI_"))}


def event(name: str, at_ms: float) -> TraceEvent:
    return TraceEvent(Kind.TOOL_CALL, name, at_ms, "c1", "s1", {"n": 1}, 1.0)


def seed(workspace: Path, ages_days: dict[str, float], *, now_ms: float | None = None,
         blobs: dict[str, dict[str, str]] | None = None) -> Path:
    """An ``orion.db`` in ``workspace`` with one event per name, ``ages_days`` old."""
    now_ms = time.time() * 1000.0 if now_ms is None else now_ms
    path = workspace / ".orion" / "orion.db"
    with TraceStore(path) as store:
        for name, age in ages_days.items():
            assert store.write([event(name, now_ms - age * DAY_MS)], (blobs or {}).get(name, {}))
    return path


def names(path: Path) -> set[str]:
    with TraceStore(path) as store:
        return {row["name"] for row in store.query(limit=1000)}


def run(workspace: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "hello.yaml"
    script.write_text(yaml.safe_dump({"conversation": [{"user": "Hello."},
                                                       {"model": {"text": "Hello!"}}]}))
    done = subprocess.run([ORION, "run", str(script), "--workspace", str(workspace), *args],
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_a_run_removes_events_beyond_keep_days_and_says_how_many(tmp_path):
    ws = tmp_path / "ws"
    db = seed(ws, {"old 1": 45, "old 2": 31, "recent": 29, "today": 0})
    done = run(ws, tmp_path)
    assert ("traces: removed 2 events more than 30 days older than the newest "
            "(trace.keep_days in orion.yaml; 0 keeps every event)") in done.stderr, done.stderr
    left = names(db)
    assert {"recent", "today"} <= left and not {"old 1", "old 2"} & left
    # Nothing more to remove: the next run says nothing about traces.
    assert "traces:" not in run(ws, tmp_path).stderr


def test_keep_days_comes_from_orion_yaml_and_zero_keeps_everything(tmp_path):
    ws = tmp_path / "ws"
    db = seed(ws, {"a year ago": 365, "ten days ago": 10, "today": 0})
    (ws / "orion.yaml").write_text("trace:\n  keep_days: 0\n")
    assert "traces:" not in run(ws, tmp_path).stderr
    assert {"a year ago", "ten days ago", "today"} <= names(db)
    (ws / "orion.yaml").write_text("trace:\n  keep_days: 7\n")
    assert "traces: removed 2 events more than 7 days" in run(ws, tmp_path).stderr
    assert "today" in names(db) and not {"a year ago", "ten days ago"} & names(db)


def test_a_clock_stepped_ahead_ages_nothing(tmp_path):
    """Every event was recorded 90 days before the clock's now, the newest 2 days before the
    others: counted back from the newest event, only what is 30 days older than it goes."""
    ws = tmp_path / "ws"
    now = time.time() * 1000.0
    db = seed(ws, {"the last day": 90, "the day before": 91, "a month before": 125},
              now_ms=now)
    done = run(ws, tmp_path)
    assert "traces: removed 1 events" in done.stderr, done.stderr
    assert {"the last day", "the day before"} <= names(db)
    assert "a month before" not in names(db)


def test_a_workspace_without_traces_gets_none_from_retention(tmp_path):
    """Retention alone does not create orion.db (the run's own traces do, afterwards)."""
    from orion.hooks.manager import make_plugin_manager

    state = tmp_path / "ws" / ".orion"
    state.mkdir(parents=True)
    pm = make_plugin_manager(entrypoints=False, env={})
    found = pm.hook.prune_traces(state_dir=state, keep_ms=DAY_MS, now_ms=time.time() * 1e3)
    assert sum(found) == 0
    assert not (state / "orion.db").exists()


def test_captured_texts_go_with_the_last_event_that_refers_to_them(tmp_path):
    ws = tmp_path / "ws"
    shared, alone = "ab" * 32, "cd" * 32
    db = seed(ws, {"old": 60, "new": 1},
              blobs={"old": {shared: "said twice", alone: "said once"},
                     "new": {shared: "said twice"}})
    with TraceStore(db) as store:
        assert store.retain(30 * DAY_MS, time.time() * 1000.0) == 1
        assert store.blob(shared) == "said twice"  # a kept event still refers to it
        assert store.blob(alone) is None


def test_a_busy_database_skips_retention_until_the_next_start(tmp_path):
    ws = tmp_path / "ws"
    db = seed(ws, {"old": 60, "new": 0})
    blocker = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
        "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True); time.sleep(60)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert blocker.stdout.readline().strip() == "locked"
        with TraceStore(db) as store:
            assert store.retain(30 * DAY_MS, time.time() * 1000.0) == 0
    finally:
        blocker.kill()
        blocker.wait()
    assert names(db) == {"old", "new"}
    with TraceStore(db) as store:
        assert store.retain(30 * DAY_MS, time.time() * 1000.0) == 1


def test_orion_traces_prune_removes_and_vacuum_gives_the_space_back(tmp_path):
    ws = tmp_path / "ws"
    now = time.time() * 1000.0
    path = ws / ".orion" / "orion.db"
    with TraceStore(path) as store:
        for day in range(40):
            at = now - (day + 0.5) * DAY_MS
            assert store.write([event(f"day {day} #{i}", at) for i in range(200)])
    size = path.stat().st_size
    done = subprocess.run([ORION, "traces", "--workspace", str(ws), "prune", "--older-than",
                           "10d", "--vacuum", "--json"], env=_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["removed"] == 30 * 200 and figures["left"] == 10 * 200
    assert figures["size_bytes"] < size / 2 and path.stat().st_size < size / 2
    bad = subprocess.run([ORION, "traces", "--workspace", str(ws), "prune", "--older-than",
                          "soon"], env=_env(), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--older-than" in bad.stderr
