"""The state hierarchy of a statechart, flattened into ``.`` paths."""

from __future__ import annotations

from dataclasses import dataclass

from orion.statechart.model.schema import StatechartSpec, StateSpec

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
