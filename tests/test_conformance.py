"""Conformance of the engine to the rules of docs/statecharts.md, section "Semantics".

Each test is one rule on a small chart of its own. The recorder plugin's ``in`` and ``out``
actions log the state being entered or exited (the engine names it in ``lifecycle.state`` while
that state's actions run), so a test reads the exact exit and entry order.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import orion
from orion.clock import VirtualClock
from orion.errors import ActionError, StatechartError, TriggerNotAllowed, UnknownTrigger
from orion.hooks.manager import make_plugin_manager
from orion.statechart import checks
from orion.statechart.interpreter.definition import load_definition, parse


class Recorder:
    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []
        self.discarded: list[tuple[str, str]] = []
        self.transitions: list[tuple[str, str, str | None]] = []

    @orion.hookimpl
    def register_actions(self, register):
        register("in", lambda lc, tr: self.log.append(("in", lc.state)))
        register("out", lambda lc, tr: self.log.append(("out", lc.state)))
        register("act", lambda lc, tr: self.log.append(("act", tr.trigger)))
        register("fail", self._fail)
        # Sends each trigger listed in context["send"] (queued: a transition is in progress).
        register("send", lambda lc, tr: [lc.trigger(t) for t in lc.context.get("send", [])])

    @orion.hookimpl
    def register_guards(self, register):
        register("allow", lambda lc, tr: True)
        register("refuse", lambda lc, tr: False)

    @staticmethod
    def _fail(lifecycle, transition):
        raise OSError(f"failed in {lifecycle.state}")

    @orion.hookimpl
    def lifecycle_transition(self, lifecycle, transition):
        self.transitions.append((transition.trigger, transition.source, transition.dest))

    @orion.hookimpl
    def lifecycle_event_discarded(self, lifecycle, trigger, payload, reason):
        self.discarded.append((trigger, reason))


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def load(tmp_path: Path, rec: Recorder):
    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(rec, "recorder")

    def load_chart(text: str, **create: Any):
        path = tmp_path / "chart.yaml"
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        lifecycle = load_definition(path, plugins=pm, env={}).create(
            clock=create.pop("clock", None) or VirtualClock(), **create)
        rec.log.clear()
        rec.transitions.clear()
        return lifecycle
    return load_chart


# A compound state ``a`` whose child ``a1`` is compound too; every state logs entry and exit.
NESTED = """
statechart: nested
initial: a
states:
  a:
    entry: in
    exit: out
    initial: a1
    states:
      a1:
        entry: in
        exit: out
        initial: one
        states:
          one: {entry: in, exit: out}
          two: {entry: in, exit: out}
      a2: {entry: in, exit: out}
  z:
    entry: in
    final: true
transitions:
  # These make every state reachable and leavable (the static checks require it); the tests
  # send other triggers.
  - {trigger: w1, source: a.a1.one, dest: a.a1.two}
  - {trigger: w2, source: a.a1.two, dest: a.a2}
  - {trigger: w3, source: a.a2, dest: z}
%s
"""


def nested(load, *transitions: str):
    return load(NESTED % textwrap.indent("\n".join(transitions), "  "))


# -- transition domain and exit set (SCXML 3.13) -------------------------------------------------


def test_an_external_transition_into_a_descendant_exits_and_reenters_its_source(load, rec):
    lc = nested(load, "- {trigger: go, source: a, dest: a.a1.two}")
    assert lc.trigger("go")
    assert rec.log == [("out", "a.a1.one"), ("out", "a.a1"), ("out", "a"),
                       ("in", "a"), ("in", "a.a1"), ("in", "a.a1.two")]
    assert lc.state == "a.a1.two"


def test_an_internal_transition_into_a_descendant_keeps_its_source_active(load, rec):
    lc = nested(load, "- {trigger: go, source: a, dest: a.a1.two, type: internal}")
    assert lc.trigger("go")
    # a.a1 is exited too: it is active but not the target's ancestor below the domain ``a``.
    assert rec.log == [("out", "a.a1.one"), ("out", "a.a1"), ("in", "a.a1"), ("in", "a.a1.two")]


@pytest.mark.parametrize("dest", ["a.a1", "a.a1.one", "a.a1.two", "a.a2"])
def test_every_target_inside_the_source_is_treated_alike(load, rec, dest):
    """Whether the target is the source's child, grandchild, or the active leaf itself, an
    internal transition exits exactly the active states below the source, and an external one
    also exits the source."""
    for kind, exited in (("internal", ["a.a1.one", "a.a1"]),
                         ("external", ["a.a1.one", "a.a1", "a"])):
        lc = nested(load, f"- {{trigger: go, source: a, dest: {dest}, type: {kind}}}")
        lc.trigger("go")
        assert [s for k, s in rec.log if k == "out"] == exited, kind
        entered = [s for k, s in rec.log if k == "in"]
        settled = {"a.a1": "a.a1.one"}.get(dest, dest)
        lineage = [p for p in dict.fromkeys(("a", "a.a1", "a.a2", settled))
                   if settled == p or settled.startswith(p + ".")]
        assert entered == (lineage if kind == "external" else lineage[1:]), kind


def test_a_transition_between_siblings_exits_only_up_to_their_common_parent(load, rec):
    lc = nested(load, "- {trigger: go, source: a.a1.one, dest: a.a1.two}")
    lc.trigger("go")
    assert rec.log == [("out", "a.a1.one"), ("in", "a.a1.two")]


def test_a_self_transition_exits_and_reenters_even_when_marked_internal(load, rec):
    """``internal`` only changes a transition from a compound state into its descendants."""
    lc = nested(load, "- {trigger: go, source: a.a1.one, dest: a.a1.one, type: internal}",
                "- {trigger: again, source: a.a1, dest: a.a1}")
    lc.trigger("go")
    assert rec.log == [("out", "a.a1.one"), ("in", "a.a1.one")]
    rec.log.clear()
    lc.trigger("again")
    assert rec.log == [("out", "a.a1.one"), ("out", "a.a1"), ("in", "a.a1"), ("in", "a.a1.one")]


def test_a_targetless_transition_exits_nothing_and_keeps_timers(load, rec):
    lc = load("""
        statechart: targetless
        initial: s
        states:
          s:
            entry: in
            exit: out
            after: [{ms: 100, trigger: late, dest: t}]
          t: {final: true}
        transitions:
          - {trigger: poke, source: s, actions: act}
    """)
    deadline = lc.pending_timers()
    assert lc.trigger("poke")
    assert rec.log == [("act", "poke")]
    assert lc.pending_timers() == deadline
    assert rec.transitions == [("poke", "s", "s")]


def test_a_wildcard_transition_exits_every_active_state(load, rec):
    lc = nested(load, "- {trigger: stop, source: '*', dest: z}")
    lc.trigger("stop")
    assert rec.log == [("out", "a.a1.one"), ("out", "a.a1"), ("out", "a"), ("in", "z")]
    assert lc.finished


# -- priority -------------------------------------------------------------------------------------


def test_the_innermost_state_wins_then_document_order(load, rec):
    lc = nested(load,
                "- {trigger: go, source: a, dest: a.a2}",
                "- {trigger: go, source: a.a1, dest: a.a1.two, guards: refuse}",
                "- {trigger: go, source: a.a1.one, dest: z, guards: refuse}",
                "- {trigger: go, source: a.a1, dest: a.a1.two, actions: act}",
                "- {trigger: go, source: a.a1, dest: a.a2}")
    lc.trigger("go")
    # The leaf's transition is refused by its guard; a.a1's first is refused, its second wins
    # over its third (document order) and over a's (outer).
    assert lc.state == "a.a1.two"
    assert ("act", "go") in rec.log


def test_a_wildcard_transition_ranks_after_every_state_transition(load, rec):
    lc = nested(load,
                "- {trigger: go, source: '*', dest: z}",
                "- {trigger: go, source: a, dest: a.a2}")
    lc.trigger("go")
    assert lc.state == "a.a2"  # the '*' transition came first in the file, yet ranks last
    lc2 = nested(load,
                 "- {trigger: go, source: '*', dest: z}",
                 "- {trigger: go, source: a, dest: a.a2, guards: refuse}")
    lc2.trigger("go")
    assert lc2.state == "z"


def test_a_delayed_transition_sent_by_code_competes_as_a_transition_of_its_state(load, rec):
    lc = load("""
        statechart: timers
        initial: p
        states:
          p:
            initial: c
            after: [{ms: 100, trigger: tick, dest: q}]
            states:
              c:
                after: [{ms: 500, trigger: tick, dest: r}]
          q: {final: true}
          r: {final: true}
    """)
    assert lc.trigger("tick")
    assert lc.state == "r"  # the inner state's timer transition wins


# -- run to completion ---------------------------------------------------------------------------


RTC = """
statechart: rtc
context:
  send: [nope, next]
initial: s1
states:
  s1: {}
  s2: {}
  s3: {final: true}
transitions:
  - {trigger: go, source: s1, dest: s2, actions: send}
  - {trigger: next, source: s2, dest: s3}
  - {trigger: nope, source: s1, dest: s3}
"""


def test_a_queued_trigger_that_nothing_answers_is_discarded_and_the_rest_still_run(load, rec):
    lc = load(RTC)
    assert lc.trigger("go")  # the completed call does not raise
    assert rec.discarded == [("nope", "no transition answers it in 's2'")]
    assert lc.state == "s3"  # the trigger queued behind the discarded one was processed
    assert [t[0] for t in rec.transitions] == ["go", "next"]


def test_a_queued_trigger_whose_guards_all_refuse_is_discarded(load, rec):
    lc = load("""
        statechart: guarded
        context: {send: [later]}
        initial: s1
        states:
          s1: {}
          s2: {}
          s3: {final: true}
        transitions:
          - {trigger: go, source: s1, dest: s2, actions: send}
          - {trigger: later, source: s2, dest: s3, guards: refuse}
          - {trigger: end, source: s2, dest: s3}
    """)
    assert lc.trigger("go")
    assert rec.discarded == [("later", "every guard said no in 's2'")]
    assert not lc.trigger("later")  # directly: False, as documented, and no discard
    assert len(rec.discarded) == 1


def test_a_direct_trigger_keeps_its_errors(load, rec):
    lc = load(RTC)
    with pytest.raises(TriggerNotAllowed):
        lc.trigger("next")
    with pytest.raises(UnknownTrigger):
        lc.trigger("no_such_trigger")
    lc.trigger("nope")
    assert lc.finished
    # After a top-level final state every defined trigger is not allowed (none is)...
    with pytest.raises(TriggerNotAllowed) as info:
        lc.trigger("go")
    assert info.value.allowed == []
    # ...and a name the chart does not define is still unknown.
    with pytest.raises(UnknownTrigger):
        lc.trigger("no_such_trigger")
    assert rec.discarded == []


def test_triggers_queued_after_the_lifecycle_finished_are_discarded(load, rec):
    lc = load(RTC.replace("send: [nope, next]", "send: [go, next]")
              .replace("{trigger: nope, source: s1, dest: s3}",
                       "{trigger: nope, source: s1, dest: s3, actions: send}"))
    assert lc.trigger("nope")
    assert lc.finished
    assert rec.discarded == [("go", "the lifecycle has finished"),
                             ("next", "the lifecycle has finished")]


# -- error atomicity -------------------------------------------------------------------------------


ATOMIC = """
statechart: atomic
initial: p
states:
  p:
    exit: %s
    initial: c
    after: [{ms: 100, trigger: p_tick, dest: q}]
    states:
      c:
        exit: out
        after: [{ms: 50, trigger: c_tick, dest: p}]
  q:
    entry: %s
    initial: q1
    after: [{ms: 70, trigger: q_tick, dest: r}]
    states:
      q1:
        entry: in
        after: [{ms: 30, trigger: q1_tick, dest: r}]
  r: {final: true}
transitions:
  - {trigger: go, source: p, dest: q}
  - {trigger: broken, source: p, dest: q, actions: [act, fail]}
"""


def test_a_failing_exit_action_still_completes_the_transition_with_its_timers(load, rec):
    clock = VirtualClock()
    lc = load(ATOMIC % ("[fail, out]", "in"), clock=clock)
    with pytest.raises(ActionError, match="failed in p") as info:
        lc.trigger("go")
    assert info.value.action == "fail"
    # p's block stopped at the failure ('out' did not run for p); c exited before it; q entered.
    assert rec.log == [("out", "p.c"), ("in", "q"), ("in", "q.q1")]
    assert lc.state == "q.q1"
    assert sorted(lc.pending_timers()) == [("q", "q_tick", 70.0), ("q.q1", "q1_tick", 30.0)]
    assert clock.pending() == [30.0, 70.0]  # nothing of p or p.c is left on the clock
    assert rec.transitions == [("go", "p.c", "q.q1")]
    clock.advance(30)
    assert lc.state == "r" and lc.finished


def test_a_failing_entry_action_skips_its_block_but_the_inner_states_are_entered(load, rec):
    lc = load(ATOMIC % ("out", "[fail, in]"))
    with pytest.raises(ActionError, match="on entry to 'q'"):
        lc.trigger("go")
    assert rec.log == [("out", "p.c"), ("out", "p"), ("in", "q.q1")]
    assert lc.state == "q.q1"
    assert {s for s, _, _ in lc.pending_timers()} == {"q", "q.q1"}


def test_a_failing_transition_action_changes_nothing(load, rec):
    clock = VirtualClock()
    lc = load(ATOMIC % ("out", "in"), clock=clock)
    before = sorted(lc.pending_timers())
    with pytest.raises(ActionError):
        lc.trigger("broken")
    assert rec.log == [("act", "broken")]
    assert lc.state == "p.c" and sorted(lc.pending_timers()) == before
    assert rec.transitions == []


def test_triggers_queued_before_an_action_failed_are_discarded_with_a_reason(load, rec):
    lc = load(RTC.replace("actions: send", "actions: [send, fail]"))
    with pytest.raises(ActionError):
        lc.trigger("go")
    assert lc.state == "s1"
    assert rec.discarded == [("nope", "an action failed before it was processed"),
                             ("next", "an action failed before it was processed")]
    assert lc.trigger("nope")  # not stuck busy
    assert lc.state == "s3"


def test_a_failing_timer_action_keeps_the_clock_and_other_timers_right(load, rec):
    clock = VirtualClock()
    chart = """
        statechart: timed
        initial: w
        states:
          w:
            after: [{ms: 10, trigger: t, dest: x, actions: %s}]
          x: {final: true}
    """
    failing = load(chart % "fail", clock=clock)
    fine = load(chart % "act", clock=clock)
    with pytest.raises(ActionError):
        clock.advance(100)
    assert clock.now_ms() == 100.0
    assert failing.state == "w" and failing.pending_timers() == []  # fired, its action failed
    assert fine.state == "x" and fine.finished  # the later timer still fired


def test_a_timer_queued_while_its_state_is_exited_is_discarded(load, rec):
    """Two timers fall due at once; the first one's transition leaves the second's state."""
    clock = VirtualClock()
    lc = load("""
        statechart: race
        initial: w
        states:
          w:
            initial: inner
            after: [{ms: 10, trigger: first, dest: xa, actions: act}]
            states:
              inner:
                after: [{ms: 10, trigger: second, dest: yb}]
          xa: {}
          yb: {final: true}
        transitions:
          - {trigger: end, source: xa, dest: yb}
    """, clock=clock)
    clock.advance(10)
    assert lc.state == "xa"  # armed first (outer state entered first), fired first
    assert rec.discarded == []  # the second timer was cancelled on exit, before its turn


# -- completion events ------------------------------------------------------------------------------


DONE = """
statechart: done
initial: job
states:
  job:
    initial: working
    states:
      working: {}
      finished: {final: true, entry: in}
  review: {entry: in}
  over: {final: true}
transitions:
  - {trigger: complete, source: job.working, dest: job.finished}
  - {trigger: done.state.job, source: job, dest: review}
  - {trigger: close, source: review, dest: over}
"""


def test_entering_a_nested_final_state_raises_done_state_of_its_parent(load, rec):
    lc = load(DONE)
    assert lc.trigger("complete")
    assert lc.state == "review"
    assert rec.log == [("in", "job.finished"), ("in", "review")]
    assert rec.transitions == [("complete", "job.working", "job.finished"),
                               ("done.state.job", "job.finished", "review")]
    assert not lc.finished  # only a top-level final finishes the lifecycle


def test_a_completion_event_nobody_handles_is_discarded(load, rec):
    lc = load(DONE.replace("- {trigger: done.state.job, source: job, dest: review}",
                           "- {trigger: next, source: job, dest: review}"))
    lc.trigger("complete")
    assert lc.state == "job.finished"
    assert rec.discarded == [("done.state.job", "no transition answers it in 'job.finished'")]


def test_a_chart_that_starts_in_a_nested_final_raises_its_completion_at_start(load, rec):
    lc = load(DONE.replace("initial: working", "initial: finished")
              .replace("dest: over}", "dest: over}\n  - {trigger: redo, source: review, "
                                      "dest: job.working}"))
    assert lc.state == "review"


def test_done_state_of_a_state_without_a_final_child_is_a_check_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(DONE.replace("done.state.job", "done.state.review"), encoding="utf-8")
    with pytest.raises(StatechartError, match="'done.state.review' never happens"):
        load_definition(path, guards={}, env={})


def test_a_completion_event_that_re_enters_its_own_state_is_a_check_error(tmp_path):
    """`done.state.job: job -> job` enters job.finished again, which raises it again: the
    trigger would never return (a chart of a team spun `orion run` at 100 % CPU)."""
    path = tmp_path / "spin.yaml"
    path.write_text(DONE.replace("{trigger: done.state.job, source: job, dest: review}",
                                 "{trigger: done.state.job, source: job, dest: job.finished}\n"
                                 "  - {trigger: look, source: job, dest: review}"),
                    encoding="utf-8")
    with pytest.raises(StatechartError) as info:
        load_definition(path, guards={}, env={})
    [finding] = [d for d in info.value.diagnostics if d.code != "SC401"]  # `in`: the recorder's
    assert (finding.code, finding.line, finding.column) == ("SC303", 14, 15)
    assert finding.message.startswith("'done.state.job' re-enters 'job.finished', which raises "
                                      "'done.state.job' again at once: the lifecycle would "
                                      "never come to rest")


def test_completion_events_that_lead_to_each_other_are_a_check_error(tmp_path):
    path = tmp_path / "pair.yaml"
    path.write_text(textwrap.dedent("""\
        statechart: pair
        initial: a
        states:
          a: {initial: x, states: {x: {}, ax: {final: true}}}
          b: {initial: bx, states: {bx: {final: true}}}
          c: {final: true}
        transitions:
          - {trigger: go, source: a.x, dest: a.ax}
          - {trigger: done.state.a, source: a, dest: b}
          - {trigger: done, source: b, dest: a.ax}
          - {trigger: stop, source: a.x, dest: c}
        """), encoding="utf-8")
    with pytest.raises(StatechartError) as info:
        load_definition(path, guards={}, env={})
    assert [(d.code, d.line) for d in info.value.diagnostics] == [("SC303", 10)]
    assert "'done.state.a' enters 'b.bx', then 'done.state.b' enters 'a.ax'" in \
        info.value.diagnostics[0].message


def test_a_zero_ms_timer_that_re_enters_its_state_is_a_check_error(tmp_path):
    path = tmp_path / "tick.yaml"
    path.write_text("statechart: tick\ninitial: t\nstates:\n  t:\n    after:\n"
                    "      - {ms: 0, dest: t}\n  u: {final: true}\n"
                    "transitions:\n  - {trigger: stop, source: t, dest: u}\n", encoding="utf-8")
    with pytest.raises(StatechartError, match=r"tick.yaml:6:14: the 0 ms timer 'timeout' of "
                                              r"'t' re-enters 't'"):
        load_definition(path, guards={}, env={})
    path.write_text(path.read_text().replace("ms: 0", "ms: 1"), encoding="utf-8")
    assert load_definition(path, guards={}, env={}).create(clock=VirtualClock()).state == "t"


def test_a_guarded_completion_loop_passes_the_check_and_the_engine_stops_it(load, rec):
    """A guard may end a loop, so the check lets it through; one that never ends is stopped
    after MAX_MICROSTEPS events with a clear error, and the lifecycle stays usable."""
    from orion.errors import MacrostepLimit
    from orion.statechart.interpreter.lifecycle import MAX_MICROSTEPS

    lc = load(DONE.replace("{trigger: done.state.job, source: job, dest: review}",
                           "{trigger: done.state.job, source: job, dest: job.finished, "
                           "guards: allow}\n  - {trigger: look, source: job, dest: review}"))
    with pytest.raises(MacrostepLimit) as info:
        lc.trigger("complete")
    message = str(info.value)
    assert message.startswith("done: trigger 'complete' did not come to rest within 10,000 "
                              "microsteps (state 'job.finished'; still queued: done.state.job)")
    assert len(rec.transitions) == MAX_MICROSTEPS + 1  # 'complete', then every microstep
    assert rec.discarded == [("done.state.job", "the trigger did not come to rest")]
    assert lc.state == "job.finished"
    assert lc.trigger("look") and lc.state == "review"  # consistent, and it goes on


# -- event descriptors (SCXML 3.12.1) --------------------------------------------------------------


DESCRIPTORS = """
statechart: descriptors
initial: p
states:
  p:
    initial: s0
    states:
      s0:
        initial: inner
        states:
          inner: {}
          end: {final: true}
  q: {entry: in}
  r: {entry: in}
  z: {final: true}
transitions:
  - {trigger: finish, source: p.s0.inner, dest: p.s0.end}
%s
  # These make every state reachable (the static checks require it); the tests send others.
  - {trigger: wq, source: p, dest: q}
  - {trigger: wr, source: q, dest: r}
  - {trigger: stop, source: [q, r], dest: z}
"""


def descriptors(load, *transitions: str):
    return load(DESCRIPTORS % textwrap.indent("\n".join(transitions), "  "))


def test_a_transition_on_done_is_taken_by_a_completion_event(load, rec):
    """W3C test 399: a descriptor matches an event name or a dot-separated prefix of it."""
    lc = descriptors(load, "- {trigger: done, source: p, dest: q}")
    assert lc.trigger("finish")
    assert lc.state == "q"
    assert rec.transitions[-1] == ("done.state.p.s0", "p.s0.end", "q")


@pytest.mark.parametrize("descriptor", ["foo", "foo.*", "foo.bar"])
def test_a_descriptor_answers_the_events_it_prefixes_token_by_token(load, rec, descriptor):
    lc = descriptors(load, f"- {{trigger: '{descriptor}', source: p, dest: q}}")
    with pytest.raises(UnknownTrigger):
        lc.trigger("foobar")  # a prefix of the text is not a prefix of the tokens
    with pytest.raises(UnknownTrigger):
        lc.trigger("fo")
    assert lc.trigger("foo.bar.baz")
    assert rec.transitions == [("foo.bar.baz", "p.s0.inner", "q")]


def test_within_a_state_document_order_decides_between_matching_descriptors(load, rec):
    lc = descriptors(load, "- {trigger: foo, source: p.s0.inner, dest: q}",
                     "- {trigger: foo.bar, source: p.s0.inner, dest: r}")
    assert lc.trigger("foo.bar") and lc.state == "q"


def test_an_inner_state_wins_over_a_more_specific_descriptor_outside(load, rec):
    lc = descriptors(load, "- {trigger: foo.bar, source: p, dest: r}",
                     "- {trigger: foo, source: p.s0, dest: q}")
    assert lc.trigger("foo.bar") and lc.state == "q"


def test_the_any_event_descriptor_answers_every_event_in_document_order(load, rec):
    lc = descriptors(load, "- {trigger: '*', source: p.s0.inner, dest: r}",
                     "- {trigger: go, source: p.s0.inner, dest: q}")
    assert lc.trigger("anything.at.all")
    assert lc.state == "r"
    lc = descriptors(load, "- {trigger: '*', source: p.s0.inner, dest: r}",
                     "- {trigger: go, source: p.s0.inner, dest: q}")
    assert lc.trigger("go") and lc.state == "r"  # the '*' transition comes first in the file


def test_a_trigger_lists_descriptors_separated_by_spaces(load, rec):
    """W3C test 399's ``event="foo bar"``: the transition answers an event either matches."""
    lc = descriptors(load, "- {trigger: 'foo bar.*', source: p, dest: q}",
                     "- {trigger: 'foo bar', source: q, dest: r}")
    assert lc.trigger("bar.baz") and lc.state == "q"
    assert lc.trigger("foo") and lc.state == "r"
    assert rec.transitions == [("bar.baz", "p.s0.inner", "q"), ("foo", "q", "r")]
    with pytest.raises(UnknownTrigger):
        lc.trigger("foos")


def test_a_completion_descriptor_names_one_state_however_deep(load, rec):
    """``done.state.job`` answers the completion of ``job`` only: the completion of
    ``job.phase`` is ``done.state.job.phase`` (a state path is one token), as SCXML's
    ``done.state.phase`` is not answered by a transition on ``done.state.job``."""
    lc = load("""
        statechart: deep
        initial: job
        states:
          job:
            initial: phase
            states:
              phase:
                initial: work
                states:
                  work: {}
                  over: {final: true}
              wrapup: {final: true}
          review: {entry: in}
          end: {final: true}
        transitions:
          - {trigger: finish, source: job.phase.work, dest: job.phase.over}
          - {trigger: done.state.job, source: job, dest: review}
          - {trigger: 'done.state.job.*', source: job, dest: review}
          - {trigger: wrap, source: job.phase, dest: job.wrapup}
          - {trigger: close, source: review, dest: end}
    """)
    assert lc.trigger("finish")
    assert lc.state == "job.phase.over"
    assert rec.discarded == [("done.state.job.phase", "no transition answers it in "
                                                      "'job.phase.over'")]
    assert lc.trigger("wrap")
    assert lc.state == "review"
    assert rec.transitions[-1] == ("done.state.job", "job.wrapup", "review")


def test_a_completion_descriptor_that_never_happens_is_still_a_check_error(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(DESCRIPTORS % "  - {trigger: 'done.state.q.*', source: p, dest: q}",
                    encoding="utf-8")
    with pytest.raises(StatechartError, match="'done.state.q.\\*' never happens"):
        load_definition(path, guards={}, env={})


# -- limits and scale ---------------------------------------------------------------------------------


def deep_chart(depth: int) -> str:
    lines = ["statechart: deep", "initial: s0", "states:"]
    indent = "  "
    for i in range(depth):
        lines.append(f"{indent}s{i}:")
        if i < depth - 1:
            lines += [f"{indent}  initial: s{i + 1}", f"{indent}  states:"]
            indent += "    "
        else:
            lines.append(f"{indent}  final: true")
    return "\n".join(lines) + "\n"


def test_nesting_beyond_the_depth_limit_is_a_located_diagnostic(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text(deep_chart(checks.MAX_DEPTH + 1), encoding="utf-8")
    _, spec, diagnostics = parse(path, None, check_names=False)
    assert spec is None and len(diagnostics) == 1
    found = diagnostics[0]
    assert f"the limit is {checks.MAX_DEPTH}" in found.message
    assert found.line == 4 + 3 * checks.MAX_DEPTH  # the too-deep state's own line
    path.write_text(deep_chart(checks.MAX_DEPTH), encoding="utf-8")
    assert parse(path, None, check_names=False)[2] == []


@pytest.mark.slow
def test_orion_check_on_absurd_nesting_prints_one_line_not_a_traceback(tmp_path):
    path = tmp_path / "deeper.yaml"
    path.write_text(deep_chart(400), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "orion", "check", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    assert f"{path}:" in result.stdout + result.stderr
    assert "nested too deeply" in result.stdout + result.stderr


def test_a_large_chart_is_checked_with_the_same_findings(tmp_path):
    """The indexed checks still find an unreachable state and a dead end among many."""
    leaves = [f"s{i}" for i in range(2000)]
    lines = ["statechart: big", "initial: s0", "states:"]
    lines += [f"  {s}: {{}}" for s in leaves] + ["  orphan: {}", "  end: {final: true}",
                                                  "transitions:"]
    lines += [f"  - {{trigger: next, source: {a}, dest: {b}}}"
              for a, b in zip(leaves, leaves[1:])]
    lines += ["  - {trigger: stop, source: s1998, dest: end}"]
    path = tmp_path / "big.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _, _, diagnostics = parse(path, None, check_names=False)
    messages = sorted(d.message for d in diagnostics)
    assert messages == ["state 'orphan' is unreachable from the initial state 's0'",
                        "state 's1999' is not final but has no transition or timer that "
                        "leaves it"]


def test_writing_the_default_type_keeps_the_definition_hash(tmp_path):
    """Snapshots taken before ``type`` existed still restore: the default is not hashed."""
    plain = tmp_path / "plain.yaml"
    plain.write_text(DONE, encoding="utf-8")
    spelled = tmp_path / "spelled.yaml"
    spelled.write_text(DONE.replace("dest: review}", "dest: review, type: external}"),
                       encoding="utf-8")
    internal = tmp_path / "internal.yaml"
    internal.write_text(DONE.replace("dest: review}", "dest: review, type: internal}"),
                        encoding="utf-8")
    for p in (plain, spelled, internal):
        p.write_text(p.read_text(encoding="utf-8").replace(", entry: in", "")
                     .replace("{entry: in}", "{}"), encoding="utf-8")
    hashes = [load_definition(p, guards={}, env={}).hash for p in (plain, spelled, internal)]
    assert hashes[0] == hashes[1] != hashes[2]


# -- the discard is traced ----------------------------------------------------------------------------


class QueueTooEarly:
    """Starts a write session and, while ``begin`` is processed, sends ``valid``, which the
    session only answers once it is finalizing."""

    @orion.hookimpl
    def register_slash_commands(self, register):
        def begin(runtime, args):
            runtime.start_lifecycle("write_session").trigger("begin")
        register("begin-write", begin, "")

    @orion.hookimpl
    def lifecycle_transition(self, lifecycle, transition):
        if transition.trigger == "begin":
            lifecycle.trigger("valid")


def test_a_discarded_trigger_is_a_trace_event_of_the_run(tmp_path):
    import asyncio
    import json
    import sqlite3

    from orion.models.script import load_script
    from orion.runtime.runner import play

    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(QueueTooEarly(), "queue-too-early")
    script = tmp_path / "script.yaml"
    script.write_text("conversation:\n  - user: /begin-write\n", encoding="utf-8")
    workspace = tmp_path / "ws"
    result = asyncio.run(play(load_script(script), workspace=workspace, plugins=pm))
    assert result.ok, result.errors
    db = sqlite3.connect(workspace / ".orion" / "orion.db")
    found = [(name, json.loads(attributes)) for name, attributes in db.execute(
        "select name, attributes from trace_events where kind = 'discarded_event'")]
    assert [name for name, _ in found] == ["write_session valid discarded"]
    attributes = found[0][1]
    assert attributes["orion.state"] == "session_active.awaiting_content"
    assert attributes["orion.reason"] == ("no transition answers it in "
                                          "'session_active.awaiting_content'")
