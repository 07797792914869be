"""What other charts and code require of a chart: transition ids an overlay can tell apart,
and the contract (the triggers the runtime sends, the tags it asks about). The catalog runs
these, since the requirements come from the charts a chart replaces."""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Iterator

from orion.errors import Diagnostic
from orion.statechart.checks.rules import declare
from orion.statechart.model.contract import Requirement
from orion.statechart.model.events import answers, descriptors
from orion.statechart.model.schema import StatechartSpec
from orion.statechart.model.tree import StateNode, flatten
from orion.yamlsource import SourceDocument

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


def check_contract(doc: SourceDocument, spec: StatechartSpec,
                   required: Iterable[Requirement]) -> Iterator[Diagnostic]:
    """Every required trigger is handled by a transition or timer; every required tag is on a
    state. A miss points at the closest name in the chart (a renamed trigger or state)."""
    firsts: dict[tuple[str, str], Requirement] = {}  # who declared it first, for the message
    for req in required:
        firsts.setdefault((req.kind, req.name), req)
    nodes = flatten(spec)
    kinds = list(firsts.values())
    yield from _contract_triggers(doc, spec, nodes, [r for r in kinds if r.kind == "trigger"])
    yield from _contract_tags(doc, spec, nodes, [r for r in kinds if r.kind == "tag"])


def _contract_triggers(doc: SourceDocument, spec: StatechartSpec, nodes: dict[str, StateNode],
                       required: list[Requirement]) -> Iterator[Diagnostic]:
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
        close = difflib.get_close_matches(req.name, own, n=1, cutoff=0.5)
        loc = triggers[close[0]] if close else ("transitions",)
        yield doc.diagnostic(loc, (
            f"no transition of {spec.statechart!r} handles trigger {req.name!r}, which the "
            f"runtime sends (contract of {req.declared_by})"
            + (f"; was {close[0]!r} renamed from it?" if close else "")), key=not close,
            code=CONTRACT_TRIGGER)


def _contract_tags(doc: SourceDocument, spec: StatechartSpec, nodes: dict[str, StateNode],
                   required: list[Requirement]) -> Iterator[Diagnostic]:
    tags = {tag for node in nodes.values() for tag in node.spec.tags}
    # A renamed state lost its tags: look among the states that have none.
    untagged = {node.name: node for node in nodes.values() if not node.spec.tags}
    for req in required:
        if req.name in tags:
            continue
        close = difflib.get_close_matches(req.name, list(untagged), n=1, cutoff=0.3)
        node = untagged[close[0]] if close else None
        yield doc.diagnostic(node.loc if node is not None else ("states",), (
            f"no state of {spec.statechart!r} has tag {req.name!r}, which the runtime asks "
            f"about (contract of {req.declared_by}); add `tags: [{req.name}]` to the state "
            "that plays that part"
            + (f" (state {close[0]!r}?)" if node is not None else "")), key=True,
            code=CONTRACT_TAG)
