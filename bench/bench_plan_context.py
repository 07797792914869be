"""What plan mode costs a turn: the per-turn plan context block and the plan tool gating.

Run from the repository root with the project's virtualenv::

    .venv/bin/python bench/bench_plan_context.py

Line 1 times the same turn as ``bench_pipeline.py`` (``Runtime.handle("hello")``, one request
answered at once by an in-process model, conversations cleared every 50 turns) in four
set-ups, interleaved, best batch of each:

- **bare loop**: ``bench_pipeline.py``'s plain async loop, for scale;
- **no plugin**: the runtime with the ``plan_mode`` plugin blocked;
- **plan off**: the built-in plugins, plan work not active (what every user pays);
- **plan on**: plan work active, a READY plan with a 2 KB Markdown draft: every request gets
  the plan block in its system message and advertises ``plan_get`` and ``plan_set_content``.

Line 2 gives the differences as shares of the plan-off turn. Line 3 times the plan plugin's
hooks in isolation, with plan work active: ``build_context`` (the block; the first plan hook
of a request, so it reads the store), ``gate_tools`` (the two plan tools' gating, sharing that
read) and ``authorize_tool_call`` for a ``plan_get`` call (what every plan tool call pays
before it runs: it reads the store again), and their sum. Line 4 is the size of the block,
which is what plan mode really costs a request: tokens. No target is set.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench_pipeline import RESET_EVERY, InstantModel, bare_turns
from timing import calibrate, timed

import orion_plugins.plan_mode as plan_plugin
from orion.clock import VirtualClock
from orion.runtime.context import ContextRequest
from orion.plan.service import plan_service_for
from orion.hooks.manager import make_plugin_manager
from orion.runtime.runtime import Runtime
from orion.tools.gating import GateRequest
from orion.tools.spec import ToolCall

PLUGIN = "orion_plugins.plan_mode"
DRAFT = "# Release plan\n\n" + "".join(
    f"{i}. Step {i}: check the build, update the changelog, tag and announce it.\n"
    for i in range(1, 28))


def runtime_turns(workspace: Path, *, blocked: tuple[str, ...] = ()) -> Callable[[int], None]:
    plugins = make_plugin_manager(entrypoints=False, blocked=blocked, env={})

    def run(n: int) -> None:
        runtime = Runtime(model=InstantModel(), plugins=plugins, workspace=workspace,
                          clock=VirtualClock(), env={})

        async def main() -> None:
            for i in range(n):
                if i % RESET_EVERY == 0:
                    runtime.conversation.reset()  # not /reset: that would end plan work
                await runtime.handle("hello")

        asyncio.run(main())
        runtime.close()
    return run


def plan_workspace(root: Path) -> Path:
    """A workspace with plan work on: a READY plan holding ``DRAFT``."""
    workspace = root / "plan-on"
    runtime = Runtime(model=InstantModel(), plugins=make_plugin_manager(entrypoints=False, env={}),
                      workspace=workspace, clock=VirtualClock(), env={})
    asyncio.run(runtime.handle("/plan on"))
    plan_service_for(runtime).set_content(DRAFT, "Release")
    runtime.close()
    return workspace


def best_of(sides: dict[str, Callable[[int], None]], *, reps: int,
            batch_s: float) -> tuple[int, dict[str, float]]:
    """``(n, best seconds per side)`` for batches of ``n``, sized on the first side (capped so
    the slowest side stays near ``2 * batch_s``), sides interleaved in rotating order."""
    fns = list(sides.items())
    n = calibrate(fns[0][1], batch_s)
    n = min([n] + [max(1, calibrate(fn, batch_s * 2)) for _, fn in fns[1:]])
    for _, fn in fns:  # warm-up
        timed(fn, n)
    best = {name: float("inf") for name in sides}
    for rep in range(reps):
        order = fns[rep % len(fns):] + fns[:rep % len(fns)]
        for name, fn in order:
            best[name] = min(best[name], timed(fn, n))
    return n, best


def hook_costs(workspace: Path, loops: int) -> tuple[dict[str, float], str]:
    """Microseconds per call of the plan plugin's hooks with plan work active, and the text of
    the plan block. ``build_context`` is timed as the first plan hook of a request (it reads the
    store: the request counter moves on before each call, as it does for each request);
    ``gate_tools`` as the second (it shares that read); ``authorize_tool_call`` reads the store
    at call time, always."""
    runtime = Runtime(model=InstantModel(), plugins=make_plugin_manager(entrypoints=False, env={}),
                      workspace=workspace, clock=VirtualClock(), env={})
    assert plan_service_for(runtime).plan_work_active
    tools = list(runtime.plugins.registry.tools.values())
    context = ContextRequest(runtime.conversation.id, runtime.states(), tags=runtime.tags(),
                             host=runtime)
    gate = GateRequest(runtime.conversation.id, runtime.states(), tags=runtime.tags(),
                       host=runtime)
    call = ToolCall("plan_get", {}, "call_1")
    block = plan_plugin.build_context(context)
    assert block is not None
    assert plan_plugin.gate_tools(tools, gate) is None
    assert plan_plugin.authorize_tool_call(call, gate) is None

    def first_of_a_request() -> None:
        runtime.requests += 1
        plan_plugin.build_context(context)

    cases = {
        "build_context": first_of_a_request,
        "gate_tools": lambda: plan_plugin.gate_tools(tools, gate),
        "authorize": lambda: plan_plugin.authorize_tool_call(call, gate),
    }
    costs = {}
    for name, fn in cases.items():
        best = float("inf")
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(loops):
                fn()
            best = min(best, time.perf_counter() - started)
        costs[name] = best / loops * 1e6
    runtime.close()
    return costs, block.text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--batch-seconds", type=float, default=0.4)
    parser.add_argument("--hook-loops", type=int, default=20_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        on = plan_workspace(root)
        sides = {"bare": bare_turns,
                 "no plugin": runtime_turns(root / "no-plugin", blocked=(PLUGIN,)),
                 "plan off": runtime_turns(root / "plan-off"),
                 "plan on": runtime_turns(on)}
        n, best = best_of(sides, reps=args.reps, batch_s=args.batch_seconds)
        hooks, block = hook_costs(on, args.hook_loops)
    us = {name: seconds / n * 1e6 for name, seconds in best.items()}
    off = us["plan off"]
    print(f"Orion plan-context benchmark: python {sys.version.split()[0]}; best of {args.reps} "
          f"interleaved batches of {n} turns; plan of {len(DRAFT.encode())} bytes")
    print(f"[1] per turn  bare loop {us['bare']:6.1f} us   no plugin {us['no plugin']:6.1f} us"
          f"   plan off {off:6.1f} us   plan on {us['plan on']:6.1f} us")
    print(f"[2] plan on - plan off {us['plan on'] - off:+6.1f} us/turn "
          f"({(us['plan on'] - off) / off:+.1%} of a plan-off turn)   plan off - no plugin "
          f"{off - us['no plugin']:+6.1f} us/turn ({(off - us['no plugin']) / off:+.1%})")
    total = sum(hooks.values())
    print(f"[3] plan hooks, plan work active  build_context {hooks['build_context']:5.2f} us   "
          f"gate_tools {hooks['gate_tools']:5.2f} us   authorize(plan_get) "
          f"{hooks['authorize']:5.2f} us   sum {total:5.2f} us ({total / off:.1%} of a "
          "plan-off turn)")
    print(f"[4] (info) the plan block: {len(block)} characters in every request's system "
          f"message (about {len(block) // 4} tokens); context_includes_markdown adds the "
          f"{len(DRAFT.encode())}-byte plan")
    return 0


if __name__ == "__main__":
    sys.exit(main())
