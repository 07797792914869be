"""A compiled chart's machine is ``transitions``' hierarchical machine, extended: one step runs
the library's nesting code (measured with coverage.py, not spied on), the library's machine
callbacks run as it documents them, and the calls that would change a compiled chart behind
its file's back, or the library variants that cannot keep Orion's rules, raise an error that
says what to do instead."""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path
from typing import Any

import coverage
import pytest
import transitions.extensions.nesting as nesting
from transitions.extensions.asyncio import AsyncMachine
from transitions.extensions.locking import LockedMachine

from orion.clock import VirtualClock
from orion.errors import ActionError, CompiledChartError
from orion.statechart import load_definition
from orion.statechart.interpreter.semantics import LifecycleMachine

CHART = """
statechart: lamp
initial: "off"
states:
  "off": {}
  "on":
    initial: dim
    entry: light
    states:
      dim: {}
      bright: {}
  broken: {final: true}
transitions:
  - {trigger: switch, source: "off", dest: "on"}
  - {trigger: brighten, source: on.dim, dest: on.bright}
  - {trigger: switch, source: "on", dest: "off"}
  - {trigger: smash, source: "*", dest: broken}
"""


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, ...]] = []

    def lifecycle_transition(self, lifecycle, transition):
        self.events.append(("transition", transition.trigger, transition.dest))

    def lifecycle_finished(self, lifecycle):
        self.events.append(("finished", lifecycle.state))


@pytest.fixture
def lamp(tmp_path: Path):
    """A chart of its own per test: a test that adds callbacks to the machine changes no other
    test's (definitions are cached per file)."""
    failing: dict[str, Any] = {"light": False}

    def light(lifecycle, transition):
        if failing["light"]:
            raise RuntimeError("the bulb is gone")

    path = tmp_path / "lamp.yaml"
    path.write_text(textwrap.dedent(CHART), encoding="utf-8")
    definition = load_definition(path, actions={"light": light}, env={})
    return definition, failing


def _functions_run(lines: set[int], *functions: Any) -> set[str]:
    """Which of ``functions`` (of transitions' nesting module) ran one of ``lines``."""
    run = set()
    for function in functions:
        source, first = inspect.getsourcelines(function)
        if lines & set(range(first + 1, first + len(source))):
            run.add(function.__qualname__)
    return run


def test_one_step_runs_the_library_nesting_code(lamp):
    definition, _ = lamp
    lifecycle = definition.create(clock=VirtualClock(), listeners=[])
    measured = coverage.Coverage(data_file=None, include=[nesting.__file__], branch=False)
    measured.start()
    try:
        lifecycle.trigger("switch")
    finally:
        measured.stop()
    lines = set(measured.get_data().lines(nesting.__file__) or ())
    library = nesting.HierarchicalMachine
    # The library's event processing (``_trigger_event``: scope, exception and finalize
    # handling), its record of the nested state change (``_update_model``), its state tree.
    assert _functions_run(
        lines, library._trigger_event, library.__call__, library.__enter__, library.__exit__,
        library.get_states, library.build_state_tree, nesting.NestedTransition._update_model,
        nesting._build_state_list,
    ) == {"HierarchicalMachine._trigger_event", "HierarchicalMachine.__call__",
          "HierarchicalMachine.__enter__", "HierarchicalMachine.__exit__",
          "HierarchicalMachine.get_states", "HierarchicalMachine.build_state_tree",
          "NestedTransition._update_model", "_build_state_list"}
    assert len(lines) >= 30
    assert lifecycle.state == "on.dim"


def test_the_library_machine_callbacks_run_each_step(lamp):
    definition, failing = lamp
    machine = definition.machine
    seen: list[tuple[str, Any]] = []
    machine.prepare_event.append(lambda event: seen.append(("prepare", event.args)))
    machine.before_state_change.append(lambda event: seen.append(("before", event.model.state)))
    machine.after_state_change.append(lambda event: seen.append(("after", event.model.state)))
    machine.finalize_event.append(lambda event: seen.append(("finalize", event.error)))
    lifecycle = definition.create(clock=VirtualClock(), listeners=[])
    # Positional arguments reach the callbacks, as the library passes them.
    assert machine.trigger_event(lifecycle, "switch", 7, level=2)
    assert seen == [("prepare", (7,)), ("before", "off"), ("after", "on.dim"),
                    ("finalize", None)]
    # on_exception receives what the step raised instead of the caller.
    failing["light"] = True
    caught: list[BaseException] = []
    machine.on_exception.append(lambda event: caught.append(event.error))
    lifecycle.trigger("switch")
    lifecycle.trigger("switch")
    assert [type(error) for error in caught] == [ActionError]
    assert lifecycle.state == "on.dim"  # the transition completed (Errors and consistency)


def test_assigning_after_state_change_cuts_off_no_listener(lamp):
    definition, _ = lamp
    machine = definition.machine
    mine: list[str] = []
    machine.after_state_change = [lambda event: mine.append(event.model.state)]
    recorder = Recorder()
    lifecycle = definition.create(clock=VirtualClock(), listeners=[recorder])
    lifecycle.trigger("switch")
    lifecycle.trigger("smash")
    assert mine == ["on.dim", "broken"]
    assert recorder.events == [("transition", "switch", "on.dim"),
                               ("transition", "smash", "broken"), ("finished", "broken")]
    assert lifecycle.finished


def test_on_final_runs_when_the_lifecycle_finishes(lamp):
    definition, _ = lamp
    finals: list[str] = []
    definition.machine.on_final.append(lambda event: finals.append(event.model.state))
    lifecycle = definition.create(clock=VirtualClock(), listeners=[])
    lifecycle.trigger("switch")
    assert finals == []
    lifecycle.trigger("smash")
    assert finals == ["broken"]


@pytest.mark.parametrize(("call", "says"), [
    (lambda m, lc: m.add_state("extra"), "add them to the YAML file"),
    (lambda m, lc: m.add_transition("go", "off", "on"), "add them to the YAML file"),
    (lambda m, lc: m.remove_transition("switch"), "remove them from the YAML file"),
    (lambda m, lc: m.add_model(object()), "definition.create()"),
    (lambda m, lc: m.dispatch("switch"), "lifecycle.trigger(name)"),
    (lambda m, lc: m.to_state(lc, "on.bright"), "lifecycle.trigger()"),
    (lambda m, lc: m.set_state("on.bright", lc), "definition.restore(snapshot)"),
    (lambda m, lc: m.remove_model(lc), "nothing to remove"),
    (lambda m, lc: setattr(m, "initial", "on"), "change 'initial:' in the YAML file"),
    (lambda m, lc: setattr(m, "ignore_invalid_triggers", True), "lifecycle.may_trigger(name)"),
])
def test_calls_that_would_change_a_compiled_chart_say_what_to_do(lamp, call, says):
    definition, _ = lamp
    lifecycle = definition.create(clock=VirtualClock(), listeners=[])
    with pytest.raises(CompiledChartError, match="lamp: .* is not available") as raised:
        call(definition.machine, lifecycle)
    assert says in str(raised.value)
    # Nothing changed: the transition removal or addition did not half-happen.
    assert lifecycle.state == "off"
    assert lifecycle.trigger("switch")
    assert lifecycle.state == "on.dim"


@pytest.mark.parametrize(("variant", "says"), [
    (LockedMachine, "the locked variant is not offered"),
    (AsyncMachine, "the asyncio variant is not offered"),
])
def test_the_locked_and_asyncio_variants_are_refused_with_a_reason(variant, says):
    with pytest.raises(TypeError, match=says):
        type("Variant", (variant, LifecycleMachine), {})


def test_built_with_the_library_arguments_it_is_a_hierarchical_machine():
    class Model:
        pass

    model = Model()
    machine = LifecycleMachine(model=model, states=["A", {"name": "C", "children": ["1", "2"]}],
                               transitions=[["go", "A", "C_2"]], initial="A",
                               prepare_event="prepare")
    prepared: list[str] = []
    model.prepare = lambda: prepared.append(model.state)  # type: ignore[attr-defined]
    assert model.go()  # type: ignore[attr-defined]
    assert model.state == "C_2"  # type: ignore[attr-defined]
    assert prepared == ["A"]
    machine.add_transition("back", "C", "A")
    machine.remove_transition("back")
    with pytest.raises(AttributeError):
        model.back()  # type: ignore[attr-defined]
