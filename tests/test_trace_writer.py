"""Traces are stored by a writer thread, off the step: told saved means saved for them too.

Real processes and real signals: a normal exit stores every queued batch (closed or not), a
SIGTERM'd `orion run` stores its last turn, and a process killed outright has what it had
not stored counted as dropped by the next store that opens the database, never lost in
silence.
"""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import yaml

from orion.trace.store import TraceStore

ORION = str(Path(sys.executable).parent / "orion")

#: A process that hands ``batches`` batches of 100 events to the default plugins'
#: ``store_traces`` (the SQLite store's writer), says so, then exits or waits to be killed.
PRODUCER = """
import sys
from pathlib import Path
from orion.hooks.manager import make_plugin_manager
from orion.trace.events import TraceEvent

state_dir, batches, then = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
pm = make_plugin_manager(entrypoints=False, env={})
for b in range(batches):
    events = [TraceEvent("transition", "bench step", 1.7e12 + b * 100 + i, "conv", "sess",
                         {"orion.seq": b * 100 + i, "orion.event": "step"})
              for i in range(100)]
    pm.hook.store_traces(events=events, blobs={}, state_dir=state_dir)
assert not pm.failures, pm.failures
print("submitted", batches * 100, flush=True)
if then == "wait":
    sys.stdin.readline()
elif then == "close":
    pm.hook.close_traces(state_dir=state_dir)
"""


def _producer(state_dir: Path, batches: int, then: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", PRODUCER, str(state_dir), str(batches), then],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _submitted(proc: subprocess.Popen[str]) -> int:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("submitted "), line
    return int(line.split()[1])


def _ledgers(state_dir: Path) -> list[Path]:
    return sorted(state_dir.glob("orion.db-unstored.*"))


def _stored(state_dir: Path) -> tuple[list[int], int]:
    """The sequence numbers stored, and the ``dropped`` counter."""
    with TraceStore(state_dir / "orion.db") as store:
        rows = store.query(limit=None)
        return sorted(r["attributes"]["orion.seq"] for r in rows), store.stats()["dropped"]


def test_a_normal_exit_stores_every_queued_batch_closed_or_not(tmp_path):
    for then in ("close", "exit"):
        state_dir = tmp_path / then
        proc = _producer(state_dir, 40, then)
        total = _submitted(proc)
        assert proc.wait(timeout=120) == 0
        assert _stored(state_dir) == (list(range(total)), 0)
        assert _ledgers(state_dir) == []


def test_a_killed_process_s_unstored_events_are_counted_by_the_next_store(tmp_path, caplog):
    # The database is busy the whole time (another connection holds its write lock), so the
    # writer can store nothing: the store drops the batches after its retries and cannot
    # even persist the count. SIGKILL then: the ledger is what tells.
    state_dir = tmp_path / "ws"
    TraceStore(state_dir / "orion.db").close()
    lock = sqlite3.connect(state_dir / "orion.db", isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    proc = _producer(state_dir, 3, "wait")
    total = _submitted(proc)
    proc.kill()
    proc.wait(timeout=60)
    lock.execute("ROLLBACK")
    lock.close()
    assert [p.name for p in _ledgers(state_dir)] == [f"orion.db-unstored.{proc.pid}"]
    with caplog.at_level(logging.WARNING, logger="orion.trace"):
        assert _stored(state_dir) == ([], total)
    assert f"process {proc.pid} ended before storing its last {total} trace events" in caplog.text
    assert _ledgers(state_dir) == []
    assert _stored(state_dir) == ([], total)  # claimed once, not again


def test_sigkill_while_the_writer_stores_loses_nothing_uncounted(tmp_path):
    # Killed right after handing over its batches, while the writer may be mid-transaction:
    # whatever did not make it into the database is counted, and what did is whole batches
    # in order.
    state_dir = tmp_path / "ws"
    proc = _producer(state_dir, 200, "wait")
    total = _submitted(proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    seqs, dropped = _stored(state_dir)
    assert seqs == list(range(len(seqs))) and len(seqs) % 100 == 0
    assert len(seqs) + dropped == total
    assert _ledgers(state_dir) == []


def _slow_script(path: Path) -> Path:
    script = {"conversation": [
        {"user": "Write the notes."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "notes", "target_file": "notes.md", "operation": "create"}}]}},
        {"model": {"chunks": [f"line {n}\n" for n in range(1, 2001)] + ["DONE\n"],
                   "chunk_delay_ms": 40}},
        {"model": {"text": "Done."}},
    ]}
    path.write_text(yaml.safe_dump(script), encoding="utf-8")
    return path


def test_a_sigterm_d_run_stores_its_last_turn(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    proc = subprocess.Popen([ORION, "run", str(_slow_script(tmp_path / "slow.yaml")),
                             "--workspace", str(workspace)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sessions = workspace / ".orion" / "write_sessions"
    # Wait (for as long as it takes) until the write streams: its journal has lines.
    while not any(p.stat().st_size for p in sessions.glob("*/content.txt")):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err
    state_dir = workspace / ".orion"
    with TraceStore(state_dir / "orion.db") as store:
        rows = store.query(limit=None)
        assert store.stats()["dropped"] == 0
    names = {(r["kind"], r["name"]) for r in rows}
    # the turn's root and the write's begin are recorded as the runtime closes
    assert ("turn", "invoke_agent orion") in names
    assert ("transition", "write_session begin") in names
    assert _ledgers(state_dir) == []
