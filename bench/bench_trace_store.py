"""Orion trace store benchmark: ``TraceStore.write`` against per-row sqlite-utils inserts.

Run from the repository root with the project's virtualenv::

    .venv/bin/python bench/bench_trace_store.py            # prints figures, always exits 0
    .venv/bin/python bench/bench_trace_store.py --check    # exits 1 when a target is missed

Both sides write the same ``--events`` realistic trace events (tool calls, transitions and
model requests with about five attributes each) to a fresh ``orion.db`` in a temp dir, set up
by ``TraceStore`` (same schema, indexes and pragmas: WAL, ``synchronous=NORMAL``):

- **store**: ``TraceStore.write(batch)`` in batches of ``--batch`` events (what a turn or a
  100 ms flush produces): one transaction per batch, multi-row INSERTs of 100 rows and
  ``executemany`` for the rest. For information, the same with ``executemany`` alone
  (``rows_per_statement=1``).
- **per-row**: ``db["trace_records"].insert(row)`` for each event, the obvious sqlite-utils
  code (each insert its own transaction).

- **recorder**: the runtime's path, ``Recorder.emit`` (encoding) then ``store_traces`` through the
  default plugins (SQLite store, OpenTelemetry exporter when installed).

Targets: the store and the runtime's path each write at least 50,000 events/s, and the store at
least 10x the per-row rate.

Timing: ``time.perf_counter`` around all the writes of one side. Both start from the same
data built before timing (``TraceEvent`` objects for the store, their ``as_dict()`` rows for
sqlite-utils), so both time the JSON encoding of the attributes and the inserts. The garbage
collector is off while timing. The sides run ``--reps`` times each,
alternating, each on a fresh database; the best run of each side counts.
"""

from __future__ import annotations

import argparse
import gc
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlite_utils

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orion.trace.events import Kind, TraceEvent  # noqa: E402
from orion.hooks.manager import make_plugin_manager  # noqa: E402
from orion.trace.recorder import Recorder  # noqa: E402
from orion.trace.store import ROWS_PER_STATEMENT, TraceStore  # noqa: E402

MIN_EVENTS_PER_S = 50_000.0
MIN_RATIO = 10.0

BASE_MS = 1_700_000_000_000.0
TOOLS = ("read_file", "write_file", "run_tests", "search", "apply_patch")
STATES = ("idle", "thinking", "calling_tools", "validating", "done")


def make_events(n: int) -> list[TraceEvent]:
    """``n`` events shaped like the runtime's: mostly tool calls and transitions, some model
    requests, in conversations of 200 events, about five attributes each."""
    events = []
    for i in range(n):
        at = BASE_MS + i * 3.7
        conversation = f"conv-{i // 200:05d}"
        session = f"sess-{i // 1000:04d}"
        if i % 5 == 4:
            events.append(TraceEvent(
                Kind.MODEL_REQUEST, "chat gpt-4o-mini", at, conversation, "",
                {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                 "orion.request.number": i % 40, "gen_ai.response.finish_reasons": ["stop"],
                 "gen_ai.usage.input_tokens": 1200 + i % 800,
                 "gen_ai.usage.output_tokens": 90 + i % 300}, 640.0 + i % 400))
        elif i % 2:
            tool = TOOLS[i % len(TOOLS)]
            events.append(TraceEvent(
                Kind.TOOL_CALL, f"execute_tool {tool}", at, conversation, "",
                {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
                 "gen_ai.tool.call.id": f"call_{i:08x}", "orion.tool.outcome": "ok",
                 "orion.tool.arguments": {"path": f"src/module_{i % 97}.py",
                                          "lines": [1, 40 + i % 60]}}, 12.5 + i % 50))
        else:
            source, dest = STATES[i % 5], STATES[(i + 1) % 5]
            events.append(TraceEvent(
                Kind.TRANSITION, f"write_session step_{i % 7}", at, conversation, session,
                {"orion.lifecycle": "write_session", "orion.event": f"step_{i % 7}",
                 "orion.source": f"session_active.{source}",
                 "orion.dest": f"session_active.{dest}", "orion.payload": {"attempt": i % 3}},
                0.08))
    return events


def per_row_dicts(events: list[TraceEvent]) -> list[dict[str, Any]]:
    """The rows for ``table.insert(row)``: ``TraceEvent.as_dict()`` with a plain ``str`` kind;
    sqlite-utils encodes the attributes dict as JSON itself, as the store does."""
    rows = [e.as_dict() for e in events]
    for row in rows:
        row["kind"] = str(row["kind"])
    return rows


def run_store(tmp: Path, events: list[TraceEvent], batch: int,
              rows_per_statement: int = ROWS_PER_STATEMENT) -> float:
    batches = [events[i:i + batch] for i in range(0, len(events), batch)]
    store = TraceStore(tmp / "orion.db", rows_per_statement=rows_per_statement)
    try:
        write = store.write
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            for chunk in batches:
                if not write(chunk):
                    raise RuntimeError(f"a batch was dropped: {store.stats()}")
            elapsed = time.perf_counter() - start
        finally:
            gc.enable()
        assert store.stats()["total"] == len(events)
        return elapsed
    finally:
        store.close()


def run_recorder(tmp: Path, events: list[TraceEvent]) -> float:
    """The runtime's path: ``Recorder.emit`` for each event (encoding, content summaries) and
    its batches through the ``store_traces`` hook of the default plugins (the SQLite store and,
    when installed, the OpenTelemetry exporter with no provider configured, as a user runs)."""
    plugins = make_plugin_manager(entrypoints=False, env={})
    recorder = Recorder(plugins, tmp)
    emit = recorder.emit
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        for event in events:
            emit(event)
        recorder.flush(wait=True)  # stored, on the writer thread, before the clock stops
        elapsed = time.perf_counter() - start
    finally:
        gc.enable()
    db = sqlite3.connect(tmp / "orion.db")
    try:
        stored = db.execute("select count(*) from trace_events").fetchone()[0]
    finally:
        db.close()
    assert stored == len(events), f"{stored} of {len(events)} events stored"
    return elapsed


def run_per_row(tmp: Path, rows: list[dict[str, Any]]) -> float:
    TraceStore(tmp / "orion.db").close()  # same schema and journal mode
    db = sqlite_utils.Database(tmp / "orion.db")
    try:
        db.execute("PRAGMA synchronous = NORMAL")  # the store's setting (per connection)
        table = db.table("trace_records")  # the table behind the trace_events view
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            for row in rows:
                table.insert(row)
            elapsed = time.perf_counter() - start
        finally:
            gc.enable()
        assert table.count == len(rows)
        return elapsed
    finally:
        db.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a target is missed (default: always exit 0)")
    parser.add_argument("--events", type=int, default=100_000,
                        help="events written by each side per run (100000)")
    parser.add_argument("--batch", type=int, default=100,
                        help="events per TraceStore.write (100)")
    parser.add_argument("--reps", type=int, default=3,
                        help="runs per side, alternating; the best counts (3)")
    args = parser.parse_args(argv)

    events = make_events(args.events)
    rows = per_row_dicts(events)
    print(f"Orion trace store benchmark: python {sys.version.split()[0]}, "
          f"SQLite {sqlite3.sqlite_version}, sqlite-utils {_version('sqlite-utils')}; "
          f"{args.events:,} events, batches of {args.batch}, best of {args.reps} runs per side")
    runs: dict[str, Callable[[Path], float]] = {
        "store": lambda d: run_store(d, events, args.batch),
        "many": lambda d: run_store(d, events, args.batch, rows_per_statement=1),
        "row": lambda d: run_per_row(d, rows),
        "recorder": lambda d: run_recorder(d, events),
    }
    best = dict.fromkeys(runs, float("inf"))
    with tempfile.TemporaryDirectory(prefix="orion-bench-") as tmp:
        for rep in range(args.reps):
            sides = list(runs)
            if rep % 2:
                sides.reverse()
            for side in sides:
                run_dir = Path(tmp) / f"{side}-{rep}"
                run_dir.mkdir()
                best[side] = min(best[side], runs[side](run_dir))
    store_rate = args.events / best["store"]
    many_rate = args.events / best["many"]
    row_rate = args.events / best["row"]
    ratio = store_rate / row_rate
    recorder_rate = args.events / best["recorder"]
    ok_recorder = recorder_rate >= MIN_EVENTS_PER_S
    ok_rate = store_rate >= MIN_EVENTS_PER_S
    ok_ratio = ratio >= MIN_RATIO
    print(f"[1] TraceStore.write, batches of {args.batch}  {store_rate:>10,.0f} events/s   "
          f"target >= {MIN_EVENTS_PER_S:,.0f}/s   {'OK' if ok_rate else 'MISS'}")
    print(f"[2] per-row table.insert(row)      {row_rate:>10,.0f} events/s   "
          f"store/per-row {ratio:.1f}x (target >= {MIN_RATIO:.0f}x)   "
          f"{'OK' if ok_ratio else 'MISS'}")
    print(f"[3] (info) TraceStore.write with executemany only (rows_per_statement=1)  "
          f"{many_rate:>10,.0f} events/s   {many_rate / row_rate:.1f}x per-row")
    print(f"[4] the runtime's path: Recorder.emit -> encode -> store_traces (default plugins)  "
          f"{recorder_rate:>10,.0f} events/s   target >= {MIN_EVENTS_PER_S:,.0f}/s   "
          f"{'OK' if ok_recorder else 'MISS'}   ({recorder_rate / store_rate:.2f}x the store alone)")
    return 1 if args.check and not (ok_rate and ok_ratio and ok_recorder) else 0


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
