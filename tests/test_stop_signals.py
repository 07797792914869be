"""Signals from outside end `orion run` and `orion chat` the way Ctrl-C ends a chat: every line
that arrived is in the journal, the open write session is named with how to go on, and the
exit status is 128 + the signal's number.

Real signals to real processes, mid-stream: `orion run` plays a script whose reply streams a
line at a time with real pauses, in a pseudo-terminal (its live line says how many lines
arrived); `orion chat` talks to a loopback SSE server that stops in the middle of a reply.
A closed terminal is a pseudo-terminal whose other end the test closes: the kernel sends the
SIGHUP itself.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from sse_server import (Pause, SSEServer, begin_write, finish_chunk, stream, text_chunk,
                        text_stream)
from test_chat_terminal import chat_in_terminal

from pty_terminal import InTerminal

ORION = str(Path(sys.executable).parent / "orion")
LINES = 2000
#: Past the journal's first automatic flush (50 lines) and short of the second (100): the
#: lines after 50 are in memory only when the signal comes, unless the signal is handled.
SHOWN_AT_LEAST = 62


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    return {**env, "TERM": "xterm", "COLUMNS": "160", "OPENAI_API_KEY": "test-key"}


def _slow_script(path: Path) -> Path:
    """A write of LINES lines, one chunk each, 40 ms apart (about 80 s: it never ends first)."""
    script = {"conversation": [
        {"user": "Write the notes."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "notes", "target_file": "notes.md", "operation": "create"}}]}},
        {"model": {"chunks": [f"line {n}\n" for n in range(1, LINES + 1)] + ["DONE\n"],
                   "chunk_delay_ms": 40}},
        {"model": {"text": "Done."}},
    ]}
    path.write_text(yaml.safe_dump(script), encoding="utf-8")
    return path


def _journal(workspace: Path) -> tuple[str, str]:
    """The one write session's id and content."""
    (session,) = [p for p in (workspace / ".orion" / "write_sessions").iterdir() if p.is_dir()]
    return session.name, (session / "content.txt").read_text(encoding="utf-8")


def _whole_lines(content: str) -> int:
    expected = "".join(f"line {n}\n" for n in range(1, content.count("\n") + 1))
    assert content == expected, content[-200:]
    return content.count("\n")


def _stop_run(tmp_path: Path, stop) -> tuple[Path, InTerminal, int, int]:
    """``orion run`` of the slow write in a terminal, stopped by ``stop(terminal)`` once its
    live line shows SHOWN_AT_LEAST lines: the workspace, the terminal, the most lines shown
    before, and the exit status."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = _slow_script(tmp_path / "slow.yaml")
    terminal = InTerminal([ORION, "run", str(script), "--workspace", str(workspace)], tmp_path,
                          _env())
    try:
        shown = terminal.wait_for_lines(SHOWN_AT_LEAST)
        stop(terminal)
        status = terminal.wait()
    finally:
        terminal.close()
    return workspace, terminal, shown, status


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_to_orion_run_keeps_every_line_that_arrived(tmp_path, signum):
    workspace, terminal, shown, status = _stop_run(
        tmp_path, lambda terminal: terminal.proc.send_signal(signum))
    output = terminal.text()
    assert status == 128 + signum, output
    session, content = _journal(workspace)
    saved = _whole_lines(content)
    assert saved >= shown, (saved, shown, output)  # every line the live line counted
    assert f"write session {session[:8]} for notes.md is still open ({saved} lines saved)" \
        in output, output
    assert f"orion sessions recover {session[:8]} --continue" in output, output
    assert f"stopped by {signal.Signals(signum).name}" in output, output
    assert "Traceback" not in output, output
    assert not (workspace / "notes.md").exists()
    assert not (workspace / ".orion" / "write_sessions" / session / "lock").exists()


def test_orion_run_whose_terminal_closes_keeps_every_line_that_arrived(tmp_path):
    # Closing the terminal: the kernel sends SIGHUP, and writing to the terminal now fails.
    workspace, _, shown, status = _stop_run(tmp_path, InTerminal.hang_up)
    assert status == 128 + signal.SIGHUP
    session, content = _journal(workspace)
    assert _whole_lines(content) >= shown
    # Recoverable as any orphan: the lock is released, the state names the lines.
    listed = subprocess.run([ORION, "sessions", "list", "--json", "--workspace",
                             str(workspace)], capture_output=True, text=True, env=_env())
    assert f'"lines": {content.count(chr(10))}' in listed.stdout, listed.stdout
    assert '"live": false' in listed.stdout, listed.stdout


def _slow_reply() -> list:
    """Three lines of the file, then the model goes on writing, slowly: the signal comes
    before the rest."""
    return [begin_write("notes.md"),
            stream([text_chunk("first line\nsecond line\nthird line\n"), Pause(20),
                    text_chunk("never shown\n"), finish_chunk("stop")]),
            stream(text_stream("unused"))]


def _chat_pid(terminal) -> int:
    """The pid of `orion chat` in the tmux pane (the child of the pane's status wrapper)."""
    pane = int(terminal.tmux("display-message", "-p", "-t", "chat", "#{pane_pid}").strip())
    children = Path(f"/proc/{pane}/task/{pane}/children").read_text().split()
    (pid,) = [int(c) for c in children]
    return pid


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_orion_chat_saves_the_open_session_and_names_it(tmp_path, signum):
    with SSEServer(_slow_reply()) as server:
        terminal = chat_in_terminal(server, tmp_path, f"signal-{signum}")
        try:
            terminal.wait_for("you>")
            terminal.keys("Write the notes.", "Enter")
            terminal.wait_for("third line")
            os.kill(_chat_pid(terminal), signum)
            status = terminal.exit_status()
            screen = terminal.screen()
        finally:
            terminal.close()
    assert status == str(128 + signum), screen
    session, content = _journal(tmp_path)
    assert content == "first line\nsecond line\nthird line\n"
    assert f"write session {session[:8]} for notes.md is still open (3 lines saved)" in screen
    assert f"orion sessions recover {session[:8]} --continue" in screen, screen
    assert f"orion chat stopped by {signal.Signals(signum).name}" in screen, screen
    assert "Traceback" not in screen, screen


def test_orion_chat_whose_terminal_closes_keeps_what_arrived(tmp_path):
    with SSEServer(_slow_reply()) as server:
        env_args = ["--base-url", server.base_url, "--model", "test-model",
                    "--workspace", str(tmp_path)]
        terminal = InTerminal([ORION, "chat", *env_args], tmp_path, _env())
        try:
            terminal.wait_for("you>")
            terminal.type("Write the notes.\r")
            terminal.wait_for("third line")
            terminal.hang_up()
            status = terminal.wait()
        finally:
            terminal.close()
    assert status == 128 + signal.SIGHUP
    _, content = _journal(tmp_path)
    assert content == "first line\nsecond line\nthird line\n"


#: A team's plugin whose report takes its time: it marks when it starts, so the test can send
#: the signal while `orion run` closes, after the script has ended.
SLOW_REPORT = '''
import os
import time
from pathlib import Path

from orion.api import RunReport, hookimpl


@hookimpl
def report_run(host):
    Path(os.environ["SLOW_REPORT_STARTED"]).write_text("closing")
    time.sleep(float(os.environ.get("SLOW_REPORT_S", "0")))
    return RunReport()
'''


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_while_orion_run_closes_lets_the_close_finish(tmp_path, signum):
    """The script ends with its write still open (the model ran out of length twice): closing
    the run flushes and releases the journal and says how to go on. A signal then used to end
    the process where it stood: killed by the signal, the journal never released, the recover
    line never said, the traces of the run never written."""
    site = tmp_path / "site"
    (site / "slow_report-1.0.dist-info").mkdir(parents=True)
    (site / "slow_report-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: slow-report\nVersion: 1.0\n")
    (site / "slow_report-1.0.dist-info" / "entry_points.txt").write_text(
        "[orion]\nslow_report = slow_report\n")
    (site / "slow_report.py").write_text(SLOW_REPORT)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    lines = "".join(f"line {n}\n" for n in range(1, 121))  # 100 flushed, 20 not yet
    script = tmp_path / "open.yaml"
    script.write_text(yaml.safe_dump({"conversation": [
        {"user": "Write the notes."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "notes", "target_file": "notes.md", "operation": "create"}}]}},
        {"model": {"text": lines, "finish_reason": "length"}},
        {"model": {"text": "line 121\n", "finish_reason": "length"}}]}), encoding="utf-8")
    started = tmp_path / "started"
    env = {**_env(), "PYTHONPATH": str(site), "SLOW_REPORT_STARTED": str(started),
           "SLOW_REPORT_S": "3"}
    proc = subprocess.Popen([ORION, "run", str(script), "--workspace", str(workspace)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(600):  # bounded: a run that never gets there fails below
            if started.exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        assert started.exists(), proc.communicate()[0]
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signum, output
    session, content = _journal(workspace)
    assert content == lines + "line 121\n", content[-100:]
    assert f"write session {session[:8]} for notes.md is still open (121 lines saved)" \
        in output, output
    assert f"stopped by {signal.Signals(signum).name} while the run closed" in output, output
    assert "Traceback" not in output, output
    assert not (workspace / ".orion" / "write_sessions" / session / "lock").exists()
