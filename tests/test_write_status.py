"""Every status a write session can reach is a ``WriteStatus``: each final state of the chart
and each way a session ends (written, blocked by a validator, failed, set aside, abandoned)
reads as one through ``orion.api``, so a plugin that reads ``session.status`` (as
docs/customize.md's ``waiting()`` does) never meets a status the enum lacks. A blocked write in
a conversation whose plugin reads every session's status leaves the conversation going, and
``orion sessions list/show/recover`` handle it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from types import SimpleNamespace

import pytest

from orion.api import (ContextBlock, ContextRequest, Issue, ValidationRequest, WriteSessionView,
                       WriteStatus, hookimpl, write_sessions)
from orion.hooks.manager import make_plugin_manager
from orion.testing.world import World

HEADER = "<!-- SPDX-License-Identifier: Apache-2.0 -->"


class LicenceHeader:
    """A team's blocking rule: Markdown files start with the licence header."""

    @hookimpl
    def validate_content(self, request: ValidationRequest) -> Issue | None:
        first = request.content.split(b"\n", 1)[0].decode("utf-8", "replace")
        if PurePosixPath(request.path).suffix != ".md" or first == HEADER:
            return None
        return Issue(1, 1, "licence-header", f"the first line must be {HEADER}", blocking=True)


class ReviewContext:
    """What a team's ``build_context`` does with the sessions: read each one's status."""

    def __init__(self) -> None:
        self.seen: list[WriteStatus] = []

    @hookimpl
    def build_context(self, request: ContextRequest) -> list[ContextBlock]:
        assert request.host is not None
        self.seen = [session.status for session in write_sessions(request.host)]
        waiting = [s for s in write_sessions(request.host) if s.status == "active"]
        return [ContextBlock("review", f"{len(waiting)} write(s) wait for review")]


@pytest.fixture
def team() -> SimpleNamespace:
    return SimpleNamespace(licence=LicenceHeader(), context=ReviewContext())


@pytest.fixture
def world(tmp_path: Path, team: SimpleNamespace) -> Iterator[World]:
    world = World(tmp_path / "w", plugins=make_plugin_manager(
        env={}, entrypoints=False, plugins={"acme_licence": team.licence,
                                            "acme_review": team.context}))
    yield world
    if not world.loop.is_closed():
        world.close()


def begin(world: World, path: str = "docs/guide.md") -> WriteSessionView:
    world.say(f"Write {path}.")
    world.reply(tool_calls=[{"name": "WritePlanTool_begin", "arguments": {
        "intent": "a guide", "target_file": path, "operation": "create"}}])
    return write_sessions(world.runtime)[-1]


def write(world: World) -> WriteSessionView:
    session = begin(world)
    world.reply(text=f"{HEADER}\n# Guide\nDONE\n")
    return session


def block(world: World) -> WriteSessionView:
    session = begin(world)
    world.reply(text="# Guide\nDONE\n")
    for _ in range(3):  # the model keeps the first line through every correction round
        world.reply(text="L1: # Guide\n")
    return session


def fail(world: World) -> WriteSessionView:
    session = begin(world)
    (world.workspace / "docs" / "guide.md").mkdir(parents=True)  # the target became a directory
    world.reply(text=f"{HEADER}\n# Guide\nDONE\n")
    return session


def discard(world: World) -> WriteSessionView:
    session = begin(world)
    world.reply(text=f"{HEADER}\n# Guide\n")
    session.fire("discard", reason="the user changed their mind")
    return session


def set_aside(world: World) -> WriteSessionView:
    session = begin(world)
    world.reply(text=f"{HEADER}\n# Guide\n")
    world.runtime.reset()  # what /reset does
    return session


#: How a session reaches each final state of the built-in chart.
FINAL_STATES: dict[str, Callable[[World], WriteSessionView]] = {"done": write,
                                                                 "abandoned": discard}
#: Every way a session ends, and the status it reads as.
OUTCOMES: dict[str, tuple[Callable[[World], WriteSessionView], WriteStatus]] = {
    "written": (write, WriteStatus.WRITTEN), "blocked": (block, WriteStatus.BLOCKED),
    "failed": (fail, WriteStatus.FAILED), "abandoned": (discard, WriteStatus.ABANDONED),
    "set_aside": (set_aside, WriteStatus.SET_ASIDE)}


def test_the_walk_covers_every_final_state_of_the_chart(world: World) -> None:
    session = begin(world)
    finals = set(session.lifecycle.definition.finals)
    assert finals == set(FINAL_STATES), (
        f"final states of write_session with no case here: {sorted(finals - set(FINAL_STATES))}")


@pytest.mark.parametrize("final", sorted(FINAL_STATES))
def test_each_final_state_ends_in_a_write_status(world: World, final: str) -> None:
    session = FINAL_STATES[final](world)
    assert session.lifecycle.state == final
    assert isinstance(session.status, WriteStatus) and session.status is not WriteStatus.ACTIVE


@pytest.mark.parametrize("outcome", sorted(OUTCOMES))
def test_each_way_a_session_ends_reads_as_a_write_status(world: World, team: SimpleNamespace,
                                                         outcome: str) -> None:
    reach, status = OUTCOMES[outcome]
    session = reach(world)
    assert session.status is status
    assert repr(session).endswith(f" docs/guide.md {status.value}>")
    if world.paused:  # the model is told how the write ended, and answers
        world.reply(text="Noted.")
    world.mark()
    world.say("What now?")  # the next turn's context reads every session's status again
    world.reply(text="Nothing more.")
    assert team.context.seen == [status]
    assert len(world.requests_since_mark) == 1  # the conversation went on
    assert "".join(world.reporter.texts).endswith("Nothing more.")


def orion(world: World, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``orion`` command on the world's workspace."""
    return subprocess.run([sys.executable, "-m", "orion", *args, "--workspace",
                           str(world.workspace)], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)


def test_a_blocked_write_is_listed_shown_and_recovered(world: World) -> None:
    session = block(world)
    world.reply(text="Understood.")
    assert session.status == "blocked" and not session.written
    world.close()
    listed = orion(world, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)
    assert entry["status"] == "blocked" and entry["id"] == session.id
    shown = orion(world, "sessions", "show", session.id[:8])
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"write session {session.id[:8]} for docs/guide.md: blocked")
    journal = world.state_dir / "write_sessions" / session.id / "content.txt"
    journal.write_text(f"{HEADER}\n# Guide\n")  # the user fixes the content
    recovered = orion(world, "sessions", "recover", session.id[:8], "--finalize")
    assert recovered.returncode == 0, recovered.stderr
    assert (world.workspace / "docs" / "guide.md").read_text() == f"{HEADER}\n# Guide\n"


def test_docs_name_every_write_status() -> None:
    docs = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text()
    section = docs.split("## `WriteStatus`", 1)[1].split("```", 1)[0]
    missing = [s.value for s in WriteStatus if f"`{s.value}`" not in section]
    assert not missing, f"docs/api.md's WriteStatus does not name {missing}"
