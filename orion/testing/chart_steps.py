"""Steps that drive a small statechart written in the scenario itself: what the engine does on
entry, exit, a timer or a queued event, read from the actions the chart runs
(docs/testing.md, "Statechart steps"; the rules are docs/design/statecharts.md).

``Given the statechart:`` takes the chart as a docstring, compiles it with Orion's engine (the
same :func:`~orion.statechart.load_definition` the runtime uses) and starts one instance on a
virtual clock at 0 ms. The chart may use these actions and guards, provided by the steps:

* ``enter`` and ``exit`` (as a state's ``entry``/``exit``): note ``enter <state>`` or
  ``exit <state>``, the state the engine has active while the action runs;
* ``act`` (as a transition's ``actions``): notes ``act <event>``;
* ``send_<event>``: sends ``<event>`` to the lifecycle from inside the action (it is queued
  behind the event being processed) and notes ``send <event>``;
* ``fail``: raises ``OSError`` (the engine turns it into an ``ActionError``);
* the guards ``always`` and ``never``, and ``broken``, a guard that raises.

What the engine refuses (``UnknownTrigger``, ``TriggerNotAllowed``, ``ActionError``) is kept as
an Orion error, as the conversation steps keep theirs: ``Then Orion reports an error containing
"..."`` expects it, and a scenario fails at its end on one it did not expect.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pytest_bdd import given, parsers, then, when

from orion.clock import VirtualClock
from orion.errors import OrionError
from orion.testing.steps import lines_of, table_rows, unescape
from orion.testing.world import World

__all__ = ["ChartRun"]


@dataclass
class ChartRun:
    """One chart of a scenario: its lifecycle, its clock and what happened, in order."""

    lifecycle: Any
    clock: VirtualClock
    #: ``enter a``, ``exit a.b``, ``act go``, ``send next``, in the order they happened.
    log: list[str] = field(default_factory=list)
    #: ``(event, reason)`` of each queued event nothing answered.
    discarded: list[tuple[str, str]] = field(default_factory=list)
    #: ``(guard, error)`` of each guard that raised.
    guard_failures: list[tuple[str, str]] = field(default_factory=list)
    #: How much of ``log`` there was when the last When step began.
    mark: int = 0
    finished: bool = False

    # -- the listener --------------------------------------------------------------------

    def lifecycle_event_discarded(self, lifecycle: Any, trigger: str, payload: Any,
                                  reason: str) -> None:
        self.discarded.append((trigger, reason))

    def guard_failed(self, lifecycle: Any, guard: str, owner: str,
                     error: BaseException) -> None:
        self.guard_failures.append((guard, f"{type(error).__name__}: {error}"))

    def lifecycle_finished(self, lifecycle: Any) -> None:
        self.finished = True

    @property
    def since_mark(self) -> list[str]:
        return self.log[self.mark:]


def _chart(world: World) -> ChartRun:
    run = world.data.get("chart")
    assert run is not None, "no statechart was given: start with `Given the statechart:`"
    return run


def _callables(world: World, text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    def note(entry: str) -> None:
        world.data["chart_log"].append(entry)

    def fail(lifecycle: Any, transition: Any) -> None:
        raise OSError(f"the action failed in {lifecycle.state}")

    def sender(event: str) -> Any:
        def send(lifecycle: Any, transition: Any) -> None:
            note(f"send {event}")
            lifecycle.trigger(event)
        return send

    actions: dict[str, Any] = {
        "enter": lambda lifecycle, transition: note(f"enter {lifecycle.state}"),
        "exit": lambda lifecycle, transition: note(f"exit {lifecycle.state}"),
        "act": lambda lifecycle, transition: note(f"act {transition.trigger}"),
        "fail": fail,
    }
    for event in set(re.findall(r"\bsend_(\w+)", text)):
        actions[f"send_{event}"] = sender(event)

    def broken(lifecycle: Any, transition: Any) -> bool:
        raise ValueError("the guard broke")

    guards = {"always": lambda lifecycle, transition: True,
              "never": lambda lifecycle, transition: False, "broken": broken}
    return guards, actions


def _kept(world: World, action: Any) -> Any:
    """Run ``action``; an Orion error is kept for the Then steps, as conversations keep it."""
    try:
        return action()
    except OrionError as exc:
        world.errors.append(exc)
        return None


# -- Given ---------------------------------------------------------------------------------


@given("the statechart:")
def the_statechart(orion_world: World, docstring: str) -> None:
    """Compile the chart with Orion's engine and start it (its initial states' entry actions
    run: ``Then the actions ran in this order`` right after it reads them)."""
    from orion.statechart import load_definition

    text = lines_of(docstring)
    directory = orion_world.root / "charts"
    directory.mkdir(exist_ok=True)
    path = directory / "chart.yaml"
    path.write_text(text, encoding="utf-8")
    guards, actions = _callables(orion_world, text)
    definition = load_definition(path, guards=guards, actions=actions, env={})
    clock = VirtualClock(start_ms=0)
    log: list[str] = []
    orion_world.data["chart_log"] = log
    run = ChartRun(lifecycle=None, clock=clock, log=log)
    orion_world.data["chart"] = run
    run.lifecycle = _kept(orion_world, lambda: definition.create(clock=clock, listeners=[run]))
    assert run.lifecycle is not None, f"the statechart did not start: {orion_world.errors}"


@given(parsers.re(r'the workspace has Orion\'s "(?P<name>\w+)" chart as "(?P<path>[^"]+)", with '
                  r"these changes:"))
def workspace_has_changed_builtin(orion_world: World, name: str, path: str,
                                  datatable: list[list[str]]) -> None:
    """A copy of Orion's built-in chart in the workspace (a chart that replaces it, not an
    overlay), with each ``| from | to |`` row's text replaced wherever it occurs (a cell's
    ``\\n`` is a line break). A row whose text does not occur fails the step."""
    from orion.statechart import builtin_statechart

    text = builtin_statechart(name).read_text(encoding="utf-8")
    for old, new in table_rows(datatable, "from", "to"):
        old, new = unescape(old), unescape(new)
        assert old in text, f"Orion's {name} chart has no {old!r}"
        text = text.replace(old, new)
    target = orion_world.workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


# -- When ----------------------------------------------------------------------------------


@when(parsers.re(r'the event "(?P<event>[^"]+)" is sent'))
def event_is_sent(orion_world: World, event: str) -> None:
    run = _chart(orion_world)
    run.mark = len(run.log)
    _kept(orion_world, lambda: run.lifecycle.trigger(event))


@when(parsers.re(r"(?P<ms>\d+) ms pass on the chart's clock"), converters={"ms": int})
def chart_clock_moves(orion_world: World, ms: int) -> None:
    run = _chart(orion_world)
    run.mark = len(run.log)
    _kept(orion_world, lambda: run.clock.advance(ms))


@when(parsers.re(r'the code asks the chart whether it has the tag "(?P<tag>[^"]+)"'))
def code_asks_tag(orion_world: World, tag: str) -> None:
    run = _chart(orion_world)
    run.mark = len(run.log)
    orion_world.data["chart_answer"] = _kept(orion_world, lambda: run.lifecycle.has_tag(tag))


# -- Then ----------------------------------------------------------------------------------


@then(parsers.re(r'the answer is "(?P<answer>yes|no)"'))
def the_answer_is(orion_world: World, answer: str) -> None:
    assert orion_world.data.get("chart_answer") is (answer == "yes"), \
        orion_world.data.get("chart_answer")


@then(parsers.re(r'the chart is in "(?P<state>[^"]+)"'))
def chart_is_in(orion_world: World, state: str) -> None:
    assert _chart(orion_world).lifecycle.state == state, _chart(orion_world).lifecycle.state


@then("the actions ran in this order:")
def actions_ran(orion_world: World, docstring: str) -> None:
    """Since the last When step (or since the chart started): each line one action, as the
    actions note them (``enter a.b``, ``exit a``, ``act go``, ``send next``)."""
    wanted = [line.strip() for line in docstring.splitlines() if line.strip()]
    ran = _chart(orion_world).since_mark
    assert ran == wanted, "the actions ran as:\n  " + "\n  ".join(ran or ["(none)"])


@then(parsers.re(r'the action "(?P<entry>[^"]+)" ran (?P<count>[\d,]+) times'))
def action_ran_times(orion_world: World, entry: str, count: str) -> None:
    """Since the last When step: how often the action noted ``entry`` (``send again``)."""
    ran = _chart(orion_world).since_mark.count(entry)
    assert ran == int(count.replace(",", "")), f"{entry!r} ran {ran:,} times"


@then("no action ran")
def no_action_ran(orion_world: World) -> None:
    ran = _chart(orion_world).since_mark
    assert not ran, ran


@then(parsers.re(r'the timer of "(?P<state>[^"]+)" is set for (?P<ms>\d+) ms'),
      converters={"ms": int})
def timer_is_set(orion_world: World, state: str, ms: int) -> None:
    """A timer of the state is armed, due at that time of the chart's clock (which started
    at 0 ms)."""
    armed = _chart(orion_world).lifecycle.pending_timers()
    assert any(s == state and deadline == ms for s, _, deadline in armed), armed


@then(parsers.re(r'no timer of "(?P<state>[^"]+)" is set'))
def no_timer_is_set(orion_world: World, state: str) -> None:
    armed = _chart(orion_world).lifecycle.pending_timers()
    assert not any(s == state for s, _, _ in armed), armed


@then(parsers.re(r'the event "(?P<event>[^"]+)" was discarded(?: because "(?P<why>[^"]+)")?'))
def event_was_discarded(orion_world: World, event: str, why: str | None) -> None:
    discarded = _chart(orion_world).discarded
    assert any(e == event and (why is None or why in reason) for e, reason in discarded), \
        discarded


@then(parsers.re(r'the guard "(?P<guard>\w+)" was reported as failed'))
def guard_reported(orion_world: World, guard: str) -> None:
    failures = _chart(orion_world).guard_failures
    assert any(g == guard for g, _ in failures), failures


@then("the chart has finished")
def chart_finished(orion_world: World) -> None:
    run = _chart(orion_world)
    assert run.finished and run.lifecycle.finished, run.lifecycle.state
