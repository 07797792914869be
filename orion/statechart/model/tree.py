"""The state hierarchy of a statechart, flattened into ``.`` paths, and its transitions as
edges of that tree."""

from __future__ import annotations

from dataclasses import dataclass

from orion.statechart.model.schema import (
    WILDCARD,
    DelayedTransition,
    StatechartSpec,
    StateSpec,
    TransitionSpec,
)

SEPARATOR = "."


@dataclass(frozen=True)
class StateNode:
    path: str
    spec: StateSpec
    loc: tuple[str | int, ...]  # where the state is defined in the YAML document
    children: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.path.rsplit(SEPARATOR, 1)[-1]

    @property
    def parent(self) -> str | None:
        return self.path.rsplit(SEPARATOR, 1)[0] if SEPARATOR in self.path else None

    @property
    def compound(self) -> bool:
        return bool(self.children)


def flatten(spec: StatechartSpec) -> dict[str, StateNode]:
    """Every state by path, parents before children, in file order."""
    nodes: dict[str, StateNode] = {}

    def walk(states: dict[str, StateSpec], prefix: str, loc: tuple[str | int, ...]) -> None:
        for name, state in states.items():
            path = f"{prefix}{name}"
            here = (*loc, name)
            nodes[path] = StateNode(path, state, here,
                                    tuple(f"{path}{SEPARATOR}{c}" for c in state.states))
            walk(state.states, f"{path}{SEPARATOR}", (*here, "states"))

    walk(spec.states, "", ("states",))
    return nodes


def lineage(path: str) -> list[str]:
    """``a.b.c`` -> ``['a', 'a.b', 'a.b.c']``: the states that are active with ``path``."""
    parts = path.split(SEPARATOR)
    return [SEPARATOR.join(parts[: i + 1]) for i in range(len(parts))]


def settle(nodes: dict[str, StateNode], path: str) -> str:
    """The leaf that entering ``path`` ends in, following ``initial`` children."""
    node = nodes[path]
    while node.compound:
        if node.spec.initial is None:
            return node.path
        child = f"{node.path}{SEPARATOR}{node.spec.initial}"
        if child not in nodes:
            return node.path
        node = nodes[child]
    return node.path


@dataclass(frozen=True)
class Edge:
    """One transition of one state, as the engine and the diagrams see it: a ``transitions``
    entry once per source state, or an ``after`` entry of its state."""

    #: Document order: a state's transitions rank by it (its ``after`` entries come last).
    index: int
    trigger: str
    #: The state it belongs to; ``None`` for a ``*`` source, which belongs to the root.
    owner: str | None
    spec: TransitionSpec | DelayedTransition
    #: Where it is, for messages: ``on 'begin'``, ``on timer 'tick' of 'wait'``.
    where: str
    #: Its position in the owner's ``after`` list, for a delayed transition.
    timer: int | None = None


def edges(spec: StatechartSpec, nodes: dict[str, StateNode]) -> list[Edge]:
    """Every transition of the chart by owner, in document order: the ``transitions`` list
    (``*`` makes a transition the root's, whatever else its source names), then each state's
    ``after`` entries in the order of the states."""
    found: list[Edge] = []
    for index, t in enumerate(spec.transitions):
        owners: list[str | None] = [None] if WILDCARD in t.source \
            else list(dict.fromkeys(t.source))
        found.extend(Edge(index, t.trigger, owner, t, f"on {t.trigger!r}") for owner in owners)
    index = len(spec.transitions)
    for path, node in nodes.items():
        for k, a in enumerate(node.spec.after):
            found.append(Edge(index, a.trigger, path, a, f"on timer {a.trigger!r} of {path!r}",
                              timer=k))
            index += 1
    return found
