"""On request, a chart's lifecycles have the model methods ``transitions`` binds onto its models
(``is_<state>()``, ``may_<trigger>()``, ``to_<state>()``, a method per trigger); no call is
silently ignored: ``to_<state>`` raises as the compiled chart's ``to_state`` does, and a name
that cannot be bound is named in a warning."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from orion.clock import VirtualClock
from orion.errors import CompiledChartError, GuardError, UnknownTrigger
from orion.statechart import load_definition

CHART = """
statechart: doors
initial: closed
states:
  closed: {}
  open:
    initial: wide
    states:
      wide: {}
      narrow: {}
  locked: {final: true}
transitions:
  - {trigger: push, source: closed, dest: open, guards: unlocked, actions: creak}
  - {trigger: narrow_it, source: open.wide, dest: open.narrow}
  - {trigger: pull, source: open, dest: closed}
  - {trigger: lock, source: closed, dest: locked}
  - {trigger: start, source: open, dest: closed}
  - {trigger: "abort.*", source: "*", dest: locked}
"""


@pytest.fixture
def doors(tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    world: dict[str, Any] = {"unlocked": True, "creaks": 0, "guard_error": None}

    def unlocked(lifecycle, transition):
        if world["guard_error"]:
            raise world["guard_error"]
        world["seen"] = (transition.trigger, transition.payload)
        return world["unlocked"]

    def creak(lifecycle, transition):
        world["creaks"] += 1

    path = tmp_path / "doors.yaml"
    path.write_text(textwrap.dedent(CHART), encoding="utf-8")
    definition = load_definition(path, guards={"unlocked": unlocked}, actions={"creak": creak},
                                 env={})
    return definition, world


def test_without_the_request_a_lifecycle_has_no_model_methods(doors):
    definition, _ = doors
    door = definition.create(clock=VirtualClock())
    assert not hasattr(door, "is_closed") and not hasattr(door, "push")


def test_is_state_and_trigger_methods(doors):
    definition, world = doors
    with pytest.warns(UserWarning, match="names are taken: start"):
        door = definition.create(clock=VirtualClock(), model_methods=True)
    assert door.is_closed() and not door.is_open()
    assert door.push(hard=True)
    assert door.state == "open.wide" and world["creaks"] == 1
    assert door.is_open_wide() and not door.is_open()
    assert door.is_open(allow_substates=True)
    door.narrow_it()
    assert door.is_open_narrow()


def test_may_runs_the_guards_only(doors):
    definition, world = doors
    with pytest.warns(UserWarning):
        door = definition.create(clock=VirtualClock(), model_methods=True)
    assert door.may_push(hard=True) is True
    assert world["seen"] == ("push", {"hard": True})  # the guard saw the would-be transition
    assert world["creaks"] == 0 and door.state == "closed"
    world["unlocked"] = False
    assert door.may_push() is False
    assert door.may_lock() is True
    assert door.may_pull() is False  # no transition of "closed" answers it
    assert door.may_trigger("abort.now") is True  # a descriptor answers it
    with pytest.raises(UnknownTrigger):
        door.may_trigger("jump")
    world["guard_error"] = RuntimeError("the lock is jammed")
    with pytest.raises(GuardError):
        door.may_push()  # guards fail closed: "could not decide" is not "no"


def test_a_finished_lifecycle_may_take_nothing(doors):
    definition, _ = doors
    with pytest.warns(UserWarning):
        door = definition.create(clock=VirtualClock(), model_methods=True)
    door.lock()
    assert door.finished and door.may_push() is False


def test_to_state_is_refused_saying_the_orion_way(doors):
    definition, _ = doors
    with pytest.warns(UserWarning):
        door = definition.create(clock=VirtualClock(), model_methods=True)
    with pytest.raises(CompiledChartError, match="add a transition to the chart"):
        door.to_open_narrow()
    assert door.state == "closed"


def test_the_definition_switch_covers_create_and_restore(doors):
    definition, _ = doors
    definition.model_methods = True
    with pytest.warns(UserWarning):
        door = definition.create(clock=VirtualClock())
    door.push()
    again = definition.restore(door.snapshot(), clock=VirtualClock())
    assert again.is_open_wide() and type(again) is type(door)
    plain = definition.create(clock=VirtualClock(), model_methods=False)
    assert not hasattr(plain, "is_closed")


def test_a_chart_asks_for_model_methods_in_its_yaml_and_an_overlay_can_too(tmp_path: Path):
    """``model_methods: true`` in a chart (or in an overlay of Orion's) is the request: the
    lifecycles of that chart have the methods, its snapshots keep their chart hash, and the
    other charts' lifecycles stay plain."""
    from orion.config import load_config
    from orion.hooks.manager import make_plugin_manager
    from orion.statechart.io.catalog import Catalog

    ws = tmp_path / "ws"
    (ws / "lifecycles").mkdir(parents=True)
    (ws / "lifecycles" / "plan.yaml").write_text("extends: plan_mode\nmodel_methods: true\n",
                                                 encoding="utf-8")
    (ws / "orion.yaml").write_text("statecharts: [lifecycles/plan.yaml]\n", encoding="utf-8")
    plugins = make_plugin_manager(env={})
    asked = Catalog(plugins, load_config(ws, env={})).definition("plan_mode", env={})
    plain = Catalog(plugins, load_config(tmp_path, env={})).definition("plan_mode", env={})
    plan = asked.create()
    assert getattr(plan, "is_" + plan.state.replace(".", "_"))() is True
    methods = {f"may_{t}" for t in asked.triggers if t.isidentifier()}
    assert methods and methods <= set(dir(plan))
    assert not methods & set(dir(plain.create()))
    # Methods are not a rule of how the chart steps: its snapshots restore under either.
    assert asked.hash == plain.hash
    assert plain.restore(plan.snapshot()).state == plan.state
