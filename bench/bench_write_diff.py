"""The diff of a write (``orion sessions diff``, the chat's ``+12 -3 lines``) against splitting
both sides into lines, on files whose repeated lines made it quadratic (FS-22).

Run from the repository root with the project's virtualenv::

    .venv/bin/python bench/bench_write_diff.py            # prints figures, always exits 0
    .venv/bin/python bench/bench_write_diff.py --check    # exits 1 when a target is missed

Line 1: ``--lines`` lines (default 80,000), every other one blank, one in six of the others
changed. Line 2: as many lines drawn from 150 values (no line occurs once, nothing anchors: the
budget cuts). Each side is timed with ``time.perf_counter``, best of ``--reps`` (default 5),
alternating: **orion** is :func:`orion.write_session.diff.changes`; **bare** is
``splitlines`` of both sides and a ``set`` of each, the least any line diff reads. Target: at
most 50x bare on each line (before FS-22, line 1 took thousands of times bare: minutes).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable

from orion.write_session.diff import changes


def _blank_lines(n: int) -> tuple[bytes, bytes]:
    before = b"".join(b"\n" if i % 2 else b"line %d\n" % i for i in range(n))
    after = b"".join(b"\n" if i % 2 else (b"line %d\n" % i if i % 6 else b"changed %d\n" % i)
                     for i in range(n))
    return before, after


def _alike_lines(n: int) -> tuple[bytes, bytes]:
    draw = random.Random(1)
    return (b"".join(b"v %d\n" % draw.randrange(150) for _ in range(n)),
            b"".join(b"v %d\n" % draw.randrange(150) for _ in range(n)))


def _bare(before: bytes, after: bytes) -> None:
    set(before.splitlines(keepends=True))
    set(after.splitlines(keepends=True))


def _best(run: Callable[[], object], reps: int) -> list[float]:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=80_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    missed = False
    for number, (name, make) in enumerate((("blank lines", _blank_lines),
                                           ("alike lines", _alike_lines)), 1):
        before, after = make(args.lines)
        orion, bare = [], []
        for _ in range(args.reps):  # alternate the sides
            orion += _best(lambda: changes(before, after), 1)
            bare += _best(lambda: _bare(before, after), 1)
        ratio = min(orion) / min(bare)
        ok = ratio <= 50
        missed = missed or not ok
        print(f"[{number}] {args.lines:,} {name}  orion {min(orion) * 1000:8.1f} ms   bare "
              f"{min(bare) * 1000:6.1f} ms   cost ratio {ratio:5.1f}x (target <= 50x)   "
              f"{'OK' if ok else 'MISSED'}   {changes(before, after).summary()}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
