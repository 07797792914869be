"""The journal's flush interval as a timer: a stream that stalls is saved on time.

The journal checks its flush interval when text arrives (:meth:`Journal.append`); a stream that
stalls after ten lines would keep them in memory only, however long it stalls. The session
therefore arms this timer whenever content is pending: it fires when the interval is up and
saves what is pending, whether or not more text arrives.

It runs on the runtime's clock, so tests advance time instead of sleeping. A virtual clock
(``orion run``) does not move while a model streams, so the timer also runs on the event
loop's real time there, as the journal's own check counts real time too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from orion.clock import Clock, RealClock, TimerHandle

__all__ = ["FlushTimer"]


class FlushTimer:
    """At most one pending deadline; ``due`` is called when it is reached (by either clock)."""

    __slots__ = ("_clock", "_due", "_handles")

    def __init__(self, clock: Clock, due: Callable[[], object]) -> None:
        self._clock = clock
        self._due = due
        self._handles: list[TimerHandle | asyncio.TimerHandle] = []

    @property
    def armed(self) -> bool:
        return bool(self._handles)

    def arm(self, wait_ms: float) -> None:
        """Call ``due`` in ``wait_ms`` (unless armed already: the journal re-arms it when it
        fires early, after an automatic flush moved the deadline)."""
        if self._handles:
            return
        loop = asyncio._get_running_loop()
        clock = self._clock
        if isinstance(clock, RealClock):
            if loop is not None:  # outside a loop nothing could fire: append's check saves
                self._handles.append(loop.call_later(wait_ms / 1000.0, self._fire))
            return
        self._handles.append(clock.call_at(clock.now_ms() + wait_ms, self._fire))
        if loop is not None:
            self._handles.append(loop.call_later(wait_ms / 1000.0, self._fire))

    def cancel(self) -> None:
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.cancel()

    def _fire(self) -> None:
        self.cancel()
        self._due()
