"""A command in a pseudo-terminal of its own, for tests that signal it or close its terminal.

The terminal is the command's controlling terminal, so closing the other end
(:meth:`InTerminal.hang_up`) makes the kernel send the command SIGHUP, as closing a terminal
window does, and its writes to the terminal fail from then on. The command sees a terminal on
standard input, output and error: ``orion run`` draws its live line there (``writing
notes.md: 73 lines, ...``), which tells the test how many lines Orion has taken in.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import subprocess
import termios
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = ["InTerminal", "live_lines"]

_LIVE = re.compile(rb"writing [^:\r\n]+: (\d+) lines")


def live_lines(output: bytes) -> list[int]:
    """Every line count the live line of a write showed, in order."""
    return [int(n) for n in _LIVE.findall(output)]


class InTerminal:
    """``argv`` in a new session whose controlling terminal is a new pseudo-terminal. Every
    wait is bounded (``deadline_s``): the bound fails a broken run, it measures nothing."""

    def __init__(self, argv: list[str], cwd: Path, env: Mapping[str, str]):
        self.master, slave = os.openpty()
        self.output = b""
        try:
            self.proc = subprocess.Popen(
                argv, cwd=cwd, env=dict(env), stdin=slave, stdout=slave, stderr=slave,
                start_new_session=True,
                preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        finally:
            os.close(slave)

    def read(self, wait_s: float = 0.1) -> None:
        """What the command wrote since the last read (waits at most ``wait_s`` for it)."""
        if self.master < 0:
            return
        # poll, not select: select() refuses a descriptor numbered past 1024, which a long
        # test session reaches.
        poller = select.poll()
        poller.register(self.master, select.POLLIN)
        if poller.poll(wait_s * 1000):
            try:
                self.output += os.read(self.master, 65536)
            except OSError:  # the command's side is closed: everything is read
                pass

    def type(self, text: str) -> None:
        os.write(self.master, text.encode("utf-8"))

    def wait_for(self, text: str, deadline_s: float = 60.0) -> None:
        end = time.monotonic() + deadline_s
        wanted = text.encode("utf-8")
        while wanted not in self.output:
            if time.monotonic() > end or self.proc.poll() is not None:
                self.read(0.2)  # what it wrote last
                if wanted in self.output:
                    return
                raise AssertionError(f"{text!r} never showed:\n{self.text()}")
            self.read()

    def wait_for_lines(self, at_least: int, deadline_s: float = 60.0) -> int:
        """Reads until the live line shows at least ``at_least`` lines; the most it showed."""
        end = time.monotonic() + deadline_s
        while True:
            self.read()
            counts = live_lines(self.output)
            if counts and max(counts) >= at_least:
                return max(counts)
            if time.monotonic() > end or self.proc.poll() is not None:
                raise AssertionError(f"the live line never showed {at_least} lines:\n"
                                     f"{self.text()}")

    def wait(self, deadline_s: float = 60.0) -> int:
        """The command's exit status, once it ended (killed when it outlives the bound)."""
        end = time.monotonic() + deadline_s
        while self.proc.poll() is None:
            self.read()
            if time.monotonic() > end:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"the command did not end:\n{self.text()}")
        for _ in range(10):  # what it wrote last
            self.read(0.05)
        return self.proc.returncode

    def hang_up(self) -> None:
        """Close the terminal: the kernel sends the command SIGHUP."""
        if self.master >= 0:
            os.close(self.master)
            self.master = -1

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.hang_up()
