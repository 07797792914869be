"""YAML statecharts: schema, static checks, compilation, lifecycles and diagrams."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from orion.errors import UnknownStatechart
from orion.statechart.definition import Definition, load_definition
from orion.statechart.lifecycle import Lifecycle, Transition

__all__ = ["Definition", "Lifecycle", "Transition", "builtin_pipeline", "builtin_statechart",
           "builtin_statecharts", "load_builtin", "load_definition"]


PIPELINE_FILE = "pipeline.yaml"


def builtin_statecharts() -> list[Path]:
    """The statecharts that ship with Orion (``statecharts/`` in the source tree)."""
    package = resources.files("orion_statecharts")
    return sorted(Path(str(p)) for p in package.iterdir()
                  if p.name.endswith(".yaml") and p.name != PIPELINE_FILE)


def builtin_pipeline() -> Path:
    """The shipped turn pipeline, ``statecharts/pipeline.yaml``."""
    return Path(str(resources.files("orion_statecharts") / PIPELINE_FILE))


def builtin_statechart(name: str) -> Path:
    """The file of the built-in statechart ``name`` (``write_session``, ``plan_mode``)."""
    for path in builtin_statecharts():
        if path.stem == name:
            return path
    names = ", ".join(p.stem for p in builtin_statecharts())
    raise UnknownStatechart(f"no built-in statechart named {name!r} (built-in: {names})")


def load_builtin(name: str, **options: Any) -> Definition:
    """:func:`load_definition` of the built-in statechart ``name``, wherever Orion is installed;
    ``options`` are those of :func:`load_definition` (``plugins``, ``overrides``, ``env``)."""
    return load_definition(builtin_statechart(name), **options)
