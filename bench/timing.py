"""Timing helpers shared by the benchmarks: best of interleaved batches, GC off inside them."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

Clock = Callable[[], float]


def timed(fn: Callable[[int], object], n: int, clock: Clock = time.perf_counter) -> float:
    gc.collect()
    gc.disable()
    try:
        start = clock()
        fn(n)
        return clock() - start
    finally:
        gc.enable()


def calibrate(fn: Callable[[int], None], target_s: float,
              clock: Clock = time.perf_counter) -> int:
    """Batch size (in units of ``fn``'s argument) that takes about ``target_s``."""
    n = 1
    while True:
        elapsed = timed(fn, n, clock)
        if elapsed >= target_s / 10 or n >= 10_000_000:
            return max(1, int(n * target_s / max(elapsed, 1e-9)))
        n *= 4


def compare(bare: Callable[[int], None], orion_fn: Callable[[int], None], *, reps: int,
            batch_s: float, clock: Clock = time.perf_counter) -> tuple[int, float, float]:
    """``(n, best bare seconds, best orion seconds)`` for batches of ``n``, interleaved;
    ``clock`` is what is counted (``time.process_time``: the CPU of every thread)."""
    n = calibrate(bare, batch_s, clock)
    # The batch is sized on the baseline; cap it so a slow Orion cannot blow the time budget.
    n = min(n, max(1, calibrate(orion_fn, batch_s * 2, clock)))
    timed(bare, n, clock)  # warm-up
    timed(orion_fn, n, clock)
    best_bare = best_orion = float("inf")
    for rep in range(reps):
        pair = [(bare, "bare"), (orion_fn, "orion")]
        if rep % 2:
            pair.reverse()
        for fn, side in pair:
            elapsed = timed(fn, n, clock)
            if side == "bare":
                best_bare = min(best_bare, elapsed)
            else:
                best_orion = min(best_orion, elapsed)
    return n, best_bare, best_orion
