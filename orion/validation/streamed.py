"""The ``validate_lines`` hook run on content while it streams, a piece of whole lines at a
time, so that after ``DONE`` only the last piece is left to check."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from orion.validation.issues import Issue, ValidationRequest, gather_issues

if TYPE_CHECKING:
    from orion.hooks.manager import PluginManager

#: Bytes of whole lines :class:`StreamedLines` gathers before it checks them: enough that a
#: check's fixed cost does not matter, little enough that the piece stays in the CPU cache and
#: the stream never waits long (about a millisecond with the built-in validators).
PIECE_BYTES = 256 * 1024


def line_breaks(data: bytes, start: int = 0, end: int | None = None) -> int:
    """How many lines end in ``data[start:end]``: at ``\\r\\n``, ``\\n`` or ``\\r``, as
    validators count them."""
    end = len(data) if end is None else end
    count = data.count(b"\n", start, end)
    if data.find(b"\r", start, end) != -1:
        count += data.count(b"\r", start, end) - data.count(b"\r\n", start, end)
    return count


@dataclass
class StreamedLines:
    """The ``validate_lines`` hook, run on a content while it still grows.

    The owner passes the bytes that arrived after :attr:`checked` to :meth:`check` now and
    then (when :meth:`due`); the whole lines among them are checked as one piece, and the
    issues kept with the piece's offset. :meth:`issues_of` then checks what is left of the
    finished content and numbers the issues' lines in the content (counting lines only up to
    the last piece with an issue): the result is what ``validate_lines`` on the whole content
    returns. A piece always ends with ``\\n``, so it never splits a ``\\r\\n`` or a character.
    """

    pm: PluginManager
    path: str
    settings: Mapping[str, Any]
    piece_bytes: int = PIECE_BYTES
    #: Bytes at the start of the content that were checked: whole lines.
    checked: int = 0
    #: ``(offset, issues)`` of each checked piece that has issues; lines count from the piece.
    found: list[tuple[int, list[Issue]]] = field(default_factory=list)
    #: A validator failed on a piece: the whole content is checked at the end instead, where
    #: the failure surfaces as it would have without streaming.
    failed: bool = False

    def due(self, size: int) -> bool:
        """Whether a content of ``size`` bytes has a piece's worth of bytes to check."""
        return not self.failed and size - self.checked >= self.piece_bytes

    def check(self, unchecked: bytes) -> None:
        """Check the whole lines at the start of ``unchecked``: the content after
        :attr:`checked`."""
        end = unchecked.rfind(b"\n") + 1
        if not end or self.failed:
            return
        try:  # whole lines already (the usual case): checked as they are, not copied
            issues = self._run(unchecked if end == len(unchecked) else unchecked[:end])
        except Exception:
            self.failed = True
            return
        if issues:
            self.found.append((self.checked, issues))
        self.checked += end

    def issues_of(self, request: ValidationRequest) -> list[Issue]:
        """The issues ``validate_lines`` finds in ``request.content``, the finished content
        whose first :attr:`checked` bytes are the ones checked."""
        content = request.content
        if self.failed or len(content) < self.checked:
            return gather_issues(self.pm.hook.validate_lines(request=request), "validate_lines")
        pieces = list(self.found)
        rest = content[self.checked:] if self.checked else content
        if rest or not self.checked:
            pieces.append((self.checked, self._run(rest)))
        issues: list[Issue] = []
        lines = counted = 0  # the lines that end before byte `counted`
        for offset, found in pieces:
            if not found:
                continue
            lines += line_breaks(content, counted, offset)
            counted = offset
            issues += [replace(issue, line=issue.line + lines) for issue in found]
        return issues

    def _run(self, piece: bytes) -> list[Issue]:
        request = ValidationRequest(self.path, piece, self.settings)
        return gather_issues(self.pm.hook.validate_lines(request=request), "validate_lines")
