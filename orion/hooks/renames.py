"""Names the public API renamed, kept working for at least one minor release.

A plugin written against an older release keeps running: the old name reads (and, where it
could be set, sets) what the new one does, with a :class:`DeprecationWarning` that names the
new name and the release that removes the old one. :data:`RENAMES` is the one list of them:
docs/api.md's deprecations section and the API check (``tests/api/``) both read it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Rename:
    """``owner.old`` became ``owner.new`` in ``since``; the old name goes in ``removed_in``."""

    owner: str
    old: str
    new: str
    since: str
    removed_in: str
    #: How to move, when the new name is not a drop-in replacement.
    how: str = ""

    def message(self) -> str:
        text = (f"{self.owner}.{self.old} is now .{self.new} (renamed in {self.since}); "
                f".{self.old} goes in {self.removed_in}")
        return f"{text}: {self.how}" if self.how else text

    def warn(self, stacklevel: int = 3) -> None:
        warnings.warn(self.message(), DeprecationWarning, stacklevel=stacklevel)


#: Every rename of a name ``orion.api`` hands out (its objects' attributes, hook arguments).
RENAMES: tuple[Rename, ...] = (
    Rename("Lifecycle", "owner", "host", "0.1.0", "0.3.0"),
    Rename("WriteSessionView", "plan", "file", "0.2.0", "0.3.0",
           how="session.plan.relative becomes session.file"),
    Rename("WriteSessionView", "result", "written", "0.2.0", "0.3.0",
           how="session.result is None becomes not session.written"),
    Rename("ContextRequest", "runtime", "host", "0.2.0", "0.3.0"),
    Rename("ToolContext", "runtime", "host", "0.2.0", "0.3.0"),
    Rename("Turn", "runtime", "host", "0.2.0", "0.3.0"),
    Rename("runtime_started", "runtime", "host", "0.2.0", "0.3.0", how="a hook argument"),
    Rename("runtime_closing", "runtime", "host", "0.2.0", "0.3.0", how="a hook argument"),
    Rename("conversation_reset", "runtime", "host", "0.2.0", "0.3.0", how="a hook argument"),
)


def rename(owner: str, old: str) -> Rename:
    """The entry of :data:`RENAMES` for ``owner.old``."""
    for entry in RENAMES:
        if (entry.owner, entry.old) == (owner, old):
            return entry
    raise KeyError(f"{owner}.{old} is not a listed rename")


def renamed(owner: str, old: str, *, read: Callable[[Any], Any] | None = None,
            settable: bool = False) -> property:
    """A property under the old name of a listed rename: it reads the new attribute (or what
    ``read`` returns, when the old name gave a different object) with a DeprecationWarning;
    ``settable`` makes assignment set the new attribute, with the same warning."""
    entry = rename(owner, old)

    def get(self: Any) -> Any:
        entry.warn()
        return read(self) if read is not None else getattr(self, entry.new)

    def put(self: Any, value: Any) -> None:
        entry.warn()
        setattr(self, entry.new, value)

    return property(get, put if settable else None,
                    doc=f"Deprecated: {entry.message()}.")
