"""Where the chart goes: every state reachable from the initial one, and no state (but a
final one) a lifecycle could never leave. The walk indexes each state's exits once, so it
grows about linearly with the chart."""

from __future__ import annotations

from collections.abc import Iterator

from orion.statechart.checks.rules import Chart, Finding, rule
from orion.statechart.model.schema import WILDCARD, StatechartSpec
from orion.statechart.model.tree import StateNode, lineage, settle


class _Exits:
    """Where everything that can leave a state goes, indexed once: each state's own
    transitions and timers, and the wildcard transitions. A leaf's exits are its lineage's."""

    def __init__(self, spec: StatechartSpec, nodes: dict[str, StateNode]):
        self.nodes = nodes
        self.wildcard: list[str | None] = []
        self.by_state: dict[str, list[str | None]] = {}
        for t in spec.transitions:
            if WILDCARD in t.source:
                self.wildcard.append(t.dest)
            else:
                for src in dict.fromkeys(t.source):
                    self.by_state.setdefault(src, []).append(t.dest)
        for node in nodes.values():
            for a in node.spec.after:
                self.by_state.setdefault(node.path, []).append(a.dest)
        self._settled: dict[str, str] = {}

    def outgoing(self, leaf: str) -> Iterator[str | None]:
        yield from self.wildcard
        for path in lineage(leaf):
            yield from self.by_state.get(path, ())

    def settle(self, dest: str) -> str:
        target = self._settled.get(dest)
        if target is None:
            target = self._settled[dest] = settle(self.nodes, dest)
        return target


def _walk(chart: Chart) -> tuple[_Exits, set[str]]:
    """The leaves reachable from the initial state, following every transition and timer
    (the wildcard destinations once: they are the same from every leaf)."""
    spec, nodes = chart.spec, chart.nodes
    exits = _Exits(spec, nodes)
    start = settle(nodes, spec.initial)
    reached: set[str] = set(lineage(start))
    queue = [start]
    seen = {start}
    wildcard_done = False
    while queue:
        leaf = queue.pop()
        dests = exits.outgoing(leaf) if not wildcard_done else (
            d for p in lineage(leaf) for d in exits.by_state.get(p, ()))
        wildcard_done = True
        for dest in dests:
            if dest is None or dest not in nodes:
                continue
            target = exits.settle(dest)
            if target not in seen:
                seen.add(target)
                queue.append(target)
                reached.update(lineage(target))
    return exits, reached


@rule("SC301", "unreachable", "a state no transition or timer leads to from the initial state")
def unreachable(chart: Chart) -> Iterator[Finding]:
    if not chart.well_formed:
        return
    _, reached = chart.shared("walk", _walk)
    for node in chart.nodes.values():
        if node.path not in reached:
            yield Finding(node.loc, f"state {node.path!r} is unreachable from the initial "
                                    f"state {chart.spec.initial!r}", key=True)


@rule("SC302", "dead-end", "a state that is not final and has no transition or timer that "
                           "leaves it")
def dead_end(chart: Chart) -> Iterator[Finding]:
    if not chart.well_formed:
        return
    exits, reached = chart.shared("walk", _walk)
    nodes = chart.nodes
    for node in nodes.values():
        if node.path not in reached or node.compound or node.spec.final:
            continue
        # Internal transitions and transitions that settle back into this very leaf run
        # actions but never leave it.
        leaves = [dest for dest in exits.outgoing(node.path)
                  if dest is not None and (dest not in nodes or exits.settle(dest) != node.path)]
        if not leaves:
            yield Finding(node.loc, f"state {node.path!r} is not final but has no transition "
                                    "or timer that leaves it", key=True)
