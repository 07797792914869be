"""The process's own limits in the middle of a write: too many open files (RLIMIT_NOFILE 10)
and no more memory (an address-space limit 90 MiB above what the process had), set on a real
``orion run`` with ``prlimit`` while it streams; and raw bytes that are not UTF-8 in the SSE
body of a real loopback server, read by a real ``orion chat``. None of them is a traceback, and
nothing that arrived is lost: the journal keeps it, or the session says where it is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from sse_server import SSEServer, begin_write, chunk, finish_chunk, stream, text_chunk, \
    text_stream

ORION = str(Path(sys.executable).parent / "orion")

needs_prlimit = pytest.mark.skipif(shutil.which("prlimit") is None,
                                   reason="prlimit (util-linux) is not installed")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ORION_", "OPENAI_"))}


def _script(path: Path, reply: dict) -> Path:
    path.write_text(yaml.safe_dump({"conversation": [
        {"user": "Write the file."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "a file", "target_file": "out.md", "operation": "create"}}]}},
        {"model": reply},
        {"model": {"text": "Done."}},
    ]}), encoding="utf-8")
    return path


def _journal(ws: Path) -> Path | None:
    sessions = ws / ".orion" / "write_sessions"
    found = [p for p in sessions.glob("*") if p.is_dir()] if sessions.exists() else []
    return found[0] if found else None


def _wait_for_content(proc: subprocess.Popen, ws: Path, at_least: int) -> Path:
    end = time.monotonic() + 120  # bounds a broken run; it measures nothing
    while True:
        journal = _journal(ws)
        content = journal / "content.txt" if journal else None
        if content is not None and content.exists() and content.stat().st_size >= at_least:
            return journal
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "the write never got there"
        time.sleep(0.02)


@needs_prlimit
def test_too_many_open_files_mid_stream_loses_nothing_and_says_where_it_is(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    lines = [f"line {n}\n" for n in range(1, 601)]
    script = _script(tmp_path / "slow.yaml", {"chunks": lines + ["DONE\n"],
                                              "chunk_delay_ms": 10})
    proc = subprocess.Popen([ORION, "run", str(script), "--workspace", str(ws)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_content(proc, ws, len("".join(lines[:100])))
        subprocess.run(["prlimit", "--pid", str(proc.pid), "--nofile=10:10"], check=True)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in out + err, err
    assert proc.returncode == 1, err
    journal = _journal(ws)
    assert journal is not None
    assert (journal / "content.txt").read_text() == "".join(lines)  # every line, on disk
    short = journal.name[:8]
    assert f"The content is saved in write session {short}" in err, err
    done = subprocess.run([ORION, "sessions", "recover", short, "--finalize", "--workspace",
                           str(ws)], env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (ws / "out.md").read_text() == "".join(lines)


@needs_prlimit
def test_no_memory_for_the_journal_mid_stream_is_a_failed_write_with_the_content_on_disk(
        tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    text = tmp_path / "big.txt"
    line = b"y" * 99 + b"\n"
    with open(text, "wb") as f:
        for _ in range(64):
            f.write(line * 40_000)  # 256 MB in all: more than the limit leaves room for
        f.write(b"DONE\n")
    script = _script(tmp_path / "big.yaml", {"text_file": str(text), "chunk_size": 65536,
                                             "chunk_delay_ms": 1})
    proc = subprocess.Popen([ORION, "run", str(script), "--workspace", str(ws)], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_content(proc, ws, 1 << 20)
        size_kib = int(next(row.split()[1] for row in
                            Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                            if row.startswith("VmSize:")))
        limit = (size_kib + 90 * 1024) * 1024
        subprocess.run(["prlimit", "--pid", str(proc.pid), f"--as={limit}"], check=True)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "Traceback" not in out + err, err
    assert "MemoryError" not in err
    assert proc.returncode == 1, err
    journal = _journal(ws)
    assert journal is not None
    saved = (journal / "content.txt").stat().st_size
    assert saved > 50 * 1024 * 1024 and saved % 65536 == 0, saved  # whole chunks
    with open(text, "rb") as f, open(journal / "content.txt", "rb") as g:
        while piece := g.read(1 << 20):
            assert f.read(len(piece)) == piece  # a prefix of what the model streamed
    short = journal.name[:8]
    assert "out of memory after" in err, err
    assert f"The content is saved in write session {short}" in err, err
    listed = json.loads(subprocess.run([ORION, "sessions", "list", "--json", "--workspace",
                                        str(ws)], env=_env(), capture_output=True,
                                       text=True).stdout)
    assert listed[0]["bytes"] == saved and not listed[0]["live"]


def _chat(server: SSEServer, ws: Path, lines: str) -> subprocess.CompletedProcess:
    return subprocess.run([ORION, "chat", "--base-url", server.base_url, "--model", "m",
                           "--workspace", str(ws)], input=lines, capture_output=True,
                          text=True, timeout=120, env={**_env(), "OPENAI_API_KEY": "k"})


def test_bytes_that_are_not_utf8_in_the_stream_are_a_cut_off_that_is_continued(tmp_path):
    bad = b'data: {"choices": [{"index": 0, "delta": {"content": "th\xff\xfeird"}}]}\n\n'
    with SSEServer([begin_write("notes.md"),
                    stream([text_chunk("first line\nsecond line\n"), bad], done=False),
                    stream([text_chunk("third line\nDONE\n"), finish_chunk("stop")]),
                    stream(text_stream("Written."))]) as server:
        done = _chat(server, tmp_path, "Write the notes.\n")
        asked = [r.body["messages"][-1]["content"] for r in server.requests[2:3]]
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    assert "sent bytes that are not UTF-8 (after 1 chunk): byte 0xff at position 56 of an " \
        "event line of 66 bytes" in done.stderr, done.stderr
    assert "what arrived is kept (2 lines), taken as cut off" in done.stderr
    assert (tmp_path / "notes.md").read_text() == "first line\nsecond line\nthird line\n"
    assert "continue" in asked[0].lower(), asked
    assert not _journal(tmp_path)  # written and cleaned up: nothing orphaned


def test_bytes_that_are_not_utf8_before_any_content_are_one_error_line(tmp_path):
    bad = b'data: {"choices": [{"index": 0, "delta": {"content": "\xc3("}}]}\n\n'
    with SSEServer([stream([chunk({"role": "assistant", "content": ""}), bad], done=False),
                    stream(text_stream("Hello again."))]) as server:
        done = _chat(server, tmp_path, "Hello.\nAnd now?\n")
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    assert "not UTF-8" in done.stderr and "the conversation is kept" in done.stderr
    assert "Hello again." in done.stdout
