"""Orion lifecycle benchmark: Orion's cost against bare ``transitions``, in one process.

Run from the repository root with the project's virtualenv::

    .venv/bin/python bench/bench_lifecycle.py            # prints figures, always exits 0
    .venv/bin/python bench/bench_lifecycle.py --check    # exits 1 when a target is missed

Two measurements, each beside a bare ``transitions`` baseline timed in the same run:

1. state-changing events/s through an Orion lifecycle with five no-op
   ``lifecycle_transition`` observers, against a bare ``HierarchicalMachine`` of the same shape
   driven through the same event sequence. Target: Orion costs at most 2.0x the bare time.
2. lifecycle instances/s from the compiled ``statecharts/write_session.yaml`` (built-in
   plugins, shared ``VirtualClock``), against ``add_model``/``remove_model`` of bare models on
   a pre-built ``HierarchicalMachine`` of the same shape. Target: at least 5,000 instances/s.
3. durable steps/s: a real write session in a runtime with the default plugins (so the
   tracing plugin records a trace event per transition) and five more observers, its snapshot
   persisted after every transition (``session.checkpoint()``: the journal's state record),
   cycling ``message_end`` / ``content`` (a pause and more content), against a bare
   ``HierarchicalMachine`` cycling the same two triggers. Target: at most 2.0x the bare time.
4. traced steps: the same write session and observers without the checkpoint, counting CPU
   time (``time.process_time``: every thread, so the trace writer's thread too), each batch
   ending with the trace batch flushed and stored; against the same bare machine's CPU time.
   Target: at most 0.6x the bare CPU time.

Timing: ``time.perf_counter``; a warm-up batch per side; batches sized by calibration to about
``--batch-seconds``; baseline and Orion batches interleaved (alternating which goes first);
the best (fastest) of ``--reps`` batches per side is reported. The garbage collector is
disabled inside timed batches (as ``timeit`` does) and collected between them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pluggy
import transitions
import yaml
from transitions.extensions.nesting import HierarchicalMachine

import orion
from orion.clock import VirtualClock
from orion.hooks.manager import make_plugin_manager
from orion.statechart.interpreter.definition import load_definition
from timing import compare

REPO = Path(__file__).resolve().parent.parent
WRITE_SESSION = REPO / "statecharts" / "write_session.yaml"

MAX_EVENT_COST_RATIO = 2.0
MIN_INSTANCES_PER_S = 5_000.0
MAX_DURABLE_COST_RATIO = 2.0
MAX_TRACED_CPU_RATIO = 0.6

# -- measurement 1: the cycle statechart ------------------------------------------------------

CYCLE_YAML = textwrap.dedent("""\
    statechart: bench_cycle
    description: Nested states and a cycle of state-changing events; no guards or actions.
    initial: idle
    states:
      idle: {}
      active:
        initial: a
        states:
          a: {}
          b: {}
    transitions:
      - {trigger: start, source: idle,     dest: active}
      - {trigger: flip,  source: active.a, dest: active.b}
      - {trigger: flop,  source: active.b, dest: active.a}
      - {trigger: stop,  source: active,   dest: idle}
    """)

#: idle -> active.a -> active.b -> active.a -> active.b -> active.a -> active.b -> idle.
#: Every event changes the leaf state; the cycle ends where it started.
CYCLE = ["start", "flip", "flop", "flip", "flop", "flip", "stop"]
EXPECTED = ["active.a", "active.b", "active.a", "active.b", "active.a", "active.b", "idle"]


def make_observer(index: int) -> object:
    """A distinct plugin object (its own class) with a no-op ``lifecycle_transition``."""

    @orion.hookimpl
    def lifecycle_transition(self, lifecycle, transition):
        pass

    cls = type(f"NoopObserver{index}", (), {"lifecycle_transition": lifecycle_transition})
    return cls()


def bare_cycle_machine() -> tuple[HierarchicalMachine, Any]:
    """The cycle statechart as a bare machine with one model: same states, transitions and
    machine options as Orion's compiled machine (``_`` is the separator; names have none)."""

    class Model:
        pass

    model = Model()
    states = ["idle", {"name": "active", "initial": "a", "children": ["a", "b"]}]
    trans = [
        {"trigger": "start", "source": "idle", "dest": "active"},
        {"trigger": "flip", "source": "active_a", "dest": "active_b"},
        {"trigger": "flop", "source": "active_b", "dest": "active_a"},
        {"trigger": "stop", "source": "active", "dest": "idle"},
    ]
    machine = HierarchicalMachine(model=model, states=states, transitions=trans, initial="idle",
                                  auto_transitions=False, send_event=True,
                                  ignore_invalid_triggers=False)
    return machine, model


# -- measurement 2: the write_session shape as a bare machine ---------------------------------

def _camel(name: str) -> str:
    """``session_active`` -> ``sessionActive``: ``_`` is the bare machine's separator."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _bare_path(path: str) -> str:
    return "_".join(_camel(p) for p in path.split("."))


def bare_machine_like(yaml_path: Path) -> HierarchicalMachine:
    """A model-less machine with the statechart's states and transitions (timers become their
    trigger's internal transition, as Orion compiles them). Guards and actions are left out:
    they do not change what ``add_model`` does."""
    doc = yaml.safe_load(yaml_path.read_text(encoding="utf-8"))

    def state(name: str, spec: dict[str, Any] | None) -> Any:
        spec = spec or {}
        if not spec.get("states"):
            return _camel(name)
        return {"name": _camel(name), "initial": _camel(spec["initial"]),
                "children": [state(n, s) for n, s in spec["states"].items()]}

    trans = []
    for t in doc.get("transitions", []):
        source = t["source"]
        source = [_bare_path(s) for s in ([source] if isinstance(source, str) else source)]
        dest = _bare_path(t["dest"]) if t.get("dest") else None
        trans.append({"trigger": t["trigger"], "source": source, "dest": dest})

    def timers(prefix: str, states: dict[str, Any] | None) -> None:
        for name, spec in (states or {}).items():
            spec = spec or {}
            path = f"{prefix}{name}"
            for after in spec.get("after", []):
                trans.append({"trigger": after.get("trigger", "timeout"),
                              "source": _bare_path(path),
                              "dest": _bare_path(after["dest"]) if after.get("dest") else None})
            timers(f"{path}.", spec.get("states"))

    timers("", doc["states"])
    return HierarchicalMachine(model=None, states=[state(n, s) for n, s in doc["states"].items()],
                               transitions=trans, initial=_camel(doc["initial"]),
                               auto_transitions=False, send_event=True,
                               ignore_invalid_triggers=False)


# -- the two measurements ----------------------------------------------------------------------

def measure_events(tmp: Path, reps: int, batch_s: float) -> dict[str, Any]:
    path = tmp / "bench_cycle.yaml"
    path.write_text(CYCLE_YAML, encoding="utf-8")
    pm = make_plugin_manager(entrypoints=False)
    for i in range(5):
        pm.register(make_observer(i), name=f"bench-observer-{i}")
    impls = [impl for impl in pm.hook.lifecycle_transition.get_hookimpls()
             if impl.plugin_name.startswith("bench-observer-")]
    assert len(impls) == 5, impls
    definition = load_definition(path, plugins=pm, env={})
    lifecycle = definition.create(clock=VirtualClock())
    machine, model = bare_cycle_machine()

    # Same sequence, same states, on both sides (checked once, outside the timing).
    for trigger, expected in zip(CYCLE, EXPECTED):
        assert lifecycle.trigger(trigger)
        assert lifecycle.state == expected, (trigger, lifecycle.state, expected)
        assert getattr(model, trigger)() is True
        assert model.state == expected.replace(".", "_"), (trigger, model.state, expected)

    orion_trigger = lifecycle.trigger
    bare_triggers = [getattr(model, t) for t in CYCLE]  # partial(machine.trigger_event, model, t)

    def run_orion(cycles: int) -> None:
        for _ in range(cycles):
            for t in CYCLE:
                orion_trigger(t)

    def run_bare(cycles: int) -> None:
        for _ in range(cycles):
            for fire in bare_triggers:
                fire()

    cycles, bare_s, orion_s = compare(run_bare, run_orion, reps=reps, batch_s=batch_s)
    assert lifecycle.state == "idle" and model.state == "idle"
    assert not pm.failures, pm.failures
    events = cycles * len(CYCLE)
    ratio = orion_s / bare_s
    return {"events": events, "bare_per_s": events / bare_s, "orion_per_s": events / orion_s,
            "ratio": ratio, "ok": ratio <= MAX_EVENT_COST_RATIO}


def measure_instances(reps: int, batch_s: float) -> dict[str, Any]:
    pm = make_plugin_manager(entrypoints=False)
    definition = load_definition(WRITE_SESSION, plugins=pm, env={})
    clock = VirtualClock()
    machine = bare_machine_like(WRITE_SESSION)

    class BareModel:
        state: str

    sample = BareModel()
    machine.add_model(sample)
    first = definition.create(clock=clock)
    assert sample.state == _bare_path(first.state), (sample.state, first.state)
    machine.remove_model(sample)

    create = definition.create
    add, remove = machine.add_model, machine.remove_model

    def run_orion(n: int) -> None:
        for _ in range(n):
            create(clock=clock)

    def run_bare(n: int) -> None:
        for _ in range(n):
            obj = BareModel()
            add(obj)
            remove(obj)

    n, bare_s, orion_s = compare(run_bare, run_orion, reps=reps, batch_s=batch_s)
    assert not machine.models
    assert not pm.failures, pm.failures
    orion_per_s = n / orion_s
    return {"instances": n, "bare_per_s": n / bare_s, "orion_per_s": orion_per_s,
            "ratio": orion_s / bare_s, "ok": orion_per_s >= MIN_INSTANCES_PER_S}


def open_write_session_and_its_bare_twin(tmp: Path) -> tuple[Any, Any, Any, Any]:
    """Lines 3 and 4: a real write session (a runtime with the built-in plugins and five more
    observers) receiving content, and a bare machine with its two states and their triggers.
    Returns the runtime, the session, the plugin manager and the bare machine's model."""
    from bench_write_ingest import open_session

    pm = make_plugin_manager(entrypoints=False, env={})
    for i in range(5):
        pm.register(make_observer(i), name=f"bench-observer-{i}")
    runtime, session = open_session(tmp, "doc.md", plugins=pm)
    session.feed("# A document\n")
    assert session.lifecycle.has_tag("receiving"), session.lifecycle.state

    class BareModel:
        state: str

    model = BareModel()
    HierarchicalMachine(model=model, states=["receiving", "paused"], initial="receiving",
                        transitions=[["message_end", "receiving", "paused"],
                                     ["content", "paused", "receiving"]],
                        auto_transitions=False, send_event=True)
    return runtime, session, pm, model


def measure_durable_steps(tmp: Path, reps: int, batch_s: float) -> dict[str, Any]:
    runtime, session, pm, model = open_write_session_and_its_bare_twin(tmp)
    pause, resume = model.message_end, model.content
    lifecycle, checkpoint = session.lifecycle, session.checkpoint
    trigger = lifecycle.trigger

    def run_orion(cycles: int) -> None:
        for _ in range(cycles):
            trigger("message_end")
            checkpoint()
            trigger("content")
            checkpoint()

    def run_bare(cycles: int) -> None:
        for _ in range(cycles):
            pause()
            resume()

    cycles, bare_s, orion_s = compare(run_bare, run_orion, reps=reps, batch_s=batch_s)
    assert lifecycle.has_tag("receiving") and model.state == "receiving"  # type: ignore
    # What was timed is durable: the newest state record names the state the session is in.
    from orion.write_session.journal import read_state

    record, problem = read_state(session.journal.directory)
    assert record is not None and record["snapshot"]["state"] == lifecycle.state, problem
    steps = cycles * 2
    assert runtime.tracer.emitted >= steps, runtime.tracer.emitted  # a trace event per step
    runtime.close()
    assert not pm.failures, pm.failures
    ratio = orion_s / bare_s
    return {"steps": steps, "bare_per_s": steps / bare_s, "orion_per_s": steps / orion_s,
            "ratio": ratio, "ok": ratio <= MAX_DURABLE_COST_RATIO}


def measure_traced_steps(tmp: Path, reps: int, batch_s: float) -> dict[str, Any]:
    import time

    from orion.trace.writer import settle_all

    runtime, session, pm, model = open_write_session_and_its_bare_twin(tmp)
    pause, resume = model.message_end, model.content
    lifecycle, tracer = session.lifecycle, runtime.tracer
    trigger = lifecycle.trigger
    step_cpu: list[float] = []

    def run_orion(cycles: int) -> None:
        start = time.thread_time()
        for _ in range(cycles):
            trigger("message_end")
            trigger("content")
        tracer.flush()  # as after a model request: the batch goes to the writer
        step_cpu.append((time.thread_time() - start) / (2 * cycles))
        settle_all()  # and is stored before the batch's time ends

    def run_bare(cycles: int) -> None:
        for _ in range(cycles):
            pause()
            resume()

    emitted = tracer.emitted
    cycles, bare_s, orion_s = compare(run_bare, run_orion, reps=reps, batch_s=batch_s,
                                      clock=time.process_time)
    assert lifecycle.has_tag("receiving") and model.state == "receiving"  # type: ignore
    assert tracer.emitted - emitted >= 2 * cycles  # a span per step at least
    runtime.close()
    assert not pm.failures, pm.failures
    steps = cycles * 2
    ratio = orion_s / bare_s
    return {"steps": steps, "bare_us": bare_s / steps * 1e6, "orion_us": orion_s / steps * 1e6,
            "step_thread_us": min(step_cpu) * 1e6, "ratio": ratio,
            "ok": ratio <= MAX_TRACED_CPU_RATIO}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a target is missed (default: always exit 0)")
    parser.add_argument("--reps", type=int, default=7,
                        help="timed batches per side and measurement; the best counts (7)")
    parser.add_argument("--batch-seconds", type=float, default=0.15,
                        help="approximate duration of one baseline batch (0.15)")
    args = parser.parse_args(argv)

    print(f"Orion lifecycle benchmark: python {sys.version.split()[0]}, "
          f"transitions {transitions.__version__}, pluggy {pluggy.__version__}; "
          f"best of {args.reps} interleaved batches per side")
    with tempfile.TemporaryDirectory(prefix="orion-bench-") as tmp:
        ev = measure_events(Path(tmp), args.reps, args.batch_seconds)
    print(f"[1] events/s, 5 observers  orion {ev['orion_per_s']:>10,.0f}/s   "
          f"bare transitions {ev['bare_per_s']:>10,.0f}/s   "
          f"cost ratio {ev['ratio']:.2f}x (orion time / bare time; target <= "
          f"{MAX_EVENT_COST_RATIO:.1f}x)   {'OK' if ev['ok'] else 'MISS'}")
    inst = measure_instances(args.reps, args.batch_seconds)
    print(f"[2] instances/s, write_session  orion {inst['orion_per_s']:>10,.0f}/s   "
          f"bare add+remove_model {inst['bare_per_s']:>10,.0f}/s   "
          f"cost ratio {inst['ratio']:.2f}x (orion time / bare time)   "
          f"target >= {MIN_INSTANCES_PER_S:,.0f}/s   {'OK' if inst['ok'] else 'MISS'}")
    with tempfile.TemporaryDirectory(prefix="orion-bench-") as tmp:
        durable = measure_durable_steps(Path(tmp), args.reps, args.batch_seconds)
    print(f"[3] durable steps/s, write session  orion {durable['orion_per_s']:>10,.0f}/s   "
          f"bare transitions {durable['bare_per_s']:>10,.0f}/s   "
          f"cost ratio {durable['ratio']:.2f}x (orion time / bare time; target <= "
          f"{MAX_DURABLE_COST_RATIO:.1f}x)   {'OK' if durable['ok'] else 'MISS'}")
    with tempfile.TemporaryDirectory(prefix="orion-bench-") as tmp:
        traced = measure_traced_steps(Path(tmp), args.reps, args.batch_seconds)
    print(f"[4] traced step CPU, write session, 5 observers  orion {traced['orion_us']:6.1f} us "
          f"(the stepping thread {traced['step_thread_us']:.1f} us)   bare transitions "
          f"{traced['bare_us']:6.1f} us   cost ratio {traced['ratio']:.2f}x (CPU time of every "
          f"thread, traces stored; target <= {MAX_TRACED_CPU_RATIO:.1f}x)   "
          f"{'OK' if traced['ok'] else 'MISS'}")
    missed = not (ev["ok"] and inst["ok"] and durable["ok"] and traced["ok"])
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
