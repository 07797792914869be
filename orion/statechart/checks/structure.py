"""The shape of the chart: initial states, compound and final states, and that every state a
transition names exists."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from orion.statechart.checks.rules import Chart, Finding, rule
from orion.statechart.model.events import DONE_PREFIX, descriptors
from orion.statechart.model.schema import WILDCARD


@rule("SC101", "initial-state", "the chart's initial is not a top-level state")
def initial_state(chart: Chart) -> Iterator[Finding]:
    spec = chart.spec
    if spec.initial not in spec.states:
        hint = difflib.get_close_matches(spec.initial, spec.states, n=1)
        yield Finding(("initial",), f"initial state {spec.initial!r} is not a top-level state "
                                    f"(top-level states: {', '.join(spec.states) or 'none'})"
                                    + (f"; did you mean {hint[0]!r}?" if hint else ""))


@rule("SC102", "compound-initial", "a compound state without a valid 'initial' child, or a "
                                   "leaf with one")
def compound_initial(chart: Chart) -> Iterator[Finding]:
    for node in chart.nodes.values():
        st = node.spec
        if node.compound and st.initial is None:
            yield Finding(node.loc, f"compound state {node.path!r} needs an 'initial' child",
                          key=True)
        elif st.initial is not None and not node.compound:
            yield Finding((*node.loc, "initial"), f"state {node.path!r} has no child states, "
                                                  "so it cannot have an 'initial'")
        elif st.initial is not None and st.initial not in st.states:
            yield Finding((*node.loc, "initial"),
                          f"initial {st.initial!r} is not a child of {node.path!r} "
                          f"(children: {', '.join(st.states)})")


@rule("SC103", "final-state", "a final state with child states, 'after' timers, exit actions "
                              "or transitions out of it")
def final_state(chart: Chart) -> Iterator[Finding]:
    nodes = chart.nodes
    for node in nodes.values():
        st = node.spec
        if st.final and (node.compound or st.after or st.exit):
            yield Finding(node.loc, f"final state {node.path!r} cannot have child states, "
                                    "'after' timers or exit actions", key=True)
    for i, t in enumerate(chart.spec.transitions):
        for j, src in enumerate(t.source):
            if src in nodes and nodes[src].spec.final:
                # A bare name (not a list) falls back to 'source' itself.
                yield Finding(("transitions", i, "source", j),
                              f"final state {src!r} cannot have transitions out of it")


@rule("SC104", "unknown-state", "a transition's source or destination, or a timer's "
                                "destination, is not a state of the chart")
def unknown_state(chart: Chart) -> Iterator[Finding]:
    nodes = chart.nodes
    for i, t in enumerate(chart.spec.transitions):
        for j, src in enumerate(t.source):
            if src != WILDCARD and src not in nodes:
                yield chart.unknown_state(("transitions", i, "source", j), src, "source")
        if t.dest is not None and t.dest not in nodes:
            yield chart.unknown_state(("transitions", i, "dest"), t.dest, "destination")
    for node in nodes.values():
        for k, a in enumerate(node.spec.after):
            if a.dest is not None and a.dest not in nodes:
                yield chart.unknown_state((*node.loc, "after", k, "dest"), a.dest,
                                          "destination")


@rule("SC105", "completion-event", "a 'done.state.X' trigger whose X is not a compound state "
                                   "with a final child: the event never happens")
def completion_event(chart: Chart) -> Iterator[Finding]:
    nodes = chart.nodes
    for i, t in enumerate(chart.spec.transitions):
        for written, descriptor in zip(t.trigger.split(), descriptors(t.trigger)):
            if not descriptor.startswith(DONE_PREFIX):
                continue
            name = descriptor[len(DONE_PREFIX):]
            done = nodes.get(name)
            if done is None or not any(nodes[c].spec.final for c in done.children):
                yield Finding(("transitions", i, "trigger"),
                              f"{written!r} never happens: it is raised when a final child "
                              f"of a compound state is entered, and {name!r} is "
                              + ("not a state" if done is None
                                 else "not a compound state with a final child"))
