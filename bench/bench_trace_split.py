"""Where a traced step's CPU goes: the split behind ``bench_lifecycle.py`` line 4.

Run from the repository root with the project's virtualenv::

    .venv/bin/python bench/bench_trace_split.py

The same write session as line 4 (default plugins, five no-op observers), cycling
``message_end`` / ``content``; per step, the best of ``--reps`` batches of ``--steps`` steps:

- **untraced step**: the stepping thread's CPU with the tracing plugin unregistered;
- **traced step**: the stepping thread's CPU with it (``time.thread_time``), the flushes
  (handing a batch to ``store_traces``) included;
- **writer**: the CPU of the other threads until the batch is stored (``time.process_time``
  minus the stepping thread's): the trace writer thread's JSON, SQLite and bookkeeping;
- **bare**: the bare ``transitions`` machine of line 4, for scale.

Informational: it prints figures and has no target (line 4 has).
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

from bench_lifecycle import open_write_session_and_its_bare_twin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20_000, help="steps per batch (20000)")
    parser.add_argument("--reps", type=int, default=5, help="batches; the best counts (5)")
    args = parser.parse_args(argv)
    from orion.trace.writer import settle_all

    with tempfile.TemporaryDirectory(prefix="orion-bench-") as tmp:
        runtime, session, pm, model = open_write_session_and_its_bare_twin(Path(tmp))
        trigger, tracer = session.lifecycle.trigger, runtime.tracer
        cycles = args.steps // 2

        def batch() -> tuple[float, float]:
            gc.collect()
            gc.disable()
            try:
                process, thread = time.process_time(), time.thread_time()
                for _ in range(cycles):
                    trigger("message_end")
                    trigger("content")
                tracer.flush()
                stepping = time.thread_time() - thread
                settle_all()
                return stepping, time.process_time() - process - stepping
            finally:
                gc.enable()

        def bare() -> float:
            gc.disable()
            try:
                start = time.process_time()
                for _ in range(cycles):
                    model.message_end()
                    model.content()
                return time.process_time() - start
            finally:
                gc.enable()

        batch()  # warm-up
        traced = [batch() for _ in range(args.reps)]
        bare_s = min(bare() for _ in range(args.reps))
        pm.unregister(pm.get_plugin("orion_plugins.tracing"))
        untraced = min(batch()[0] for _ in range(args.reps))
        runtime.close()
    us = 1e6 / (2 * cycles)
    step_us, writer_us = min(s for s, _ in traced) * us, min(w for _, w in traced) * us
    print(f"traced step CPU split, write session, 5 observers ({2 * cycles:,} steps a batch, "
          f"best of {args.reps})")
    print(f"  untraced step          {untraced * us:6.1f} us")
    print(f"  traced step (stepping) {step_us:6.1f} us   tracing adds "
          f"{step_us - untraced * us:4.1f} us on the stepping thread")
    print(f"  writer thread          {writer_us:6.1f} us")
    print(f"  traced step, all       {step_us + writer_us:6.1f} us   "
          f"(bare transitions {bare_s * us:.1f} us: {(step_us + writer_us) / (bare_s * us):.2f}x;"
          f" untraced {untraced / bare_s:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
