"""Static checks of a statechart file: small rules, one code each.

:func:`check` reads a document as :mod:`.document` says (a mapping, within the limits, valid
against the schema), then runs every rule of :mod:`.structure`, :mod:`.settings`,
:mod:`.flow`, :mod:`.loops` and :mod:`.names` on the validated chart. :mod:`.contract` and
:mod:`.sources` hold the codes the catalog raises, for what depends on other charts. ``RULES``
lists them all; docs/statecharts.md documents each code.
"""

from __future__ import annotations

from pydantic import ValidationError

from orion.errors import Diagnostic
from orion.statechart.checks import contract, flow, loops, names, settings, sources, structure
from orion.statechart.checks.document import (
    MAX_DEPTH,
    MAX_STATES,
    MAX_TRANSITIONS,
    YAML_SOURCE,
    limits,
    not_a_mapping,
    schema_findings,
)
from orion.statechart.checks.rules import RULES, Chart, Names, Rule, coded, run
from orion.statechart.model.schema import StatechartSpec
from orion.config.yamlsource import SourceDocument

__all__ = ["MAX_DEPTH", "MAX_STATES", "MAX_TRANSITIONS", "RULES", "YAML_SOURCE", "Names",
           "Rule", "check", "coded"]

# The rule modules register themselves on import; named here so that they are imported.
_RULE_MODULES = (structure, settings, flow, loops, names, contract, sources)


def check(doc: SourceDocument, names: Names | None = None) -> tuple[StatechartSpec | None,
                                                                    list[Diagnostic]]:
    """Validate ``doc``; return the spec (``None`` when the schema fails) and every finding,
    in the order of their positions.

    ``names`` enables the check that every guard and action is provided by a plugin.
    """
    if not isinstance(doc.data, dict):
        return None, [not_a_mapping(doc)]
    too_big = limits(doc)
    if too_big:
        return None, too_big
    try:
        spec = StatechartSpec.model_validate(doc.data)
    except ValidationError as exc:
        return None, sorted(schema_findings(doc, exc), key=lambda d: (d.line, d.column))
    findings = list(run(Chart(doc, spec, names)))
    return spec, sorted(findings, key=lambda d: (d.line, d.column))
