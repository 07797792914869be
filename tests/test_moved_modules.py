"""Modules that moved into packages in 0.2.0 keep answering to their old names until 0.3.0,
with a warning that names the new one: a team's plugin that imported ``orion.plugins`` keeps
working while its authors move to ``orion.api``."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import orion


@pytest.mark.parametrize("old, new", sorted(orion.MOVED_MODULES.items()))
def test_an_old_module_name_is_the_new_module_with_a_warning(old: str, new: str) -> None:
    program = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        "assert old is new, (old, new)\n"
        f"assert new.__spec__.name == {new!r}, new.__spec__\n"
        "messages = [str(w.message) for w in caught if w.category is DeprecationWarning]\n"
        "print(messages[0])\n")
    # A process of its own: in this one the old name may have been imported already.
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"{old} moved to {new} in 0.2.0; the old name goes in "
                                   "0.3.0 (orion.api is the import path that stays)")


def test_no_old_name_is_a_module_of_its_own() -> None:
    """Each old name leads to the one module that moved: none is still a file of orion/."""
    top = Path(orion.__file__).parent.parent
    for old in orion.MOVED_MODULES:
        path = top.joinpath(*old.split("."))
        assert not path.with_suffix(".py").exists() and not path.is_dir(), old


#: Files that name old paths on purpose: the alias table, the record of the moves, the tests
#: of the deprecations, and the team projects of an earlier release that run unchanged.
NAMES_OLD_PATHS = ("orion/__init__.py", "CHANGELOG.md", "tests/test_moved_modules.py",
                   "tests/test_teams_of_earlier_releases.py", "tests/teams/")
#: Old module names that are also a logger's name, which stays: teams configure their logs by it.
LOGGERS = {"orion.plugins"}
IMPORTED = re.compile(r"(\w+)(?:\s+as\s+\w+)?\s*(?:,|$|#)")
FROM_IMPORT = re.compile(r"from\s+(orion[\w.]*)\s+import\s+(?:\(([^)]*)\)|([^\n]*))")


def _old_paths_named(text: str) -> list[str]:
    lines = text.splitlines()
    named = [(number, m.group(1)) for number, line in enumerate(lines, 1)
             for m in re.finditer(r"(?<![\w.])(orion(?:\.\w+)+)", line)]
    named += [(text.count("\n", 0, m.start()) + 1, f"{m.group(1)}.{name}")
              for m in FROM_IMPORT.finditer(text)
              for name in IMPORTED.findall(m.group(2) or m.group(3))]
    found = []
    for number, name in sorted(named):
        old = next((old for old in orion.MOVED_MODULES
                    if name == old or name.startswith(old + ".")), None)
        if old is not None and not (old in LOGGERS and "log" in lines[number - 1]):
            found.append(f"{number}: {old} (now {orion.MOVED_MODULES[old]})")
    return found


def test_the_project_names_no_old_module_path() -> None:
    """Orion's code, tests, docs, examples and features use the new module paths, so each
    module has one name; the old ones are for the teams' code that still imports them."""
    root = Path(orion.__file__).resolve().parent.parent
    listed = subprocess.run(["git", "ls-files", "*.py", "*.md", "*.feature", "*.yaml", "*.yml"],
                            cwd=root, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("needs a git checkout of Orion to list its files")
    found = {}
    for name in listed.stdout.splitlines():
        if not name.startswith(NAMES_OLD_PATHS) and (root / name).is_file():
            named = _old_paths_named((root / name).read_text(encoding="utf-8"))
            if named:
                found[name] = named
    assert not found, f"old module paths named (use the new ones): {found}"


def test_the_process_steps_left_the_step_library_with_a_warning() -> None:
    """``orion.testing.process_steps`` was a step library the pytest plugin loaded in 0.2.0; its
    steps test Orion itself and moved to Orion's own tests. A team's ``conftest.py`` that
    names it still imports, and is told, until 0.3.0."""
    from orion.testing.plugin import STEP_MODULES
    program = ("import warnings\n"
               "with warnings.catch_warnings(record=True) as caught:\n"
               "    warnings.simplefilter('always')\n"
               "    import orion.testing.process_steps\n"
               "print([str(w.message) for w in caught if w.category is DeprecationWarning])\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "orion.testing.process_steps left the step library" in done.stdout
    assert "goes in 0.3.0" in done.stdout
    assert "orion.testing.process_steps" not in STEP_MODULES
