"""Temp files a killed write left beside its target: found by name, removed when their process is gone."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from orion.workspace.confined import TEMP_MARK
from orion.workspace.processes import process_alive



#: Directories the leftover sweep never enters: Orion's state, version control, and trees of
#: generated files that are large and never a write's target.
SWEEP_SKIPPED = frozenset({".git", ".hg", ".svn", ".orion", "node_modules", ".venv", "venv",
                           "__pycache__", ".tox", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
#: The sweep looks at most at this many directories (a huge tree costs a bounded listing).
SWEEP_MAX_DIRS = 5000
#: A temp file without a pid in its name (an older Orion) is removed once it is this old.
LEGACY_TEMP_AGE_S = 600
_TEMP_PID = re.compile(r"(\d+)-[0-9a-f]+")


def remove_temp_leftovers(directory: Path) -> list[str]:
    """Remove the ``.NAME.orion-tmp-PID-RANDOM`` files in ``directory`` whose process is gone
    (a write in progress in another running process is left alone); their names."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if not name.startswith(".") or TEMP_MARK not in name:
            continue
        try:
            if not entry.is_file(follow_symlinks=False):
                continue
            match = _TEMP_PID.fullmatch(name.rsplit(TEMP_MARK, 1)[1])
            if match is not None:
                if process_alive(int(match.group(1))):
                    continue
            elif time.time() - entry.stat(follow_symlinks=False).st_mtime < LEGACY_TEMP_AGE_S:
                continue
            os.unlink(entry.path)
        except OSError:
            continue
        removed.append(name)
    return removed


def sweep_temp_leftovers(workspace: Path, state_dir: Path) -> list[str]:
    """:func:`remove_temp_leftovers` in every directory of the workspace, listing names only
    (no file is read), never entering :data:`SWEEP_SKIPPED` directories, the state directory
    or a symbolic link, and at most :data:`SWEEP_MAX_DIRS` directories. Paths removed,
    relative to the workspace."""
    root = Path(workspace).resolve()
    state = Path(state_dir).resolve()
    removed: list[str] = []
    pending = [root]
    seen = 0
    while pending and seen < SWEEP_MAX_DIRS:
        directory = pending.pop()
        seen += 1
        relative = directory.relative_to(root)
        removed += [(relative / name).as_posix() for name in remove_temp_leftovers(directory)]
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.name in SWEEP_SKIPPED:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    path = Path(entry.path)
                    if path != state:
                        pending.append(path)
            except OSError:
                continue
    return removed
