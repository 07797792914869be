"""The public API as a machine compares it: what ``orion.api`` names, the hooks, and what the
pytest plugin hands teams, each name resolved to the object it is (a class with its members, a
function with its parameters), kept as griffe's JSON.

A release stores its surface as ``tests/api/orion-VERSION.json`` (a clean clone may have no git
tags, so the file is the record); ``tests/test_api_stability.py`` compares today's surface with
the newest one and fails on a change griffe calls breaking unless the old name is kept as a
listed deprecation (``orion.hooks.renames.RENAMES``) or its removal release has come.

At a release: ``python tests/api_surface.py REF VERSION`` (``make api-snapshot``) writes the
file for the commit ``REF``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = ROOT / "tests" / "api"
#: The modules a team's code imports or its features rely on, and the names each promises
#: (``None``: ``__all__`` where the module has one, else every public name it defines itself,
#: not what it imports). The step library's steps are promised by their phrases, which the
#: 0.1-era team projects under ``tests/teams/`` use; of its functions, docs/testing.md names
#: the helpers.
PUBLIC: dict[str, tuple[str, ...] | None] = {
    "api": None, "hookspecs": None, "testing.plugin": None, "testing.world": ("World",),
    "testing.steps": ("unescape", "generated", "generated_line")}


def load_tree(ref: str | None = None, *, root: Path = ROOT) -> griffe.Module:
    """Orion's package as griffe reads it: from the commit ``ref``, or the tree at ``root``."""
    options: dict[str, Any] = {"resolve_aliases": True, "resolve_external": False}
    if ref is not None:
        tree = griffe.load_git("orion", ref=ref, repo=root, **options)
    else:
        tree = griffe.load("orion", search_paths=[root], try_relative_path=False, **options)
    assert isinstance(tree, griffe.Module), tree
    return tree


def _public(name: str) -> bool:
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _prune(data: Any) -> Any:
    """Drop docstrings and private members: neither is a promise. File paths are kept
    relative to the package's parent (``orion/api.py``), wherever the tree was read."""
    if isinstance(data, dict):
        data.pop("docstring", None)
        if isinstance(data.get("filepath"), str):
            parts = Path(data["filepath"]).parts
            data["filepath"] = "/".join(parts[len(parts) - 1 - parts[::-1].index("orion"):])
        members = data.get("members")
        if isinstance(members, dict):
            for name in [n for n in members if not _public(n)]:
                del members[name]
        for value in data.values():
            _prune(value)
    elif isinstance(data, list):
        for value in data:
            _prune(value)
    return data


def _exported(module: griffe.Module, promised: tuple[str, ...] | None) -> dict[str, Any]:
    """Each public name of ``module``, as the object it resolves to."""
    members: dict[str, Any] = {}
    names = (promised if promised is not None else list(module.exports)
             if module.exports is not None else list(module.members))
    for name in names:
        member = module.members.get(str(name))
        if member is None or not _public(str(name)):
            continue
        if isinstance(member, griffe.Alias):
            if module.exports is None:
                continue  # an import, not this module's own
            member = member.final_target
        data = json.loads(member.as_json(full=False))
        data["name"] = str(name)
        members[str(name)] = data
    return members


def surface(tree: griffe.Module) -> dict[str, Any]:
    """The public modules of ``tree`` with every name resolved, as JSON-ready data."""
    modules = {}
    for path, promised in PUBLIC.items():
        module = tree[path]
        data = {key: value for key, value in json.loads(module.as_json(full=False)).items()
                if key != "members"}
        data["members"] = _exported(module, promised)
        modules[path] = _prune(data)
    return {"format": 1, "modules": modules}


def decode(data: dict[str, Any]) -> dict[str, griffe.Module]:
    """The modules of a surface as griffe objects, ready for ``find_breaking_changes``."""
    modules = {}
    for path, module in data["modules"].items():
        decoded = json.loads(json.dumps(module), object_hook=griffe.json_decoder)
        collection = griffe.ModulesCollection()
        collection.set_member(decoded.name, decoded)
        modules[path] = decoded
    return modules


def newest_snapshot() -> Path:
    def version(path: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in path.stem.removeprefix("orion-").split("."))
    return max(SNAPSHOTS.glob("orion-*.json"), key=version)


def write_snapshot(ref: str, version: str) -> Path:
    target = SNAPSHOTS / f"orion-{version}.json"
    SNAPSHOTS.mkdir(exist_ok=True)
    target.write_text(json.dumps(surface(load_tree(ref)), indent=1, sort_keys=True) + "\n",
                      encoding="utf-8")
    return target


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python tests/api_surface.py GIT_REF VERSION")
    print(write_snapshot(sys.argv[1], sys.argv[2]))
