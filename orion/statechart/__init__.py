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

import importlib
from types import ModuleType
from typing import Any

from orion import MOVED_MODULES
from orion.statechart.interpreter.definition import Definition, load_definition
from orion.statechart.interpreter.lifecycle import Lifecycle, Step, Transition
from orion.statechart.interpreter.listeners import Listener, PluginHooks
from orion.statechart.io.builtin import builtin_pipeline, builtin_statechart, builtin_statecharts

__all__ = ["Definition", "Lifecycle", "Listener", "PluginHooks", "Step", "Transition",
           "builtin_pipeline", "builtin_statechart", "builtin_statecharts", "load_builtin",
           "load_definition"]


def __getattr__(name: str) -> ModuleType:
    """A module path from before the package had a floor plan, read as an attribute: the
    module it moved to, with the DeprecationWarning of ``orion.MOVED_MODULES``."""
    old = f"{__name__}.{name}"
    if old not in MOVED_MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(old)


def load_builtin(name: str, **options: Any) -> Definition:
    """:func:`load_definition` of the built-in statechart ``name``, wherever Orion is installed;
    ``options`` are those of :func:`load_definition` (``plugins``, ``overrides``, ``env``)."""
    return load_definition(builtin_statechart(name), **options)
