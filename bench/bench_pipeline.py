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
prints microseconds per turn for both, Orion's overhead per turn, and the ratio. No target is
set; the figure is tracked in the closing notes of the changes that touch the pipeline.
"""

from __future__ import annotations

import argparse
import gc
import asyncio
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from timing import compare

from orion.clock import VirtualClock
from orion.models.base import ModelRequest
from orion.models.events import Finish, ModelEvent, TextDelta
from orion.plugins import make_plugin_manager
from orion.runtime.runtime import Runtime

REPLY = ("The answer is short.",)
RESET_EVERY = 50
#: Turn 2,000 of one conversation may cost at most this much more than turn 10.
MAX_LONG_RATIO = 1.5


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


def turn_cost_by_length(workspace: Path, turns: int, window: int = 400) -> tuple[float, float]:
    """Microseconds per turn around turn 10 and around turn ``turns`` of one conversation that
    is never reset, with no budget (no compaction: the conversation grows to twice ``turns``
    messages)."""
    (workspace / "orion.yaml").write_text("runtime:\n  max_messages: 0\n  max_tokens: 0\n")
    plugins = make_plugin_manager(entrypoints=False, env={})
    runtime = Runtime(model=InstantModel(), plugins=plugins, workspace=workspace,
                      clock=VirtualClock(), env={})
    spans: dict[int, float] = {}

    async def main() -> None:
        for i in range(turns + window):
            if i in (10, turns):
                gc.collect()
                gc.disable()
                spans[i] = time.perf_counter()
            await runtime.handle("hello")
            if i in (10 + window - 1, turns + window - 1):
                start = 10 if i < turns else turns
                spans[start] = time.perf_counter() - spans[start]
                gc.enable()

    asyncio.run(main())
    runtime.close()
    return spans[10] / window * 1e6, spans[turns] / window * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--batch-seconds", type=float, default=0.4)
    parser.add_argument("--long-turns", type=int, default=2000,
                        help="the turn whose cost line 2 compares with turn 10 (2000)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        n, bare_s, orion_s = compare(bare_turns, orion_turns(Path(tmp)), reps=args.reps,
                                     batch_s=args.batch_seconds)
    bare_us, orion_us = bare_s / n * 1e6, orion_s / n * 1e6
    print(f"Orion pipeline benchmark: best of {args.reps} interleaved batches of {n} turns")
    print(f"[1] per turn (no model latency)  orion {orion_us:8.1f} us   bare loop {bare_us:6.1f} us"
          f"   overhead {orion_us - bare_us:8.1f} us/turn   ratio {orion_s / bare_s:5.1f}x")
    with tempfile.TemporaryDirectory() as tmp:
        early, late = turn_cost_by_length(Path(tmp), args.long_turns)
    ratio = late / early
    print(f"[2] turn {args.long_turns:,} of one conversation {late:8.1f} us   turn 10 {early:8.1f} us   "
          f"ratio {ratio:4.2f}x (target <= {MAX_LONG_RATIO}x: O(1) amortized per turn)   "
          f"{'OK' if ratio <= MAX_LONG_RATIO else 'MISS'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
