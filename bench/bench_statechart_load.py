"""Statechart load benchmark: parsing, checking and compiling charts of 100, 1,000 and 10,000
states, against reading the same YAML alone, in one process.

Run from the repository root with the project's virtualenv::

    .venv/bin/python bench/bench_statechart_load.py            # prints figures, always exits 0
    .venv/bin/python bench/bench_statechart_load.py --check    # exits 1 when a target is missed

The generated chart has ``N`` states: compound groups of ten leaves (two levels deep, every
tenth group nested one level further), a ``next`` transition from each leaf to the following
one, a ``back`` transition from each group to the first leaf, an ``after`` timer in every group
and a ``*`` reset. For each size it reports:

- ``yaml``: :func:`orion.config.yamlsource.load_yaml` alone (PyYAML plus the positions Orion keeps
  for its diagnostics): the baseline, as every load starts with it;
- ``check+compile``: :func:`orion.statechart.checks.check` on the parsed document (schema and
  every static check, plugin names included), compiling the
  :class:`~orion.statechart.interpreter.definition.Definition`, creating one instance and taking one
  transition;
- ``load+check``: the two together, what ``orion check`` and ``load_definition`` pay;
- the ratio of check+compile to yaml, and the growth of check+compile from one size to the
  next (10x more states: near-linear means close to 10x).

Targets: the 10,000-state chart loads and checks in under 10 s, and check+compile grows at
most 15x from 1,000 to 10,000 states (linear would be 10x; the per-leaf scans this replaced
grew about 100x).

The overlay lines time what ``orion check FILE`` does with a file (the catalog resolves it:
read, merged with what it extends, checked), for an overlay that adds the same states and
transitions to Orion's ``write_session`` (1,000, 5,000 and 10,000 states) and, beside it in
the same run, for the plain chart of the same size on its own. The ratio overlay/plain stays
flat when merging is linear; it grew with the overlay's size when every merged part scanned
every position (2,000 states took 9.8 s). Target: at most 3x at 10,000 states.
"""

from __future__ import annotations

import argparse
import gc
import platform
import sys
import tempfile
import time
from pathlib import Path

from orion.clock import VirtualClock
from orion.hooks.manager import make_plugin_manager
from orion.statechart import checks
from orion.statechart.io.catalog import Catalog, ChartCache
from orion.statechart.interpreter.definition import Definition
from orion.statechart.interpreter.settings import resolve
from orion.config.yamlsource import load_yaml

SIZES = (100, 1_000, 10_000)
OVERLAY_SIZES = (1_000, 5_000, 10_000)
MAX_SECONDS_10K = 10.0
MAX_GROWTH = 15.0
MAX_OVERLAY_RATIO = 3.0


def chart(states: int) -> str:
    """A chart of about ``states`` states (groups of ten leaves plus the group states)."""
    header = ["statechart: generated", "initial: g0",
              "settings:", "  wait_ms: {type: int, default: 1000}", "states:"]
    return _generated(states, header, "transitions:", "  - ")


def overlay(states: int) -> str:
    """The states and transitions of :func:`chart`, as an overlay of Orion's ``write_session``
    (entered from ``idle``); ``finish`` leads back to ``idle``."""
    header = ["extends: write_session", "settings:", "  wait_ms: {type: int, default: 1000}",
              "states:"]
    text = _generated(states, header, "transitions:\n  insert:", "    - ")
    return (text.replace("dest: end}", "dest: idle}").replace("  end:\n    final: true\n", "")
            + "    - {trigger: generated, source: idle, dest: g0}\n")


def _generated(states: int, header: list[str], transitions: str, item: str) -> str:
    groups = max(1, states // 11)
    lines = list(header)
    leaves: list[str] = []
    for g in range(groups):
        nested = g % 10 == 9
        lines += [f"  g{g}:", "    initial: " + ("inner" if nested else "s0"),
                  "    after: [{ms: wait_ms, trigger: tick, dest: " + f"g{(g + 1) % groups}" + "}]",
                  "    states:"]
        indent, prefix = "      ", f"g{g}"
        if nested:
            lines += ["      inner:", "        initial: s0", "        states:"]
            indent, prefix = "          ", f"g{g}.inner"
        for s in range(10):
            lines.append(f"{indent}s{s}: {{}}")
            leaves.append(f"{prefix}.s{s}")
    lines += ["  end:", "    final: true", transitions]
    for i, leaf in enumerate(leaves):
        lines.append(f"{item}{{trigger: next, source: {leaf}, "
                     f"dest: {leaves[(i + 1) % len(leaves)]}}}")
    for g in range(groups):
        lines.append(f"{item}{{trigger: back, source: g{g}, dest: g{g}, type: internal}}")
    lines.append(f"{item}{{trigger: finish, source: '*', dest: end}}")
    return "\n".join(lines) + "\n"


def best_of(fn, reps: int) -> float:
    """The best of ``reps`` runs, the garbage collector off inside each (as ``timeit`` does):
    its full collections scan every object alive, which would charge the chart's size twice."""
    best = float("inf")
    for _ in range(reps):
        gc.collect()
        gc.disable()
        try:
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--reps", type=int, default=3, help="runs per size; the best counts")
    args = parser.parse_args(argv)

    plugins = make_plugin_manager(entrypoints=False)
    print(f"Statechart load benchmark: python {platform.python_version()}; "
          f"best of {args.reps} runs per size")
    results: dict[int, float] = {}
    yaml_10k = 0.0
    names = checks.Names(plugins.registry.guards, plugins.registry.actions)
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            text = chart(size)
            path = Path(tmp) / f"chart_{size}.yaml"
            path.write_text(text, encoding="utf-8")
            doc = load_yaml(path, text=text)

            def yaml_only() -> None:
                load_yaml(path, text=text)

            def check_and_compile() -> None:
                spec, diagnostics = checks.check(doc, names)
                assert spec is not None and not diagnostics, diagnostics[:3]
                definition = Definition(spec, source=str(path), plugins=plugins,
                                        settings=resolve(spec, None, {}))
                lifecycle = definition.create(clock=VirtualClock())
                assert lifecycle.trigger("next")

            spec, _ = checks.check(doc, names)
            count = sum(1 for _ in _states(spec))
            base = best_of(yaml_only, args.reps)
            own = best_of(check_and_compile, args.reps)
            results[size] = own
            if size == 10_000:
                yaml_10k = base
            growth = "" if size == SIZES[0] else \
                f"   growth x{own / results[size // 10]:.1f} for 10x states"
            print(f"{count:>6,} states   yaml {base * 1000:8.1f} ms   check+compile "
                  f"{own * 1000:8.1f} ms   load+check {(base + own) * 1000:8.1f} ms   "
                  f"check+compile/yaml {own / base:4.2f}x{growth}")
    total_10k = results[10_000] + yaml_10k
    ok_time = total_10k < MAX_SECONDS_10K
    ok_growth = results[10_000] / results[1_000] <= MAX_GROWTH
    print(f"10,000 states loaded and checked in {total_10k:.2f} s "
          f"(target < {MAX_SECONDS_10K:g} s)   "
          f"{'OK' if ok_time else 'MISS'}")
    print(f"check+compile growth 1,000 -> 10,000 states x{results[10_000] / results[1_000]:.1f} "
          f"(target <= {MAX_GROWTH:g}x)   {'OK' if ok_growth else 'MISS'}")
    ok_overlay = overlays(plugins, args.reps)
    return 1 if args.check and not (ok_time and ok_growth and ok_overlay) else 0


def overlays(plugins, reps: int) -> bool:
    """``orion check FILE`` of an overlay and of a plain chart of the same size, each through
    a fresh catalog (what a new ``orion check`` process does after reading its plugins)."""
    ratio = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for size in OVERLAY_SIZES:
            files = {"plain": Path(tmp) / f"plain_{size}.yaml",
                     "overlay": Path(tmp) / f"overlay_{size}.yaml"}
            files["plain"].write_text(chart(size), encoding="utf-8")
            files["overlay"].write_text(overlay(size), encoding="utf-8")
            took = {}
            for kind, path in files.items():
                resolved = Catalog(plugins).resolve_file(path)
                assert resolved.ok, resolved.diagnostics[:3]

                def check_file(path: Path = path) -> None:
                    # A cache of its own: each run reads the file, as a new process does.
                    Catalog(plugins, cache=ChartCache()).resolve_file(path)

                took[kind] = best_of(check_file, reps)
            ratio = took["overlay"] / took["plain"]
            print(f"overlay of {size:>6,} states   plain chart {took['plain'] * 1000:8.1f} ms   "
                  f"overlay {took['overlay'] * 1000:8.1f} ms   overlay/plain {ratio:5.2f}x")
    ok = ratio <= MAX_OVERLAY_RATIO
    print(f"overlay/plain at 10,000 states {ratio:.2f}x (target <= {MAX_OVERLAY_RATIO:g}x)   "
          f"{'OK' if ok else 'MISS'}")
    return ok


def _states(spec):
    pending = list(spec.states.values())
    while pending:
        state = pending.pop()
        yield state
        pending.extend(state.states.values())


if __name__ == "__main__":
    sys.exit(main())
