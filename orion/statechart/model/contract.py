"""Contracts and tags: what the code that drives a lifecycle relies on.

Code never compares state names: it asks ``lifecycle.has_tag("finalizing")`` (XState's
``hasTag``), and a chart says which states carry which tags. A chart's ``contract:`` lists the
triggers the runtime sends and the tags it asks about; a chart that replaces or extends it must
keep both, and :func:`orion.statechart.checks.contract.check_contract` says, with a position,
where it does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from orion.statechart.model.schema import StatechartSpec
from orion.statechart.model.tree import StateNode, lineage


@dataclass(frozen=True)
class Requirement:
    """One trigger or tag the runtime relies on, and which chart declared it."""

    kind: str  # "trigger" or "tag"
    name: str
    declared_by: str  # e.g. "the built-in write_session"


def tags_by_state(nodes: Mapping[str, StateNode]) -> dict[str, frozenset[str]]:
    """For each state path, its own tags and those of its ancestors (the active tags when it
    is the current state)."""
    return {path: frozenset(tag for p in lineage(path) for tag in nodes[p].spec.tags)
            for path in nodes}


def state_tagged(nodes: Mapping[str, StateNode], tag: str) -> str | None:
    """The first leaf, in file order, whose active tags include ``tag``."""
    tags = tags_by_state(nodes)
    for path, node in nodes.items():
        if not node.compound and tag in tags[path]:
            return path
    return None


def requirements(spec: StatechartSpec, declared_by: str) -> list[Requirement]:
    return ([Requirement("trigger", t, declared_by) for t in spec.contract.triggers]
            + [Requirement("tag", t, declared_by) for t in spec.contract.tags])
