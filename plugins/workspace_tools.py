"""Read-only tools for the model: list the workspace and read a file, by line range."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from orion.api import OrionError, ToolSpec, hookimpl, resolve_inside

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


def read_file(args: ReadFileArgs, context) -> dict:
    target = resolve_inside(context.workspace, args.path)
    if not target.is_file():
        raise OrionError(f"{args.path!r} is not a file")
    data = target.read_bytes()
    if b"\x00" in data[:8192]:
        raise OrionError(f"{args.path!r} is a binary file")
    lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
    chosen = lines[args.start_line - 1: args.start_line - 1 + args.max_lines]
    return {"path": args.path, "start_line": args.start_line,
            "end_line": args.start_line + len(chosen) - 1, "total_lines": len(lines),
            "text": "".join(chosen)}


def list_files(args: ListFilesArgs, context) -> dict:
    directory = resolve_inside(context.workspace, args.path)
    if not directory.is_dir():
        raise OrionError(f"{args.path!r} is not a directory")
    entries = []
    for child in sorted(directory.iterdir()):
        if child.name in HIDDEN:
            continue
        kind = "dir" if child.is_dir() else "file"
        entries.append({"name": child.name, "type": kind,
                        **({"bytes": child.stat().st_size} if kind == "file" else {})})
        if len(entries) == MAX_ENTRIES:
            break
    return {"path": args.path, "entries": entries, "truncated": len(entries) == MAX_ENTRIES}


@hookimpl
def register_tools(register):
    register(ToolSpec("read_file", "Read a text file of the workspace, by line range.",
                      ReadFileArgs, read_file))
    register(ToolSpec("list_files", "List a directory of the workspace.", ListFilesArgs,
                      list_files))
