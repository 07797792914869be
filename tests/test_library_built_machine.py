"""A ``LifecycleMachine`` built with ``transitions``' own arguments (no chart) is a drop-in
``HierarchicalMachine`` that keeps Orion's rules where they differ from the library's
(docs/statecharts.md, "On `transitions`"): the transition domain, ``type="internal"``,
``done.state`` events, one run-to-completion queue per model, and ``*`` ranked after every
state's own transitions. Each test sets the library's separator it relies on."""

from __future__ import annotations

from typing import Any

import pytest
import transitions.extensions.nesting as nesting
from transitions import MachineError

from orion.statechart.interpreter.semantics import LifecycleMachine


@pytest.fixture(autouse=True)
def dotted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nesting.NestedState, "separator", ".")


class Model:
    def __init__(self) -> None:
        self.seen: list[str] = []


def _watch(machine: LifecycleMachine, model: Model) -> None:
    for name in machine.get_nested_state_names():
        state = machine.get_state(name)
        state.on_enter.append(lambda *_, n=name: model.seen.append(f"enter {n}"))
        state.on_exit.append(lambda *_, n=name: model.seen.append(f"exit {n}"))


def _machine(transitions: list[Any], initial: str = "a.a1.one", **kwargs: Any) -> Model:
    model = Model()
    states = [{"name": "a", "initial": "a1", "children": [
        {"name": "a1", "initial": "one", "children": ["one", "two"]}]}, "z"]
    machine = LifecycleMachine(model, states=states, transitions=transitions, initial=initial,
                               auto_transitions=False, **kwargs)
    _watch(machine, model)
    return model


@pytest.mark.parametrize(("transition", "exits", "enters"), [
    ({"source": "a", "dest": "a.a1.two"}, ["a.a1.one", "a.a1", "a"], ["a", "a.a1", "a.a1.two"]),
    ({"source": "a", "dest": "a.a1.two", "type": "internal"}, ["a.a1.one", "a.a1"],
     ["a.a1", "a.a1.two"]),
    ({"source": "a.a1.one", "dest": "a.a1.two"}, ["a.a1.one"], ["a.a1.two"]),
    ({"source": "a.a1.one", "dest": "a.a1.one"}, ["a.a1.one"], ["a.a1.one"]),
    ({"source": "*", "dest": "z"}, ["a.a1.one", "a.a1", "a"], ["z"]),
])
def test_the_exit_and_entry_sets_are_the_transition_domains(transition, exits, enters):
    model = _machine([{"trigger": "go", **transition}])
    model.go()
    assert model.seen == [f"exit {s}" for s in exits] + [f"enter {s}" for s in enters]


def test_a_transition_type_other_than_internal_or_external_is_refused():
    with pytest.raises(ValueError, match="type must be 'external' or 'internal'"):
        _machine([{"trigger": "go", "source": "a", "dest": "z", "type": "sideways"}])


def test_a_wildcard_transition_ranks_after_the_states_own_whatever_the_order_added():
    model = _machine([{"trigger": "go", "source": "*", "dest": "z"},
                      {"trigger": "go", "source": "a", "dest": "a.a1.two"}])
    model.go()
    assert model.state == "a.a1.two"


def test_entering_a_final_child_raises_the_parents_completion_event_after_the_step():
    model = Model()
    machine = LifecycleMachine(
        model, states=[{"name": "job", "initial": "work",
                        "children": ["work", {"name": "finished", "final": True}]}, "next"],
        transitions=[["end", "job.work", "job.finished"], ["done.state.job", "job", "next"]],
        initial="job", auto_transitions=False)
    _watch(machine, model)
    assert model.end() is True
    assert model.state == "next"
    assert model.seen == ["exit job.work", "enter job.finished", "exit job.finished",
                          "exit job", "enter next"]


def test_a_completion_event_no_transition_answers_is_discarded():
    model = Model()
    LifecycleMachine(model, states=[{"name": "job", "initial": "work",
                                     "children": ["work", {"name": "finished", "final": True}]},
                                    "other"],
                     transitions=[["end", "job.work", "job.finished"],
                                  ["done.state.job", "other", "job"]],
                     initial="job", auto_transitions=False)
    assert model.end() is True
    assert model.state == "job.finished"


def test_a_trigger_sent_from_a_callback_waits_for_the_step_and_returns_none():
    model = Model()
    answers: list[Any] = []
    machine = LifecycleMachine(model, states=["a", "b", "c"],
                               transitions=[["go", "a", "b"], ["on", "b", "c"]], initial="a",
                               auto_transitions=False)
    machine.get_state("b").on_enter.append(lambda: answers.append(model.on()))
    machine.get_state("b").on_enter.append(lambda: answers.append(model.state))
    assert model.go() is True
    assert answers == [None, "b"]  # queued, and the step went on in "b"
    assert model.state == "c"


def test_each_model_has_its_own_queue():
    first, second = Model(), Model()
    machine = LifecycleMachine([first, second], states=["a", "b"],
                               transitions=[["go", "a", "b"]], initial="a",
                               auto_transitions=False)
    # While the first model's step runs, the second model's trigger is not behind it: it is
    # processed at once (True, not None).
    def send_once() -> None:
        if second.state == "a":
            first.seen.append(second.go())

    machine.get_state("b").on_enter.append(send_once)
    first.go()
    assert first.seen == [True] and second.state == "b"


def test_an_error_drops_the_events_queued_behind_it():
    model = Model()
    machine = LifecycleMachine(model, states=["a", "b", "c"],
                               transitions=[["go", "a", "b"], ["on", "b", "c"]], initial="a",
                               auto_transitions=False)

    def fail() -> None:
        model.on()
        raise RuntimeError("boom")

    machine.get_state("b").on_enter.append(fail)
    with pytest.raises(RuntimeError, match="boom"):
        model.go()
    assert model.state == "b"
    assert model.on() is True  # nothing is left queued for the model


def test_a_trigger_the_state_does_not_answer_still_raises_the_librarys_error():
    model = _machine([["go", "a", "z"]])
    assert model.trigger("go") is True
    with pytest.raises(MachineError):
        model.trigger("go")  # from "z": the library's answer is kept


def test_a_jump_to_a_final_child_completes_before_its_completion_event_is_taken():
    model = Model()
    machine = LifecycleMachine(
        model, states=[{"name": "job", "initial": "work",
                        "children": ["work", {"name": "finished", "final": True}]}, "next"],
        transitions=[["done.state.job", "job", "next"]], initial="next", auto_transitions=False)
    _watch(machine, model)
    machine.to_state(model, "job.finished")
    assert model.seen == ["exit next", "enter job", "enter job.finished", "exit job.finished",
                          "exit job", "enter next"]
