"""Positions and problems of lines: what the line checks report, the same everywhere (see
``docs/validation.md`` and :mod:`orion.validation`)."""

from __future__ import annotations

import bisect
import codecs
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass


UTF8_INVALID = "utf8-invalid"
REPLACEMENT_CHAR = "utf8-replacement-char"
CONTROL_CHAR = "control-char"

#: Lines (in decoded columns) longer than this are cut around the position in an issue's
#: ``context``.
CONTEXT_WIDTH = 100
#: Lines longer than this are cut around each problem in the correction prompt.
MAX_PROMPT_LINE = 1000
#: A cut-off line is marked with this where text was left out.
CUT = "…"

LINE_BREAK = re.compile(rb"\r\n|\n|\r")
TEXT_LINE_BREAK = re.compile(r"\r\n|\n|\r")
#: Control characters that are reported: C0 except tab, LF and CR, and DEL; and U+FFFD.
_SUSPECT = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\xef\xbf\xbd")
_REPLACEMENT_BYTES = b"\xef\xbf\xbd"

#: The names of the control characters that are reported.
CONTROL_NAMES = dict(enumerate(
    "NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB "
    "CAN EM SUB ESC FS GS RS US".split())) | {0x7F: "DEL"}


# -- finding problems ---------------------------------------------------------------------------

_recording = threading.local()


def _record_invalid(exc: UnicodeError) -> tuple[str, int]:
    assert isinstance(exc, UnicodeDecodeError)
    _recording.spans.append((exc.start, exc.end))
    return "\ufffd", exc.end


_HANDLER = "orion.record-invalid-utf8"
codecs.register_error(_HANDLER, _record_invalid)


def invalid_spans(content: bytes) -> list[tuple[int, int]]:
    """The ``(start, end)`` byte offsets of every maximal invalid subpart, as Python's UTF-8
    decoder delimits them (each becomes one U+FFFD with ``errors="replace"``)."""
    saved = getattr(_recording, "spans", None)
    spans: list[tuple[int, int]] = []
    _recording.spans = spans
    try:
        content.decode("utf-8", _HANDLER)
    finally:
        _recording.spans = saved
    return spans


@dataclass(frozen=True)
class Problem:
    """Bytes that are not acceptable text: an invalid UTF-8 sequence, a U+FFFD, or a control
    character. ``start``/``end`` are byte offsets in the content; ``line``, ``column`` and
    ``byte_column`` are 1-based (the column counts decoded characters, see the module doc)."""

    code: str
    start: int
    end: int
    line: int
    column: int
    byte_column: int
    raw: bytes
    reason: str

    @property
    def escaped(self) -> str:
        """How the problem is shown: ``\\xed\\xa0``, ``\\x00``, ``\\ufffd``."""
        return escape(self.raw, self.code)

    @property
    def message(self) -> str:
        """The reason, with the byte column (the issue's column counts characters)."""
        return f"{self.reason} (byte {self.byte_column} of the line)"


def escape(raw: bytes, code: str) -> str:
    if code == REPLACEMENT_CHAR:
        return "\\ufffd"
    return "".join(f"\\x{byte:02x}" for byte in raw)


def _is_continuation(byte: int | None) -> bool:
    return byte is not None and 0x80 <= byte <= 0xBF


def describe_invalid(raw: bytes, following: int | None) -> str:
    """Why a maximal invalid subpart ``raw`` is invalid; ``following`` is the next byte."""
    shown = escape(raw, UTF8_INVALID)
    lead = raw[0]
    if 0x80 <= lead <= 0xBF:
        return f"invalid UTF-8: unexpected continuation byte {shown} (no lead byte before it)"
    if lead in (0xC0, 0xC1):
        return (f"invalid UTF-8: {shown} starts an overlong encoding (C0 and C1 lead bytes "
                "only encode ASCII characters, which must be single bytes)")
    if lead in (0xFE, 0xFF):
        return f"invalid UTF-8: the byte {shown} never occurs in UTF-8"
    if lead >= 0xF8:
        size = 5 if lead <= 0xFB else 6
        return (f"invalid UTF-8: {shown} starts a {size}-byte sequence (obsolete; UTF-8 ends "
                "at U+10FFFF, 4 bytes)")
    if lead >= 0xF5:
        return f"invalid UTF-8: {shown} starts a code point above U+10FFFF"
    size = 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
    if len(raw) == 1 and _is_continuation(following):
        assert following is not None
        if lead == 0xE0 and following < 0xA0 or lead == 0xF0 and following < 0x90:
            return (f"invalid UTF-8: {shown} starts an overlong encoding (a shorter encoding "
                    "exists)")
        if lead == 0xED and following >= 0xA0:
            return (f"invalid UTF-8: {shown} starts a UTF-16 surrogate code point "
                    "(U+D800..U+DFFF cannot be encoded in UTF-8)")
        if lead == 0xF4 and following >= 0x90:
            return f"invalid UTF-8: {shown} starts a code point above U+10FFFF"
    what = "end of the content" if following is None else "a byte that does not continue it"
    return (f"invalid UTF-8: truncated {size}-byte sequence {shown} ({len(raw)} of {size} "
            f"bytes, then {what})")


def line_spans(content: bytes) -> list[tuple[int, int, int]]:
    """Each line's ``(start, end of text, end with the line break)`` byte offsets."""
    spans, start = [], 0
    for match in LINE_BREAK.finditer(content):
        spans.append((start, match.start(), match.end()))
        start = match.end()
    if start < len(content):
        spans.append((start, len(content), len(content)))
    return spans


def find_problems(content: bytes) -> list[Problem]:
    """Every invalid UTF-8 sequence, U+FFFD and reported control character, in order."""
    found: list[tuple[int, int, str]] = [(s, e, UTF8_INVALID) for s, e in invalid_spans(content)]
    # Controls are ASCII bytes and EF BF BD is always the character U+FFFD: neither can be part
    # of an invalid subpart (those consist of bytes >= 0x80, and EF is never a continuation).
    for match in _SUSPECT.finditer(content):
        code = REPLACEMENT_CHAR if match.group() == _REPLACEMENT_BYTES else CONTROL_CHAR
        found.append((match.start(), match.end(), code))
    if not found:
        return []
    found.sort()
    starts = [0] + [m.end() for m in LINE_BREAK.finditer(content)]
    problems: list[Problem] = []
    line_index, pos, column = -1, 0, 1
    for start, end, code in found:
        index = bisect.bisect_right(starts, start) - 1
        if index != line_index:
            line_index, pos, column = index, starts[index], 1
        column += len(content[pos:start].decode("utf-8", "replace"))
        raw = content[start:end]
        if code == UTF8_INVALID:
            reason = describe_invalid(raw, content[end] if end < len(content) else None)
        elif code == REPLACEMENT_CHAR:
            reason = ("replacement character U+FFFD (\\ufffd), left by an earlier lossy "
                      "decode: the character that was meant is lost")
        else:
            reason = (f"control character U+{raw[0]:04X} ({CONTROL_NAMES[raw[0]]}, "
                      f"{escape(raw, code)})")
        problems.append(Problem(code, start, end, index + 1, column,
                                start - starts[index] + 1, raw, reason))
        pos, column = end, column + 1
    return problems


def text_lines(content: bytes) -> list[str]:
    """The lines of ``content`` as validators count them: decoded with ``errors="replace"``,
    split at ``\\r\\n``, ``\\n`` and ``\\r``, without their line breaks."""
    lines = TEXT_LINE_BREAK.split(content.decode("utf-8", "replace"))
    if lines[-1] == "":  # what follows a final line break (or empty content) is no line
        lines.pop()
    return lines


def position(text: str, index: int) -> tuple[int, int]:
    """The 1-based line and column of character ``index`` of ``text`` (lines as above)."""
    index = max(0, min(index, len(text)))
    line, start = 1, 0
    for match in TEXT_LINE_BREAK.finditer(text, 0, index + 1):
        if match.end() > index:  # index is on this line's break: still on this line
            break
        line, start = line + 1, match.end()
    return line, index - start + 1


# -- showing lines ------------------------------------------------------------------------------


def _cells(content: bytes, span: tuple[int, int, int], problems: Sequence[Problem]) -> list[str]:
    """One string per column of a line: the character, or the escaped problem."""
    start, text_end, _ = span
    cells: list[str] = []
    pos = start
    for problem in problems:
        cells.extend(content[pos:problem.start].decode("utf-8", "replace"))
        cells.append(problem.escaped)
        pos = problem.end
    cells.extend(content[pos:text_end].decode("utf-8", "replace"))
    return cells


def cut_around(cells: Sequence[str], column: int, width: int) -> str:
    if len(cells) <= width:
        return "".join(cells)
    begin = max(0, min(column - 1 - width * 2 // 5, len(cells) - width))
    end = begin + width
    return ((CUT if begin > 0 else "") + "".join(cells[begin:end])
            + (CUT if end < len(cells) else ""))


class LineView:
    """The lines of some content with their problems, for contexts and prompts."""

    def __init__(self, content: bytes, problems: Sequence[Problem] | None = None) -> None:
        self.content = content
        self.spans = line_spans(content)
        self.problems = find_problems(content) if problems is None else list(problems)
        self._by_line: dict[int, list[Problem]] = {}
        for problem in self.problems:
            self._by_line.setdefault(problem.line, []).append(problem)
        self._cells: dict[int, list[str]] = {}

    def __len__(self) -> int:
        return len(self.spans)

    def cells(self, line: int) -> list[str]:
        if not 1 <= line <= len(self.spans):
            return []
        if line not in self._cells:
            self._cells[line] = _cells(self.content, self.spans[line - 1],
                                       self._by_line.get(line, []))
        return self._cells[line]

    def context(self, line: int, column: int, width: int = CONTEXT_WIDTH) -> str:
        """The line, problems escaped, cut to about ``width`` columns around ``column``."""
        return cut_around(self.cells(line), column, width)


def line_context(content: bytes, line: int, column: int, width: int = CONTEXT_WIDTH) -> str:
    """:meth:`LineView.context` for one position."""
    return LineView(content).context(line, column, width)
