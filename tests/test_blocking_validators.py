"""A validator's rule that blocks a write: the team's licence header (docs/validation.md).

The rule's issue goes through the correction rounds like any other; still there after the
last one, the target is not written, the content stays in the session's journal, the user and
the model are told why, and `orion sessions` lists the session as blocked and will not write
it until the content keeps the rule. The real runtime with the team's plugin, a queued model,
and the real `orion` command with the plugin installed (an entry point)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orion.hooks.manager import make_plugin_manager
from orion.testing.world import World

HEADER = "<!-- SPDX-License-Identifier: Apache-2.0 -->"
PLUGIN = f'''\
    from pathlib import PurePosixPath

    from orion import hookimpl
    from orion.validation import Issue
    from orion.write_session.repair import text_lines

    HEADER = {HEADER!r}


    @hookimpl
    def validate_content(request):
        lines = text_lines(request.content)
        if PurePosixPath(request.path).suffix != ".md" or (lines and lines[0] == HEADER):
            return None
        return Issue(1, 1, "licence-header",
                     f"the first line must be the licence header {{HEADER}}", blocking=True)
    '''


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """The team's plugin, installed: a distribution with an entry point of the group orion."""
    root = tmp_path / "site"
    info = root / "acme_licence-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-licence\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[orion]\nacme_licence = acme_licence\n")
    (root / "acme_licence.py").write_text(textwrap.dedent(PLUGIN))
    return root


@pytest.fixture
def world(tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(site))
    import importlib

    plugin = importlib.import_module("acme_licence")
    world = World(tmp_path / "w", plugins=make_plugin_manager(
        env={}, entrypoints=False, plugins={"acme_licence": plugin}))
    yield world
    if not world.loop.is_closed():
        world.close()


def orion(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site),
                                                        os.environ.get("PYTHONPATH", "")])}
    env.pop("ORION_LOAD_PLUGINS", None)
    return subprocess.run([sys.executable, "-m", "orion", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def write_guide(world: World, text: str) -> None:
    world.say("Write docs/guide.md.")
    world.reply(tool_calls=[{"name": "WritePlanTool_begin", "arguments": {
        "intent": "a guide", "target_file": "docs/guide.md", "operation": "create"}}])
    world.reply(text=text + "DONE\n")


def last_request(world: World) -> str:
    return "\n".join(str(m.get("content") or "") for m in world.model.requests[-1].messages)


def test_a_rule_still_broken_after_the_rounds_blocks_the_write_and_keeps_the_content(world,
                                                                                     site):
    content = "# Guide\nHow to use it.\n"
    write_guide(world, content)
    for round in (1, 2, 3):
        prompt = world.reporter.prompts[-1]
        assert prompt.startswith(f"Correction round {round} of 3")
        assert "[licence-header, blocks the write]" in prompt
        world.mark()
        world.reply(text="L1: # Guide, with no header\n")  # the model does not keep the rule
    assert "the file is not written at all." in prompt  # the last round said so
    target = world.workspace / "docs" / "guide.md"
    assert not target.exists()
    [told] = [n for n in world.notices_since_mark if "was not written" in n]
    assert told.startswith("docs/guide.md was not written: 1 issue(s) that block a write "
                           "remain after 3 correction rounds: line 1: the first line must be "
                           f"the licence header {HEADER} [licence-header]. The file is as it "
                           "was; its content stays in write session ")
    assert told in last_request(world)  # the model was told the same
    # the journal keeps the content as it streamed; orion sessions lists the session, blocked
    world.reply(text="Understood.")
    world.close()
    listed = orion(site, "sessions", "list", "--json", "--workspace", str(world.workspace))
    [session] = json.loads(listed.stdout)
    assert session["status"] == "blocked" and not session["live"]
    assert session["blocked"] == [f"1:1: licence-header: the first line must be the licence "
                                  f"header {HEADER}"]
    journal = Path(session["directory"]) / "content.txt"
    assert journal.read_text() == content
    table = orion(site, "sessions", "list", "--workspace", str(world.workspace))
    assert "blocked" in table.stderr and "licence-header" in table.stderr  # a table for people
    shown = orion(site, "sessions", "show", session["id"][:8], "--workspace",
                  str(world.workspace))
    assert shown.stdout.startswith(f"write session {session['id'][:8]} for docs/guide.md: "
                                   "blocked, nothing set aside\nblocked by: 1:1: licence-header: "
                                   f"the first line must be the licence header {HEADER}\n")
    # recovering it checks the rule again: refused until the content keeps it
    refused = orion(site, "sessions", "recover", session["id"][:8], "--finalize",
                    "--workspace", str(world.workspace))
    assert refused.returncode == 1 and not target.exists()
    assert "is blocked: 1 issue(s) keep docs/guide.md from being written" in refused.stderr
    assert str(journal) in refused.stderr
    journal.write_text(f"{HEADER}\n{content}")
    written = orion(site, "sessions", "recover", session["id"][:8], "--finalize",
                    "--workspace", str(world.workspace))
    assert written.returncode == 0, written.stderr
    assert target.read_text() == f"{HEADER}\n{content}"


def test_a_rule_the_model_keeps_in_a_correction_round_is_written(world):
    write_guide(world, "# Guide\nHow to use it.\n")
    assert "[licence-header, blocks the write]" in world.reporter.prompts[-1]
    world.reply(text=f"L1: {HEADER}\nL1: # Guide\n")
    target = world.workspace / "docs" / "guide.md"
    assert target.read_text() == f"{HEADER}\n# Guide\nHow to use it.\n"
    assert not any("was not written" in n for n in world.reporter.notices)


def test_a_blocked_write_leaves_an_existing_file_as_it_was(world):
    target = world.workspace / "docs" / "guide.md"
    target.parent.mkdir(parents=True)
    target.write_text(f"{HEADER}\nold\n")
    world.say("Rewrite docs/guide.md.")
    world.reply(tool_calls=[{"name": "WritePlanTool_begin", "arguments": {
        "intent": "a guide", "target_file": "docs/guide.md", "operation": "overwrite"}}])
    world.reply(text="# New guide\nDONE\n")
    for _ in range(3):
        world.reply(text="L1: # New guide\n")
    assert target.read_text() == f"{HEADER}\nold\n"
    assert any(n.startswith("docs/guide.md was not written") for n in world.reporter.notices)


def test_the_next_start_names_a_blocked_write_and_why(world):
    write_guide(world, "# Guide\n")
    for _ in range(3):
        world.reply(text="L1: # Guide\n")
    world.reply(text="Understood.")
    world.mark()
    world.restart()
    [named] = [n for n in world.notices_since_mark if "was blocked" in n]
    assert "docs/guide.md (1 line" in named
    assert f"was blocked (1:1: licence-header: the first line must be the licence header " \
           f"{HEADER}): fix its content, then orion sessions recover " in named
    assert not (world.workspace / "docs" / "guide.md").exists()


def test_issues_that_do_not_block_still_end_in_the_safe_replacement_and_a_write(world):
    """Without blocking issues nothing changes: bytes are repaired, the file is written."""
    write_guide(world, f"{HEADER}\ncaf\udcc3 au lait\n")
    for _ in range(3):
        world.reply(text="L2: caf\udcc3 au lait\n")
    target = world.workspace / "docs" / "guide.md"
    assert target.read_bytes() == f"{HEADER}\ncaf au lait\n".encode()
