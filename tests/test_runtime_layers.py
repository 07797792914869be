"""The runtime knows no feature: nothing in ``orion.runtime`` (the runtime, ``orion run``'s
runner, ``orion chat`` and its screen) imports the write sessions or plan mode, not even for
types. The features start themselves (``runtime_started``) and answer through hooks
(``report_run``, ``reply_stopped``, ``open_write``), as a team's feature would."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "orion" / "runtime"
FEATURES = ("orion.write_session", "orion.plan", "orion_plugins")


def imported(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, wherever the import is (a function, ``TYPE_CHECKING``),
    relative ones resolved, and the names given to ``importlib.import_module``."""
    package = "orion.runtime"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.Call) and _called(node) in ("import_module", "__import__") \
                and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            found.append((node.lineno, node.args[0].value))
    return found


def _called(call: ast.Call) -> str:
    return getattr(call.func, "attr", getattr(call.func, "id", ""))


def feature_imports(path: Path) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{line} imports {name}" for line, name in imported(path)
            if any(name == f or name.startswith(f + ".") for f in FEATURES)]


@pytest.mark.parametrize("module", sorted(p.name for p in RUNTIME.glob("*.py")))
def test_no_runtime_module_imports_a_feature(module):
    assert feature_imports(RUNTIME / module) == []


def test_the_walk_finds_every_kind_of_import(tmp_path):
    # The check bites: each way of importing a feature is found.
    source = tmp_path / "m.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import orion.plan.store\n"
        "from orion.write_session.manager import manager_for\n"
        "from ..write_session import recover\n"
        "if TYPE_CHECKING:\n"
        "    from orion.write_session.progress import Progress\n"
        "def f():\n"
        "    import importlib\n"
        "    return importlib.import_module('orion_plugins.plan_mode')\n", encoding="utf-8")
    found = [name for _, name in imported(source)
             if any(name.startswith(f) for f in FEATURES)]
    assert found == ["orion.plan.store", "orion.write_session.manager.manager_for",
                     "orion.write_session.recover", "orion.write_session.progress.Progress",
                     "orion_plugins.plan_mode"]
