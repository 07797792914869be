"""The scripted conversations that ship with Orion (``examples/`` in the source tree, the
package ``orion_examples`` once installed), so ``orion run tools`` works without a checkout."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def shipped_examples() -> list[Path]:
    """Every shipped script, by name."""
    package = resources.files("orion_examples")
    return sorted(Path(str(p)) for p in package.iterdir() if p.name.endswith(".yaml"))


def shipped_example(name: str) -> Path | None:
    """The shipped script ``name`` (``tools`` or ``tools.yaml``), or ``None``."""
    stem = name.removesuffix(".yaml")
    return next((p for p in shipped_examples() if p.stem == stem), None)
