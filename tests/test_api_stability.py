"""The public API holds still: today's ``orion.api``, hooks and pytest plugin, compared by griffe
with the last release's (``tests/api/orion-VERSION.json``), break nothing a team relies on. A
rename keeps the old name as a listed deprecation (``orion.hooks.renames.RENAMES``); the old
name may go once the release that removes it has come.

The check bites: a copy of Orion with a public name renamed and no alias fails it, and the
same rename with its listed alias passes."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import griffe
import pytest

from api_surface import ROOT, decode, load_tree, newest_snapshot, surface
from orion.hooks.renames import RENAMES


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


CURRENT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


#: What griffe calls breaking in a function that a hook implementation does not feel: pluggy
#: passes a hook's arguments by name, and only those an implementation asks for.
HOOK_COMPATIBLE = {griffe.BreakageKind.PARAMETER_ADDED_REQUIRED,
                   griffe.BreakageKind.PARAMETER_MOVED,
                   griffe.BreakageKind.PARAMETER_CHANGED_REQUIRED,
                   griffe.BreakageKind.PARAMETER_CHANGED_KIND}


def _gone_as_planned(change: griffe.Breakage) -> bool:
    """A removed name whose deprecation ran its course (its removal release has come), or a
    hook that gained an argument or had its arguments reordered."""
    if change.obj.path.startswith("hookspecs.") and change.kind in HOOK_COMPATIBLE:
        return True
    if change.kind is not griffe.BreakageKind.OBJECT_REMOVED:
        return False
    owner, _, old = change.obj.path.rpartition(".")
    return any(r.old == old and owner.endswith(r.owner)
               and version(CURRENT) >= version(r.removed_in) for r in RENAMES)


def breaking_changes(root: Path = ROOT) -> list[str]:
    """What breaks, against the newest release's surface, for the tree at ``root``."""
    old = decode(json.loads(newest_snapshot().read_text(encoding="utf-8")))
    new = decode(surface(load_tree(root=root)))
    found = []
    for path, module in old.items():
        for change in griffe.find_breaking_changes(module, new[path]):
            if not _gone_as_planned(change):
                found.append(f"orion.{change.obj.path}: {change.kind.value} "
                             f"({change.old_value!s} -> {change.new_value!s})")
    return found


def test_the_public_api_breaks_nothing_of_the_last_release() -> None:
    breaks = breaking_changes()
    assert not breaks, (
        f"the public API breaks {newest_snapshot().name} without a deprecation (keep the old "
        "name with orion.hooks.renames.renamed and list it in RENAMES and docs/api.md):\n"
        + "\n".join(breaks))


def test_the_snapshot_is_of_a_release_no_newer_than_this_version() -> None:
    assert version(newest_snapshot().stem.removeprefix("orion-")) <= version(CURRENT)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """Orion's source, copied: the place to break it."""
    shutil.copytree(ROOT / "orion", tmp_path / "orion",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def edit(root: Path, relative: str, old: str, new: str) -> None:
    path = root / "orion" / relative
    text = path.read_text()
    assert old in text, f"{relative} no longer has {old!r}: update this test"
    path.write_text(text.replace(old, new))


@pytest.mark.slow  # griffe reads a whole copy of Orion
def test_a_public_name_renamed_without_an_alias_fails_the_check(copy: Path) -> None:
    edit(copy, "write_session/view.py", "    def file(self) -> str:", "    def path(self) -> str:")
    breaks = breaking_changes(copy)
    assert [b for b in breaks if b.startswith("orion.api.WriteSessionView.file: ")], breaks


@pytest.mark.slow  # griffe reads a whole copy of Orion
def test_a_hook_argument_renamed_fails_the_check(copy: Path) -> None:
    edit(copy, "hookspecs.py", "def validate_content(request:", "def validate_content(req:")
    breaks = breaking_changes(copy)
    assert [b for b in breaks if b.startswith("orion.hookspecs.validate_content: ")], breaks


@pytest.mark.slow  # griffe reads a whole copy of Orion
def test_a_hook_that_gains_an_argument_passes_the_check(copy: Path) -> None:
    """An implementation asks only for the arguments it uses: a new one breaks none."""
    edit(copy, "hookspecs.py", "def validate_content(request:",
         "def validate_content(host: Host | None, request:")
    assert breaking_changes(copy) == []


@pytest.mark.slow  # griffe reads a whole copy of Orion
def test_a_fixture_of_the_pytest_plugin_removed_fails_the_check(copy: Path) -> None:
    edit(copy, "testing/plugin.py", "def orion_yaml(", "def orion_config(")
    assert [b for b in breaking_changes(copy) if "orion_yaml" in b]


@pytest.mark.slow  # griffe reads a whole copy of Orion
def test_a_rename_that_keeps_its_listed_alias_passes(copy: Path) -> None:
    edit(copy, "write_session/view.py", "    def file(self) -> str:", "    def path(self) -> str:")
    edit(copy, "write_session/view.py", "    def fire(self, trigger",
         '    file = renamed("WriteSessionView", "file")\n\n    def fire(self, trigger')
    edit(copy, "hooks/renames.py", "RENAMES: tuple[Rename, ...] = (\n",
         'RENAMES: tuple[Rename, ...] = (\n    Rename("WriteSessionView", "file", "path", '
         f'"{CURRENT}", "9.0.0"),\n')
    assert breaking_changes(copy) == []
