"""Clocks. Every timer in Orion goes through one, so tests advance time instead of sleeping.

``now_ms()`` is wall-clock milliseconds since the epoch: snapshots store timer deadlines in it,
so a deadline still means the same moment after a restart.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> float: ...

    def call_at(self, deadline_ms: float, callback: Callable[[], object]) -> TimerHandle: ...


class RealClock:
    """Timers on the running asyncio event loop; no threads, so callbacks never race the
    lifecycle they drive."""

    def now_ms(self) -> float:
        return time.time() * 1000.0

    def call_at(self, deadline_ms: float, callback: Callable[[], object]) -> TimerHandle:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError("RealClock timers need a running asyncio event loop; "
                               "use VirtualClock outside of one") from None
        delay = max(0.0, deadline_ms - self.now_ms()) / 1000.0
        return loop.call_later(delay, callback)


class _VirtualTimer:
    """``deadline`` is when it fires (never before it was armed); ``requested`` is the deadline
    asked for, which orders timers that were armed already overdue."""

    __slots__ = ("deadline", "requested", "seq", "callback", "cancelled")

    def __init__(self, deadline: float, requested: float, seq: int,
                 callback: Callable[[], object]):
        self.deadline, self.requested, self.seq = deadline, requested, seq
        self.callback, self.cancelled = callback, False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: _VirtualTimer) -> bool:
        return ((self.deadline, self.requested, self.seq)
                < (other.deadline, other.requested, other.seq))


class VirtualClock:
    """Time that moves only when told to. Timers fire in deadline order, each at its own
    deadline, including timers armed by callbacks during the same :meth:`advance`."""

    def __init__(self, start_ms: float = 0.0):
        self._now = float(start_ms)
        self._heap: list[_VirtualTimer] = []
        self._seq = itertools.count()

    def now_ms(self) -> float:
        return self._now

    def call_at(self, deadline_ms: float, callback: Callable[[], object]) -> TimerHandle:
        if math.isnan(deadline_ms):
            raise ValueError("a timer deadline cannot be NaN")
        requested = float(deadline_ms)
        timer = _VirtualTimer(max(requested, self._now), requested, next(self._seq), callback)
        heapq.heappush(self._heap, timer)
        return timer

    def pending(self) -> list[float]:
        """Deadlines of the timers that have not fired or been cancelled."""
        return sorted(t.deadline for t in self._heap if not t.cancelled)

    def advance(self, ms: float) -> int:
        """Move time forward by ``ms`` and fire what falls due; return how many fired.

        A callback that raises does not stop the others: every timer due by the target still
        fires at its own deadline, time ends at the target, and then the first error is raised
        (later ones are added to it as notes)."""
        if ms < 0:
            raise ValueError("time cannot go backwards")
        if not math.isfinite(ms):
            raise ValueError(f"cannot advance by {ms!r} ms: the amount must be finite")
        target = self._now + ms
        fired = 0
        errors: list[Exception] = []
        while self._heap and self._heap[0].deadline <= target:
            timer = heapq.heappop(self._heap)
            if timer.cancelled:
                continue
            self._now = timer.deadline
            fired += 1
            try:
                timer.callback()
            except Exception as exc:
                errors.append(exc)
        self._now = target
        if errors:
            for later in errors[1:]:
                errors[0].add_note(f"then, from a later timer: {later!r}")
            raise errors[0]
        return fired
