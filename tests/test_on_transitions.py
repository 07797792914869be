"""A lifecycle is a ``transitions`` machine: the library's classes execute every transition
Orion takes, and a ``transitions`` user finds the machine, its states and its transitions.

These tests need no plugin manager: guards and actions are plain functions, and the test
listens to the lifecycle itself.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import transitions.core
from transitions.extensions.nesting import (
    HierarchicalMachine,
    NestedEvent,
    NestedState,
    NestedTransition,
)

from orion.clock import VirtualClock
from orion.errors import ActionError, GuardError
from orion.statechart import load_definition

CHART = """
statechart: doors
initial: closed
context:
  opened: 0
states:
  closed:
    tags: shut
    entry: log
    exit: log
  open:
    tags: [ajar]
    entry: [log, count]
    exit: log
    initial: wide
    states:
      wide:
        entry: log
        exit: log
        after:
          - {ms: 100, trigger: drift, dest: open.narrow}
      narrow:
        entry: log
        exit: log
  locked: {final: true, entry: log}
transitions:
  - {trigger: push, source: closed, dest: open, guards: unlocked, actions: creak}
  - {trigger: pull, source: open, dest: closed, actions: ask}
  - {trigger: lock, source: closed, dest: locked, unless: unlocked}
  - {trigger: lock, source: closed, dest: locked}
"""


class Recorder:
    """A listener: what the lifecycle reports, without pluggy."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def lifecycle_started(self, lifecycle):
        self.events.append(("started", lifecycle.state))

    def lifecycle_transition(self, lifecycle, transition):
        self.events.append(("transition", transition.trigger, transition.source,
                            transition.dest))

    def lifecycle_finished(self, lifecycle):
        self.events.append(("finished", lifecycle.state))

    def lifecycle_prompt(self, lifecycle, text):
        self.events.append(("prompt", text))

    def guard_failed(self, lifecycle, guard, owner, error):
        self.events.append(("guard_failed", guard, owner, str(error)))


@pytest.fixture
def doors(tmp_path: Path):
    log: list[tuple[str, str]] = []

    def unlocked(lifecycle, transition):
        return lifecycle.context.get("unlocked", True)

    actions = {
        "log": lambda lc, tr: log.append((tr.trigger, lc.state)),
        "count": lambda lc, tr: lc.context.update(opened=lc.context["opened"] + 1),
        "creak": lambda lc, tr: log.append(("creak", lc.state)),
        "ask": lambda lc, tr: lc.prompt(f"closed after {lc.context['opened']} opening(s)"),
    }
    path = tmp_path / "doors.yaml"
    path.write_text(textwrap.dedent(CHART), encoding="utf-8")
    definition = load_definition(path, guards={"unlocked": unlocked}, actions=actions, env={})
    return definition, log


def test_the_definition_needs_no_plugin_manager(doors):
    definition, log = doors
    recorder = Recorder()
    lc = definition.create(clock=VirtualClock(), listeners=[recorder])
    assert definition.plugins is None and lc.plugins is None
    assert recorder.events == [("started", "closed")]
    assert log == [("start", "closed")]


def test_the_machine_states_and_transitions_are_transitions_objects(doors):
    definition, _ = doors
    lc = definition.create(clock=VirtualClock(), listeners=[])
    machine = lc.machine
    assert isinstance(machine, HierarchicalMachine)
    assert machine is definition.machine  # one machine per chart, every lifecycle its model
    state = machine.get_state("open.narrow")
    assert isinstance(state, NestedState) and state.name == "narrow"
    assert list(machine.get_state("open").states) == ["wide", "narrow"]
    assert isinstance(machine.events["push"], NestedEvent)
    [push] = machine.get_transitions("push")
    assert isinstance(push, NestedTransition)
    assert (push.source, push.dest) == ("closed", "open")
    assert [(c.func.name, c.target) for c in push.conditions] == [("unlocked", True)]
    first, second = machine.get_transitions("lock")
    assert [(c.func.name, c.target) for c in first.conditions] == [("unlocked", False)]
    assert second.conditions == []
    # The delayed transition is a transition of its state, as transitions has it.
    [drift] = machine.get_transitions("drift", source="open.wide")
    assert drift.dest == "open.narrow"
    assert machine.is_state("open", lc, allow_substates=False) is False
    assert "push" in machine.get_triggers("closed")


def test_transitions_executes_every_transition_and_state_change(doors, monkeypatch):
    """Spy on the library's own classes: every transition Orion takes runs through
    ``transitions.core.Transition.execute``, its guards through ``Condition.check``, and every
    exit and entry through ``State.exit``/``State.enter`` with Orion's states."""
    calls: list[tuple[Any, ...]] = []

    def spy(cls, name, describe):
        original = getattr(cls, name)

        def wrapper(self, event_data):
            calls.append((name, *describe(self)))
            return original(self, event_data)

        monkeypatch.setattr(cls, name, wrapper)

    spy(transitions.core.Transition, "execute", lambda t: (t.source, t.dest))
    spy(transitions.core.Condition, "check", lambda c: (c.func.name, c.target))
    spy(transitions.core.State, "enter", lambda s: (s.path,))
    spy(transitions.core.State, "exit", lambda s: (s.path,))
    definition, log = doors
    clock = VirtualClock()
    lc = definition.create(clock=clock, listeners=[])
    assert calls == [("enter", "closed")]
    calls.clear()
    assert lc.trigger("push")
    assert calls == [("execute", "closed", "open"), ("check", "unlocked", True),
                     ("exit", "closed"), ("enter", "open"), ("enter", "open.wide")]
    calls.clear()
    clock.advance(100)  # the timer's transition goes the same way
    assert calls == [("execute", "open.wide", "open.narrow"), ("exit", "open.wide"),
                     ("enter", "open.narrow")]
    assert lc.state == "open.narrow"
    assert log[-3:] == [("push", "open.wide"), ("drift", "open.wide"),
                        ("drift", "open.narrow")]


def test_a_guard_that_says_no_stops_in_the_condition(doors, monkeypatch):
    definition, _ = doors
    lc = definition.create(clock=VirtualClock(), listeners=[], context={"unlocked": False})
    executed = []
    original = transitions.core.Transition.execute
    monkeypatch.setattr(transitions.core.Transition, "execute",
                        lambda self, ed: executed.append(self.dest) or original(self, ed))
    assert not lc.trigger("push")
    assert executed == ["open"] and lc.state == "closed"
    assert lc.trigger("lock")  # the first lock transition's ``unless`` passes
    assert executed == ["open", "locked"] and lc.finished


def test_trigger_returns_what_happened(doors):
    definition, _ = doors
    recorder = Recorder()
    lc = definition.create(clock=VirtualClock(), listeners=[recorder])
    step = lc.trigger("push")
    assert step and step.taken and step.trigger == "push"
    assert step.exited == ["closed"] and step.entered == ["open", "open.wide"]
    assert step.tags_gained == {"ajar"} and step.tags_lost == {"shut"}
    assert step.state == "open.wide" and step.prompts == []
    assert [(t.trigger, t.source, t.dest) for t in step.transitions] == [
        ("push", "closed", "open.wide")]
    step = lc.trigger("pull")
    assert step.exited == ["open.wide", "open"] and step.entered == ["closed"]
    assert step.prompts == ["closed after 1 opening(s)"]
    assert ("prompt", "closed after 1 opening(s)") in recorder.events
    lc.context["unlocked"] = False
    refused = lc.trigger("push")
    assert not refused and refused.exited == [] and refused.transitions == []


def one_step(tmp_path: Path, edge: str) -> Path:
    """A chart ``a --go--> b`` whose transition also has ``edge`` (``guards: x``)."""
    path = tmp_path / "one_step.yaml"
    path.write_text("statechart: one_step\ninitial: a\nstates:\n  a: {}\n  b: {final: true}\n"
                    f"transitions:\n  - {{trigger: go, source: a, dest: b, {edge}}}\n",
                    encoding="utf-8")
    return path


def test_a_failing_guard_is_reported_to_the_listeners_and_stops_the_event(tmp_path):
    path = one_step(tmp_path, "guards: broken")

    def broken(lifecycle, transition):
        raise RuntimeError("no idea")

    recorder = Recorder()
    lc = load_definition(path, guards={"broken": broken}, env={}).create(listeners=[recorder])
    with pytest.raises(GuardError) as raised:
        lc.trigger("go")
    assert ("guard_failed", "broken", "callables", "no idea") in recorder.events
    assert lc.state == "a"
    line = broken.__code__.co_firstlineno + 1
    assert str(raised.value) == (f"one_step: plugin 'callables' failed in guard 'broken' "
                                 f"({__file__}:{line}) deciding 'go' in state 'a': "
                                 "RuntimeError: no idea; no transition was taken")


def test_an_action_error_from_a_function_names_it(tmp_path):
    path = one_step(tmp_path, "actions: fail")

    def fail(lifecycle, transition):
        raise OSError("disk full")

    lc = load_definition(path, actions={"fail": fail}, env={}).create(listeners=[])
    with pytest.raises(ActionError, match="'fail' failed on 'go'.*disk full"):
        lc.trigger("go")
    assert lc.state == "a"


def test_the_engine_runs_on_the_callables_it_is_given_and_loads_no_plugin_manager(
        tmp_path: Path):
    # The engine takes guards and actions from its caller: a script that loads a chart on
    # plain functions never pulls in the plugin manager (nor pluggy's hooks with it).
    path = tmp_path / "doors.yaml"
    path.write_text(textwrap.dedent(CHART), encoding="utf-8")
    code = textwrap.dedent(f"""\
        import sys
        from orion.statechart import load_definition
        definition = load_definition({str(path)!r}, guards={{"unlocked": lambda lc, tr: True}},
                                     actions={{n: (lambda lc, tr: None)
                                              for n in ("log", "count", "creak", "ask")}},
                                     env={{}})
        lifecycle = definition.create(listeners=[])
        print(lifecycle.state, "orion.hooks.manager" in sys.modules)
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert proc.stdout.split() == ["closed", "False"]


def test_a_load_naming_no_guards_actions_or_plugins_still_loads_and_warns(tmp_path: Path):
    # Written before the engine took its guards and actions from the caller: it keeps working
    # with Orion's plugins, and says how to write it now.
    path = tmp_path / "plain.yaml"
    path.write_text("statechart: plain\ninitial: a\nstates:\n  a: {}\n  b: {final: true}\n"
                    "transitions:\n  - {trigger: go, source: a, dest: b}\n", encoding="utf-8")
    with pytest.warns(DeprecationWarning, match="plugins=, guards= or actions="):
        definition = load_definition(path, env={})
    assert definition.plugins is not None
    lifecycle = definition.create(clock=VirtualClock(), listeners=[])
    lifecycle.trigger("go")
    assert lifecycle.state == "b"
