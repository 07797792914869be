"""YAML statecharts, run on ``transitions``.

The package is laid out as::

    model/        the chart as data: schema, tree of states, tags and contracts
    io/           charts in and out: built-in files, YAML source, overlays, catalog,
                  diagrams, JSON Schema
    interpreter/  running a chart: definition, lifecycle, semantics (the transitions
                  extension), settings
    checks/       the static checks, one small rule with a code each

The names below are the package's public API; docs/statecharts.md describes them.
"""

from __future__ import annotations

import sys
from typing import Any

from orion.statechart.interpreter import definition as _definition
from orion.statechart.interpreter import lifecycle as _lifecycle
from orion.statechart.interpreter import settings as _settings
from orion.statechart.interpreter.definition import Definition, load_definition
from orion.statechart.interpreter.lifecycle import Lifecycle, Step, Transition
from orion.statechart.interpreter.listeners import Listener, PluginHooks
from orion.statechart.io import catalog as _catalog
from orion.statechart.io import diagrams as _diagrams
from orion.statechart.io.builtin import builtin_pipeline, builtin_statechart, builtin_statecharts
from orion.statechart.model import schema as _schema
from orion.statechart.model import tree as _tree

__all__ = ["Definition", "Lifecycle", "Listener", "PluginHooks", "Step", "Transition",
           "builtin_pipeline", "builtin_statechart", "builtin_statecharts", "load_builtin",
           "load_definition"]

# Module paths from before the package had a floor plan. Code, docs and plugins import them
# (``orion.statechart.catalog``, ``orion.statechart.lifecycle``, ...), so each stays the very
# module it moved to: patching or monkeypatching it reaches the code that runs.
for _old, _module in {"catalog": _catalog, "definition": _definition, "diagram": _diagrams,
                      "lifecycle": _lifecycle, "schema": _schema, "settings": _settings,
                      "tree": _tree}.items():
    sys.modules[f"{__name__}.{_old}"] = _module
    globals()[_old] = _module
del _old, _module


def load_builtin(name: str, **options: Any) -> Definition:
    """:func:`load_definition` of the built-in statechart ``name``, wherever Orion is installed;
    ``options`` are those of :func:`load_definition` (``plugins``, ``overrides``, ``env``)."""
    return load_definition(builtin_statechart(name), **options)
