"""YAML statecharts: schema, static checks, compilation, lifecycles and diagrams."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from orion.statechart.definition import Definition, load_definition
from orion.statechart.lifecycle import Lifecycle, Transition

__all__ = ["Definition", "Lifecycle", "Transition", "builtin_statecharts", "load_definition"]


def builtin_statecharts() -> list[Path]:
    """The statecharts that ship with Orion (``statecharts/`` in the source tree)."""
    package = resources.files("orion_statecharts")
    return sorted(Path(str(p)) for p in package.iterdir() if p.name.endswith(".yaml"))
