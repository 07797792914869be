"""Actions and guards provided for one statechart (XState's ``provide``): in that chart they
take the place of the shared ones of the same name, and nowhere else. The write sessions and
plan mode each bind their own ``finalize`` so; no built-in plugin asks a lifecycle its name."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

import orion
from orion.errors import PluginError, StatechartError
from orion.models.examples import shipped_example
from orion.models.script import load_script
from orion.hooks.manager import make_plugin_manager
from orion.runtime.runner import play
from orion.statechart import load_definition

PLUGINS = Path(__file__).resolve().parent.parent / "plugins"

CHART = """
statechart: {name}
initial: idle
states:
  idle: {{}}
  done:
    final: true
transitions:
  - trigger: go
    source: idle
    dest: done
    guards: ready
    actions: greet
"""


class Shared:
    @orion.hookimpl
    def register_actions(self, register):
        register("greet", lambda lc, tr: lc.context.update(said="shared"))

    @orion.hookimpl
    def register_guards(self, register):
        register("ready", lambda lc, tr: True)


class ForOne:
    @orion.hookimpl
    def register_actions(self, register):
        register("greet", lambda lc, tr: lc.context.update(said="mine"), chart="mine")

    @orion.hookimpl
    def register_guards(self, register):
        register("ready", lambda lc, tr: False, chart="mine")


def charts(tmp_path, *names):
    for name in names:
        (tmp_path / f"{name}.yaml").write_text(CHART.format(name=name), encoding="utf-8")
    return tmp_path


def test_a_provided_action_and_guard_take_the_place_of_the_shared_ones_in_their_chart_only(
        tmp_path):
    folder = charts(tmp_path, "mine", "other")
    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(Shared(), "shared")
    pm.register(ForOne(), "for_one")
    other = load_definition(folder / "other.yaml", plugins=pm).create()
    other.trigger("go")
    assert (other.state, other.context["said"]) == ("done", "shared")
    mine = load_definition(folder / "mine.yaml", plugins=pm).create()
    mine.trigger("go")  # its own guard says no
    assert mine.state == "idle" and "said" not in mine.context


def test_a_name_provided_for_one_chart_is_unknown_in_another(tmp_path):
    folder = charts(tmp_path, "other")
    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(ForOne(), "for_one")
    with pytest.raises(StatechartError, match="action 'greet' is not provided"):
        load_definition(folder / "other.yaml", plugins=pm)


def test_providing_one_name_twice_for_one_chart_names_both_plugins():
    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(ForOne(), "first")
    pm.register(ForOne(), "second")
    with pytest.raises(PluginError, match="guard 'ready' is registered twice for 'mine': by "
                                          "plugin 'first' and by 'second'"):
        pm.registry


def test_write_sessions_and_plan_mode_each_bind_their_own_finalize():
    registry = make_plugin_manager(entrypoints=False, env={}).registry
    assert registry.actions["finalize"].plugin == "orion_plugins.finalization"
    assert registry.chart_actions["write_session"]["finalize"].plugin == \
        "orion_plugins.write_sessions"
    assert registry.chart_actions["plan_mode"]["finalize"].plugin == "orion_plugins.plan_mode"
    assert {"open_plan", "approve_plan", "close_plan", "cancel_plan"} <= \
        registry.chart_actions["plan_mode"].keys()


def _asks_a_lifecycle_its_name(node: ast.AST) -> bool:
    if not isinstance(node, ast.Compare):
        return False
    return any(isinstance(side, ast.Attribute) and side.attr == "name"
               and isinstance(side.value, ast.Name) and side.value.id == "lifecycle"
               for side in (node.left, *node.comparators))


@pytest.mark.parametrize("module", sorted(p.name for p in PLUGINS.glob("*.py")))
def test_no_built_in_plugin_decides_by_a_lifecycle_s_name(module):
    tree = ast.parse((PLUGINS / module).read_text(encoding="utf-8"))
    lines = [node.lineno for node in ast.walk(tree) if _asks_a_lifecycle_its_name(node)]
    assert lines == [], f"plugins/{module} compares lifecycle.name on lines {lines}"


class Greedy:
    """A team's finalize for its own chart that, as the hook allows, asks no name."""

    calls = 0

    @orion.hookimpl
    def finalize(self, lifecycle, transition):
        Greedy.calls += 1
        return {"greedy": True}


def test_a_finalize_hook_that_asks_no_name_does_not_take_over_the_built_in_charts(tmp_path):
    """A plain ``finalize`` sees every write session end (an audit log), after the write: what
    it returns never replaces the write the built-in chart makes."""
    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(Greedy(), "greedy")
    script = load_script(shipped_example("write_guide"))
    plain = asyncio.run(play(script, workspace=tmp_path / "plain",
                             plugins=make_plugin_manager(entrypoints=False, env={})))
    result = asyncio.run(play(script, workspace=tmp_path / "ws", plugins=pm))
    assert result.ok, result.errors
    assert result.files and all((tmp_path / "ws" / f.path).is_file() for f in result.files)
    assert [(f.path, f.sha256) for f in result.files] == [(f.path, f.sha256) for f in plain.files]
    assert Greedy.calls == len(result.sessions)
