"""A real crash: ``orion run`` streams a long document into a write session in a real
subprocess, is killed with SIGKILL part way through, and ``orion sessions recover --finalize``
writes what the journal had saved: exactly a prefix of the intended content, and at least
everything that was on disk before the kill.

The scripted model sleeps between chunks in real time (``chunk_delay_ms``); the test waits for
the journal to reach a randomized size (seeded: the seed is in every assertion message), never
for a fixed time. No network: the scripted model runs in the subprocess itself.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")

SEED = 20260104
KILLS = 4
LINES = 400
#: Only a safety net against a hung subprocess; nothing asserts on time.
DEADLINE_S = 60.0

INTENDED = "".join(f"{i:03d}: the quick brown fox jumps over the lazy dog, line {i} of "
                   f"{LINES}\n" for i in range(1, LINES + 1))


def slow_script(path: Path) -> Path:
    chunks = INTENDED.splitlines(keepends=True)
    path.write_text(
        "description: A long document streamed slowly, to be killed part way.\n"
        "settings:\n  write_session: {flush_lines: 4}\n"
        "conversation:\n"
        "  - user: \"Write the long guide.\"\n"
        "  - model:\n"
        "      tool_calls:\n"
        "        - name: WritePlanTool_begin\n"
        "          arguments: {intent: \"long guide\", target_file: docs/long.md, "
        "operation: create}\n"
        "  - model:\n"
        "      chunk_delay_ms: 4\n"
        f"      chunks: {json.dumps(chunks)}\n", encoding="utf-8")
    return path


def orion(*args: str | Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orion", *map(str, args)],
                          capture_output=True, text=True, timeout=DEADLINE_S, **kw)


def journal_file(workspace: Path) -> Path | None:
    found = list((workspace / ".orion" / "write_sessions").glob("*/content.txt"))
    return found[0] if found else None


def size(path: Path | None) -> int:
    try:
        return path.stat().st_size if path is not None else 0
    except FileNotFoundError:
        return 0


def crash_and_recover(tmp_path: Path, script: Path, kill_at: int, where: str) -> None:
    workspace = tmp_path / f"ws_{kill_at}"
    log = (tmp_path / f"run_{kill_at}.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "orion", "run", str(script), "--workspace",
                             str(workspace)], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    try:
        started = time.monotonic()
        content = None
        while size(content) < kill_at:
            assert proc.poll() is None, f"{where}: orion run ended before the kill " \
                f"(exit {proc.returncode}); see {log.name}"
            assert time.monotonic() - started < DEADLINE_S, f"{where}: no progress"
            content = content or journal_file(workspace)
            time.sleep(0.002)
        flushed = size(content)  # on disk right before the kill
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    assert proc.returncode == -signal.SIGKILL, where
    target = workspace / "docs" / "long.md"
    assert not target.exists(), f"{where}: the target was written before DONE"

    listed = orion("sessions", "list", "--json", "--workspace", workspace)
    assert listed.returncode == 0, f"{where}: {listed.stderr}"
    (row,) = json.loads(listed.stdout)
    assert (row["target_file"], row["live"], row["status"]) == ("docs/long.md", False, "open"), \
        where
    assert row["bytes"] >= flushed, where

    recovered = orion("sessions", "recover", row["id"][:8], "--finalize", "--workspace",
                      workspace)
    assert recovered.returncode == 0, f"{where}: {recovered.stderr}"
    assert "recovered" in recovered.stderr, where
    data = target.read_text(encoding="utf-8")
    assert INTENDED.startswith(data), f"{where}: not a prefix of the intended content"
    assert len(data.encode()) >= flushed, \
        f"{where}: {len(data.encode())} bytes recovered, {flushed} were saved before the kill"
    assert not (workspace / ".orion" / "write_sessions" / row["id"]).exists(), where


@pytest.mark.slow
def test_killed_mid_stream_recovers_a_prefix(tmp_path):
    rng = random.Random(SEED)
    script = slow_script(tmp_path / "slow.yaml")
    total = len(INTENDED.encode())
    points = sorted(rng.randrange(total // 20, total // 2) for _ in range(KILLS))
    for n, kill_at in enumerate(points, 1):
        crash_and_recover(tmp_path, script, kill_at,
                          f"seed {SEED}, kill {n}/{KILLS} at >= {kill_at} of {total} bytes")
