"""A statechart file read from YAML and checked: the document (with the position of every
value, for findings), the spec, and every finding of the static checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orion.errors import Diagnostic
from orion.statechart import checks
from orion.statechart.model.schema import StatechartSpec
from orion.config.yamlsource import SourceDocument, YamlSourceError, load_yaml


def parse(source: str | Path, plugins: Any, *, text: str | None = None,
          check_names: bool = True) -> tuple[SourceDocument | None, StatechartSpec | None,
                                             list[Diagnostic]]:
    """Parse and statically check one file: ``(document, spec, diagnostics)``. ``plugins``
    (a plugin manager, or anything with a ``registry`` of guards and actions) provides the
    names the check of guard and action names accepts."""
    try:
        doc = load_yaml(source, text=text)
    except YamlSourceError as exc:
        return None, None, checks.coded(exc.diagnostics, checks.YAML_SOURCE)
    names = None
    if check_names:
        registry = plugins.registry
        chart = doc.data.get("statechart") if isinstance(doc.data, dict) else None
        if isinstance(chart, str) and hasattr(registry, "actions_for"):
            names = checks.Names(registry.guards_for(chart), registry.actions_for(chart))
        else:
            names = checks.Names(registry.guards, registry.actions)
    spec, diagnostics = checks.check(doc, names)
    return doc, spec, diagnostics
