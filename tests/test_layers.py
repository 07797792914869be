"""The planned layers, checked on the import graph.

Rules (module-level imports only: not under ``if TYPE_CHECKING:``, not inside functions, which
run when called, not when the module is imported):

* the engine (``orion.statechart``) imports no feature (``orion.write_session``,
  ``orion.plan``) and no plugin manager (``orion.hooks.manager``, ``pluggy``);
* the runtime (``orion.runtime``) imports no feature;
* the features do not import each other;
* the terminal (``orion.terminal``: the chat, its prompt, screen and rendering, the consoles)
  is imported only by the CLI and by the terminal itself;
* no cycle among Orion's subpackages.

Where the code still breaks a rule, the break is listed below with why it is there. The check
ratchets: a new break fails, and so does a listed break that no longer exists, so the lists
only shrink as the code is fixed.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import orion

ROOT = Path(orion.__file__).parent

ENGINE = ("orion.statechart",)
RUNTIME = ("orion.runtime",)
FEATURES = ("orion.write_session", "orion.plan")
PLUGIN_MANAGER = ("orion.hooks.manager", "pluggy")
TERMINAL = ("orion.terminal",)
CLI = ("orion.cli", "orion.__main__")


def _modules(root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


#: Old module paths that still import (``orion.MOVED_MODULES``): an import by the old name is
#: an import of the module it names now.
MOVED = dict(orion.MOVED_MODULES)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _top_level(body: list[ast.stmt],
               typing: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it is imported: its own statements, the branches of its
    ``if``/``try``/``with`` and its class bodies, but no function body and no
    ``if TYPE_CHECKING:`` block (unless ``typing``: the imports a type checker follows)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if typing or not _is_type_checking(node.test):
                yield from _top_level(node.body, typing)
            yield from _top_level(node.orelse, typing)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody,
                          *(h.body for h in node.handlers)):
                yield from _top_level(block, typing)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            yield from _top_level(node.body, typing)


def _target(name: str, modules: dict[str, Path]) -> str:
    """The module ``name`` imports: the longest Orion module it names (or the name itself,
    for a third-party one), with old paths resolved to where they moved."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            name = new + name[len(old):]
    parts = name.split(".")
    while parts and ".".join(parts) not in modules:
        parts.pop()
    return ".".join(parts) if parts else name


def _imported(module: str, node: ast.Import | ast.ImportFrom,
              modules: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield _target(alias.name, modules)
        return
    base = node.module or ""
    if node.level:
        package = module if modules[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    for alias in node.names:
        yield _target(f"{base}.{alias.name}", modules)  # a submodule, or a name in ``base``


def module_edges(root: Path = ROOT, *, typing: bool = False) -> set[tuple[str, str]]:
    """Every (importer, imported) pair of the module-level imports of the package at
    ``root`` (Orion), between its modules or into pluggy; with ``typing``, those under
    ``if TYPE_CHECKING:`` too."""
    modules = _modules(root)
    edges = set()
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in _top_level(tree.body, typing):
            for target in _imported(module, node, modules):
                if target != module and target.split(".")[0] in (root.name, "pluggy"):
                    edges.add((module, target))
    return edges


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def _feature(module: str) -> str | None:
    return next((f for f in FEATURES if _within(module, (f,))), None)


RULES = {
    "engine imports no feature": lambda a, b: _within(a, ENGINE) and _within(b, FEATURES),
    "engine imports no plugin manager":
        lambda a, b: _within(a, ENGINE) and _within(b, PLUGIN_MANAGER),
    "runtime imports no feature": lambda a, b: _within(a, RUNTIME) and _within(b, FEATURES),
    "features do not import each other":
        lambda a, b: None is not _feature(a) != _feature(b) is not None,
    "only the CLI imports the terminal":
        lambda a, b: _within(b, TERMINAL) and not _within(a, CLI + TERMINAL),
}


def breaks(edges: set[tuple[str, str]]) -> dict[str, set[tuple[str, str]]]:
    return {rule: {e for e in edges if broken(*e)} for rule, broken in RULES.items()}


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def package_cycles(edges: set[tuple[str, str]]) -> list[tuple[str, ...]]:
    """The groups of Orion's subpackages (``orion.runtime``, ``orion.cli``...) that import
    one another in a circle, each sorted: the strongly connected components of the package
    graph with more than one member."""
    return _circles({(_package(a), _package(b)) for a, b in edges})


def module_cycles(edges: set[tuple[str, str]]) -> list[tuple[str, ...]]:
    """The groups of Orion's modules that import one another in a circle, each sorted."""
    return _circles(edges)


def _circles(edges: set[tuple[str, str]]) -> list[tuple[str, ...]]:
    """The strongly connected components with more than one member of the graph of ``edges``
    between Orion's modules (or packages)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        if a != b and b.startswith("orion"):
            graph.setdefault(a, set()).add(b)
            graph.setdefault(b, set())

    def reach(start: str) -> set[str]:
        seen, stack = {start}, [start]
        while stack:
            for nxt in graph[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    reachable = {p: reach(p) for p in graph}
    groups = {tuple(sorted(q for q in reachable[p] if p in reachable[q])) for p in graph}
    return sorted(g for g in groups if len(g) > 1)


# -- where the code still breaks a rule -------------------------------------------------------

#: Per rule, the (importer, imported) pairs that still break it, each with why.
KNOWN: dict[str, dict[tuple[str, str], str]] = {rule: {} for rule in RULES}

#: Groups of subpackages that still import one another in a circle, each with why.
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}

EDGES = module_edges()


def _ratchet(what: str, found: set, known: dict) -> None:
    new = sorted(found - set(known))
    fixed = sorted(set(known) - found)
    assert not new, f"{what}: new, not listed as known: {new}"
    assert not fixed, f"{what}: listed as known but fixed: remove {fixed} from the list"


@pytest.mark.parametrize("rule", list(RULES))
def test_a_layer_rule_holds_but_for_its_listed_breaks(rule: str):
    _ratchet(rule, breaks(EDGES)[rule], KNOWN[rule])


def test_no_cycle_among_the_subpackages_but_the_listed_ones():
    _ratchet("package cycle", set(package_cycles(EDGES)), KNOWN_CYCLES)


def test_the_engine_is_in_no_circle_with_other_modules_even_for_the_type_checker():
    """The engine's modules import the seam types (``orion.hooks.types``), which import
    nothing of Orion: no module outside the engine, the plugin manager included, is in a
    circle with one of them, counting ``if TYPE_CHECKING:`` imports."""
    for circle in module_cycles(module_edges(typing=True)):
        engine = [m for m in circle if _within(m, ENGINE)]
        assert not engine or len(engine) == len(circle), circle


# -- the check sees what the interpreter runs -------------------------------------------------


def _package_at(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "orion"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def test_the_check_counts_the_imports_that_run_when_a_module_is_imported(tmp_path: Path):
    root = _package_at(tmp_path, {
        "__init__.py": "",
        "statechart/__init__.py": "",
        "statechart/engine.py": """\
            from __future__ import annotations
            from typing import TYPE_CHECKING
            from ..plan import store
            try:
                import orion.hooks.manager
            except ImportError:
                pass
            if TYPE_CHECKING:
                from orion.write_session import journal
            def later():
                from orion.write_session import journal
            """,
        "plan/__init__.py": "", "plan/store.py": "",
        "hooks/__init__.py": "", "hooks/manager.py": "import pluggy\n",
        "write_session/__init__.py": "", "write_session/journal.py": "",
    })
    edges = module_edges(root)
    assert ("orion.statechart.engine", "orion.plan.store") in edges  # relative, resolved
    assert ("orion.statechart.engine", "orion.hooks.manager") in edges  # under try
    assert ("orion.hooks.manager", "pluggy") in edges
    assert not any(b.startswith("orion.write_session") for _, b in edges)  # typing, functions
    found = breaks(edges)
    assert found["engine imports no feature"] == {("orion.statechart.engine", "orion.plan.store")}
    assert found["engine imports no plugin manager"] == {
        ("orion.statechart.engine", "orion.hooks.manager")}


def test_a_circle_of_subpackages_is_found(tmp_path: Path):
    root = _package_at(tmp_path, {
        "__init__.py": "", "cli.py": "from orion.terminal import chat\n",
        "terminal/__init__.py": "", "terminal/chat.py": "from orion.tools import spec\n",
        "tools/__init__.py": "",
        "tools/spec.py": "import orion.terminal\nfrom orion.terminal.chat import Screen\n",
    })
    edges = module_edges(root)
    assert package_cycles(edges) == [("orion.terminal", "orion.tools")]
    assert breaks(edges)["only the CLI imports the terminal"] == {
        ("orion.tools.spec", "orion.terminal"), ("orion.tools.spec", "orion.terminal.chat")}


if __name__ == "__main__":
    # The circles a type checker sees (``if TYPE_CHECKING:`` imports counted), largest first.
    for circle in sorted(module_cycles(module_edges(typing=True)), key=len, reverse=True):
        print(len(circle), " ".join(circle))
