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
are only noted: the cleanup the first one started is not cut short by a second.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Awaitable, Iterable
from typing import TypeVar

__all__ = ["CHAT_SIGNALS", "RUN_SIGNALS", "Stopped", "release_lost_outputs", "until_stopped"]

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


class _Handlers:
    def __init__(self, task: asyncio.Task) -> None:
        self.task = task
        self.received: int | None = None

    def __call__(self, signum: int) -> None:
        if self.received is None:
            self.received = signum
            self.task.cancel()


async def until_stopped(work: Awaitable[T], signals: Iterable[int] = CHAT_SIGNALS) -> T:
    """Await ``work`` in the current task; one of ``signals`` cancels it, and once the work's
    cleanup (its ``finally`` blocks) has run, :class:`Stopped` is raised in its place. Where
    the event loop cannot take signal handlers (not the main thread, another platform), the
    work runs as it is."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    handlers = _Handlers(task) if task is not None else None
    installed = []
    if handlers is not None:
        for signum in signals:
            try:
                loop.add_signal_handler(signum, handlers, signum)
            except (NotImplementedError, RuntimeError, ValueError):
                continue
            installed.append(signum)
    try:
        return await work
    except asyncio.CancelledError:
        if handlers is None or handlers.received is None:
            raise
        if task is not None:
            task.uncancel()
        raise Stopped(handlers.received) from None
    finally:
        if handlers is not None and handlers.received is None:
            for signum in installed:
                loop.remove_signal_handler(signum)


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
