"""Which transition an event takes, and which states it exits and enters.

The rules follow the W3C SCXML recommendation (section 3.13, "Selecting and Executing
Transitions") for a chart without parallel states or history: docs/statecharts.md, section
"Semantics", states each one. Everything here is computed once per definition, so taking a
transition at run time costs a walk up the active state's lineage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orion.statechart.model.tree import SEPARATOR, StateNode, lineage, settle

#: The prefix of completion events: entering a final child of ``p`` raises ``done.state.p``.
DONE_PREFIX = "done.state."


@dataclass(frozen=True, slots=True)
class CompiledTransition:
    """One transition as the engine takes it.

    ``source`` is the state the transition belongs to (``None``: the root, for ``*``).
    ``domain`` is the SCXML transition domain: every active state strictly inside it is
    exited, and ``enter`` lists the states entered below it, outermost first, ending in the
    leaf the transition settles in. A targetless transition (``dest`` is ``None``) exits and
    enters nothing."""

    trigger: str
    source: str | None
    dest: str | None
    guards: tuple[Any, ...]
    unless: tuple[Any, ...]
    actions: tuple[Any, ...]
    where: str
    domain: str | None
    enter: tuple[str, ...]

    @property
    def leaf(self) -> str | None:
        return self.enter[-1] if self.enter else None


def is_descendant(path: str, ancestor: str | None) -> bool:
    """Whether ``path`` lies strictly inside ``ancestor`` (``None``: the root holds all)."""
    return ancestor is None or path.startswith(ancestor + SEPARATOR)


def transition_domain(nodes: dict[str, StateNode], source: str | None, dest: str,
                      internal: bool) -> str | None:
    """SCXML's ``getTransitionDomain``: an internal transition from a compound state into one
    of its descendants keeps its source active; any other transition's domain is the innermost
    compound proper ancestor of the source that also contains the target (``findLCCA``)."""
    if source is None:
        return None
    if internal and nodes[source].compound and is_descendant(dest, source):
        return source
    for ancestor in reversed(lineage(source)[:-1]):
        if is_descendant(dest, ancestor):
            return ancestor
    return None


def entry_path(nodes: dict[str, StateNode], domain: str | None, dest: str) -> tuple[str, ...]:
    """The states a transition into ``dest`` enters below ``domain``, outermost first: the
    ancestors of ``dest``, ``dest``, then its ``initial`` descendants."""
    return tuple(p for p in lineage(settle(nodes, dest)) if is_descendant(p, domain))


def exit_path(active_leaf: str, domain: str | None) -> list[str]:
    """The active states a transition with ``domain`` exits, innermost first."""
    return [p for p in reversed(lineage(active_leaf)) if is_descendant(p, domain)]


def done_event(nodes: dict[str, StateNode], entered: str) -> str | None:
    """The completion event that entering ``entered`` raises, if it is a nested final."""
    node = nodes[entered]
    if node.spec.final and node.parent is not None:
        return DONE_PREFIX + node.parent
    return None
