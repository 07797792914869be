"""The team's overlay resolves against Orion's chart, keeps its contract, and changes only
what leads to the write."""

from __future__ import annotations

from orion.statechart.io.catalog import Catalog


def test_the_plugin_ships_the_overlay_and_it_passes_the_checks(orion_plugins):
    catalog = Catalog(orion_plugins)
    source = catalog.winner("write_session")
    # "from plugin team_review", or "from team-customization 0.1.0" when it is installed
    assert catalog.describe(source).endswith("(extends built-in)"), catalog.describe(source)
    resolved = catalog.resolve(source)
    assert resolved.diagnostics == []
    assert "review" in resolved.spec.contract.tags and "valid" in resolved.spec.contract.triggers


def test_only_approve_write_leads_to_the_write(orion_plugins):
    catalog = Catalog(orion_plugins)
    definition = catalog.definition("write_session", env={})
    writes = [t for t in definition.spec.transitions if "finalize" in (t.actions or [])]
    assert [(t.trigger, t.source, t.dest) for t in writes] == [
        ("approve_write", ["review"], "done")]
    [orion_own] = [s for s in catalog.sources["write_session"] if s.layer == "built-in"]
    builtin = catalog.resolve(orion_own).spec
    assert definition.spec.settings == builtin.settings  # settings come from Orion's chart
    assert len(definition.spec.transitions) == len(builtin.transitions) + 2
