"""Paths inside the workspace, and the state directory beside them.

Every tool that touches a file resolves its path with :func:`resolve_inside`. Orion's own
state (journals, backups, undo records, ``orion.db``, ``plans.db``) lives in the state
directory that :func:`state_directory` chooses and checks: the one rule for ``orion run``,
``orion chat``, the ``orion sessions``/``plan``/``traces`` commands and the runtime.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from orion.errors import ConfigError, OrionError

#: The state directory's name in the workspace, unless ``--state-dir`` names another.
STATE_DIR_NAME = ".orion"
#: The mode a new state directory gets: it holds backups of the user's files, journals of what
#: the model wrote and the trace database, so only the user reads it.
STATE_DIR_MODE = 0o700


class PathOutsideWorkspace(OrionError):
    """A path that is absolute outside the workspace, escapes it with ``..``, or leads out of it
    through a symlink (of the file or of any parent directory)."""


class StateDirOutside(ConfigError):
    """The workspace's ``.orion``, or an entry of it, is a symbolic link that leads out of
    where Orion keeps its state: something a cloned repository can ship, so that backups,
    undo records and traces would be written elsewhere. Raised before anything is written."""


def resolve_inside(workspace: Path, path: str) -> Path:
    """``path`` (relative to ``workspace``, or absolute inside it), fully resolved, or
    :class:`PathOutsideWorkspace` saying why not."""
    root = workspace.resolve()
    if not path or "\x00" in path:
        raise PathOutsideWorkspace(f"invalid path {path!r}")
    candidate = Path(path)
    joined = candidate if candidate.is_absolute() else root / candidate
    # resolve() follows every symlink on the way, so a link that points out is caught too.
    resolved = joined.resolve()
    if not resolved.is_relative_to(root):
        if candidate.is_absolute() and not joined.is_relative_to(root):
            why = "is an absolute path outside the workspace"
        elif ".." in candidate.parts:
            why = "escapes the workspace with '..'"
        else:
            why = "leads outside the workspace through a symbolic link"
        raise PathOutsideWorkspace(f"{path!r} {why} ({root})")
    return resolved


# -- the state directory --------------------------------------------------------------------------


def state_directory(workspace: str | os.PathLike[str],
                    given: str | os.PathLike[str] | None = None, *,
                    create: bool = False) -> Path:
    """Where Orion keeps the state of ``workspace``: ``given`` (``--state-dir``: the user's
    choice, used as it is) or ``WORKSPACE/.orion``, checked first.

    ``.orion`` may be a symbolic link within the workspace; a link out of it is refused with
    :class:`StateDirOutside`, and so is any entry of ``.orion`` (``backups``, ``undo``,
    ``orion.db``, ``plans.db`` and their ``-wal``, ``-shm`` and ``.setup.lock`` sidecars,
    ``write_sessions``, ``rescued``, ...) that is a symbolic link leading out of the state
    directory. Deeper entries are named by fresh random ids (``backups/<id>/``), so a link
    shipped there is never written through. With ``create``, a missing state directory is made
    with mode 0700; an existing one keeps the mode its user gave it."""
    chosen = state_dir_path(workspace, given)
    if not given:
        _check_confined(chosen.parent, chosen)
    if create:
        _create(chosen)
    return chosen


def state_dir_path(workspace: str | os.PathLike[str],
                   given: str | os.PathLike[str] | None = None) -> Path:
    """Where :func:`state_directory` looks, without looking: for reading what a run left there
    (a test's checks), never for writing."""
    return Path(given).resolve() if given else Path(workspace).resolve() / STATE_DIR_NAME


def _check_confined(root: Path, state: Path) -> None:
    try:
        info = os.lstat(state)
    except FileNotFoundError:
        return
    real = state
    if stat.S_ISLNK(info.st_mode):
        real = _followed(state)
        if not real.is_relative_to(root):
            raise StateDirOutside(_refusal(state, real, f"outside the workspace {root}"))
    if not real.is_dir():
        if real.exists():
            raise StateDirOutside(f"{state} is not a directory, so Orion cannot keep its state "
                                  "there; move it aside, or give --state-dir")
        return  # a link to a directory not made yet
    with os.scandir(real) as entries:
        for entry in entries:
            if entry.is_symlink():
                link = state / entry.name
                target = _followed(link)
                if not target.is_relative_to(real):
                    raise StateDirOutside(_refusal(link, target,
                                                   f"outside the state directory {real}"))


def _followed(link: Path) -> Path:
    try:
        return link.resolve()
    except (RuntimeError, OSError) as exc:  # a loop of links (RuntimeError in 3.11)
        raise StateDirOutside(f"{link} is a symbolic link that cannot be followed ({exc}); "
                              "Orion keeps no state there. Remove the link, or give "
                              "--state-dir") from exc


def _refusal(link: Path, real: Path, where: str) -> str:
    written = os.readlink(link)
    points = repr(written) if written == str(real) else f"{written!r} ({real})"
    return (f"{link} is a symbolic link to {points}, {where}: Orion's state (backups of your "
            "files, undo records, journals, plans, traces) would be written there. Nothing was "
            "written; remove the link, or give --state-dir to keep the state elsewhere on "
            "purpose")


def _create(state: Path) -> None:
    state.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(state, STATE_DIR_MODE)
    except FileExistsError:
        pass
