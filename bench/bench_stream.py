"""Orion streaming benchmark: CPU per streamed chunk of a real stream, replayed at full speed.

Run from the repository root with the project's virtualenv::

    .venv/bin/python bench/bench_stream.py            # prints figures, always exits 0
    .venv/bin/python bench/bench_stream.py --check    # exits 1 when a target is missed

The loopback endpoint of the tests (``tests/sse_server.py``) replays a reply of
``--chunks`` text deltas of 16 characters through real HTTP and the real ``openai`` SDK, as a
hosted model streams it. Counted: this thread's CPU time (``time.thread_time``; the endpoint
runs on threads of its own), per chunk, best of ``--reps``.

1. Orion: ``Runtime.handle`` of one user message with ``OpenAICompatibleModel`` (one SDK
   client, as ``orion chat`` keeps), the reply streamed through the turn pipeline, the text
   sinks and the trace. Target: under 100 us per chunk, the SDK's parse included.
2. (info) the SDK alone: ``client.chat.completions.create(stream=True)`` and a loop that reads
   each chunk's delta, the SDK's models built for every chunk: what a Python client that reads
   the SDK's typed chunks pays.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path

import openai

from orion.clock import VirtualClock
from orion.hooks.manager import make_plugin_manager
from orion.models.openai_compat import OpenAICompatibleModel
from orion.runtime.runtime import Runtime

# The loopback endpoint of Orion's tests.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from sse_server import SSEServer, stream, text_stream  # noqa: E402

MAX_US_PER_CHUNK = 100.0
PIECE = "streamed text. "[:16].ljust(16, "x")


def _reply(chunks: int) -> list[str]:
    return [PIECE] * chunks


def orion_cpu_per_chunk(workspace: Path, chunks: int, reps: int) -> float:
    best = float("inf")
    with SSEServer() as server:
        model = OpenAICompatibleModel(model="bench", base_url=server.base_url, api_key="bench",
                                      max_retries=0)
        runtime = Runtime(model=model, plugins=make_plugin_manager(entrypoints=False, env={}),
                          workspace=workspace, clock=VirtualClock(), env={})

        async def main() -> float:
            nonlocal best
            async with model.session():
                server.enqueue(*[stream(text_stream(*_reply(chunks))) for _ in range(reps + 1)])
                await runtime.handle("hello")  # warm-up: connection, imports, caches
                for _ in range(reps):
                    runtime.conversation.reset()  # each request the same size
                    gc.collect()
                    start = time.thread_time()
                    await runtime.handle("hello")
                    best = min(best, (time.thread_time() - start) / chunks)
            return best

        asyncio.run(main())
        runtime.close()
    return best * 1e6


def sdk_cpu_per_chunk(chunks: int, reps: int) -> float:
    best = float("inf")
    with SSEServer() as server:
        async def main() -> None:
            nonlocal best
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="bench",
                                        max_retries=0)
            server.enqueue(*[stream(text_stream(*_reply(chunks))) for _ in range(reps + 1)])
            for rep in range(reps + 1):
                gc.collect()
                start = time.thread_time()
                response = await client.chat.completions.create(
                    model="bench", messages=[{"role": "user", "content": "hello"}], stream=True)
                text = []
                async for chunk in response:
                    if chunk.choices and chunk.choices[0].delta.content:
                        text.append(chunk.choices[0].delta.content)
                if rep:  # the first is the warm-up
                    best = min(best, (time.thread_time() - start) / chunks)
            await client.close()

        asyncio.run(main())
    return best * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--chunks", type=int, default=4000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"Orion streaming benchmark: python {sys.version.split()[0]}, openai "
          f"{openai.__version__}; {args.chunks:,} chunks of {len(PIECE)} characters, best of "
          f"{args.reps}")
    with tempfile.TemporaryDirectory(prefix="orion-bench-") as tmp:
        orion_us = orion_cpu_per_chunk(Path(tmp), args.chunks, args.reps)
    sdk_us = sdk_cpu_per_chunk(args.chunks, args.reps)
    ok = orion_us <= MAX_US_PER_CHUNK
    print(f"[1] CPU per chunk  orion chat's path (Runtime.handle, openai SDK)  {orion_us:6.1f} us"
          f"   target <= {MAX_US_PER_CHUNK:.0f} us   {'OK' if ok else 'MISS'}")
    print(f"[2] (info) the openai SDK alone, reading each delta  {sdk_us:6.1f} us   "
          f"orion's path / the SDK's {orion_us / sdk_us:.2f}x")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
