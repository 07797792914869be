"""Snapshots: a lifecycle as JSON, and resuming it in another process (another clock)."""

from __future__ import annotations

import copy
import json
import math

import pytest

from orion.clock import VirtualClock
from orion.errors import SnapshotError
from orion.statechart.interpreter.definition import load_definition

CHART = """
statechart: snap
settings:
  wait_ms:
    type: int
    default: 1000
    min: 1
context:
  count: 0
  notes: []
  nested:
    items: []
initial: idle
states:
  idle:
    entry: enter_idle
  session_active:
    entry: enter_outer
    initial: awaiting_content
    after:
      - ms: 5000
        trigger: session_timeout
        dest: timed_out
    states:
      awaiting_content:
        entry: enter_inner
        after:
          - ms: wait_ms
            trigger: idle_timeout
            actions: act
      other_child:
        entry: enter_other
  timed_out:
    entry: enter_done
    final: true
transitions:
  - trigger: begin
    source: idle
    dest: session_active
  - trigger: switch
    source: session_active.awaiting_content
    dest: session_active.other_child
  - trigger: back
    source: session_active.other_child
    dest: session_active.awaiting_content
"""


@pytest.fixture
def chart(pm, probe, write_chart):
    return load_definition(write_chart(CHART), plugins=pm, env={})


def _roundtrip(snapshot: dict) -> dict:
    return json.loads(json.dumps(snapshot, allow_nan=False))


# -- taking snapshots -----------------------------------------------------------------------


def test_snapshot_is_json_and_complete(chart):
    clock = VirtualClock(start_ms=10_000)
    lc = chart.create(clock=clock, instance_id="inst-1")
    lc.trigger("begin")
    lc.context["notes"].append("hello")
    lc.context["nested"]["items"].append({"a": [1, 2.5, None, True]})
    clock.advance(200)
    snap = lc.snapshot()
    assert _roundtrip(snap) == snap
    assert snap["definition"] == "snap"
    assert snap["definition_hash"] == chart.hash
    assert len(snap["definition_hash"]) == 64
    assert snap["id"] == "inst-1"
    assert snap["state"] == "session_active.awaiting_content"
    assert snap["finished"] is False
    assert snap["context"] == {"count": 0, "notes": ["hello"],
                               "nested": {"items": [{"a": [1, 2.5, None, True]}]}}
    # absolute deadlines, not remaining delays
    assert sorted((t["state"], t["trigger"], t["deadline_ms"]) for t in snap["timers"]) == [
        ("session_active", "session_timeout", 15_000.0),
        ("session_active.awaiting_content", "idle_timeout", 11_000.0),
    ]


def test_snapshot_timers_name_their_position_and_may_omit_it(chart, probe):
    clock = VirtualClock()
    lc = chart.create(clock=clock)
    lc.trigger("begin")
    snap = lc.snapshot()
    assert all(t["index"] == 0 for t in snap["timers"])
    for timer in snap["timers"]:  # a snapshot written without positions is still understood
        del timer["index"]
    restored = chart.restore(snap, clock=VirtualClock())
    assert sorted(restored.pending_timers()) == sorted(lc.pending_timers())
    restored.clock.advance(1000)
    assert probe.log.count("act") == 1


def test_snapshot_is_detached_from_the_lifecycle(chart):
    lc = chart.create(clock=VirtualClock())
    snap = lc.snapshot()
    lc.context["notes"].append("later")
    assert snap["context"]["notes"] == []
    snap["context"]["notes"].append("edited")
    assert lc.context["notes"] == ["later"]


def test_snapshot_of_a_finished_lifecycle(chart):
    clock = VirtualClock()
    lc = chart.create(clock=clock)
    lc.trigger("begin")
    clock.advance(5000)
    assert lc.finished and lc.state == "timed_out"
    snap = lc.snapshot()
    assert snap["finished"] is True and snap["timers"] == []
    restored = chart.restore(_roundtrip(snap), clock=VirtualClock())
    assert restored.finished and restored.allowed_triggers() == []


@pytest.mark.parametrize("value, fragment", [
    ({1, 2}, "context['bad'] is a set"),
    (object(), "context['bad'] is a object"),
    (math.nan, "context['bad'] is nan"),
    (math.inf, "context['bad'] is inf"),
    ({"inner": [1, b"bytes"]}, "context['bad']['inner'][1] is a bytes"),
    ({1: "int key"}, "context['bad'] has the key 1 of type int"),
])
def test_non_json_context_cannot_be_snapshotted(chart, value, fragment):
    lc = chart.create(clock=VirtualClock())
    lc.context["bad"] = value
    with pytest.raises(SnapshotError) as info:
        lc.snapshot()
    message = str(info.value)
    assert fragment in message
    assert "snap" in message and lc.id in message


def test_circular_context_is_reported_not_a_crash(chart):
    lc = chart.create(clock=VirtualClock())
    loop: list = []
    loop.append(loop)
    lc.context["loop"] = loop
    with pytest.raises(SnapshotError, match="circular"):
        lc.snapshot()


def test_shared_but_acyclic_values_are_fine(chart):
    lc = chart.create(clock=VirtualClock())
    shared = [1, 2]
    lc.context["a"] = [shared, shared]
    assert lc.snapshot()["context"]["a"] == [[1, 2], [1, 2]]


def test_tuples_are_stored_as_arrays(chart):
    lc = chart.create(clock=VirtualClock())
    lc.context["pair"] = (1, "two")
    assert lc.snapshot()["context"]["pair"] == [1, "two"]


# -- restoring ------------------------------------------------------------------------------


def test_restore_rearms_timers_at_the_same_absolute_deadline(chart, probe):
    clock = VirtualClock(start_ms=0)
    lc = chart.create(clock=clock)
    lc.trigger("begin")  # idle_timeout due at 1000, session_timeout at 5000
    clock.advance(300)
    snap = _roundtrip(lc.snapshot())
    entries = list(probe.log)

    later = VirtualClock(start_ms=600)  # "another process", 300 ms later
    restored = chart.restore(snap, clock=later)
    assert restored.id == lc.id
    assert restored.state == "session_active.awaiting_content"
    assert restored.context == lc.context
    assert sorted(restored.pending_timers()) == sorted(lc.pending_timers())
    assert probe.log == entries  # restoring ran no entry action
    assert probe.started == [lc.id]  # and no lifecycle_started

    later.advance(399)
    assert "act" not in probe.log
    later.advance(1)  # now 1000: the original deadline
    assert probe.log.count("act") == 1
    assert restored.current.trigger == "idle_timeout" and restored.current.at_ms == 1000.0
    later.advance(3999)
    assert restored.state == "session_active.awaiting_content"
    later.advance(1)  # 5000
    assert restored.state == "timed_out" and restored.finished


def test_restore_fires_overdue_timers_at_once(chart, probe):
    clock = VirtualClock()
    lc = chart.create(clock=clock)
    lc.trigger("begin")
    snap = _roundtrip(lc.snapshot())
    probe.log.clear()

    later = VirtualClock(start_ms=2000)  # idle_timeout (1000) is overdue, 5000 is not
    restored = chart.restore(snap, clock=later)
    assert probe.log == []  # nothing runs during restore itself
    assert later.advance(0) == 1
    assert probe.log == ["act"]
    assert restored.state == "session_active.awaiting_content"
    later.advance(2999)
    assert not restored.finished
    later.advance(1)
    assert restored.finished

    much_later = VirtualClock(start_ms=60_000)  # both overdue: fired in deadline order
    again = chart.restore(snap, clock=much_later)
    probe.log.clear()
    much_later.advance(0)
    assert probe.log == ["act", "enter_done"]
    assert again.state == "timed_out"


def test_restore_does_not_rerun_entry_actions(chart, probe):
    lc = chart.create(clock=VirtualClock())
    lc.trigger("begin")
    before = {name: probe.log.count(name) for name in ("enter_idle", "enter_outer",
                                                       "enter_inner")}
    assert before == {"enter_idle": 1, "enter_outer": 1, "enter_inner": 1}
    for _ in range(3):
        chart.restore(lc.snapshot(), clock=VirtualClock())
    after = {name: probe.log.count(name) for name in before}
    assert after == before


def test_restore_into_a_nested_state_keeps_working(chart, probe):
    clock = VirtualClock()
    lc = chart.create(clock=clock)
    lc.trigger("begin")
    lc.trigger("switch")
    snap = _roundtrip(lc.snapshot())
    assert snap["state"] == "session_active.other_child"
    assert [t["trigger"] for t in snap["timers"]] == ["session_timeout"]

    later = VirtualClock(start_ms=100)
    restored = chart.restore(snap, clock=later)
    assert restored.is_in("session_active")
    assert restored.allowed_triggers() == ["back", "session_timeout"]
    probe.log.clear()
    assert restored.trigger("back")
    assert restored.state == "session_active.awaiting_content"
    assert probe.log == ["enter_inner"]  # only the sibling; the parent stayed active
    assert sorted(restored.pending_timers()) == [
        ("session_active", "session_timeout", 5000.0),
        ("session_active.awaiting_content", "idle_timeout", 1100.0),
    ]


def test_restore_from_the_initial_state(chart, probe):
    lc = chart.create(clock=VirtualClock())
    restored = chart.restore(_roundtrip(lc.snapshot()), clock=VirtualClock())
    assert restored.state == "idle" and restored.pending_timers() == []
    assert restored.trigger("begin")


def test_restored_instances_do_not_share_context(chart):
    lc = chart.create(clock=VirtualClock())
    lc.context["notes"].append("one")
    snap = lc.snapshot()
    a = chart.restore(snap, clock=VirtualClock())
    b = chart.restore(snap, clock=VirtualClock())
    a.context["notes"].append("a")
    a.context["nested"]["items"].append("a")
    assert b.context["notes"] == ["one"]
    assert b.context["nested"]["items"] == []
    assert snap["context"]["notes"] == ["one"]  # the caller's snapshot is untouched
    assert lc.context["notes"] == ["one"]


def test_restore_default_clock_is_virtual(chart):
    lc = chart.create()
    lc.trigger("begin")
    restored = chart.restore(lc.snapshot())
    assert isinstance(restored.clock, VirtualClock)


# -- snapshots that cannot be restored -----------------------------------------------------


@pytest.fixture
def snap(chart):
    lc = chart.create(clock=VirtualClock())
    lc.trigger("begin")
    return _roundtrip(lc.snapshot())


def test_restore_rejects_another_statechart(chart, snap):
    bad = {**snap, "definition": "other_chart"}
    with pytest.raises(SnapshotError, match="statechart 'other_chart', not 'snap'"):
        chart.restore(bad, clock=VirtualClock())


def test_restore_rejects_another_version(chart, snap, pm, write_chart):
    changed = load_definition(write_chart(CHART.replace("default: 1000", "default: 2000"),
                                          "changed.yaml"), plugins=pm, env={})
    assert changed.name == chart.name and changed.hash != chart.hash
    with pytest.raises(SnapshotError, match="different version of statechart 'snap'"):
        changed.restore(snap, clock=VirtualClock())
    with pytest.raises(SnapshotError, match="different version"):
        chart.restore({**snap, "definition_hash": "0" * 64}, clock=VirtualClock())


def test_settings_overrides_do_not_change_the_hash(chart, snap, pm, write_chart):
    # Deadlines are absolute, so a snapshot stays valid when only a setting changed.
    other = load_definition(chart.source, plugins=pm, overrides={"wait_ms": 50}, env={})
    assert other is not chart and other.hash == chart.hash
    assert other.restore(snap, clock=VirtualClock()).state == snap["state"]


@pytest.mark.parametrize("state", ["nowhere", "session_active", "session_active.nowhere",
                                   "session_active_awaiting_content"])
def test_restore_rejects_unknown_or_compound_states(chart, snap, state):
    with pytest.raises(SnapshotError, match=f"snapshot state '{state}' is not a state of "
                                            f"'snap'"):
        chart.restore({**snap, "state": state, "timers": []}, clock=VirtualClock())


def test_restore_rejects_inconsistent_finished_flag(chart, snap):
    with pytest.raises(SnapshotError, match="finished=True"):
        chart.restore({**snap, "finished": True}, clock=VirtualClock())
    final = {**snap, "state": "timed_out", "timers": [], "finished": False}
    with pytest.raises(SnapshotError, match="finished=False"):
        chart.restore(final, clock=VirtualClock())


def test_restore_rejects_timers_of_inactive_or_unknown_timers(chart, snap):
    clock = VirtualClock()
    inactive = copy.deepcopy(snap)
    inactive["state"] = "session_active.other_child"
    with pytest.raises(SnapshotError, match="timer for 'session_active.awaiting_content'"):
        chart.restore(inactive, clock=clock)
    unknown = copy.deepcopy(snap)
    unknown["timers"][0]["trigger"] = "no_such_timer"
    with pytest.raises(SnapshotError, match="'no_such_timer'.* is not a timer of state"):
        chart.restore(unknown, clock=clock)
    wrong_index = copy.deepcopy(snap)
    wrong_index["timers"][0]["index"] = 5
    with pytest.raises(SnapshotError, match=r"\(#5\) is not a timer of state"):
        chart.restore(wrong_index, clock=clock)
    assert clock.pending() == []  # nothing was armed by the failed restores


@pytest.mark.parametrize("mutate, fragment", [
    (lambda s: s.pop("state"), "state"),
    (lambda s: s.pop("context"), "context"),
    (lambda s: s.update(extra="field"), "extra"),
    (lambda s: s.update(context=["not", "a", "dict"]), "context"),
    (lambda s: s.update(timers=[{"state": "x"}]), "timers"),
    (lambda s: s["timers"][0].update(deadline_ms="soon"), "deadline_ms"),
    (lambda s: s["timers"][0].update(deadline_ms=math.nan), "deadline_ms"),
    (lambda s: s.update(id=""), "id"),
])
def test_restore_rejects_malformed_snapshots(chart, snap, mutate, fragment):
    bad = copy.deepcopy(snap)
    mutate(bad)
    with pytest.raises(SnapshotError, match="invalid snapshot") as info:
        chart.restore(bad, clock=VirtualClock())
    assert fragment in str(info.value)


@pytest.mark.parametrize("data", [None, "{}", [], 42])
def test_restore_rejects_non_objects(chart, data):
    with pytest.raises(SnapshotError, match="invalid snapshot"):
        chart.restore(data, clock=VirtualClock())


def test_restore_rejects_unsupported_format(chart, snap):
    with pytest.raises(SnapshotError, match="format 2 is not supported"):
        chart.restore({**snap, "format": 2}, clock=VirtualClock())


def test_restore_rejects_non_json_context(chart, snap):
    with pytest.raises(SnapshotError, match=r"context\['bad'\] is a set"):
        chart.restore({**snap, "context": {"bad": {1}}}, clock=VirtualClock())


# -- the write-session statechart -------------------------------------------------------------


def test_write_session_timer_prompts_after_a_restart(pm, statecharts):
    definition = load_definition(statecharts / "write_session.yaml", plugins=pm, env={})
    clock = VirtualClock(start_ms=1_000_000)
    lc = definition.create(clock=clock)
    lc.trigger("begin")
    lc.trigger("message_end")
    clock.advance(1200)
    data = json.dumps(lc.snapshot())  # written to disk, say

    class Asked:
        prompts: list[str] = []

        def lifecycle_prompt(self, lifecycle, text):
            self.prompts.append(text)

    restarted = VirtualClock(start_ms=1_001_500)
    resumed = definition.restore(json.loads(data), clock=restarted).listen(Asked())
    assert resumed.state == "session_active.awaiting_done_or_more_content"
    restarted.advance(499)
    assert Asked.prompts == []
    restarted.advance(1)  # the idle timer keeps its deadline across the restart
    assert len(Asked.prompts) == 1 and "DONE" in Asked.prompts[0]
