"""A write session's lifecycle context is a ``WriteContext``: the keys a team's guard or action
reads are the ones Orion's code and the chart's actions pass each other, the typed properties
say the same, and the context links the lifecycle to its session without being saved with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orion.api import WriteContext, WriteSessionView, write_session_of, write_sessions
from orion.hooks.manager import make_plugin_manager
from orion.testing.world import World
from orion.write_session.decision import Quoted


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    world = World(tmp_path / "w", plugins=make_plugin_manager(env={}, entrypoints=False))
    yield world
    if not world.loop.is_closed():
        world.close()


def begin(world: World) -> WriteSessionView:
    world.say("Write docs/guide.md.")
    world.reply(tool_calls=[{"name": "WritePlanTool_begin", "arguments": {
        "intent": "a guide", "target_file": "docs/guide.md", "operation": "create"}}])
    return write_sessions(world.runtime)[-1]


def test_a_cut_off_reply_is_counted_in_the_key_a_team_reads_and_in_the_typed_property(world):
    session = begin(world)
    world.reply(text="# Guide\nInstall Orion with pip.\nThen run orion ch",
                finish_reason="length")
    context = session.lifecycle.context
    assert isinstance(context, WriteContext)
    assert context["continuations"] == context.continuations == 1
    # The continuation request quoted the tail: the unfinished line, with the lines before it.
    assert context.quoted == Quoted(("# Guide", "Install Orion with pip."), "Then run orion ch")
    assert context.unfinished_line == context["unfinished_line"] == 3
    world.reply(text="Then run orion chat.\nDONE\n")
    assert (world.workspace / "docs" / "guide.md").read_text(encoding="utf-8") == (
        "# Guide\nInstall Orion with pip.\nThen run orion chat.\n")
    assert context.continuations == 1 and not context.incomplete


def test_the_context_links_the_lifecycle_to_its_session_and_the_snapshot_holds_data_only(world):
    session = begin(world)
    world.stream_partial("# Guide\n")  # the reply stalls in the middle of its message
    lifecycle = session.lifecycle
    assert write_session_of(lifecycle) == session
    snapshot = lifecycle.snapshot()
    assert type(snapshot["context"]) is dict
    assert snapshot["context"] == dict(lifecycle.context)
    restored = lifecycle.definition.restore(snapshot, clock=lifecycle.clock)
    assert write_session_of(restored) is None  # a lifecycle on its own: no session
    assert WriteContext.of(restored).continuations == 0
    world.reply(text="DONE\n")  # the same message goes on, and ends the content
    assert session.written and write_session_of(lifecycle) == session
