"""Clocks. Every timer in Orion goes through one, so tests advance time instead of sleeping.

``now_ms()`` is wall-clock milliseconds since the epoch: snapshots store timer deadlines in it,
so a deadline still means the same moment after a restart.

``since_boot()`` is the second clock: a :class:`BootTime`, the time since the machine booted
(Linux: ``CLOCK_BOOTTIME``, which counts suspended time too, with the kernel's boot id). A
wall-clock step (an NTP correction, a virtual machine resumed with a stale clock, someone
setting the date) does not move it, so what must never be decided on the wall clock alone (how
old a session left behind is) measures with both. A clock of a platform without it gives None.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import re
import time
from collections.abc import Callable
from typing import NamedTuple, Protocol


#: The longest duration Orion counts (100 years of 365.25 days, in ms): a longer one on the
#: command line is refused in one line, never carried to a date no clock can show (FS-24).
MAX_DURATION_MS = 36_525 * 86_400_000.0
MAX_DURATION = "36525d (100 years)"
#: The moments Orion counts: from the epoch to the end of year 9998 (local time stays within
#: what a date can show whatever the offset).
LAST_MOMENT_MS = 253_370_764_800_000.0  # 9998-12-31T00:00:00Z


def countable(ms: float, text: str) -> float:
    """``ms`` (a duration the user typed as ``text``) when Orion can count it; ValueError,
    naming the value and the largest accepted, otherwise."""
    if not math.isfinite(ms) or ms > MAX_DURATION_MS:
        shown = text if len(text) <= 40 else text[:20] + "..." + text[-8:]
        raise ValueError(f"{shown!r} is longer than Orion counts: at most {MAX_DURATION}")
    return ms


#: The units of a duration as people type it (``1h30m``, ``500ms``), in milliseconds.
_UNITS_MS = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0,
             "w": 604_800_000.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w))+")


def typed_duration_ms(compact: str, text: str) -> float | None:
    """``compact`` (what the user typed as ``text``, lower case and without spaces: ``1h30m``,
    ``500ms``, ``2d``) as milliseconds; None when it is no duration, ValueError when it is one
    too long to count (see :func:`countable`)."""
    if not compact or not _DURATION.fullmatch(compact):
        return None
    return countable(sum(float(n) * _UNITS_MS[unit] for n, unit in _PART.findall(compact)), text)


def countable_moment(ms: float, text: str) -> float:
    """``ms`` (a moment the user typed as ``text``) when it lies between the epoch and the end
    of year 9998; ValueError otherwise."""
    if not math.isfinite(ms) or not 0.0 <= ms <= LAST_MOMENT_MS:
        raise ValueError(f"{text!r} is outside the dates Orion counts (1970-01-01 to "
                         "9998-12-31)")
    return ms


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class BootTime(NamedTuple):
    """A reading of the clock that wall-clock steps do not move: ``ms`` since the boot named
    ``boot`` (two readings compare only within one boot)."""

    boot: str
    ms: float

    def elapsed_since(self, earlier: BootTime | None) -> float | None:
        """Milliseconds from ``earlier`` to this reading, or None when they cannot be compared
        (another boot, or no reading)."""
        if earlier is None or earlier.boot != self.boot:
            return None
        return self.ms - earlier.ms

    @classmethod
    def from_json(cls, value: object) -> BootTime | None:
        """A reading as a journal saved it (``[boot, ms]``), or None."""
        if isinstance(value, list | tuple) and len(value) == 2 and isinstance(value[0], str) \
                and isinstance(value[1], int | float) and not isinstance(value[1], bool):
            return cls(value[0], float(value[1]))
        return None


_BOOT_ID: list[str | None] = []  # read once per process


def kernel_boot_time() -> BootTime | None:
    """The kernel's ``CLOCK_BOOTTIME`` with its boot id (Linux), or None where there is none."""
    if not _BOOT_ID:
        try:
            with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
                _BOOT_ID.append(f.read().strip() or None)
        except OSError:
            _BOOT_ID.append(None)
    boot = _BOOT_ID[0]
    clock = getattr(time, "CLOCK_BOOTTIME", None)
    if boot is None or clock is None:
        return None
    return BootTime(boot, time.clock_gettime(clock) * 1000.0)


class Clock(Protocol):
    def now_ms(self) -> float: ...

    def call_at(self, deadline_ms: float, callback: Callable[[], object]) -> TimerHandle: ...


def since_boot(clock: object) -> BootTime | None:
    """``clock``'s second clock, for a clock that has one (:meth:`RealClock.since_boot`)."""
    reading = getattr(clock, "since_boot", None)
    return reading() if callable(reading) else None


class RealClock:
    """Timers on the running asyncio event loop; no threads, so callbacks never race the
    lifecycle they drive."""

    def now_ms(self) -> float:
        return time.time() * 1000.0

    def since_boot(self) -> BootTime | None:
        return kernel_boot_time()

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

    def __init__(self, start_ms: float = 0.0, *, boot: BootTime | None = None):
        """``boot``: where its second clock starts (default: a boot of its own at 0); an
        ``orion run`` starts it at the kernel's, so its sessions compare with other
        processes'."""
        self._now = float(start_ms)
        self._boot = boot if boot is not None else BootTime("virtual", 0.0)
        self._start = self._now
        self._stepped = 0.0  # wall-clock steps (step), which the second clock does not count
        self._heap: list[_VirtualTimer] = []
        self._seq = itertools.count()

    def now_ms(self) -> float:
        return self._now

    def since_boot(self) -> BootTime:
        return BootTime(self._boot.boot,
                        self._boot.ms + (self._now - self._start - self._stepped))

    def step(self, ms: float) -> None:
        """A wall-clock step of ``ms`` (negative: back): ``now_ms`` jumps, the second clock
        does not, and no timer fires (they fire at the next :meth:`advance` that reaches them)."""
        if not math.isfinite(ms):
            raise ValueError(f"cannot step the clock by {ms!r} ms")
        self._now += ms
        self._stepped += ms

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
