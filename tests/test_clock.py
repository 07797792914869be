"""Clocks: VirtualClock moves only when told to; RealClock runs timers on the asyncio loop."""

from __future__ import annotations

import asyncio
import math

import pytest

from orion.clock import RealClock, VirtualClock

# -- VirtualClock ---------------------------------------------------------------------------


def test_virtual_clock_starts_where_told_and_advances():
    clock = VirtualClock(start_ms=1500)
    assert clock.now_ms() == 1500.0
    assert clock.advance(250) == 0
    assert clock.now_ms() == 1750.0
    assert clock.advance(0) == 0
    assert clock.now_ms() == 1750.0


def test_timers_fire_in_deadline_order_regardless_of_arming_order():
    clock = VirtualClock()
    fired: list[tuple[str, float]] = []
    for name, deadline in (("c", 30), ("a", 10), ("d", 40), ("b", 20)):
        clock.call_at(deadline, lambda n=name: fired.append((n, clock.now_ms())))
    assert clock.pending() == [10.0, 20.0, 30.0, 40.0]
    assert clock.advance(35) == 3
    assert fired == [("a", 10.0), ("b", 20.0), ("c", 30.0)]
    assert clock.now_ms() == 35.0
    assert clock.pending() == [40.0]
    assert clock.advance(5) == 1
    assert fired[-1] == ("d", 40.0)
    assert clock.pending() == []


def test_equal_deadlines_fire_in_arming_order():
    clock = VirtualClock()
    fired: list[int] = []
    for i in range(5):
        clock.call_at(100, lambda i=i: fired.append(i))
    clock.advance(100)
    assert fired == [0, 1, 2, 3, 4]


def test_nothing_fires_before_its_deadline():
    clock = VirtualClock()
    fired: list[float] = []
    clock.call_at(100, lambda: fired.append(clock.now_ms()))
    assert clock.advance(99) == 0
    assert fired == []
    assert clock.advance(1) == 1
    assert fired == [100.0]


def test_timers_armed_by_callbacks_fire_at_their_own_deadline_within_one_advance():
    clock = VirtualClock()
    fired: list[tuple[str, float]] = []

    def first():
        fired.append(("first", clock.now_ms()))
        clock.call_at(clock.now_ms() + 15, second)  # 25: before "late", within the advance
        clock.call_at(clock.now_ms() + 500, never)  # 510: after the advance's end

    def second():
        fired.append(("second", clock.now_ms()))

    def never():
        fired.append(("never", clock.now_ms()))

    clock.call_at(10, first)
    clock.call_at(40, lambda: fired.append(("late", clock.now_ms())))
    assert clock.advance(100) == 3
    assert fired == [("first", 10.0), ("second", 25.0), ("late", 40.0)]
    assert clock.now_ms() == 100.0
    assert clock.pending() == [510.0]


def test_a_callback_arming_a_zero_delay_timer_fires_it_in_the_same_advance():
    clock = VirtualClock()
    fired: list[float] = []
    clock.call_at(10, lambda: clock.call_at(clock.now_ms(), lambda: fired.append(clock.now_ms())))
    clock.advance(10)
    assert fired == [10.0]


def test_cancel_prevents_firing_and_removes_from_pending():
    clock = VirtualClock()
    fired: list[str] = []
    keep = clock.call_at(10, lambda: fired.append("keep"))
    drop = clock.call_at(20, lambda: fired.append("drop"))
    drop.cancel()
    assert clock.pending() == [10.0]
    assert clock.advance(50) == 1
    assert fired == ["keep"]
    keep.cancel()  # cancelling a timer that already fired is harmless
    drop.cancel()  # so is cancelling twice
    assert clock.advance(50) == 0


def test_a_callback_can_cancel_a_later_timer_due_in_the_same_advance():
    clock = VirtualClock()
    fired: list[str] = []
    later = clock.call_at(20, lambda: fired.append("later"))
    clock.call_at(10, lambda: (fired.append("first"), later.cancel()))
    assert clock.advance(30) == 1
    assert fired == ["first"]


def test_a_deadline_in_the_past_fires_on_the_next_advance_at_the_current_time():
    clock = VirtualClock(start_ms=1000)
    fired: list[float] = []
    clock.call_at(10, lambda: fired.append(clock.now_ms()))
    assert clock.pending() == [1000.0]
    assert clock.advance(0) == 1
    assert fired == [1000.0]


def test_negative_advance_is_an_error_and_time_does_not_move():
    clock = VirtualClock(start_ms=5)
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)
    assert clock.now_ms() == 5.0


@pytest.mark.parametrize("ms", [math.nan, math.inf])
def test_non_finite_advance_is_an_error(ms):
    clock = VirtualClock()
    clock.call_at(10, lambda: None)
    with pytest.raises(ValueError):
        clock.advance(ms)
    assert clock.now_ms() == 0.0
    assert clock.pending() == [10.0]


def test_non_finite_deadline_is_an_error():
    clock = VirtualClock()
    with pytest.raises(ValueError):
        clock.call_at(math.nan, lambda: None)
    assert clock.pending() == []


def test_a_failing_callback_propagates_after_time_and_later_timers_moved_on():
    clock = VirtualClock()
    fired: list[tuple[str, float]] = []

    def bad():
        raise RuntimeError("callback failed")

    clock.call_at(10, bad)
    clock.call_at(20, lambda: fired.append(("after", clock.now_ms())))
    clock.call_at(50, lambda: fired.append(("later", clock.now_ms())))
    with pytest.raises(RuntimeError, match="callback failed"):
        clock.advance(30)
    assert clock.now_ms() == 30.0  # the time asked for, not where the failure happened
    assert fired == [("after", 20.0)]  # due timers still fired, each at its own deadline
    assert clock.pending() == [50.0]
    assert clock.advance(20) == 1
    assert fired[-1] == ("later", 50.0)


# -- RealClock ------------------------------------------------------------------------------


def test_real_clock_now_is_wall_clock_milliseconds():
    import time

    before = time.time() * 1000.0
    now = RealClock().now_ms()
    after = time.time() * 1000.0
    assert before <= now <= after


def test_real_clock_timer_fires_via_the_running_loop():
    async def main() -> list[str]:
        clock = RealClock()
        fired = asyncio.Event()
        calls: list[str] = []

        def callback():
            calls.append("fired")
            fired.set()

        clock.call_at(clock.now_ms() + 1, callback)
        await asyncio.wait_for(fired.wait(), timeout=10)
        return calls

    assert asyncio.run(main()) == ["fired"]


def test_real_clock_past_deadline_fires_soon():
    async def main() -> None:
        clock = RealClock()
        fired = asyncio.Event()
        clock.call_at(clock.now_ms() - 60_000, fired.set)
        await asyncio.wait_for(fired.wait(), timeout=10)

    asyncio.run(main())


def test_real_clock_cancel_stops_the_timer():
    async def main() -> list[str]:
        clock = RealClock()
        calls: list[str] = []
        done = asyncio.Event()
        handle = clock.call_at(clock.now_ms() + 1, lambda: calls.append("cancelled one"))
        handle.cancel()
        # A later timer proves the loop ran past the cancelled one's deadline.
        clock.call_at(clock.now_ms() + 2, done.set)
        await asyncio.wait_for(done.wait(), timeout=10)
        return calls

    assert asyncio.run(main()) == []


def test_real_clock_outside_a_running_loop_raises_a_clear_error():
    clock = RealClock()
    with pytest.raises(RuntimeError, match="running asyncio event loop.*VirtualClock"):
        clock.call_at(clock.now_ms() + 1, lambda: None)


def test_overdue_timers_fire_in_the_order_they_fell_due():
    clock = VirtualClock(start_ms=1000)
    fired: list[str] = []
    clock.call_at(900, lambda: fired.append("900"))
    clock.call_at(100, lambda: fired.append("100"))
    clock.call_at(1000, lambda: fired.append("1000"))
    clock.call_at(500, lambda: fired.append("500"))
    assert clock.pending() == [1000.0] * 4
    clock.advance(0)
    assert fired == ["100", "500", "900", "1000"]
