"""How a write session takes in content streamed through the runtime's model loop.

Chunks that arrive in a burst are taken in as one batch, chunks that trickle in one by one; in
both cases the journal saves at the same lines as chunk by chunk, nothing waits in memory past
the pass of the event loop it arrived in, and an error while taking content in still ends the
turn.
Real runtime, real journal on disk, the built-in plugins.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from orion.clock import VirtualClock
from orion.models.base import ModelRequest
from orion.models.events import Finish, ModelEvent, TextDelta
from orion.hooks.manager import make_plugin_manager
from orion.runtime.report import Reporter
from orion.runtime.runtime import Runtime
from orion.write_session.manager import manager_for
from orion.write_session.plan import WritePlan

LINES = [f"line {i}: the quick brown fox jumps over the lazy dog\n" for i in range(1, 121)]


class Streaming:
    """Streams ``chunks``; with ``trickle`` it lets the event loop run after each one, as a
    slow network does. Then (the runtime has had the chunk) it calls ``seen(i)``."""

    name = "streaming"

    def __init__(self, chunks: list[str], seen: Callable[[int], None], *, trickle: bool):
        self.chunks, self.seen, self.trickle = chunks, seen, trickle
        self.fed = 0  # chunks the runtime has had

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for i, chunk in enumerate(self.chunks, 1):
            yield TextDelta(chunk)
            self.fed = i
            if self.trickle:
                await asyncio.sleep(0)
            self.seen(i)
        yield Finish("stop", "stop")


def open_session(workspace: Path, model, *, flush_lines: int = 50, reporter=None):
    (workspace / "orion.yaml").write_text(
        f"settings:\n  write_session:\n    flush_lines: {flush_lines}\n")
    runtime = Runtime(model=model, plugins=make_plugin_manager(entrypoints=False, env={}),
                      workspace=workspace, clock=VirtualClock(), env={}, reporter=reporter)
    manager = manager_for(runtime)
    manager.begin(WritePlan(intent="guide", target_file="guide.md", operation="create"))
    return runtime, manager.active


def on_disk(session) -> int:
    return len(session.journal.content_path.read_bytes())


@pytest.mark.parametrize("trickle", [False, True], ids=["burst", "trickle"])
def test_the_journal_saves_every_flush_lines_lines_however_the_lines_arrive(tmp_path, trickle):
    saved: list[int] = []
    model = Streaming(LINES, lambda i: saved.append(on_disk(session)), trickle=trickle)
    runtime, session = open_session(tmp_path, model, flush_lines=7)
    asyncio.run(runtime.run_turn())
    # After the i-th line, the file holds the lines of every whole group of 7 so far.
    assert saved == [prefix(i - i % 7) for i in range(1, 121)]
    assert session.journal.content() == "".join(LINES).encode()
    runtime.close()


def test_trickling_content_is_in_the_journal_within_the_pass_of_the_loop_it_arrived_in(
        tmp_path):
    taken: list[int] = []
    model = Streaming(LINES, lambda i: taken.append(session.journal.bytes), trickle=True)
    runtime, session = open_session(tmp_path, model)
    seen_by_others: list[tuple[int, int]] = []

    async def turn() -> None:
        async def watch() -> None:  # another task, as a timer or the user's input would be
            while model.fed < len(LINES):
                seen_by_others.append((model.fed, session.journal.bytes))
                await asyncio.sleep(0)
        watcher = asyncio.get_running_loop().create_task(watch())
        await runtime.run_turn()
        await watcher

    asyncio.run(turn())
    # Once the loop has gone round, in the model's view: all of it. Another task sees at most
    # the chunk that arrived in the same pass of the loop still to come (it was due first).
    assert taken == [prefix(i) for i in range(1, 121)]
    assert len(seen_by_others) > 100
    assert [(fed, size) for fed, size in seen_by_others
            if not prefix(fed - 1) <= size <= prefix(fed)] == []
    runtime.close()


def prefix(lines: int) -> int:
    return len("".join(LINES[:lines]).encode())


def test_a_burst_is_taken_in_whole_at_the_message_end(tmp_path):
    chunks = ["# Guide\n", "\nThe first ", "part.\nThe sec", "ond part.\nDO", "NE\n", "Done."]
    runtime, session = open_session(tmp_path, Streaming(chunks, lambda i: None, trickle=False))
    asyncio.run(runtime.run_turn())
    assert (tmp_path / "guide.md").read_text() == "# Guide\n\nThe first part.\nThe second part.\n"
    runtime.close()


class BrokenScreen(Reporter):
    def progress(self, progress) -> None:
        raise RuntimeError("the screen is gone")


@pytest.mark.parametrize("trickle", [False, True], ids=["burst", "trickle"])
def test_an_error_while_content_is_taken_in_ends_the_turn(tmp_path, trickle):
    # One line: taken in by the loop (trickle) or at the message end (burst), the last thing
    # before the message ends either way.
    model = Streaming(LINES[:1], lambda i: None, trickle=trickle)
    runtime, session = open_session(tmp_path, model, reporter=BrokenScreen())
    with pytest.raises(RuntimeError, match="the screen is gone"):
        asyncio.run(runtime.run_turn())
    runtime.close()


class OneWrite:
    """Streams ``chunks`` as the first reply, then answers ``Written.``."""

    name = "one-write"

    def __init__(self, chunks: list[str]):
        self.chunks, self.requests = chunks, 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests += 1
        for chunk in self.chunks if self.requests == 1 else ["Written."]:
            yield TextDelta(chunk)
        yield Finish("stop", "stop")


def test_a_streamed_write_is_held_once_not_once_per_listener(tmp_path):
    # 4 MB through the model loop, DONE, the file written: the content is in memory about
    # once (the journal), not also in the turn's text, the message joined from it and a copy
    # for finalizing. tracemalloc counts every Python allocation, whatever holds it.
    line = "a line of the document, with a few words in it: the quick brown fox é\n"
    content = line * (4 * 2**20 // len(line))
    size = len(content.encode())
    chunks = [content[i:i + 4096] for i in range(0, len(content), 4096)] + ["DONE\n"]
    runtime, session = open_session(tmp_path, OneWrite(chunks))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        asyncio.run(runtime.run_turn())
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    runtime.close()
    assert (tmp_path / "guide.md").read_text() == content
    assert peak < 1.5 * size, f"peak {peak / size:.2f}x the content's size"
    [message] = [m for m in runtime.conversation.messages if m.role == "assistant"][:1]
    assert message.content.startswith("[wrote guide.md: 59918 lines, sha256 ")


class Failing:
    """Streams ``chunks`` in one burst, then fails as a broken connection does, raised."""

    name = "failing"

    def __init__(self, chunks: list[str]):
        self.chunks = chunks

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        for chunk in self.chunks:
            yield TextDelta(chunk)
        raise ConnectionResetError("the server went away")


def test_what_arrived_before_a_stream_fails_reaches_the_journal(tmp_path):
    # The lines are still in the burst (the loop never went round) when the stream raises:
    # they are handed on first, so the session keeps them, and the turn ends with the error.
    runtime, session = open_session(tmp_path, Failing(LINES[:10]))

    async def turn() -> bytes:
        with pytest.raises(ConnectionResetError, match="went away"):
            await runtime.run_turn()
        return session.journal.content()  # as the error arrives, not once the loop goes on

    assert asyncio.run(turn()) == "".join(LINES[:10]).encode()
    runtime.close()


def test_a_sink_that_fails_after_the_stream_failed_is_noted_on_the_streams_error(tmp_path):
    runtime, session = open_session(tmp_path, Failing(LINES[:3]))

    def broken(text: str) -> bool:
        raise OSError("no space left on the sink's device")

    runtime.text_sinks.insert(0, broken)
    with pytest.raises(ConnectionResetError) as raised:
        asyncio.run(runtime.run_turn())
    assert raised.value.__notes__ == [
        "handing on the text received before it: OSError: no space left on the sink's device"]
    runtime.close()
