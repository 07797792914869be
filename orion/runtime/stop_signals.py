"""The signals that end ``orion run`` and ``orion chat`` from outside: SIGTERM (``kill``, a
cancelled CI job), SIGHUP (the terminal closed) and, in ``orion run``, SIGINT (Ctrl-C).

Their default action ends the process where it stands, and what the model streamed since the
journal's last flush would go with it. :func:`until_stopped` turns them into a cancellation of
the command's work instead: the work's own cleanup runs (the runtime closes: open write
sessions flush their journals, content the journal could not save goes to a rescue file, and
the user is told how to go on), and :class:`Stopped` says which signal it was. The command then
exits with the conventional status, 128 + the signal's number (143 for SIGTERM, 129 for SIGHUP,
130 for SIGINT).

``orion chat`` keeps Ctrl-C for itself (it stops a reply, or ends the chat at the prompt), so
it passes :data:`CHAT_SIGNALS`; ``orion run`` passes :data:`RUN_SIGNALS`.

Once a signal has arrived, the handlers stay until the event loop closes, and further signals
are only noted: the cleanup the first one started is not cut short by a second. The same holds
for a signal that comes after the work ended, while the command closes (its report, its open
journals flushed, its traces written): :class:`StopSignals` keeps its handlers until the
command has closed, and :meth:`StopSignals.settle` says which signal came meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Iterable
from typing import TypeVar

from orion.hooks.deadline import clear_stop, request_stop

__all__ = ["CHAT_SIGNALS", "RUN_SIGNALS", "StopSignals", "Stopped", "release_lost_outputs",
           "until_stopped"]

T = TypeVar("T")

#: What ends ``orion chat`` from outside (Ctrl-C is the chat's own key).
CHAT_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP)
#: What ends ``orion run``: Ctrl-C too.
RUN_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


class Stopped(Exception):
    """The command was stopped by a signal; its cleanup has run."""

    def __init__(self, signum: int):
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"stopped by {self.name}")

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a process a signal ended."""
        return 128 + self.signum


class StopSignals:
    """The handlers of ``signals`` for a command, from its start until it has closed: during
    :meth:`run` a signal cancels the work, after it the signal is only noted, and the command
    asks :meth:`settle` once it has closed. A signal in between never ends the process where
    it stands. Where the event loop cannot take signal handlers (not the main thread, another
    platform), nothing is installed and the work runs as it is."""

    def __init__(self, signals: Iterable[int] = CHAT_SIGNALS) -> None:
        self.signals = tuple(signals)
        self.received: int | None = None
        self._task: asyncio.Task | None = None
        self._installed: list[int] = []

    def __enter__(self) -> StopSignals:
        loop = asyncio.get_running_loop()
        clear_stop()
        for signum in self.signals:
            try:
                loop.add_signal_handler(signum, self._arrived, signum)
            except (NotImplementedError, RuntimeError, ValueError):
                continue
            # The loop takes the signal in at its next turn; a plugin's validator that hangs
            # keeps it from turning, so the wait for the validator hears it at once
            # (asyncio's own handler at this level does nothing: its wake-up is in C).
            signal.signal(signum, _stop_requested)
            signal.siginterrupt(signum, False)  # as asyncio's: system calls restart
            self._installed.append(signum)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.received is None:  # after a signal they stay: a second one is only noted
            loop = asyncio.get_running_loop()
            for signum in self._installed:
                loop.remove_signal_handler(signum)
            clear_stop()

    def _arrived(self, signum: int) -> None:
        if self.received is None:
            self.received = signum
            if self._task is not None:
                self._task.cancel()

    async def run(self, work: Awaitable[T]) -> T:
        """Await ``work`` in the current task; a signal cancels it, and once the work's cleanup
        (its ``finally`` blocks) has run, :class:`Stopped` is raised in its place."""
        self._task = asyncio.current_task() if self._installed else None
        try:
            return await work
        except asyncio.CancelledError:
            if self._task is None or self.received is None:
                raise
            self._task.uncancel()
            raise Stopped(self.received) from None
        finally:
            self._task = None

    async def settle(self) -> Stopped | None:
        """The signal that came after :meth:`run` ended, while the command closed, if one did.
        The event loop takes a signal in at its next turns (its self-pipe is read, then the
        handler is called), so these turns come first."""
        if self._installed and self.received is None:
            for _ in range(3):
                await asyncio.sleep(0)
        return Stopped(self.received) if self.received is not None else None


def _stop_requested(signum: int, frame: object) -> None:
    request_stop(signum)


async def until_stopped(work: Awaitable[T], signals: Iterable[int] = CHAT_SIGNALS) -> T:
    """Await ``work`` in the current task; one of ``signals`` cancels it, and once the work's
    cleanup (its ``finally`` blocks) has run, :class:`Stopped` is raised in its place. The
    handlers are removed when the work ends without a signal (a command whose closing
    matters keeps them with :class:`StopSignals`)."""
    with StopSignals(signals) as handlers:
        return await handlers.run(work)


def release_lost_outputs() -> None:
    """After SIGHUP the terminal may be gone, and writing to it fails (EIO). Standard output
    and error that cannot be flushed any more are pointed at ``/dev/null``: what is left to
    say goes nowhere, and the exit status stays the signal's (Python exits with 120 when it
    cannot flush them at exit)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except (OSError, ValueError):
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                try:
                    os.dup2(null, stream.fileno())
                finally:
                    os.close(null)
                stream.flush()
            except (OSError, ValueError):
                pass
