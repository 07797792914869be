"""Where a streaming write stands: what the live progress line of a reporter shows."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """Where a streaming write stands: what the live line shows."""

    target: str
    lines: int
    bytes: int
    state: str
    continuation: int = 0
    max_continuations: int = 0

    def line(self) -> str:
        size = f"{self.bytes / 1024:.1f} KiB" if self.bytes >= 1024 else f"{self.bytes} B"
        return (f"writing {self.target}: {self.lines} lines, {size}, {self.state}, "
                f"continuation {self.continuation}/{self.max_continuations}")
