"""What other charts and code require of a chart: transition ids an overlay can tell apart,
and the contract (the triggers the runtime sends, the tags it asks about). The catalog runs
these, since the requirements come from the charts a chart replaces."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Iterator

from orion.errors import Diagnostic
from orion.statechart.checks.rules import declare
from orion.statechart.model.contract import (
    FIRST_VERSION,
    Handler,
    Requirement,
    added_since,
    placement,
)
from orion.statechart.model.events import answers, descriptors
from orion.statechart.model.schema import StatechartSpec
from orion.statechart.model.tree import StateNode, flatten
from orion.config.yamlsource import SourceDocument

TRANSITION_ID = declare("SC501", "transition-id", "two transitions with one id (an explicit "
                        "'id', or a trigger no other transition has)")
CONTRACT_TRIGGER = declare("SC502", "contract-trigger", "no transition handles a trigger the "
                           "contract of this chart, or of one it replaces, lists")
CONTRACT_TAG = declare("SC503", "contract-tag", "no state has a tag the contract of this chart, "
                       "or of one it replaces, lists")


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
                                 f"{seen[tid] + 1}; an overlay could not tell them apart",
                                 code=TRANSITION_ID)
        seen[tid] = i


CONTRACT_SETTING = declare("SC505", "contract-setting", "the chart has no setting the "
                           "contract of this chart, or of one it replaces, lists")
CONTRACT_VERSION = declare("SC504", "contract-version", "a chart written for an older version "
                           "of a contract lacks what a later version added: a warning while it "
                           "runs migrated, for one release; `orion migrate FILE` adds it")

#: Where an overlay's edit of the transitions of a trigger is, in a merged document:
#: ``(EDITS, trigger)`` (a location of no chart: the overlay's ``remove`` or ``replace`` entry).
EDITS = "$edits"


def check_contract(doc: SourceDocument, spec: StatechartSpec, required: Iterable[Requirement],
                   version: int = FIRST_VERSION) -> Iterator[Diagnostic]:
    """Every required trigger is handled by a transition or timer; every required tag is on a
    state. A miss points at where the chart should have it: the state or transition the
    declaring chart has it on, a renamed one, a misspelled tag, the overlay's edit that took
    it away. What came to the contract after ``version`` (the one the chart was written for),
    where the declaring chart's states are, is a warning: a migration adds it."""
    kinds = _firsts(required)
    nodes = flatten(spec)
    movable = {(r.kind, r.name) for r in migratable(doc, spec, kinds, version)}
    yield from _contract_triggers(doc, spec, nodes, [r for r in kinds if r.kind == "trigger"],
                                  version, movable)
    yield from _contract_tags(doc, spec, nodes, [r for r in kinds if r.kind == "tag"], version,
                              movable)
    yield from _contract_settings(doc, spec, [r for r in kinds if r.kind == "setting"], version,
                                  movable)


def _firsts(required: Iterable[Requirement]) -> list[Requirement]:
    """Each requirement once, as the first chart that declared it has it (for the message)."""
    firsts: dict[tuple[str, str], Requirement] = {}
    for req in required:
        firsts.setdefault((req.kind, req.name), req)
    return list(firsts.values())


def migratable(doc: SourceDocument, spec: StatechartSpec, required: Iterable[Requirement],
               version: int) -> list[Requirement]:
    """What the chart lacks that a migration adds: what came to a contract after ``version``,
    for which it has the states the declaring chart has it on, and which its overlay did not
    take away on purpose (a ``remove`` or ``replace`` of the trigger's transitions)."""
    nodes = flatten(spec)
    tags = {tag for node in nodes.values() for tag in node.spec.tags}
    handled = {d for t in spec.transitions for d in descriptors(t.trigger)} | {
        a.trigger for node in nodes.values() for a in node.spec.after}
    found = []
    for req in _firsts(required):
        lacking = req.name not in spec.settings if req.kind == "setting" else \
            req.name not in tags if req.kind == "tag" else not answers(handled, req.name)
        if lacking and added_since(req, version) and placement(req, nodes) \
                and (req.kind == "tag" or (EDITS, req.name) not in doc.positions):
            found.append(req)
    return found


def _migrated(doc: SourceDocument, loc: tuple, what: str, req: Requirement, version: int,
              adds: str, *, key: bool = False) -> Diagnostic:
    release = f", Orion {req.release}" if req.release else ""
    contract = doc.data.get("contract") if isinstance(doc.data, dict) else None
    written = f"was written for version {version}" if isinstance(contract, dict) and \
        "version" in contract else f"names no contract version, so it counts as version {version}"
    found = doc.diagnostic(loc, (
        f"{what} (contract version {req.since} of {req.declared_by}{release}; this chart "
        f"{written}): it runs migrated for this release; `orion migrate {doc.path}` {adds}"),
        key=key, code=CONTRACT_VERSION)
    return Diagnostic(found.path, found.line, found.column, found.message, found.code,
                      "warning")


def _contract_triggers(doc: SourceDocument, spec: StatechartSpec, nodes: dict[str, StateNode],
                       required: list[Requirement], version: int,
                       movable: set[tuple[str, str]]) -> Iterator[Diagnostic]:
    triggers: dict[str, tuple] = {}  # each trigger the chart handles, and where first
    for i, t in enumerate(spec.transitions):
        triggers.setdefault(t.trigger, ("transitions", i, "trigger"))
    for node in nodes.values():
        for k, a in enumerate(node.spec.after):
            triggers.setdefault(a.trigger, (*node.loc, "after", k))
    handled = {d for t in triggers for d in descriptors(t)}
    # A renamed trigger is one the chart handles that the contract does not list.
    own = [t for t in triggers if t not in {r.name for r in required}]
    for req in required:
        if answers(handled, req.name):
            continue
        message = (f"no transition of {spec.statechart!r} handles trigger {req.name!r}, which "
                   f"the runtime sends (contract of {req.declared_by})")
        if ("trigger", req.name) in movable:
            count = len(req.handlers)
            yield _migrated(doc, ("transitions",), f"no transition of {spec.statechart!r} "
                            f"handles trigger {req.name!r}", req, version,
                            f"adds its {count} transition{'s' * (count != 1)} ("
                            + "; ".join(_route(h) for h in req.handlers) + ")", key=True)
            continue
        renamed = _renamed(spec, own, req)
        if renamed is not None:
            yield doc.diagnostic(triggers[renamed], f"{message}; was {renamed!r} renamed from it?",
                                 code=CONTRACT_TRIGGER)
        elif (EDITS, req.name) in doc.positions:
            yield doc.diagnostic((EDITS, req.name), f"{message}; this overlay removes or "
                                 "replaces the transitions that handled it",
                                 code=CONTRACT_TRIGGER)
        else:
            where = "; ".join(_route(h) for h in req.handlers)
            yield doc.diagnostic(("transitions",), message + (
                f" (in {req.declared_by}: {where})" if where else ""), key=True,
                code=CONTRACT_TRIGGER)


def _route(handler: Handler) -> str:
    sources = ", ".join(handler.sources)
    return f"from {sources} to {handler.dest}" if handler.dest else f"in {sources}"


def _renamed(spec: StatechartSpec, own: list[str], req: Requirement) -> str | None:
    """The trigger of the chart, not in the contract, that goes where ``req``'s transitions go
    in the declaring chart; without them to compare, the closest name."""
    if not req.handlers:
        close = difflib.get_close_matches(req.name, own, n=1, cutoff=0.5)
        return close[0] if close else None
    routes = {(frozenset(h.sources), h.dest) for h in req.handlers}
    for t in spec.transitions:
        if t.trigger in own and (frozenset(t.source), t.dest) in routes:
            return t.trigger
    return None


def _contract_tags(doc: SourceDocument, spec: StatechartSpec, nodes: dict[str, StateNode],
                   required: list[Requirement], version: int,
                   movable: set[tuple[str, str]]) -> Iterator[Diagnostic]:
    has: dict[str, StateNode] = {}  # each tag of the chart, and the first state with it
    for node in nodes.values():
        for tag in node.spec.tags:
            has.setdefault(tag, node)
    wanted = {r.name for r in required}
    for req in required:
        if req.name in has:
            continue
        message = (f"no state of {spec.statechart!r} has tag {req.name!r}, which the runtime "
                   f"asks about (contract of {req.declared_by})")
        if ("tag", req.name) in movable:
            node = nodes[next(p for p in req.carriers if p in nodes)]
            # At its tags when it has some (an overlay that replaced them wrote them there).
            yield _migrated(doc, (*node.loc, "tags") if node.spec.tags else node.loc,
                            f"no state of {spec.statechart!r} has tag {req.name!r}", req,
                            version, f"adds `tags: [{req.name}]` to state {node.path!r}",
                            key=not node.spec.tags)
            continue
        yield _missing_tag(doc, spec, nodes, req, message,
                           [t for t in has if t not in wanted], has)


def _contract_settings(doc: SourceDocument, spec: StatechartSpec, required: list[Requirement],
                       version: int, movable: set[tuple[str, str]]) -> Iterator[Diagnostic]:
    for req in required:
        if req.name in spec.settings:
            continue
        if ("setting", req.name) in movable:
            yield _migrated(doc, ("settings",), f"{spec.statechart!r} has no setting "
                            f"{req.name!r}", req, version, f"adds its definition from "
                            f"{req.declared_by}", key=True)
            continue
        close = difflib.get_close_matches(req.name, list(spec.settings), n=1)
        yield doc.diagnostic(("settings", close[0]) if close else ("settings",), (
            f"{spec.statechart!r} has no setting {req.name!r}, which the runtime reads "
            f"(contract of {req.declared_by})"
            + (f"; was {close[0]!r} renamed from it?" if close else "")), key=True,
            code=CONTRACT_SETTING)


def _missing_tag(doc: SourceDocument, spec: StatechartSpec, nodes: dict[str, StateNode],
                 req: Requirement, message: str, spare: list[str],
                 has: dict[str, StateNode]) -> Diagnostic:
    """Where the tag should be: a misspelled tag of the chart, the state that has it in the
    declaring chart (by its path, or the one the same triggers lead to when it was renamed),
    or the closest state without tags."""
    close = difflib.get_close_matches(req.name, spare, n=1, cutoff=0.75)
    if close:
        node = has[close[0]]
        tags = list(node.spec.tags)
        loc = (*node.loc, "tags", tags.index(close[0]))
        return doc.diagnostic(loc if loc in doc.positions else (*node.loc, "tags"), (
            f"{message}; state {node.path!r} has {close[0]!r}: did you mean {req.name!r}?"),
            code=CONTRACT_TAG)
    add = f"add `tags: [{req.name}]` to the state that plays that part"
    if req.first is not None and req.first in nodes:
        node = nodes[req.first]
        loc = (*node.loc, "tags") if node.spec.tags else node.loc
        return doc.diagnostic(loc, f"{message}; {add}: {node.path!r} has it in "
                                   f"{req.declared_by}", key=not node.spec.tags,
                              code=CONTRACT_TAG)
    played = _renamed_state(spec, nodes, req)
    hint = f" (state {played.path!r}?)" if played is not None else ""
    if req.first is not None:
        hint = f": {req.first!r} has it in {req.declared_by}{hint}"
    return doc.diagnostic(played.loc if played is not None else ("states",), message + "; "
                          + add + hint, key=True, code=CONTRACT_TAG)


def _renamed_state(spec: StatechartSpec, nodes: dict[str, StateNode],
                   req: Requirement) -> StateNode | None:
    """The state of the chart that plays the part of the one carrying ``req`` in the declaring
    chart: where the triggers that lead there lead in this chart, else the closest name among
    the states without tags."""
    dests = Counter(t.dest for t in spec.transitions
                    if t.trigger in req.entered_by and t.dest in nodes
                    and not nodes[t.dest].spec.tags)
    if dests:
        return nodes[dests.most_common(1)[0][0]]
    untagged = {node.name: node for node in nodes.values() if not node.spec.tags}
    name = req.first.rsplit(".", 1)[-1] if req.first else req.name
    close = difflib.get_close_matches(name, list(untagged), n=1, cutoff=0.3)
    return untagged[close[0]] if close else None
