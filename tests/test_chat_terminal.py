"""`orion chat` in a real terminal (tmux): Ctrl-C during a reply stops the reply, not the chat,
and names the write session it saved; Ctrl-C at the prompt ends the chat at once."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from sse_server import (Pause, SSEServer, begin_write, finish_chunk, stream, text_chunk,
                        text_stream)

ORION = str(Path(sys.executable).parent / "orion")

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (apt-get install tmux)")


#: Runs the command and writes its exit status to a file. tmux 3.3 sometimes leaves a finished
#: pane's process unreaped (a zombie, no ``pane_dead_status``), so the status comes from here.
#: It ignores Ctrl-C itself after starting the command: the key is for the command.
STATUS_WRAPPER = ("import signal, subprocess, sys; child = subprocess.Popen(sys.argv[2:]); "
                  "signal.signal(signal.SIGINT, signal.SIG_IGN); status = child.wait(); "
                  "open(sys.argv[1], 'w').write(str(status))")


class Terminal:
    """One tmux server of its own (a private socket), one window running ``command``; its
    exit status goes to ``status_file``."""

    def __init__(self, command: str, name: str, status_file: Path):
        self.socket = f"orion-test-{os.getpid()}-{name}"
        self.status_file = status_file
        wrapped = (f"{shlex.quote(sys.executable)} -c {shlex.quote(STATUS_WRAPPER)} "
                   f"{shlex.quote(str(status_file))} {command}")
        self.tmux("new-session", "-d", "-x", "160", "-y", "48", "-s", "chat", wrapped)
        self.tmux("set-option", "-t", "chat", "remain-on-exit", "on")

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, timeout=30, check=True).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "chat")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "chat", *keys)

    def wait_for(self, text: str, deadline_s: float = 30.0) -> str:
        # Polls the screen until ``text`` shows; the deadline only bounds a broken run.
        end = time.monotonic() + deadline_s
        while True:
            screen = self.screen()
            if text in screen:
                return screen
            if time.monotonic() > end:
                raise AssertionError(f"{text!r} never appeared; the screen:\n{screen}")
            time.sleep(0.1)

    def wait_for_prompt(self, after: str, deadline_s: float = 30.0) -> str:
        """Polls the screen until ``after`` shows and the prompt is drawn again below it, as the
        last row: the chat's output and its redrawn prompt are two writes, not one."""
        end = time.monotonic() + deadline_s
        while True:
            screen = self.screen()
            if after in screen and screen.rstrip().endswith("you>"):
                return screen
            if time.monotonic() > end:
                raise AssertionError(f"{after!r} and then the prompt never appeared; the "
                                     f"screen:\n{screen}")
            time.sleep(0.1)

    def exit_status(self, deadline_s: float = 30.0) -> str:
        """The command's exit status once it has ended; the deadline only bounds a broken
        run."""
        end = time.monotonic() + deadline_s
        while not self.status_file.exists() or not self.status_file.read_text():
            if time.monotonic() > end:
                raise AssertionError(f"the command did not end; the screen:\n{self.screen()}")
            time.sleep(0.1)
        return self.status_file.read_text()

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=30)


def chat_in_terminal(server: SSEServer, workspace: Path, name: str) -> Terminal:
    """``orion chat`` against ``server`` in a terminal of its own, with a clean environment."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in
                   {**clean, "OPENAI_API_KEY": "test-key", "TERM": "xterm"}.items()
                   if k.isidentifier())
    return Terminal(f"env -i {env} {shlex.quote(ORION)} chat --base-url {server.base_url} "
                    f"--model test-model --workspace {shlex.quote(str(workspace))}", name,
                    workspace.parent / f"{name}.status")


def test_ctrl_c_stops_the_reply_names_the_saved_session_and_ctrl_c_again_exits(tmp_path):
    # The model streams three lines, then keeps writing (slowly) until interrupted.
    slow = stream([text_chunk("first line\nsecond line\nthird line\n"), Pause(20),
                   text_chunk("never shown\n"), finish_chunk("stop")])
    with SSEServer([begin_write("notes.md"), slow, stream(text_stream("unused"))]) as server:
        terminal = chat_in_terminal(server, tmp_path, "ctrl-c")
        try:
            terminal.wait_for("you>")
            terminal.keys("Write the notes.", "Enter")
            terminal.wait_for("third line")
            terminal.keys("C-c")
            screen = terminal.wait_for("reply stopped; write session")
            assert "saved (3 lines)" in screen, screen
            assert "Traceback" not in screen and "Aborted" not in screen
            assert not terminal.status_file.exists(), screen  # the chat goes on
            terminal.wait_for("from another shell\nyou>")  # the prompt after the notice
            terminal.keys("C-c")  # at the prompt: the chat ends at once, without Enter
            status = terminal.exit_status()
            screen = terminal.screen()
            assert status == "0", screen
            assert "Traceback" not in screen and "Aborted" not in screen
        finally:
            terminal.close()
    sessions = list((tmp_path / ".orion" / "write_sessions").iterdir())
    (session,) = [s for s in sessions if s.is_dir()]
    assert (session / "content.txt").read_text() == "first line\nsecond line\nthird line\n"
    assert f"write session {session.name[:8]} saved (3 lines)" in screen, screen


def test_the_live_progress_line_never_lands_inside_the_streamed_text(tmp_path):
    # Lines arrive in pieces, with pauses long enough for the live line to be drawn between
    # (and in the middle of) them: each line must still show whole, on a line of its own.
    pieces: list[Any] = []
    lines = [f"line {n:02d} of the notes, written in two pieces" for n in range(1, 13)]
    for line in lines:
        head, tail = line[:12], line[12:]
        pieces += [text_chunk(head), Pause(0.15), text_chunk(tail + "\n"), Pause(0.1)]
    content = stream([*pieces, text_chunk("DONE\n"), finish_chunk("stop")])
    with SSEServer([begin_write("notes.md"), content, stream(text_stream("Written."))]) as server:
        terminal = chat_in_terminal(server, tmp_path, "progress")
        try:
            terminal.wait_for("you>")
            terminal.keys("Write the notes.", "Enter")
            screen = terminal.wait_for("Written.")
        finally:
            terminal.close()
    assert (tmp_path / "notes.md").read_text() == "".join(f"{line}\n" for line in lines)
    shown = screen.splitlines()
    for line in lines:
        assert line in shown, screen  # whole, and alone on its screen line
    assert any(row.startswith("writing notes.md: ") for row in shown), screen
    assert not any("writing notes.md" in row and not row.startswith("writing") for row in shown)
    assert not any(row.startswith("writing notes.md") and "line " in row for row in shown)


def test_the_prompt_comes_back_after_the_idle_prompt_and_its_answer(tmp_path):
    # The message ends without DONE: the chat hands the prompt back; 2 s later Orion's idle
    # prompt asks the model, which answers DONE in the background. The prompt must come back
    # below that output, ready for the next line.
    content = stream([text_chunk("# Notes\n\nAll of them.\n"), finish_chunk("stop")])
    answer = stream([text_chunk("DONE\n"), finish_chunk("stop")])
    with SSEServer([begin_write("notes.md"), content, answer,
                    stream(text_stream("Anything else?")),
                    stream(text_stream("Glad to help."))]) as server:
        terminal = chat_in_terminal(server, tmp_path, "idle")
        try:
            terminal.wait_for("you>")
            terminal.keys("Write the notes.", "Enter")
            terminal.wait_for_prompt("Anything else?")
            terminal.keys("Thanks.", "Enter")
            screen = terminal.wait_for_prompt("Glad to help.")
        finally:
            terminal.close()
    assert (tmp_path / "notes.md").read_text() == "# Notes\n\nAll of them.\n"
    # The idle prompt's output starts below the prompt it interrupted: no "you> orion ..." row.
    prompts = [row.rstrip() for row in screen.splitlines() if row.startswith("you>")]
    assert prompts == ["you> Write the notes.", "you>", "you> Thanks.", "you>"], screen
    rows = screen.splitlines()
    assert rows[rows.index("you> ") + 1].startswith("orion  If you're finished"), screen
