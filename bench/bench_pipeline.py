"""Per-turn overhead of Orion's turn pipeline, against a bare loop, in one process.

Run from the repository root with the project's virtualenv::

    .venv/bin/python bench/bench_pipeline.py

One user turn = one model request and its reply, with no model latency: the model answers at
once with a short text. Both sides do the same essential work (append the user message, build
the request's message list with a system prompt, read the reply's events, append the reply):

- **bare**: a plain async loop doing exactly that and nothing else;
- **orion**: ``Runtime.handle`` with the built-in plugins: slash-command check, compaction
  check, the ``context`` system (context hooks, tool gating, tool definitions), the ``model``
  system (events, reporter, text sinks) and the ``tools`` system.

Both conversations are cleared every 50 turns, so their length (and cost) stays comparable. It
prints microseconds per turn for both, Orion's overhead per turn, and the ratio (line 1, no
target). Line 2 compares a turn late in one long conversation with an early one (target: O(1)
amortized per turn), line 3 how much each side's turn grew meanwhile, and line 4 the same
conversation through the OpenAI adapter and real HTTP, where every request sends the whole
history (bench/README.md says what each line times).
"""

from __future__ import annotations

import argparse
import gc
import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import closing
from math import inf
from pathlib import Path

from timing import compare

from orion.clock import VirtualClock
from orion.models.base import ModelRequest
from orion.models.events import Finish, ModelEvent, TextDelta
from orion.hooks.manager import make_plugin_manager
from orion.runtime.runtime import Runtime

REPLY = ("The answer is short.",)
RESET_EVERY = 50
#: Turn 2,000 of one conversation may cost at most this much more than turn 10.
MAX_LONG_RATIO = 1.5
#: Turns timed from each point of line 2: more than one periodic checkpoint of the trace log.
WINDOW = 400


class InstantModel:
    """Answers every request at once: the cost of a model is not what is measured."""

    name = "instant"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for text in REPLY:
            yield TextDelta(text)
        yield Finish("stop", "stop")


def bare_turns(n: int) -> None:
    model = InstantModel()

    async def main() -> None:
        messages: list[dict] = []
        for i in range(n):
            if i % RESET_EVERY == 0:
                messages.clear()
            messages.append({"role": "user", "content": "hello"})
            request = ModelRequest([{"role": "system", "content": "You are helpful."},
                                    *messages], [], i + 1)
            text = []
            async for event in model.stream(request):
                if type(event) is TextDelta:
                    text.append(event.text)
            messages.append({"role": "assistant", "content": "".join(text)})

    asyncio.run(main())


def orion_turns(workspace: Path):
    plugins = make_plugin_manager(entrypoints=False, env={})

    def run(n: int) -> None:
        runtime = Runtime(model=InstantModel(), plugins=plugins, workspace=workspace,
                          clock=VirtualClock(), env={})

        async def main() -> None:
            for i in range(n):
                if i % RESET_EVERY == 0:
                    runtime.conversation.reset()
                await runtime.handle("hello")

        asyncio.run(main())
    return run


def _checkpoint(state_dir: Path) -> None:
    """Move the trace database's write-ahead log into the database and empty it, as SQLite does
    by itself every 1,000 pages (about every 180 turns here): a window that starts after this
    meets the same periodic checkpoints, at the same offsets, as any other window."""
    with closing(sqlite3.connect(state_dir / "orion.db")) as db:
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        raise RuntimeError("the trace database was busy: the checkpoint did not happen")


def orion_cost_by_length(workspace: Path, turns: int, window: int) -> tuple[float, float]:
    """Microseconds per turn over ``window`` turns from turn 10 and from turn ``turns`` of one
    conversation that is never reset, with no budget (no compaction: the conversation grows to
    twice ``turns + window`` messages)."""
    (workspace / "orion.yaml").write_text("runtime:\n  max_messages: 0\n  max_tokens: 0\n")
    plugins = make_plugin_manager(entrypoints=False, env={})
    runtime = Runtime(model=InstantModel(), plugins=plugins, workspace=workspace,
                      clock=VirtualClock(), env={})
    spans: dict[int, float] = {}

    async def main() -> None:
        for i in range(turns + window):
            if i in (10, turns):
                runtime.tracer.flush(wait=True)  # the trace writer is done: nothing is busy
                _checkpoint(runtime.state_dir)
                gc.collect()
                gc.disable()
                spans[i] = time.perf_counter()
            await runtime.handle("hello")
            if i in (10 + window - 1, turns + window - 1):
                runtime.tracer.flush(wait=True)  # the window's traces stored inside it
                start = 10 if i < turns else turns
                spans[start] = time.perf_counter() - spans[start]
                gc.enable()

    asyncio.run(main())
    runtime.close()
    return spans[10] / window * 1e6, spans[turns] / window * 1e6


def bare_cost_by_length(turns: int, window: int) -> tuple[float, float]:
    """The bare loop's microseconds per turn over the same windows of one conversation."""
    model = InstantModel()
    system = {"role": "system", "content": "You are helpful."}
    spans: dict[int, float] = {}

    async def main() -> None:
        messages: list[dict] = []
        for i in range(turns + window):
            if i in (10, turns):
                gc.collect()
                gc.disable()
                spans[i] = time.perf_counter()
            messages.append({"role": "user", "content": "hello"})
            request = ModelRequest([system, *messages], [], i + 1)
            text = []
            async for event in model.stream(request):
                if type(event) is TextDelta:
                    text.append(event.text)
            messages.append({"role": "assistant", "content": "".join(text)})
            if i in (10 + window - 1, turns + window - 1):
                start = 10 if i < turns else turns
                spans[start] = time.perf_counter() - spans[start]
                gc.enable()

    asyncio.run(main())
    return spans[10] / window * 1e6, spans[turns] / window * 1e6


def adapter_cost_by_length(workspace: Path, turns: int, requests: int,
                           shared: bool = True) -> tuple[float, ...]:
    """Through the OpenAI adapter and real HTTP to the loopback endpoint of the tests, with
    one SDK client for the conversation (``shared``, as ``orion chat`` keeps one) or a new one
    per request: this thread's CPU milliseconds per request at turn 10 and at turn ``turns``,
    and the JSON encoding of the turn-``turns`` body alone.
    The conversation is filled directly up to each point (the turns before are not what is
    timed); the endpoint runs on other threads, so its CPU is not counted."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from sse_server import SSEServer, stream, text_stream

    from orion.models.openai_compat import OpenAICompatibleModel

    (workspace / "orion.yaml").write_text("runtime:\n  max_messages: 0\n  max_tokens: 0\n")
    spans: list[float] = []
    with SSEServer() as server:
        model = OpenAICompatibleModel(model="bench", base_url=server.base_url, api_key="bench",
                                      max_retries=0)
        runtime = Runtime(model=model, plugins=make_plugin_manager(entrypoints=False, env={}),
                          workspace=workspace, clock=VirtualClock(), env={})

        async def main() -> None:
            if shared:
                async with model.session():
                    await requests_at_both_lengths()
            else:
                await requests_at_both_lengths()

        async def requests_at_both_lengths() -> None:
            for at in (10, turns):
                while len(runtime.conversation.messages) < 2 * at:
                    runtime.conversation.add_user("hello")
                    runtime.conversation.add_assistant(REPLY[0])
                server.enqueue(*[stream(text_stream(*REPLY)) for _ in range(requests + 1)])
                await runtime.handle("hello")  # warm-up: the running forms catch up here
                gc.collect()
                start = time.thread_time()
                for _ in range(requests):
                    await runtime.handle("hello")
                spans.append((time.thread_time() - start) / requests * 1e3)

        asyncio.run(main())
        system = runtime.system_message([])
        body = {"model": "bench", "messages": runtime.conversation.to_openai(system),
                "stream": True}
        runtime.close()
    start = time.thread_time()
    for _ in range(requests):
        json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    return spans[0], spans[1], (time.thread_time() - start) / requests * 1e3


def turn_cost_by_length(turns: int, window: int, reps: int) -> dict[str, tuple[float, float]]:
    """Best of ``reps`` fresh conversations, for each side and window."""
    best = {"orion": (inf, inf), "bare": (inf, inf)}
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as tmp:
            runs = {"orion": orion_cost_by_length(Path(tmp), turns, window),
                    "bare": bare_cost_by_length(turns, window)}
        for side, (early, late) in runs.items():
            best[side] = (min(best[side][0], early), min(best[side][1], late))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--batch-seconds", type=float, default=0.4)
    parser.add_argument("--long-turns", type=int, default=2000,
                        help="the turn whose cost line 2 compares with turn 10 (2000)")
    parser.add_argument("--window", type=int, default=WINDOW,
                        help=f"turns timed from turn 10 and from --long-turns ({WINDOW})")
    parser.add_argument("--long-reps", type=int, default=3,
                        help="fresh long conversations for line 2; the best counts (3)")
    parser.add_argument("--adapter-requests", type=int, default=10,
                        help="requests timed at each point of line 4 (10)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        n, bare_s, orion_s = compare(bare_turns, orion_turns(Path(tmp)), reps=args.reps,
                                     batch_s=args.batch_seconds)
    bare_us, orion_us = bare_s / n * 1e6, orion_s / n * 1e6
    print(f"Orion pipeline benchmark: best of {args.reps} interleaved batches of {n} turns")
    print(f"[1] per turn (no model latency)  orion {orion_us:8.1f} us   bare loop {bare_us:6.1f} us"
          f"   overhead {orion_us - bare_us:8.1f} us/turn   ratio {orion_s / bare_s:5.1f}x")
    best = turn_cost_by_length(args.long_turns, args.window, args.long_reps)
    early, late = best["orion"]
    bare_early, bare_late = best["bare"]
    ratio = late / early
    print(f"[2] turn {args.long_turns:,} of one conversation {late:8.1f} us   turn 10 {early:8.1f} us   "
          f"ratio {ratio:4.2f}x (target <= {MAX_LONG_RATIO}x: O(1) amortized per turn)   "
          f"{'OK' if ratio <= MAX_LONG_RATIO else 'MISS'}")
    print(f"[3] (info) growth from turn 10 to turn {args.long_turns:,}  orion {late - early:+7.1f} us"
          f"   bare loop {bare_late - bare_early:+7.1f} us (turn 10 {bare_early:.1f} us, "
          f"turn {args.long_turns:,} {bare_late:.1f} us)")
    with tempfile.TemporaryDirectory() as tmp:
        early, late, encode = adapter_cost_by_length(Path(tmp), args.long_turns,
                                                     args.adapter_requests)
    with tempfile.TemporaryDirectory() as tmp:
        own, _, _ = adapter_cost_by_length(Path(tmp), 10, args.adapter_requests, shared=False)
    print(f"[4] (info) OpenAI adapter over loopback HTTP, CPU per request (one client for the "
          f"conversation, as orion chat)  turn 10 {early:6.2f} ms   turn {args.long_turns:,} "
          f"{late:6.2f} ms   growth {late - early:+6.2f} ms   JSON encoding of the "
          f"turn-{args.long_turns:,} body alone {encode:5.2f} ms   (a new client per request: "
          f"turn 10 {own:6.2f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
