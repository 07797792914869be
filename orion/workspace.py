"""Paths inside the workspace. Every tool that touches a file resolves its path here."""

from __future__ import annotations

from pathlib import Path

from orion.errors import OrionError


class PathOutsideWorkspace(OrionError):
    """A path that is absolute outside the workspace, escapes it with ``..``, or leads out of it
    through a symlink (of the file or of any parent directory)."""


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
