"""The layout shows the architecture: each concept Orion owns is a package of ``orion/``, and
only the public face and the leaves every package uses are modules at the top."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The modules that stay at the top of ``orion/``: what plugin authors import (``api``,
#: ``hookspecs``), the command's entry point (``cli``), and the two leaves every package
#: depends on (``errors``, ``clock``); a module that joins them belongs in a package instead.
TOP_LEVEL = {"__init__", "__main__", "api", "hookspecs", "cli", "errors", "clock"}


def test_only_the_public_face_and_the_leaves_are_top_level_modules() -> None:
    loose = {path.stem for path in (ROOT / "orion").glob("*.py")}
    assert loose == TOP_LEVEL, (f"modules at the top of orion/ that belong in a package: "
                                f"{sorted(loose - TOP_LEVEL)}; gone: {sorted(TOP_LEVEL - loose)}")


def test_every_package_is_in_the_distribution() -> None:
    """A package missing from pyproject.toml's list would be left out of the wheel."""
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(ROOT).parts)
             for init in (ROOT / "orion").rglob("__init__.py") if "__pycache__" not in init.parts}
    assert found <= listed, f"packages pyproject.toml does not list: {sorted(found - listed)}"
