"""The running engine: compiled statecharts driven through real plugins and a VirtualClock."""

from __future__ import annotations

import asyncio
import json

import pytest
import transitions.extensions.nesting

import orion
from orion.clock import RealClock, VirtualClock
from orion.errors import ActionError, GuardError, TriggerNotAllowed, UnknownTrigger
from orion.statechart.interpreter.definition import load_definition

# A chart with nested states (names with underscores), entry/exit actions on every level,
# internal, self, wildcard and parent-sourced transitions, and timers.
NESTED = """
statechart: nested
settings:
  wait_ms:
    type: int
    default: 100
    min: 1
context:
  count: 0
  notes: []
initial: idle
states:
  idle:
    entry: enter_idle
    exit: exit_idle
  session_active:
    entry: enter_outer
    exit: exit_outer
    initial: awaiting_content
    states:
      awaiting_content:
        entry: enter_inner
        exit: exit_inner
        after:
          - ms: wait_ms
            trigger: idle_timeout
            dest: session_active.waiting_more
      waiting_more:
        entry: enter_other
        exit: exit_other
        after:
          - ms: 50
            trigger: nudge
            actions: act2
  done:
    entry: enter_done
    final: true
transitions:
  - trigger: begin
    source: idle
    dest: session_active
    actions: act
  - trigger: more
    source: session_active.waiting_more
    dest: session_active.awaiting_content
  - trigger: poke
    source: session_active.awaiting_content
    actions: act
  - trigger: again
    source: session_active.awaiting_content
    dest: session_active.awaiting_content
  - trigger: leave
    source: session_active
    dest: idle
    actions: act
  - trigger: finish
    source: session_active
    dest: done
  - trigger: reset
    source: "*"
    dest: idle
  - trigger: crash
    source: idle
    dest: session_active
    actions: boom
  - trigger: unreachable_here
    source: session_active.waiting_more
    dest: idle
"""


@pytest.fixture
def nested(pm, probe, write_chart):
    return load_definition(write_chart(NESTED), plugins=pm, env={})


@pytest.fixture
def clock():
    return VirtualClock()


# -- nesting and the separator --------------------------------------------------------------


def test_nested_paths_use_dots_and_keep_the_library_default_separator(nested, clock, probe, statecharts):
    assert transitions.extensions.nesting.NestedState.separator == "_"
    assert "session_active.awaiting_content" in nested.leaves
    assert "session_active.waiting_more" in nested.leaves
    lc = nested.create(clock=clock)
    assert lc.state == "idle"
    assert lc.trigger("begin")
    assert lc.state == "session_active.awaiting_content"
    assert lc.is_in("session_active")
    assert lc.is_in("session_active.awaiting_content")
    assert not lc.is_in("session")  # a prefix of a name is not an ancestor
    assert not lc.is_in("idle")
    # Loading another chart, and another machine, leaves the default alone as well.
    load_definition(statecharts / "write_session.yaml", plugins=nested.plugins, env={})
    assert transitions.extensions.nesting.NestedState.separator == "_"


def test_initial_entry_runs_outer_before_inner(pm, probe, write_chart, clock):
    path = write_chart("""
        statechart: starts_nested
        initial: outer_state
        states:
          outer_state:
            entry: enter_outer
            initial: inner_state
            states:
              inner_state:
                entry: enter_inner
          done:
            final: true
        transitions:
          - trigger: finish
            source: outer_state
            dest: done
    """)
    definition = load_definition(path, plugins=pm, env={})
    lc = definition.create(clock=clock)
    assert lc.state == "outer_state.inner_state"
    assert probe.log == ["enter_outer", "enter_inner"]
    assert probe.started == [lc.id]


def test_entering_a_compound_state_enters_its_initial_child(nested, clock, probe):
    lc = nested.create(clock=clock)
    probe.log.clear()
    lc.trigger("begin")
    # transition action first, then exit, then entry outer before inner
    assert probe.log == ["act", "exit_idle", "enter_outer", "enter_inner"]


def test_exit_runs_inner_before_outer_and_transition_actions_before_any_exit(nested, clock,
                                                                              probe):
    lc = nested.create(clock=clock)
    lc.trigger("begin")
    probe.log.clear()
    assert lc.trigger("leave")
    assert lc.state == "idle"
    assert probe.log == ["act", "exit_inner", "exit_outer", "enter_idle"]


def test_sibling_transition_does_not_exit_the_parent(nested, clock, probe):
    lc = nested.create(clock=clock)
    lc.trigger("begin")
    clock.advance(100)
    assert lc.state == "session_active.waiting_more"
    probe.log.clear()
    lc.trigger("more")
    assert lc.state == "session_active.awaiting_content"
    assert probe.log == ["exit_other", "enter_inner"]


def test_transition_from_a_compound_parent_applies_in_each_child(nested, clock):
    for advance in (0, 100):  # in awaiting_content, then in waiting_more
        lc = nested.create(clock=clock)
        lc.trigger("begin")
        clock.advance(advance)
        assert lc.is_in("session_active")
        assert "leave" in lc.allowed_triggers()
        assert lc.trigger("leave")
        assert lc.state == "idle"
        assert lc.pending_timers() == []


def test_wildcard_source_applies_in_every_state(nested, clock, probe):
    lc = nested.create(clock=clock)
    assert lc.trigger("reset")  # from idle to idle: a self-transition
    assert lc.state == "idle"
    lc.trigger("begin")
    assert lc.trigger("reset")
    assert lc.state == "idle"
    lc.trigger("begin")
    clock.advance(100)
    assert lc.state == "session_active.waiting_more"
    probe.log.clear()
    assert lc.trigger("reset")
    assert lc.state == "idle"
    assert probe.log == ["exit_other", "exit_outer", "enter_idle"]
    assert lc.pending_timers() == []


def test_internal_transition_keeps_entry_actions_and_timers(nested, clock, probe):
    lc = nested.create(clock=clock)
    lc.trigger("begin")
    assert lc.pending_timers() == [("session_active.awaiting_content", "idle_timeout", 100.0)]
    clock.advance(60)
    probe.log.clear()
    assert lc.trigger("poke")
    assert lc.state == "session_active.awaiting_content"
    assert probe.log == ["act"]  # no exit, no entry
    assert lc.pending_timers() == [("session_active.awaiting_content", "idle_timeout", 100.0)]
    assert probe.records[-1].dest == "session_active.awaiting_content"
    clock.advance(39)
    assert lc.state == "session_active.awaiting_content"
    clock.advance(1)  # the original deadline still holds
    assert lc.state == "session_active.waiting_more"


def test_self_transition_reruns_exit_and_entry_and_rearms_the_timer(nested, clock, probe):
    lc = nested.create(clock=clock)
    lc.trigger("begin")
    clock.advance(60)
    probe.log.clear()
    assert lc.trigger("again")
    assert lc.state == "session_active.awaiting_content"
    assert probe.log == ["exit_inner", "enter_inner"]  # the parent stays active
    assert lc.pending_timers() == [("session_active.awaiting_content", "idle_timeout", 160.0)]
    clock.advance(40)  # the old deadline (100) passes without effect
    assert lc.state == "session_active.awaiting_content"
    clock.advance(59)
    assert lc.state == "session_active.awaiting_content"
    clock.advance(1)
    assert lc.state == "session_active.waiting_more"


def test_transition_records_reach_observers(nested, clock, probe):
    lc = nested.create(clock=clock, instance_id="abc123")
    clock.advance(7)
    lc.trigger("begin", who="me")
    record = probe.records[-1]
    assert record.lifecycle == "nested"
    assert record.instance_id == "abc123"
    assert record.trigger == "begin"
    assert record.source == "idle"
    assert record.dest == "session_active.awaiting_content"
    assert record.payload == {"who": "me"}
    assert record.at_ms == 7.0
    assert record.duration_ms >= 0.0
    assert lc.current is record


def test_payload_reaches_actions(nested, clock, probe):
    seen = []
    probe.effects["act"] = lambda lc, tr: seen.append((tr.trigger, tr.payload))
    lc = nested.create(clock=clock)
    lc.trigger("begin", bytes=3)
    assert seen == [("begin", {"bytes": 3})]


# -- guards ---------------------------------------------------------------------------------

GUARDED = """
statechart: guarded
initial: a
states:
  a: {}
  b: {}
  c: {}
transitions:
  - trigger: go_deny
    source: a
    dest: b
    guards: deny
  - trigger: go_allow_deny
    source: a
    dest: b
    guards: [allow, deny]
  - trigger: go_unless
    source: a
    dest: b
    unless: flag
  - trigger: go_explode
    source: a
    dest: b
    guards: explode
    actions: act
  - trigger: pick
    source: a
    dest: b
    guards: flag
  - trigger: pick
    source: a
    dest: c
  - trigger: back
    source: [b, c]
    dest: a
"""


@pytest.fixture
def guarded(pm, probe, write_chart):
    return load_definition(write_chart(GUARDED), plugins=pm, env={})


def test_false_guard_returns_false_and_keeps_the_state(guarded, clock, probe):
    lc = guarded.create(clock=clock)
    assert not lc.trigger("go_deny")
    assert lc.state == "a"
    assert not lc.trigger("go_allow_deny")
    assert lc.state == "a"
    assert probe.transitions == []  # no observer call for a transition not taken
    assert probe.guard_calls == ["deny", "allow", "deny"]


def test_unless_blocks_when_the_guard_is_true(guarded, clock):
    lc = guarded.create(clock=clock, context={"flag": True})
    assert not lc.trigger("go_unless")
    assert lc.state == "a"
    lc.context["flag"] = False
    assert lc.trigger("go_unless")
    assert lc.state == "b"


def test_first_transition_whose_guards_pass_wins(guarded, clock):
    lc = guarded.create(clock=clock, context={"flag": True})
    assert lc.trigger("pick")
    assert lc.state == "b"
    lc.trigger("back")
    lc.context["flag"] = False
    assert lc.trigger("pick")
    assert lc.state == "c"


def test_a_raising_guard_fails_closed_and_is_reported(guarded, clock, probe):
    pm = guarded.plugins
    lc = guarded.create(clock=clock)
    with pytest.raises(GuardError, match="plugin 'probe' failed in guard 'explode'"):
        lc.trigger("go_explode")
    assert lc.state == "a"
    assert "act" not in probe.log
    assert len(pm.failures) == 1
    failure = pm.failures[0]
    assert failure.plugin == "probe"
    assert "explode" in failure.hook
    assert "RuntimeError" in failure.error and "guard blew up" in failure.error


# -- triggers that cannot be taken ----------------------------------------------------------


def test_trigger_not_allowed_lists_the_allowed_triggers(nested, clock):
    lc = nested.create(clock=clock)
    with pytest.raises(TriggerNotAllowed) as info:
        lc.trigger("more")
    err = info.value
    assert not isinstance(err, UnknownTrigger)
    assert err.trigger == "more" and err.state == "idle"
    assert err.allowed == ["begin", "crash", "reset"]
    assert "'more' is not allowed in state 'idle'" in str(err)
    assert "begin, crash, reset" in str(err)
    assert lc.state == "idle"


def test_allowed_triggers_include_parent_transitions_and_timers(nested, clock):
    lc = nested.create(clock=clock)
    lc.trigger("begin")
    assert lc.allowed_triggers() == ["again", "finish", "idle_timeout", "leave", "poke", "reset"]


def test_unknown_trigger_is_an_error_that_names_the_defined_triggers(nested, clock):
    lc = nested.create(clock=clock)
    with pytest.raises(UnknownTrigger, match="unknown trigger 'nope'") as info:
        lc.trigger("nope")
    assert "begin" in str(info.value) and "reset" in str(info.value)
    assert isinstance(info.value, TriggerNotAllowed)  # callers may catch either
    assert lc.state == "idle"


def test_reaching_a_final_state_finishes_once_and_cancels_timers(nested, clock, probe):
    lc = nested.create(clock=clock)
    lc.trigger("begin")
    assert lc.pending_timers()
    assert lc.trigger("finish")
    assert lc.state == "done"
    assert lc.finished is True
    assert probe.finished == [lc.id]
    assert lc.pending_timers() == []
    assert clock.pending() == []
    assert lc.allowed_triggers() == []
    with pytest.raises(TriggerNotAllowed, match="allowed here: none"):
        lc.trigger("reset")  # even the wildcard is closed now
    with pytest.raises(UnknownTrigger):
        lc.trigger("nope")
    clock.advance(10_000)
    assert probe.finished == [lc.id]
    assert lc.state == "done"


def test_parent_timer_is_cancelled_when_finishing(pm, probe, write_chart, clock):
    path = write_chart("""
        statechart: parent_timer
        initial: outer_state
        states:
          outer_state:
            initial: inner_state
            after:
              - ms: 100
                trigger: tick
                actions: act
            states:
              inner_state: {}
          end:
            final: true
        transitions:
          - trigger: stop
            source: outer_state
            dest: end
    """)
    lc = load_definition(path, plugins=pm, env={}).create(clock=clock)
    assert lc.pending_timers() == [("outer_state", "tick", 100.0)]
    lc.trigger("stop")
    assert lc.pending_timers() == [] and clock.pending() == []
    clock.advance(1000)
    assert probe.log == []


# -- failing actions ------------------------------------------------------------------------


def test_failing_transition_action_raises_action_error_and_keeps_the_source(nested, clock,
                                                                            probe):
    lc = nested.create(clock=clock)
    probe.log.clear()
    with pytest.raises(ActionError) as info:
        lc.trigger("crash")
    err = info.value
    assert err.action == "boom"
    assert "'boom'" in str(err) and "'crash'" in str(err) and "kaboom" in str(err)
    assert isinstance(err.cause, ValueError)
    assert lc.state == "idle"
    assert probe.log == ["boom"]  # nothing exited, nothing entered
    assert probe.transitions == []
    # the lifecycle is still usable
    assert lc.trigger("begin")
    assert lc.state == "session_active.awaiting_content"


def test_failing_entry_action_names_the_action_and_the_state(nested, clock, probe):
    probe.effects["enter_inner"] = lambda lc, tr: (_ for _ in ()).throw(OSError("disk full"))
    lc = nested.create(clock=clock)
    with pytest.raises(ActionError, match=r"'enter_inner' failed on entry to "
                                          r"'session_active.awaiting_content'.*disk full"):
        lc.trigger("begin")


def test_a_lifecycle_recovers_after_a_failed_trigger(nested, clock, probe):
    """The engine's busy flag and queue are reset after an error."""
    lc = nested.create(clock=clock)
    probe.effects["boom"] = lambda l, t: l.trigger("reset")  # queued, then dropped by the error
    with pytest.raises(ActionError):
        lc.trigger("crash")
    assert lc.state == "idle"
    assert lc.trigger("begin")
    assert [t[1] for t in probe.transitions] == ["begin"]


# -- run to completion ----------------------------------------------------------------------


def test_trigger_from_an_action_is_queued_until_the_current_transition_completes(nested, clock,
                                                                                 probe):
    results = []

    def act(lifecycle, transition):
        if transition.trigger == "begin":
            results.append(lifecycle.trigger("poke"))  # queued
            results.append(lifecycle.state)  # still the source: nothing ran yet

    probe.effects["act"] = act
    lc = nested.create(clock=clock)
    assert lc.trigger("begin")
    assert results == [None, "idle"]
    assert [(t[1], t[2], t[3]) for t in probe.transitions] == [
        ("begin", "idle", "session_active.awaiting_content"),
        ("poke", "session_active.awaiting_content", "session_active.awaiting_content"),
    ]
    assert probe.log == ["enter_idle", "act", "exit_idle", "enter_outer", "enter_inner", "act"]


def test_entry_action_trigger_runs_after_the_entering_transition(nested, clock, probe):
    probe.effects["enter_inner"] = lambda lc, tr: lc.trigger("leave") if tr.trigger == "begin" \
        else None
    lc = nested.create(clock=clock)
    lc.trigger("begin")
    assert lc.state == "idle"
    assert [t[1] for t in probe.transitions] == ["begin", "leave"]


def test_queued_triggers_run_in_order(nested, clock, probe):
    def act(lifecycle, transition):
        if transition.trigger == "begin":
            lifecycle.trigger("poke")
            lifecycle.trigger("leave")

    probe.effects["act"] = act
    lc = nested.create(clock=clock)
    lc.trigger("begin")
    assert [t[1] for t in probe.transitions] == ["begin", "poke", "leave"]
    assert lc.state == "idle"


def test_an_action_in_one_lifecycle_can_drive_another_of_the_same_definition(nested, clock,
                                                                             probe):
    """One compiled machine serves both instances, so its processing must be re-entrant."""
    first = nested.create(clock=clock, instance_id="first")
    second = nested.create(clock=clock, instance_id="second")

    def act(lifecycle, transition):
        if lifecycle is first and transition.trigger == "begin":
            assert second.trigger("begin")  # a different lifecycle: runs right now
            assert second.state == "session_active.awaiting_content"
            second.trigger("again")

    probe.effects["act"] = act
    assert first.trigger("begin")
    assert first.state == "session_active.awaiting_content"
    assert second.state == "session_active.awaiting_content"
    assert [(t[0], t[1]) for t in probe.transitions] == [
        ("second", "begin"), ("second", "again"), ("first", "begin")]
    # Both keep working independently afterwards, including nested parent transitions.
    assert second.trigger("leave") and second.state == "idle"
    assert first.state == "session_active.awaiting_content"
    assert first.trigger("finish") and first.finished and not second.finished


def test_nested_lifecycle_trigger_from_exit_action_mid_transition(nested, clock, probe):
    """Another instance is driven while this one is between exit and entry."""
    first = nested.create(clock=clock, instance_id="first")
    second = nested.create(clock=clock, instance_id="second")
    second.trigger("begin")

    def exit_inner(lifecycle, transition):
        if lifecycle is first:
            second.trigger("leave")

    probe.effects["exit_inner"] = exit_inner
    first.trigger("begin")
    assert first.trigger("leave")
    assert first.state == "idle" and second.state == "idle"


# -- delayed transitions --------------------------------------------------------------------


def test_after_with_a_setting_fires_exactly_at_its_delay(nested, clock, probe):
    lc = nested.create(clock=clock)
    clock.advance(500)  # idle has no timer
    lc.trigger("begin")
    clock.advance(99)
    assert lc.state == "session_active.awaiting_content"
    clock.advance(1)
    assert lc.state == "session_active.waiting_more"
    record = probe.records[-1]
    assert record.trigger == "idle_timeout" and record.at_ms == 600.0


def test_after_with_a_literal_internal_timer_runs_its_actions_once(nested, clock, probe):
    lc = nested.create(clock=clock)
    lc.trigger("begin")
    clock.advance(100)
    assert lc.state == "session_active.waiting_more"
    probe.log.clear()
    clock.advance(49)
    assert probe.log == []
    clock.advance(1)
    assert probe.log == ["act2"]  # internal: no exit/entry, state unchanged
    assert lc.state == "session_active.waiting_more"
    assert lc.pending_timers() == []
    clock.advance(1000)
    assert probe.log == ["act2"]


def test_timer_is_cancelled_on_exit(nested, clock, probe):
    lc = nested.create(clock=clock)
    lc.trigger("begin")
    clock.advance(50)
    lc.trigger("leave")
    assert lc.pending_timers() == []
    assert clock.pending() == []
    clock.advance(1000)
    assert lc.state == "idle"
    assert [t[1] for t in probe.transitions] == ["begin", "leave"]


def test_settings_override_changes_the_delay(pm, probe, write_chart, clock):
    path = write_chart(NESTED)
    definition = load_definition(path, plugins=pm, overrides={"wait_ms": 300}, env={})
    assert definition.settings["wait_ms"] == 300
    lc = definition.create(clock=clock)
    lc.trigger("begin")
    clock.advance(299)
    assert lc.state == "session_active.awaiting_content"
    clock.advance(1)
    assert lc.state == "session_active.waiting_more"


def test_timer_trigger_can_also_be_sent_by_code(nested, clock):
    lc = nested.create(clock=clock)
    lc.trigger("begin")
    assert lc.trigger("idle_timeout")
    assert lc.state == "session_active.waiting_more"
    assert lc.pending_timers() == [("session_active.waiting_more", "nudge", 50.0)]


def test_timers_of_a_guarded_timer_that_says_no(pm, probe, write_chart, clock):
    path = write_chart("""
        statechart: guarded_timer
        initial: waiting
        states:
          waiting:
            after:
              - ms: 10
                trigger: expire
                dest: expired
                guards: flag
          expired:
            final: true
    """)
    lc = load_definition(path, plugins=pm, env={}).create(clock=clock)
    clock.advance(10)
    assert lc.state == "waiting"  # the guard said no; the timer is spent
    assert lc.pending_timers() == []
    lc.context["flag"] = True
    assert lc.trigger("expire")
    assert lc.finished


class Asked:
    """A listener: what lifecycles ask the model (``lifecycle.prompt``), by instance."""

    def __init__(self) -> None:
        self.prompts: dict[str, list[str]] = {}

    def lifecycle_prompt(self, lifecycle, text):
        self.prompts.setdefault(lifecycle.id, []).append(text)

    def of(self, lifecycle) -> list[str]:
        return self.prompts.get(lifecycle.id, [])


def test_write_session_prompts_after_idle_ms(pm, clock, statecharts):
    definition = load_definition(statecharts / "write_session.yaml", plugins=pm, env={})
    asked = Asked()
    lc = definition.create(clock=clock).listen(asked)
    lc.trigger("begin")
    lc.trigger("message_end")
    assert lc.state == "session_active.awaiting_done_or_more_content"
    clock.advance(1999)
    assert asked.of(lc) == []
    clock.advance(1)
    [prompt] = asked.of(lc)
    assert prompt.startswith(
        "If you're finished, reply with DONE on its own line; otherwise continue.")
    assert lc.state == "session_active.awaiting_done_or_more_content"
    clock.advance(10_000)
    assert len(asked.of(lc)) == 1


def test_write_session_idle_prompt_is_cancelled_by_content(pm, clock, statecharts):
    definition = load_definition(statecharts / "write_session.yaml", plugins=pm, env={})
    asked = Asked()
    lc = definition.create(clock=clock).listen(asked)
    lc.trigger("begin")
    lc.trigger("message_end")
    clock.advance(1500)
    lc.trigger("content")
    clock.advance(10_000)
    assert asked.of(lc) == []


def test_write_session_idle_ms_override_and_env(pm, clock, statecharts):
    path = statecharts / "write_session.yaml"
    fast = load_definition(path, plugins=pm, overrides={"idle_ms": 300}, env={})
    asked = Asked()
    lc = fast.create(clock=clock).listen(asked)
    lc.trigger("begin")
    lc.trigger("message_end")
    clock.advance(299)
    assert asked.of(lc) == []
    clock.advance(1)
    assert len(asked.of(lc)) == 1
    via_env = load_definition(path, plugins=pm, env={"WRITE_SESSION_IDLE_MS": "700"})
    assert via_env.settings["idle_ms"] == 700
    assert via_env is not fast


def test_write_session_truncation_flow(pm, clock, statecharts):
    definition = load_definition(statecharts / "write_session.yaml", plugins=pm,
                                 overrides={"max_continuations": 1}, env={})
    lc = definition.create(clock=clock)
    lc.trigger("begin")
    # The session quotes the tail through the context (payloads are traced; lines are content).
    lc.context["quoted"] = {"lines": ["a", "b"], "unfinished": None}
    step = lc.trigger("truncated", bytes=10, lines=2)
    assert step
    assert lc.state == "session_active.continuing"
    assert lc.context["continuations"] == 1
    [prompt] = step.prompts  # what trigger() returns says what the model is asked
    assert "continuation 1/1" in prompt and "> a\n> b" in prompt
    assert step.tags_gained == {"continuing"} and step.tags_lost == {"receiving"}
    step = lc.trigger("truncated", bytes=20)  # continuations used up
    assert step and step.prompts == []
    assert lc.state == "session_active.finalizing"
    assert lc.context["status"] == "incomplete"


def test_write_session_empty_truncation_abandons(pm, probe, clock, statecharts):
    definition = load_definition(statecharts / "write_session.yaml", plugins=pm, env={})
    lc = definition.create(clock=clock)
    lc.trigger("begin")
    assert lc.trigger("truncated", bytes=0)
    assert lc.state == "abandoned" and lc.finished
    assert probe.finished == [lc.id]


# -- RealClock end to end ------------------------------------------------------------------


def test_lifecycle_timer_fires_on_the_real_clock(pm, probe, write_chart):
    path = write_chart("""
        statechart: real_timer
        initial: waiting
        states:
          waiting:
            after:
              - ms: 1
                trigger: expire
                dest: expired
                actions: act
          expired:
            final: true
    """)
    definition = load_definition(path, plugins=pm, env={})

    async def main():
        fired = asyncio.Event()
        probe.effects["act"] = lambda lc, tr: fired.set()
        lc = definition.create(clock=RealClock())
        await asyncio.wait_for(fired.wait(), timeout=10)
        return lc

    lc = asyncio.run(main())
    assert lc.finished and lc.state == "expired"


def test_creating_a_timed_lifecycle_on_the_real_clock_outside_a_loop_fails(pm, probe,
                                                                         write_chart):
    path = write_chart("""
        statechart: real_timer_outside
        initial: waiting
        states:
          waiting:
            after:
              - ms: 1
                trigger: expire
                dest: expired
          expired:
            final: true
    """)
    with pytest.raises(RuntimeError, match="running asyncio event loop"):
        load_definition(path, plugins=pm, env={}).create(clock=RealClock())


# -- many cheap, independent instances -----------------------------------------------------


def test_a_thousand_instances_keep_separate_context_and_timers(pm, clock, statecharts):
    definition = load_definition(statecharts / "write_session.yaml", plugins=pm, env={})
    asked = Asked()
    lcs = [definition.create(clock=clock).listen(asked) for _ in range(1000)]
    assert len({lc.id for lc in lcs}) == 1000
    for i, lc in enumerate(lcs):
        lc.trigger("begin")
        if i % 2 == 0:
            lc.trigger("message_end")
        lc.context["index"] = i
    assert len({id(lc.context) for lc in lcs}) == 1000
    assert len(clock.pending()) == 500
    clock.advance(2000)
    for i, lc in enumerate(lcs):
        assert lc.context["index"] == i
        assert len(asked.of(lc)) == (1 if i % 2 == 0 else 0), i
    assert clock.pending() == []
    # the definition's own initial context is untouched
    assert "index" not in definition.initial_context
    fresh = definition.create(clock=clock)
    assert "index" not in fresh.context


def test_caller_context_does_not_leak_between_instances(nested, clock):
    shared = {"items": [1]}
    a = nested.create(clock=clock, context=shared)
    b = nested.create(clock=clock, context=shared)
    a.context["items"].append(2)
    assert b.context["items"] == [1]
    assert shared == {"items": [1]}
    a.context["notes"].append("x")
    assert b.context["notes"] == []


# -- load_definition caching ----------------------------------------------------------------


def test_load_definition_is_cached_per_file_content_and_settings(pm, probe, write_chart):
    path = write_chart(NESTED)
    first = load_definition(path, plugins=pm, env={})
    assert load_definition(path, plugins=pm, env={}) is first
    assert load_definition(str(path), plugins=pm, env={}) is first
    same_value = load_definition(path, plugins=pm, overrides={"wait_ms": 100}, env={})
    assert same_value is first  # the effective settings are what count
    other = load_definition(path, plugins=pm, overrides={"wait_ms": 300}, env={})
    assert other is not first
    assert load_definition(path, plugins=pm, overrides={"wait_ms": 300}, env={}) is other

    path.write_text(path.read_text().replace("default: 100", "default: 200"))
    changed = load_definition(path, plugins=pm, env={})
    assert changed is not first
    assert changed.settings["wait_ms"] == 200
    assert changed.hash != first.hash
    assert load_definition(path, plugins=pm, env={}) is changed


def test_load_definition_is_not_shared_between_plugin_managers(write_chart, make_probe):
    from orion.hooks.manager import make_plugin_manager

    path = write_chart(NESTED)
    pms = []
    for _ in range(2):
        pm = make_plugin_manager(entrypoints=False, env={})
        pm.register(make_probe(), "probe")
        pms.append(pm)
    a = load_definition(path, plugins=pms[0], env={})
    b = load_definition(path, plugins=pms[1], env={})
    assert a is not b
    assert a.plugins is pms[0] and b.plugins is pms[1]


def test_load_definition_recompiles_after_a_plugin_is_registered(pm, write_chart, clock,
                                                                 make_probe):
    """A definition compiled before a plugin was registered must not be served afterwards
    with stale guard and action functions."""
    path = write_chart("""
        statechart: late_plugin
        initial: a
        states:
          a:
            entry: enter_idle
          b:
            final: true
        transitions:
          - trigger: go
            source: a
            dest: b
    """)
    first, second = make_probe(), make_probe()
    pm.register(first, "probe")
    load_definition(path, plugins=pm, env={}).create(clock=clock)
    assert first.log == ["enter_idle"]
    pm.unregister(first)
    pm.register(second, "probe")
    load_definition(path, plugins=pm, env={}).create(clock=clock)
    assert second.log == ["enter_idle"]
    assert first.log == ["enter_idle"]


def test_context_is_json_roundtrippable_through_a_snapshot(nested, clock):
    lc = nested.create(clock=clock)
    assert json.loads(json.dumps(lc.snapshot()))["context"] == {"count": 0, "notes": []}


# -- timers take their own transition -------------------------------------------------------

SHARED_TIMER_NAMES = """
statechart: shared_timer_names
initial: outer_state
states:
  outer_state:
    initial: inner_state
    after:
      - ms: 100
        dest: outer_expired
    states:
      inner_state:
        after:
          - ms: 30
            actions: act
          - ms: 60
            actions: act2
          - ms: 80
            dest: outer_state.inner_expired
            guards: flag
      inner_expired: {}
  outer_expired:
    final: true
"""


def test_a_parent_timer_takes_the_parents_transition_even_with_the_same_trigger_name(
        pm, probe, write_chart, clock):
    """Every ``after`` above uses the default trigger ``timeout``: when the parent's timer
    fires, the parent's delayed transition runs, not the child's (which would shadow it)."""
    lc = load_definition(write_chart(SHARED_TIMER_NAMES), plugins=pm, env={}).create(clock=clock)
    clock.advance(30)
    assert probe.log == ["act"]
    clock.advance(30)
    assert probe.log == ["act", "act2"]  # the second timer of the state, not the first again
    clock.advance(20)
    assert lc.state == "outer_state.inner_state"  # its guard said no
    clock.advance(20)
    assert lc.state == "outer_expired" and lc.finished
    assert [(r.trigger, r.dest) for r in probe.records] == [
        ("timeout", "outer_state.inner_state"), ("timeout", "outer_state.inner_state"),
        ("timeout", "outer_expired")]
    assert probe.log == ["act", "act2"]


def test_shared_timer_names_survive_a_snapshot(pm, probe, write_chart, clock):
    definition = load_definition(write_chart(SHARED_TIMER_NAMES), plugins=pm, env={})
    lc = definition.create(clock=clock)
    clock.advance(30)
    snap = lc.snapshot()
    assert sorted((t["state"], t["deadline_ms"]) for t in snap["timers"]) == [
        ("outer_state", 100.0), ("outer_state.inner_state", 60.0),
        ("outer_state.inner_state", 80.0)]
    later = VirtualClock(start_ms=30)
    restored = definition.restore(json.loads(json.dumps(snap)), clock=later)
    probe.log.clear()
    later.advance(30)
    assert probe.log == ["act2"]
    restored.context["flag"] = True
    later.advance(20)
    assert restored.state == "outer_state.inner_expired"
    later.advance(20)
    assert restored.state == "outer_expired"


def test_sending_a_timer_trigger_by_code_takes_the_innermost_transition(pm, probe, write_chart,
                                                                        clock):
    lc = load_definition(write_chart(SHARED_TIMER_NAMES), plugins=pm, env={}).create(clock=clock)
    assert lc.trigger("timeout")
    assert probe.log == ["act"]


# -- start runs to completion too -----------------------------------------------------------

KICKOFF = """
statechart: kickoff
initial: outer_state
states:
  outer_state:
    entry: [enter_outer, kick]
    initial: inner_state
    states:
      inner_state:
        entry: enter_inner
        after:
          - ms: 10
            trigger: tick
            actions: act
  elsewhere:
    entry: enter_other
transitions:
  - trigger: go
    source: outer_state
    dest: elsewhere
  - trigger: back
    source: elsewhere
    dest: outer_state
"""


def test_a_trigger_sent_while_starting_waits_until_the_initial_states_are_entered(
        pm, probe, write_chart, clock):
    def kick(lifecycle, transition):
        if transition.trigger == "start":
            assert lifecycle.trigger("go") is None  # queued
    probe.effects["kick"] = kick
    lc = load_definition(write_chart(KICKOFF), plugins=pm, env={}).create(clock=clock)
    assert lc.state == "elsewhere"
    assert probe.log == ["enter_outer", "kick", "enter_inner", "enter_other"]
    assert probe.started == [lc.id]
    assert [(t[1], t[2], t[3]) for t in probe.transitions] == [
        ("go", "outer_state.inner_state", "elsewhere")]
    assert lc.pending_timers() == [] and clock.pending() == []  # inner_state's timer is gone
    clock.advance(100)
    assert "act" not in probe.log


def test_started_observer_runs_before_transitions_queued_during_start(pm, probe, write_chart,
                                                                      clock):
    order = []
    probe.effects["kick"] = lambda lc, tr: lc.trigger("go") if tr.trigger == "start" else None

    class Watcher:
        @orion.hookimpl
        def lifecycle_started(self, lifecycle):
            order.append(("started", lifecycle.state))

        @orion.hookimpl
        def lifecycle_transition(self, lifecycle, transition):
            order.append((transition.trigger, lifecycle.state))

    pm.register(Watcher(), "watcher")
    load_definition(write_chart(KICKOFF), plugins=pm, env={}).create(clock=clock)
    assert order == [("started", "outer_state.inner_state"), ("go", "elsewhere")]


def test_an_initial_final_state_finishes_at_once(pm, probe, write_chart, clock):
    path = write_chart("""
        statechart: instant
        initial: over
        states:
          over:
            entry: enter_done
            final: true
    """)
    lc = load_definition(path, plugins=pm, env={}).create(clock=clock)
    assert lc.finished and probe.finished == [lc.id]
    assert probe.log == ["enter_done"]


def test_an_error_in_a_nested_lifecycle_does_not_disturb_the_outer_one(nested, clock, probe):
    first = nested.create(clock=clock, instance_id="first")
    second = nested.create(clock=clock, instance_id="second")
    caught = []

    def act(lifecycle, transition):
        if lifecycle is first and transition.trigger == "begin":
            with pytest.raises(TriggerNotAllowed) as info:
                second.trigger("more")  # second is idle: not allowed there
            caught.append(info.value.state)
            with pytest.raises(ActionError):
                second.trigger("crash")
            caught.append(second.state)

    probe.effects["act"] = act
    assert first.trigger("begin")
    assert caught == ["idle", "idle"]
    assert first.state == "session_active.awaiting_content"
    clock.advance(100)
    assert first.state == "session_active.waiting_more"
    assert second.trigger("begin")


def test_a_failing_timer_action_names_the_timer_and_state(pm, probe, write_chart, clock):
    path = write_chart("""
        statechart: failing_timer
        initial: waiting
        states:
          waiting:
            after:
              - ms: 10
                trigger: expire
                actions: boom
          other:
            final: true
        transitions:
          - trigger: go
            source: waiting
            dest: other
    """)
    lc = load_definition(path, plugins=pm, env={}).create(clock=clock)
    with pytest.raises(ActionError, match="'boom' failed on timer 'expire' of 'waiting'"):
        clock.advance(10)
    assert lc.state == "waiting"
    assert lc.trigger("go")  # not stuck busy
