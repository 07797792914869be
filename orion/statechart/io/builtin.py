"""The statecharts that ship with Orion, wherever it is installed (``statecharts/`` in the
source tree, the ``orion_statecharts`` package in a wheel)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from orion.errors import UnknownStatechart

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
