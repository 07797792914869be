"""Content validation: plugins report issues, each with a position.

Two hooks collect them: ``validate_content`` sees the whole content, ``validate_lines`` any run
of whole lines. A line check can therefore run while a write session's content streams
(:class:`StreamedLines`), so that after ``DONE`` only the last piece is left to check.

The line checks share their positions and problems (:func:`find_problems`,
:class:`LineView`, :func:`line_spans`, :func:`position`), defined below:

Positions (the same everywhere, see ``docs/validation.md``):

* **Lines** are 1-based and end at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (what Python, YAML and
  most editors count). A final line without a line break is a line; the empty string after a
  final line break is not.
* **Columns** are 1-based and count the characters of the line decoded with
  ``errors="replace"``: every valid character is one column, and so is every invalid sequence
  (Python's decoder turns each *maximal invalid subpart* into one U+FFFD). For a valid UTF-8 line
  that is the ordinary character column. :class:`Problem` also has the 1-based ``byte_column``,
  and the messages of the UTF-8 issues give both.

What is a problem (:func:`find_problems`):

* ``utf8-invalid``: each maximal invalid subpart, exactly as Python's UTF-8 decoder delimits
  them (truncated sequences, overlong encodings, surrogates ``ED A0..BF ..``, code points above
  U+10FFFF, stray continuation bytes, the bytes ``C0``, ``C1``, ``F5``..``FF``).
* ``utf8-replacement-char``: a U+FFFD already in the text, the trace of an earlier lossy decode.
* ``control-char``: a C0 control character other than tab, line feed and carriage return, and
  DEL (U+007F). C1 controls (U+0080..U+009F) and noncharacters (U+FFFE, ...) are valid UTF-8 and
  are not reported.
"""

from __future__ import annotations

import bisect
import codecs
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orion.plugins import PluginManager

#: Bytes of whole lines :class:`StreamedLines` gathers before it checks them: enough that a
#: check's fixed cost does not matter, little enough that the piece stays in the CPU cache and
#: the stream never waits long (about a millisecond with the built-in validators).
PIECE_BYTES = 256 * 1024


@dataclass(frozen=True)
class Issue:
    line: int
    column: int
    code: str
    message: str
    context: str = ""
    #: A rule the content breaks (a licence header it lacks), not bytes a repair could take
    #: out: the model is asked to correct it like any issue, but when it is still there after
    #: the last correction round the target is not written (docs/validation.md).
    blocking: bool = False

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.code}: {self.message}"


@dataclass(frozen=True)
class ValidationRequest:
    path: str
    content: bytes
    settings: Mapping[str, Any] = field(default_factory=dict)


def collect_issues(pm: PluginManager, request: ValidationRequest, *,
                   streamed: StreamedLines | None = None) -> list[Issue]:
    """All issues from every validator, in content order. ``streamed`` holds what the line
    checks found in the content's first pieces while it streamed; only the rest is checked."""
    if streamed is None:
        issues = _issues(pm.hook.validate_lines(request=request), "validate_lines")
    else:
        issues = streamed.issues_of(request)
    issues += _issues(pm.hook.validate_content(request=request), "validate_content")
    return sorted(issues, key=lambda i: (i.line, i.column, i.code))


def _issues(results: Iterable[Any], hook: str) -> list[Issue]:
    issues: list[Issue] = []
    for found in results:
        if not found:
            continue
        for issue in [found] if isinstance(found, (Issue, str, bytes)) else found:
            if not isinstance(issue, Issue):
                raise TypeError(f"{hook} returned {type(issue).__name__} {issue!r:.60}, "
                                "not an Issue")
            issues.append(issue)
    return issues


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
            return _issues(self.pm.hook.validate_lines(request=request), "validate_lines")
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
        return _issues(self.pm.hook.validate_lines(request=request), "validate_lines")


# -- positions and problems of lines (what line checks report) --------------------------------

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
