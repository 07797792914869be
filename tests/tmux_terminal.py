"""A real terminal for tests: ``orion chat`` in tmux, driven with send-keys and read with
capture-pane, as a person at a terminal would use it.

Every wait is for something on the screen (or the command's exit), polled; a deadline only
bounds a broken run, it never decides a result.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sse_server import SSEServer

ORION = str(Path(sys.executable).parent / "orion")

needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (apt-get install tmux)")

#: Runs the command, then prints what a shell would (``shell$``, where the next prompt goes) and
#: writes the command's exit status to a file. tmux 3.3 sometimes leaves a finished pane's
#: process unreaped (a zombie, no ``pane_dead_status``), so the status comes from here. It
#: ignores Ctrl-C itself after starting the command: the key is for the command.
STATUS_WRAPPER = ("import signal, subprocess, sys; child = subprocess.Popen(sys.argv[2:]); "
                  "signal.signal(signal.SIGINT, signal.SIG_IGN); status = child.wait(); "
                  "sys.stdout.write('shell$ '); sys.stdout.flush(); "
                  "open(sys.argv[1], 'w').write(str(status))")

PROMPT = "you>"
WIDTH, HEIGHT = 100, 40


class Terminal:
    """One tmux server of its own (a private socket), one window running ``command``; its
    exit status goes to ``status_file``."""

    def __init__(self, command: str, name: str, status_file: Path, *, width: int = WIDTH,
                 height: int = HEIGHT):
        self.socket = f"orion-test-{os.getpid()}-{name}"
        self.status_file = status_file
        self.width = width
        wrapped = (f"{shlex.quote(sys.executable)} -c {shlex.quote(STATUS_WRAPPER)} "
                   f"{shlex.quote(str(status_file))} {command}")
        self.tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-s", "chat",
                  wrapped)
        self.tmux("set-option", "-t", "chat", "remain-on-exit", "on")

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True,
                              text=True, timeout=30, check=True).stdout

    def screen(self) -> str:
        """The screen and what scrolled off it, line by line: a line the terminal wrapped
        (written past its last column) is one line here, as it was written."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-1000", "-t", "chat")

    def rows(self) -> list[str]:
        """The rows of :meth:`screen`, without the trailing blank ones and the line tmux adds
        when the command has ended."""
        rows = [row.rstrip() for row in self.screen().rstrip("\n").split("\n")]
        while rows and (not rows[-1] or rows[-1].startswith("Pane is dead")):
            rows.pop()
        return rows

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "chat", *keys)

    def type(self, text: str) -> None:
        """Type ``text`` as it is (no key names)."""
        self.tmux("send-keys", "-t", "chat", "-l", text)

    def send(self, text: str) -> None:
        """Type ``text`` and press Enter."""
        self.type(text)
        self.keys("Enter")

    def paste(self, text: str) -> None:
        """Paste ``text`` as a terminal does, marked as a paste when the program asked for it
        (bracketed paste)."""
        self.tmux("set-buffer", "-b", "orion-test", text)
        self.tmux("paste-buffer", "-p", "-d", "-b", "orion-test", "-t", "chat")

    def wait_until(self, what: str, ready: Callable[[list[str]], bool],
                   deadline_s: float = 30.0) -> list[str]:
        """Polls the screen's rows until ``ready(rows)``; the deadline only bounds a broken
        run."""
        end = time.monotonic() + deadline_s
        while True:
            rows = self.rows()
            if ready(rows):
                return rows
            if time.monotonic() > end:
                shown = "\n".join(rows)
                raise AssertionError(f"{what} never happened; the screen:\n{shown}")
            time.sleep(0.05)

    def wait_for(self, text: str, deadline_s: float = 30.0) -> list[str]:
        return self.wait_until(f"{text!r} on the screen",
                               lambda rows: text in "\n".join(rows), deadline_s)

    def wait_for_prompt(self, after: str = "", typed: str = "",
                        deadline_s: float = 30.0) -> list[str]:
        """Polls until ``after`` shows and the last row is the prompt (with ``typed`` on it):
        the chat waits for the user, nothing drawn above the prompt any more."""
        want = f"{PROMPT} {typed}".rstrip()

        def ready(rows: list[str]) -> bool:
            text = "\n".join(rows)
            return after in text and rows[-1] == want
        return self.wait_until(f"{after!r} and then the prompt {want!r}", ready, deadline_s)

    def exit_status(self, deadline_s: float = 30.0) -> str:
        """The command's exit status once it has ended; the deadline only bounds a broken
        run."""
        end = time.monotonic() + deadline_s
        while not self.status_file.exists() or not self.status_file.read_text():
            if time.monotonic() > end:
                shown = self.screen()
                raise AssertionError(f"the command did not end; the screen:\n{shown}")
            time.sleep(0.05)
        return self.status_file.read_text()

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=30)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def chat_in_terminal(server: SSEServer, workspace: Path, name: str, *,
                     env: dict[str, str] | None = None, **size: int) -> Terminal:
    """``orion chat`` against ``server`` in a terminal of its own, with a clean environment
    (plus ``env``)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    variables = {**clean, "OPENAI_API_KEY": "test-key", "TERM": "xterm", **(env or {})}
    env_line = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items()
                        if k.isidentifier())
    return Terminal(f"env -i {env_line} {shlex.quote(ORION)} chat --base-url {server.base_url} "
                    f"--model test-model --workspace {shlex.quote(str(workspace))}", name,
                    workspace.parent / f"{name}.status", **size)


def started(terminal: Terminal) -> list[str]:
    """The chat is up: its prompt is the last row."""
    return terminal.wait_for_prompt("orion chat with test-model")


def count(rows: list[str], pattern: str) -> int:
    """How many rows match ``pattern`` (a regular expression, from the row's start)."""
    return sum(1 for row in rows if re.match(pattern, row))


def flowed(rows: list[str]) -> str:
    """The rows as one text, a space where a row ends: a message that spans rows reads as it
    was said."""
    return " ".join(" ".join(rows).split())
