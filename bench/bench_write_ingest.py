"""Per-chunk cost of the write session's hot path, against a bare append-mode file, in one process.

Run from the repository root with the project's virtualenv::

    .venv/bin/python bench/bench_write_ingest.py            # print figures; always exits 0
    .venv/bin/python bench/bench_write_ingest.py --check    # exit 1 if a target is missed

The stream is about 10 MB of realistic Markdown (headings, wrapped paragraphs, lists, tables,
fenced and indented code, some non-ASCII) with no ``DONE`` line until the very end, cut into
64-character chunks, as a model streams it. Both sides get the same chunks:

- **orion**: a real write session opened through ``WritePlanTool_begin``'s code path (runtime,
  lifecycle, journal with the default flush policy, 50 lines / 5 s on a ``VirtualClock``), and
  ``WriteSession.feed`` on every chunk, as the runtime's text sink calls it (end-marker
  scanning, journal appends, the live-line check, and the line checks of ``validate_lines``
  (UTF-8, placeholders) on every 256 KiB of whole lines), then the journal flush of a message
  end;
  only the streaming and the flush are timed, not opening the session;
- **bare**: a plain loop writing every chunk to a file opened in append mode and flushing it
  every 50 lines, so both sides do comparable disk work.

It prints microseconds per chunk for both, the overhead per chunk and the ratio (target: at
most 3 us of overhead per chunk), and the peak memory traced by ``tracemalloc`` while the
journal ingests the stream, against the content size (target: at most 3x). Line 4 times the
same stream as one model reply through the runtime's model loop (``Runtime.run_turn``), against
the same events appended to a file: the path a user's write takes, with the same target.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
from typing import Any
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from timing import timed  # noqa: E402

from orion.clock import VirtualClock  # noqa: E402
from orion.models.events import Finish, TextDelta  # noqa: E402
from orion.hooks.manager import make_plugin_manager  # noqa: E402
from orion.runtime.runtime import Runtime  # noqa: E402
from orion.write_session.manager import manager_for  # noqa: E402
from orion.write_session.plan import Operation, WritePlan  # noqa: E402
from orion.write_session.session import WriteSession  # noqa: E402

CHUNK = 64
FLUSH_LINES = 50
OVERHEAD_TARGET_US = 3.0
MEMORY_TARGET = 3.0

WORDS = ("the a of and to in is for that with as on by this be are from it or an session "
         "content model journal stream chunk line file write plan target validation repair "
         "continuation prompt timer idle controller disk memory buffer crash recovery "
         "directory state metadata lock process Orion Data Default Done Design Decision "
         "Markdown fence block code example table list heading paragraph value error "
         "number configuration setting option runtime plugin hook transition event café "
         "naïve — “quoted” über").split()
IDENTS = "session journal marker chunk content state path data count result text".split()


def markdown(size: int, seed: int = 1) -> str:
    """About ``size`` bytes of Markdown without a line that is only ``DONE``."""
    rng = random.Random(seed)

    def words(lo: int, hi: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))

    def wrapped(n_words: int, width: int) -> list[str]:
        lines, line = [], ""
        for _ in range(n_words):
            w = rng.choice(WORDS)
            if line and len(line) + 1 + len(w) > width:
                lines.append(line)
                line = w
            else:
                line = f"{line} {w}" if line else w
        return [*lines, line] if line else lines

    out: list[str] = []
    total = 0
    section = 0
    while total < size:
        kind = rng.random()
        if kind < 0.08:
            section += 1
            block = [f"{'#' * rng.randint(1, 3)} {section}. {words(2, 6).capitalize()}"]
        elif kind < 0.55:
            block = wrapped(rng.randint(15, 90), rng.choice((72, 80, 100)))
        elif kind < 0.75:
            block = []
            for i in range(rng.randint(2, 7)):
                bullet = rng.choice(("-", "*", f"{i + 1}."))
                indent = "  " if rng.random() < 0.2 else ""
                block.append(f"{indent}{bullet} {words(3, 14)}")
        elif kind < 0.83:
            cols = rng.randint(2, 4)
            block = ["| " + " | ".join(words(1, 2) for _ in range(cols)) + " |",
                     "|" + "---|" * cols]
            block += ["| " + " | ".join(words(1, 3) for _ in range(cols)) + " |"
                      for _ in range(rng.randint(2, 6))]
        elif kind < 0.95:
            fence = rng.choice(("```python", "```", "~~~", "```yaml"))
            block = [fence]
            depth = 0
            for _ in range(rng.randint(3, 18)):
                ident = rng.choice(IDENTS)
                depth = max(0, min(3, depth + rng.choice((-1, 0, 0, 1))))
                block.append("    " * depth + rng.choice((
                    f"{ident} = {rng.choice(IDENTS)}.get({rng.randint(0, 999)})",
                    f"if {ident}:", f"return {ident}", f"# {words(2, 8)}",
                    f"{ident}.append({rng.choice(IDENTS)}[{rng.randint(0, 9)}])")))
            block.append(fence[:3])
        else:
            block = ["    " + words(2, 8) for _ in range(rng.randint(2, 5))]
        text = "\n".join(block) + "\n\n"
        out.append(text)
        total += len(text.encode())
    content = "".join(out)
    assert "\nDONE\n" not in content
    return content


def chunked(text: str) -> list[str]:
    return [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)]


class _NoModel:
    name = "none"

    async def stream(self, request):  # pragma: no cover - the benchmarks send no request
        raise AssertionError("no model request in a write-session benchmark")
        yield


class ChunkModel:
    """A model that streams the given chunks as one message, as fast as they are taken."""

    name = "chunks"

    def __init__(self, chunks: list[str]):
        self.chunks = chunks

    async def stream(self, request):
        for chunk in self.chunks:
            yield TextDelta(chunk)
        yield Finish("stop", "stop")


def open_session(directory: Path, target: str = "doc.md", plugins: Any = None,
                 model: Any = None) -> tuple[Runtime, WriteSession]:
    """A real write session (runtime, lifecycle, journal with the default flush policy) for
    a create of ``target`` in ``directory``, opened by ``WritePlanTool_begin``'s code path,
    ready for streamed text. (bench_write_finalize.py opens its sessions here too.)"""
    runtime = Runtime(model=model or _NoModel(), plugins=plugins or make_plugin_manager(env={}),
                      workspace=directory, clock=VirtualClock(), env={})
    manager = manager_for(runtime)
    manager.begin(WritePlan(intent="benchmark", target_file=target, operation=Operation.CREATE))
    assert manager.active is not None
    return runtime, manager.active


def orion_ingest(chunks: list[str], session) -> float:
    """Seconds to stream ``chunks`` through the controller's hot path and flush the journal
    as the message ends (finalizing is measured by bench_write_finalize.py)."""
    feed = session.feed
    started = time.perf_counter()
    for chunk in chunks:
        feed(chunk)
    session.journal.flush()
    return time.perf_counter() - started


def orion_model_loop(chunks: list[str], directory: Path) -> float:
    """Seconds for one model request whose reply streams ``chunks`` into an open write session:
    the runtime's whole turn (context, the model system's loop over the stream, the text sinks,
    the message's end), as ``orion run`` and ``orion chat`` take a reply."""
    runtime, session = open_session(directory, model=ChunkModel(chunks))
    started = time.perf_counter()
    asyncio.run(runtime.run_turn())
    elapsed = time.perf_counter() - started
    assert session.journal.lines == sum(c.count("\n") for c in chunks)
    runtime.close()
    return elapsed


async def bare_model_loop(chunks: list[str], path: Path) -> None:
    """The floor of taking a streamed reply into a file: the same stream, appended."""
    with open(path, "a", encoding="utf-8") as f:
        pending = 0
        async for event in ChunkModel(chunks).stream(None):
            if type(event) is TextDelta:
                f.write(event.text)
                pending += event.text.count("\n")
                if pending >= FLUSH_LINES:
                    f.flush()
                    pending = 0


def bare_ingest(chunks: list[str], path: Path) -> None:
    with open(path, "a", encoding="utf-8") as f:
        pending = 0
        for chunk in chunks:
            f.write(chunk)
            pending += chunk.count("\n")
            if pending >= FLUSH_LINES:
                f.flush()
                pending = 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megabytes", type=float, default=10.0)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)

    content = markdown(int(args.megabytes * 1024 * 1024))
    stream = content + "DONE\n"
    chunks = chunked(stream)
    expected = content.encode("utf-8")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        runs = iter(range(10**9))

        def run_orion() -> float:
            directory = root / f"orion-{next(runs)}"
            runtime, session = open_session(directory)
            elapsed = orion_ingest(chunks, session)
            runtime.close()
            shutil.rmtree(directory)
            return elapsed

        def run_bare(_n: int) -> None:
            path = root / f"bare-{next(runs)}.txt"
            bare_ingest(chunks, path)
            path.unlink()

        # Both sides produce what they should before anything is timed.
        runtime, session = open_session(root / "check")
        orion_ingest(chunks, session)
        assert session.journal.content() == expected, "the journal differs from the stream"
        assert (session.journal.directory / "content.txt").read_bytes() == expected
        runtime.close()
        bare_ingest(chunks, root / "check.txt")
        assert (root / "check.txt").read_bytes() == stream.encode("utf-8")

        best_orion = best_bare = float("inf")
        for rep in range(args.reps):
            pair = [(run_bare, "bare"), (run_orion, "orion")]
            if rep % 2:
                pair.reverse()
            for fn, side in pair:
                elapsed = timed(run_bare, 1) if side == "bare" else run_orion()
                if side == "bare":
                    best_bare = min(best_bare, elapsed)
                else:
                    best_orion = min(best_orion, elapsed)

        # Line 4: the same stream as a model's reply, through the runtime's model loop.
        body = chunked(content)  # no DONE: the message ends and the session waits
        best_loop = best_loop_bare = float("inf")
        for rep in range(args.reps):
            best_loop = min(best_loop, orion_model_loop(body, root / f"loop-{rep}"))
            shutil.rmtree(root / f"loop-{rep}")
            started = time.perf_counter()
            asyncio.run(bare_model_loop(body, root / f"loop-bare-{rep}.txt"))
            best_loop_bare = min(best_loop_bare, time.perf_counter() - started)

        # Peak memory of the ingest alone: the chunks already exist (the model sent them).
        runtime, session = open_session(root / "memory")
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        orion_ingest(chunks, session)
        peak = tracemalloc.get_traced_memory()[1] - before
        data = session.journal.content()  # what finalizing reads: the buffer, not a copy
        peak_finalize = tracemalloc.get_traced_memory()[1] - before
        del data
        tracemalloc.stop()
        runtime.close()

    n = len(chunks)
    orion_us, bare_us = best_orion / n * 1e6, best_bare / n * 1e6
    overhead = orion_us - bare_us
    ratio = peak / len(expected)
    ok_time = overhead <= OVERHEAD_TARGET_US
    ok_memory = ratio <= MEMORY_TARGET
    print(f"Orion write-ingest benchmark: python {sys.version.split()[0]}; "
          f"{len(expected) / 2**20:.1f} MB of Markdown ({content.count(chr(10)):,} lines) in "
          f"{n:,} chunks of {CHUNK} characters; best of {args.reps} interleaved runs per side")
    print(f"[1] per chunk  orion (WriteSession.feed: end marker, journal, line checks) "
          f"{orion_us:5.2f} us   "
          f"bare append-mode file {bare_us:5.2f} us   overhead {overhead:5.2f} us/chunk "
          f"(target <= {OVERHEAD_TARGET_US:.1f})   ratio {best_orion / best_bare:4.1f}x   "
          f"{'OK' if ok_time else 'MISS'}")
    print(f"[2] peak traced memory while ingesting  {peak / 2**20:5.1f} MB for "
          f"{len(expected) / 2**20:.1f} MB of content   ratio {ratio:4.2f}x "
          f"(target <= {MEMORY_TARGET:.1f}x)   {'OK' if ok_memory else 'MISS'}")
    print(f"[3] (info) peak with the content finalizing reads (Journal.content(), no copy)  "
          f"{peak_finalize / 2**20:5.1f} MB   ratio {peak_finalize / len(expected):4.2f}x")
    loop_us = best_loop / len(body) * 1e6
    loop_bare_us = best_loop_bare / len(body) * 1e6
    ok_loop = loop_us - loop_bare_us <= OVERHEAD_TARGET_US
    print(f"[4] per chunk through the model loop  orion (Runtime.run_turn, a streamed reply) "
          f"{loop_us:5.2f} us   bare (the same stream appended to a file) {loop_bare_us:5.2f} us"
          f"   overhead {loop_us - loop_bare_us:5.2f} us/chunk (target <= "
          f"{OVERHEAD_TARGET_US:.1f})   {'OK' if ok_loop else 'MISS'}")
    if args.check and not (ok_time and ok_memory and ok_loop):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
