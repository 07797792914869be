"""The team's statechart passes Orion's checks with the team's plugin, and differs from
Orion's own only by the review."""

from __future__ import annotations

import team_review
from orion.statechart import builtin_statecharts
from orion.statechart.definition import load_definition, parse


def test_the_team_statechart_passes_the_checks(orion_plugins):
    _, spec, diagnostics = parse(team_review.WRITE_SESSION, orion_plugins)
    assert diagnostics == []
    assert spec.statechart == "write_session"  # the lifecycle Orion's finalize hook handles


def test_only_approve_write_leads_to_the_write(orion_plugins):
    definition = load_definition(team_review.WRITE_SESSION, plugins=orion_plugins, env={})
    writes = [t for t in definition.spec.transitions if "finalize" in (t.actions or [])]
    assert [(t.trigger, t.source, t.dest) for t in writes] == [
        ("approve_write", ["review"], "done")]
    [builtin] = [p for p in builtin_statecharts() if p.name == "write_session.yaml"]
    orion_own = load_definition(builtin, plugins=orion_plugins, env={})
    assert definition.settings == orion_own.settings
