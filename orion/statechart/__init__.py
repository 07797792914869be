"""YAML statecharts: schema, static checks, compilation, lifecycles and diagrams."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from orion.statechart.definition import Definition, load_definition
from orion.statechart.lifecycle import Lifecycle, Transition

__all__ = ["Definition", "Lifecycle", "Transition", "builtin_pipeline", "builtin_statecharts",
           "load_definition"]


PIPELINE_FILE = "pipeline.yaml"


def builtin_statecharts() -> list[Path]:
    """The statecharts that ship with Orion (``statecharts/`` in the source tree)."""
    package = resources.files("orion_statecharts")
    return sorted(Path(str(p)) for p in package.iterdir()
                  if p.name.endswith(".yaml") and p.name != PIPELINE_FILE)


def builtin_pipeline() -> Path:
    """The shipped turn pipeline, ``statecharts/pipeline.yaml``."""
    return Path(str(resources.files("orion_statecharts") / PIPELINE_FILE))
