"""Read-only tools for the model: list the workspace and read a file, by line range."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from orion.api import OrionError, ToolSpec, hookimpl, resolve_inside

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from orion.api import ToolContext

HIDDEN = {".git", ".orion"}
MAX_ENTRIES = 500


class ReadFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="a path relative to the workspace")
    start_line: int = Field(default=1, ge=1, description="the first line to return (1-based)")
    max_lines: int = Field(default=400, ge=1, le=2000, description="how many lines at most")


class ListFilesArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(default=".", description="a directory relative to the workspace")


def _resolved(workspace: Path, path: str) -> Path:
    """``path`` resolved inside the workspace; a link that leads to itself (a loop) is a tool
    error the model can act on, not a failure of this plugin."""
    try:
        return resolve_inside(workspace, path)
    except RuntimeError as exc:  # a loop of links (Python 3.11; later ones raise ELOOP)
        raise OrionError(f"{path!r} cannot be resolved: it is a symbolic link that leads back "
                         f"to itself ({exc}); nothing read") from None
    except OSError as exc:
        why = ("it is a symbolic link that leads back to itself" if exc.errno == errno.ELOOP
               else exc.strerror or str(exc))
        raise OrionError(f"{path!r} cannot be resolved: {why}; nothing read") from None


def read_file(args: ReadFileArgs, context: ToolContext) -> dict[str, Any]:
    target = _resolved(context.workspace, args.path)
    if not target.is_file():
        raise OrionError(f"{args.path!r} is not a file")
    try:
        data = target.read_bytes()
    except OSError as exc:  # gone, or not readable, since it was looked at
        raise OrionError(f"{args.path!r} cannot be read: {exc.strerror or exc}") from None
    if b"\x00" in data[:8192]:
        raise OrionError(f"{args.path!r} is a binary file")
    lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
    chosen = lines[args.start_line - 1: args.start_line - 1 + args.max_lines]
    return {"path": args.path, "start_line": args.start_line,
            "end_line": args.start_line + len(chosen) - 1, "total_lines": len(lines),
            "text": "".join(chosen)}


def list_files(args: ListFilesArgs, context: ToolContext) -> dict[str, Any]:
    directory = _resolved(context.workspace, args.path)
    if not directory.is_dir():
        raise OrionError(f"{args.path!r} is not a directory")
    entries = []
    for child in sorted(directory.iterdir()):
        if child.name in HIDDEN:
            continue
        kind = "dir" if child.is_dir() else "file"
        try:
            size = {"bytes": child.stat().st_size} if kind == "file" else {}
        except OSError:  # a link that leads nowhere, or back to itself
            kind, size = "link", {}
        entries.append({"name": child.name, "type": kind, **size})
        if len(entries) == MAX_ENTRIES:
            break
    return {"path": args.path, "entries": entries, "truncated": len(entries) == MAX_ENTRIES}


@hookimpl
def register_tools(register: Callable[[ToolSpec], None]) -> None:
    register(ToolSpec("read_file", "Read a text file of the workspace, by line range.",
                      ReadFileArgs, read_file, paths=("path",)))
    register(ToolSpec("list_files", "List a directory of the workspace.", ListFilesArgs,
                      list_files, paths=("path",)))
