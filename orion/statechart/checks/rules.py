"""What a rule is: a code, a name, one line saying what it finds, and a small function from
the chart to its findings. Every finding carries its rule's code (``orion check`` shows it);
docs/statecharts.md lists the codes.

A rule that is not run on one chart alone (a contract other charts set, an overlay's base) is
declared here with its code and raised where the catalog or the overlay merge finds it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, NamedTuple

from orion.errors import Diagnostic
from orion.statechart.model.schema import StatechartSpec
from orion.statechart.model.tree import StateNode, flatten
from orion.config.yamlsource import Loc, SourceDocument


@dataclass(frozen=True)
class Names:
    """The guard and action names that the loaded plugins provide."""

    guards: Collection[str]
    actions: Collection[str]


class Finding(NamedTuple):
    """Where a rule found something (a path into the document) and what; ``key`` points at
    the key of a mapping entry rather than its value."""

    loc: Loc
    message: str
    key: bool = False


@dataclass
class Chart:
    """What rules read: the document (for positions), the validated spec, its states by path,
    and the names plugins provide (``None``: names are not checked)."""

    doc: SourceDocument
    spec: StatechartSpec
    names: Names | None = None
    _shared: dict[str, Any] = field(default_factory=dict, repr=False)

    def shared(self, name: str, compute: Callable[[Chart], Any]) -> Any:
        """What several rules need, computed once per chart (a walk of the chart)."""
        if name not in self._shared:
            self._shared[name] = compute(self)
        return self._shared[name]

    @cached_property
    def nodes(self) -> dict[str, StateNode]:
        return flatten(self.spec)

    @cached_property
    def well_formed(self) -> bool:
        """The initial states resolve to a leaf: what the rules that walk the chart need."""
        return self.spec.initial in self.nodes and all(
            (not n.compound) or (n.spec.initial in n.spec.states) for n in self.nodes.values())

    def unknown_state(self, loc: Loc, path: str, role: str) -> Finding:
        hint = difflib.get_close_matches(path, self.nodes, n=1)
        return Finding(loc, f"{role} state {path!r} does not exist"
                            + (f"; did you mean {hint[0]!r}?" if hint else ""))


Check = Callable[[Chart], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    summary: str
    check: Check | None = None


#: Every rule by code, in code order: the order they run and are documented in.
RULES: dict[str, Rule] = {}


def rule(code: str, name: str, summary: str) -> Callable[[Check], Check]:
    """Register ``check`` as the rule ``code``: run on every chart that passed the schema."""
    def register(check: Check) -> Check:
        _add(Rule(code, name, summary, check))
        return check
    return register


def declare(code: str, name: str, summary: str) -> str:
    """A code whose findings are raised outside :func:`run` (the document, the catalog)."""
    _add(Rule(code, name, summary))
    return code


def _add(new: Rule) -> None:
    if new.code in RULES:
        raise ValueError(f"rule code {new.code} is taken by {RULES[new.code].name}")
    ordered = sorted([*RULES.values(), new], key=lambda r: r.code)
    RULES.clear()
    RULES.update((r.code, r) for r in ordered)


def run(chart: Chart) -> Iterator[Diagnostic]:
    """Every rule's findings on ``chart``, each with its rule's code."""
    for code, entry in RULES.items():
        if entry.check is not None:
            for found in entry.check(chart):
                yield chart.doc.diagnostic(found.loc, found.message, key=found.key, code=code)


def coded(diagnostics: Iterable[Diagnostic], code: str) -> list[Diagnostic]:
    """``diagnostics`` (found by code that does not know the rules) with ``code``."""
    return [Diagnostic(d.path, d.line, d.column, d.message, code) for d in diagnostics]
