"""Streamed Markdown cut into finished blocks.

``orion chat`` renders a reply as Markdown while it streams. A block is printed once, rendered,
as soon as nothing that follows can change how it looks; the block still growing is shown below
the printed ones and replaced as it grows. A block ends:

- at a blank line outside a fenced code block (paragraphs, lists, tables, quotes end there);
- after the line that closes a fenced code block;
- after an ATX heading line (``# Title``), which is a block of its own.

What is inside a fence is never cut: a blank line in code is code. The cut points depend only
on the text, never on how it was chunked, and the blocks put back together are the text.
"""

from __future__ import annotations

import re

#: A fence opens with three or more backticks or tildes, indented by at most three spaces; a
#: backtick fence's info string may not hold a backtick (that line is no fence at all).
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_HEADING = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")


class MarkdownBlocks:
    """Feed the text as it streams; take the finished blocks; :attr:`pending` is the rest."""

    def __init__(self) -> None:
        self._lines: list[str] = []  # the complete lines of the unfinished block, with "\n"
        self._partial: list[str] = []  # pieces of the line being streamed, not ended yet
        self._fence: str | None = None  # the marker of the fenced block the text is inside
        self._opened_at = 0  # ... and the index in _lines of the line that opened it

    def feed(self, delta: str) -> list[str]:
        """Take ``delta``; return the blocks it finished, in order (each with its line ends
        and the blank lines that ended it)."""
        if "\n" not in delta:
            if delta:
                self._partial.append(delta)
            return []
        first, *lines, last = delta.split("\n")
        lines.insert(0, "".join(self._partial) + first)
        self._partial = [last] if last else []
        finished: list[str] = []
        for line in lines:
            if self._line(line + "\n") and any(s.strip() for s in self._lines):
                finished.append("".join(self._lines))
                self._lines = []
        return finished

    @property
    def pending(self) -> str:
        """The text of the block that is still growing (with the line being streamed)."""
        return "".join(self._lines) + "".join(self._partial)

    def tail(self, lines: int) -> str:
        """The end of :attr:`pending`, about ``lines`` source lines, for a preview of a block
        too long to render whole at every chunk: the line that opened its fence stays first,
        so code is still shown as code."""
        if len(self._lines) <= lines:
            return self.pending
        kept = self._lines[-lines:]
        if self._fence is not None and self._opened_at < len(self._lines) - lines:
            kept.insert(0, self._lines[self._opened_at])
        return "".join(kept) + "".join(self._partial)

    def end(self) -> str:
        """The message ended: the unfinished block, which is finished now."""
        rest = self.pending
        self._lines, self._partial, self._fence = [], [], None
        return rest

    def _line(self, line: str) -> bool:
        """Add a complete line; return whether the block ends after it."""
        self._lines.append(line)
        if self._fence is not None:
            stripped = line.strip()
            marker = self._fence
            if stripped.startswith(marker) and not stripped.strip(marker[0]) \
                    and len(line) - len(line.lstrip(" ")) <= 3:
                self._fence = None
                return True
            return False
        fence = _FENCE.match(line.rstrip("\n"))
        if fence is not None and not (fence.group(1)[0] == "`" and "`" in fence.group(2)):
            self._fence, self._opened_at = fence.group(1), len(self._lines) - 1
            return False
        return not line.strip() or _HEADING.match(line) is not None
