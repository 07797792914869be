"""A lifecycle comes to rest: no event it raises itself leads, unconditionally, back to where
it raises that event again.

Entering a final child of ``p`` raises ``done.state.p`` at once; a transition that answers it
and enters that final child again (``done.state.spin: spin -> spin``) raises it again, for
ever: the trigger that started it never returns. A timer of 0 ms whose transition re-enters
its own state does the same to the clock. Only what is certain is reported: the first
transition the event would take, without guards (a guarded loop may end, and the engine's
microstep limit stops one that does not, see docs/statecharts.md#limits).
"""

from __future__ import annotations

from collections.abc import Iterator

from orion.statechart.checks.rules import Chart, Finding, rule
from orion.statechart.interpreter.semantics import entry_path, transition_domain
from orion.statechart.model.events import DONE_PREFIX, answers, descriptors
from orion.statechart.model.tree import Edge, edges, lineage, settle


@rule("SC303", "endless-loop", "a completion event, or a 0 ms timer, whose first transition "
                               "re-enters the state that raises it, with no guard to stop it")
def endless_loop(chart: Chart) -> Iterator[Finding]:
    nodes = chart.nodes
    finals = [p for p, n in nodes.items() if n.spec.final and n.parent is not None]
    zero = any(a.ms == 0 for n in nodes.values() for a in n.spec.after)
    # Most charts have neither a nested final state nor a 0 ms timer: nothing to follow.
    if not (finals or zero) or not chart.well_formed or not _targets_exist(chart):
        return
    if finals:
        by_owner: dict[str | None, list[Edge]] = {}
        for edge in edges(chart.spec, {}):  # the transitions, not the timers
            by_owner.setdefault(edge.owner, []).append(edge)
        yield from _completion_loops(chart, finals, by_owner)
    if zero:
        yield from _zero_timer_loops(chart)


def _targets_exist(chart: Chart) -> bool:
    """Every destination is a state (else SC104 reports it, and there is nothing to follow)."""
    nodes = chart.nodes
    return all(t.dest is None or t.dest in nodes for t in chart.spec.transitions) and all(
        a.dest is None or a.dest in nodes for n in nodes.values() for a in n.spec.after)


def _first_answer(by_owner: dict[str | None, list[Edge]], leaf: str, event: str) -> Edge | None:
    """The transition ``event`` is tried on first in ``leaf``: the leaf's own, then each
    ancestor's outwards, then the root's; document order within a state."""
    for owner in [*reversed(lineage(leaf)), None]:
        for edge in by_owner.get(owner, ()):
            if answers(frozenset(descriptors(edge.trigger)), event):
                return edge
    return None


def _completion_loops(chart: Chart, finals: list[str],
                      by_owner: dict[str | None, list[Edge]]) -> Iterator[Finding]:
    """Follow each nested final state's completion event through its first transition, when
    that transition has no guard: a path that comes back to a final state it passed never
    ends. Each final state has at most one such successor, so every state is walked once."""
    nodes = chart.nodes
    step: dict[str, tuple[str, Edge]] = {}
    for path in finals:
        edge = _first_answer(by_owner, path, DONE_PREFIX + str(nodes[path].parent))
        if edge is None or edge.spec.guards or edge.spec.unless or edge.spec.dest is None:
            continue
        step[path] = (settle(nodes, edge.spec.dest), edge)
    done: set[str] = set()
    for start in step:
        path, trail = start, []
        while path in step and path not in done:
            done.add(path)
            trail.append(path)
            path = step[path][0]
        if path in trail:  # this walk closed a loop
            loop = trail[trail.index(path):]
            edge = step[loop[-1]][1]
            yield Finding(("transitions", edge.index, "trigger"), _loop_message(loop, step))


def _loop_message(loop: list[str], step: dict[str, tuple[str, Edge]]) -> str:
    def event(final: str) -> str:
        return DONE_PREFIX + final.rsplit(".", 1)[0]

    rest = ("the lifecycle would never come to rest (lead the completion event elsewhere, or "
            "give the transition a guard)")
    if len(loop) == 1:
        return (f"{event(loop[0])!r} re-enters {step[loop[0]][0]!r}, which raises "
                f"{event(loop[0])!r} again at once: {rest}")
    chain = ", then ".join(f"{event(p)!r} enters {step[p][0]!r}" for p in loop)
    return f"completion events in a loop: {chain}, which raises {event(loop[0])!r} again: {rest}"


def _zero_timer_loops(chart: Chart) -> Iterator[Finding]:
    nodes = chart.nodes
    for path, node in nodes.items():
        for k, timer in enumerate(node.spec.after):
            if timer.ms != 0 or timer.guards or timer.unless or timer.dest is None:
                continue
            domain = transition_domain(nodes, path, timer.dest, timer.type == "internal")
            if path in entry_path(nodes, domain, timer.dest):
                yield Finding((*node.loc, "after", k, "ms"), (
                    f"the 0 ms timer {timer.trigger!r} of {path!r} re-enters {path!r}, which "
                    "arms it again at once: the lifecycle would never come to rest (give it a "
                    "delay or a guard, or lead it elsewhere)"))
