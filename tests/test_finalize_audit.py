"""A team's plain ``finalize`` implementation (an audit of every write) runs for write
sessions too, after Orion's write, with ``transition.result`` set; a failing one is said in one
line and never undoes the write the user is told of."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from test_plugin_failures import line_of, make_package, write

from orion.hooks.manager import make_plugin_manager
from orion.testing.world import World

AUDIT = '''\
import os
from pathlib import Path

from orion.api import hookimpl


@hookimpl
def finalize(lifecycle, transition):
    if lifecycle.name != "write_session":
        return None
    if os.environ.get("EPSILON_FAIL"):
        raise OSError("the audit disk is gone")  # AUDIT FAILS
    with open(os.environ["EPSILON_LOG"], "a") as log:
        log.write(f"{lifecycle.name} {transition.result.relative} {transition.result.lines}\\n")
    return "audited"  # not the result: Orion's write owns it
'''


@pytest.fixture
def audited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    root = tmp_path / "site"
    make_package(root, "epsilon_audit", AUDIT)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("EPSILON_LOG", str(tmp_path / "audit.log"))
    for name in [m for m in sys.modules if m.startswith("epsilon_audit")]:
        del sys.modules[name]
    plugin = importlib.import_module("epsilon_audit.plugin")
    world = World(tmp_path / "w", plugins=make_plugin_manager(
        env={}, entrypoints=False, plugins={"epsilon_audit": plugin}))
    yield world, tmp_path / "audit.log", root / "epsilon_audit" / "plugin.py"
    if not world.loop.is_closed():
        world.close()


def test_a_plain_finalize_runs_for_every_write_after_the_write(audited):
    world, log, _ = audited
    write(world, "docs/guide.md", "# Guide\nline two\n")
    world.reply(text="Written.")
    write(world, "docs/other.md", "# Other\n")
    assert (world.workspace / "docs" / "guide.md").read_text() == "# Guide\nline two\n"
    assert log.read_text() == "write_session docs/guide.md 2\nwrite_session docs/other.md 1\n"


def test_a_failing_audit_is_said_in_one_line_and_the_write_stands(audited, monkeypatch):
    world, log, plugin = audited
    monkeypatch.setenv("EPSILON_FAIL", "1")
    write(world, "docs/guide.md", "# Guide\n")
    assert (world.workspace / "docs" / "guide.md").read_text() == "# Guide\n"
    assert not any("Could not write" in n for n in world.reporter.notices)
    [failure] = world.plugins.failures
    assert (failure.plugin, failure.hook, failure.error) == (
        "epsilon_audit", "finalize", "OSError: the audit disk is gone")
    assert failure.where == f"{plugin}:{line_of(plugin, 'AUDIT FAILS')}"
    assert not log.exists()
