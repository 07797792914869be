"""Guard and action names: each one a loaded plugin provides."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator

from orion.statechart.checks.rules import Chart, Finding, rule
from orion.config.yamlsource import Loc


@rule("SC401", "unknown-name", "a guard or action name that no loaded plugin provides")
def unknown_name(chart: Chart) -> Iterator[Finding]:
    names = chart.names
    if names is None:
        return
    for i, t in enumerate(chart.spec.transitions):
        loc: Loc = ("transitions", i)
        yield from _unknown(chart, (*loc, "guards"), t.guards, names.guards, "guard")
        yield from _unknown(chart, (*loc, "unless"), t.unless, names.guards, "guard")
        yield from _unknown(chart, (*loc, "actions"), t.actions, names.actions, "action")
    for node in chart.nodes.values():
        yield from _unknown(chart, (*node.loc, "entry"), node.spec.entry, names.actions, "action")
        yield from _unknown(chart, (*node.loc, "exit"), node.spec.exit, names.actions, "action")
        for k, a in enumerate(node.spec.after):
            loc = (*node.loc, "after", k)
            yield from _unknown(chart, (*loc, "guards"), a.guards, names.guards, "guard")
            yield from _unknown(chart, (*loc, "unless"), a.unless, names.guards, "guard")
            yield from _unknown(chart, (*loc, "actions"), a.actions, names.actions, "action")


def _unknown(chart: Chart, loc: Loc, values: list[str], known: Collection[str],
             kind: str) -> Iterator[Finding]:
    for j, value in enumerate(values):
        if value not in known:
            hint = difflib.get_close_matches(value, list(known), n=1)
            at = (*loc, j) if (*loc, j) in chart.doc.positions else loc
            yield Finding(at, f"{kind} {value!r} is not provided by any loaded plugin"
                              + (f"; did you mean {hint[0]!r}?" if hint else ""))
