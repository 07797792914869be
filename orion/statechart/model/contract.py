"""Contracts and tags: what the code that drives a lifecycle relies on.

Code never compares state names: it asks ``lifecycle.has_tag("finalizing")`` (XState's
``hasTag``), and a chart says which states carry which tags. A chart's ``contract:`` lists the
triggers the runtime sends, the tags it asks about and the settings it reads; a chart that
replaces or extends it must keep them all, and
:func:`orion.statechart.checks.contract.check_contract` says, with a position, where it does
not.

Contracts grow. A contract's ``history`` says what each version added, and a chart says which
version of the contracts below it it was written for (``contract.version``, 1 without it). What
a chart lacks of what came after its version, where the declaring chart has it (a tag on a
state, a trigger's transitions, a setting), is what a migration adds
(:mod:`orion.statechart.io.migrate`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orion.statechart.model.events import answers, descriptors
from orion.statechart.model.schema import StatechartSpec
from orion.statechart.model.tree import StateNode, flatten, lineage

#: The version of a contract (or the one a chart was written for) when none is given.
FIRST_VERSION = 1


@dataclass(frozen=True)
class Handler:
    """A transition that handles a required trigger, in the chart that declared it."""

    sources: tuple[str, ...]
    dest: str | None


@dataclass(frozen=True)
class Requirement:
    """One trigger or tag the runtime relies on, which chart declared it, and where that chart
    has it: the states whose own tags include the tag (with the triggers that lead into them),
    or the transitions that handle the trigger."""

    kind: str  # "trigger", "tag" or "setting"
    name: str
    declared_by: str  # e.g. "built-in write_session"
    carriers: tuple[str, ...] = ()
    entered_by: tuple[str, ...] = ()
    handlers: tuple[Handler, ...] = ()
    #: The contract version that added it, and that version's release (``None``: it has been
    #: in the contract from the first version, or the contract keeps no history).
    since: int | None = None
    release: str = ""

    @property
    def first(self) -> str | None:
        """The first state that carries the tag, in the declaring chart."""
        return self.carriers[0] if self.carriers else None


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


def written_for(spec: StatechartSpec) -> int:
    """The contract version ``spec`` was written for."""
    return spec.contract.version or FIRST_VERSION


def requirements(spec: StatechartSpec, declared_by: str) -> list[Requirement]:
    """What ``spec``'s contract requires of a chart that replaces or extends it."""
    nodes = flatten(spec)
    added = {(kind, name): change for change in spec.contract.history
             for kind, names in (("trigger", change.triggers), ("tag", change.tags),
                                 ("setting", change.settings))
             for name in names}

    def since(kind: str, name: str) -> dict[str, Any]:
        change = added.get((kind, name))
        return {"since": change.version, "release": change.release} if change else {}

    found = []
    for name in spec.contract.triggers:
        handlers = tuple(Handler(tuple(t.source), t.dest) for t in spec.transitions
                         if answers(frozenset(descriptors(t.trigger)), name))
        found.append(Requirement("trigger", name, declared_by, handlers=handlers,
                                 **since("trigger", name)))
    for name in spec.contract.tags:
        carriers = tuple(p for p, n in nodes.items() if name in n.spec.tags)
        entered = tuple(dict.fromkeys(t.trigger for t in spec.transitions
                                      if t.dest is not None and t.dest in carriers))
        found.append(Requirement("tag", name, declared_by, carriers=carriers,
                                 entered_by=entered, **since("tag", name)))
    for name in spec.contract.settings:
        found.append(Requirement("setting", name, declared_by,
                                 carriers=(name,) if name in spec.settings else (),
                                 **since("setting", name)))
    return found


def added_since(req: Requirement, version: int) -> bool:
    """Whether ``req`` came to the contract after ``version``: a chart written for that
    version could not have it."""
    return req.since is not None and req.since > version


def placement(req: Requirement, nodes: Mapping[str, StateNode]) -> bool:
    """Whether a chart with these states can have ``req`` where the declaring chart has it:
    a carrier of the tag, every state each handling transition names, by the same path, or
    the setting's definition."""
    if req.kind == "setting":
        return bool(req.carriers)  # the declaring chart defines it: its definition is copied
    if req.kind == "tag":
        return any(path in nodes for path in req.carriers)
    return bool(req.handlers) and all(
        all(s == "*" or s in nodes for s in h.sources) and (h.dest is None or h.dest in nodes)
        for h in req.handlers)
