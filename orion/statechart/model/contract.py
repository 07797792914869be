"""Contracts and tags: what the code that drives a lifecycle relies on.

Code never compares state names: it asks ``lifecycle.has_tag("finalizing")`` (XState's
``hasTag``), and a chart says which states carry which tags. A chart's ``contract:`` lists the
triggers the runtime sends and the tags it asks about; a chart that replaces or extends it must
keep both, and :func:`check_contract` says, with a position, where it does not.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from orion.errors import Diagnostic
from orion.statechart.model.events import answers, normalize_descriptor
from orion.statechart.model.schema import StatechartSpec
from orion.statechart.model.tree import StateNode, flatten, lineage
from orion.yamlsource import SourceDocument


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


def check_ids(doc: SourceDocument, spec: StatechartSpec) -> Iterator[Diagnostic]:
    """Transition ids are unique (an explicit id may not repeat another's trigger-id)."""
    triggers = Counter(t.trigger for t in spec.transitions)
    seen: dict[str, int] = {}
    for i, t in enumerate(spec.transitions):
        tid = t.id or (t.trigger if triggers[t.trigger] == 1 else None)
        if tid is None:
            continue
        if tid in seen:
            yield doc.diagnostic(("transitions", i, "id" if t.id else "trigger"),
                                 f"transition id {tid!r} is also the id of transition "
                                 f"{seen[tid] + 1}; an overlay could not tell them apart")
        seen[tid] = i


def check_contract(doc: SourceDocument, spec: StatechartSpec,
                   required: Iterable[Requirement]) -> Iterator[Diagnostic]:
    """Every required trigger is handled by a transition or timer; every required tag is on a
    state. A miss points at the closest name in the chart (a renamed trigger or state)."""
    nodes = flatten(spec)
    triggers: dict[str, tuple] = {}
    for i, t in enumerate(spec.transitions):
        triggers.setdefault(t.trigger, ("transitions", i, "trigger"))
    for node in nodes.values():
        for k, a in enumerate(node.spec.after):
            triggers.setdefault(a.trigger, (*node.loc, "after", k))
    tags = {tag for node in nodes.values() for tag in node.spec.tags}
    handled = {normalize_descriptor(t) for t in triggers}
    required = list(required)
    # A renamed trigger is one the chart handles that the contract does not list.
    own = [t for t in triggers if t not in {r.name for r in required if r.kind == "trigger"}]
    done: set[tuple[str, str]] = set()
    for req in required:
        if (req.kind, req.name) in done:
            continue
        done.add((req.kind, req.name))
        if req.kind == "trigger" and not answers(handled, req.name):
            close = difflib.get_close_matches(req.name, own, n=1, cutoff=0.5)
            loc = triggers[close[0]] if close else ("transitions",)
            yield doc.diagnostic(loc, (
                f"no transition of {spec.statechart!r} handles trigger {req.name!r}, which the "
                f"runtime sends (contract of {req.declared_by})"
                + (f"; was {close[0]!r} renamed from it?" if close else "")), key=not close)
        elif req.kind == "tag" and req.name not in tags:
            # A renamed state lost its tags: look among the states that have none.
            untagged = {node.name: node for node in nodes.values() if not node.spec.tags}
            close = difflib.get_close_matches(req.name, list(untagged), n=1, cutoff=0.3)
            node = untagged[close[0]] if close else None
            yield doc.diagnostic(node.loc if node is not None else ("states",), (
                f"no state of {spec.statechart!r} has tag {req.name!r}, which the runtime asks "
                f"about (contract of {req.declared_by}); add `tags: [{req.name}]` to the state "
                "that plays that part"
                + (f" (state {close[0]!r}?)" if node is not None else "")), key=True)
