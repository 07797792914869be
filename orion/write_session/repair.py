"""Finding and repairing bad bytes in written content: the 2-3-10 validation loop's tools.

After the model streamed a file, the validators (built-in plugins ``validate_utf8``,
``validate_syntax``, ``validate_placeholders``) report issues. The session then asks the model
for corrections in one batched prompt (:func:`correction_prompt`), reads its reply
(:func:`parse_corrections`), applies the corrected lines (:func:`apply_corrections`) and
validates again, for up to ``max_corrections`` rounds. What is still wrong after the last round
is removed by :func:`safe_replacement`, which never touches a line without a problem.

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orion.validation import Issue

__all__ = [
    "CONTEXT_WIDTH", "CorrectionResult", "LineView", "MAX_PROMPT_LINE", "Problem", "Replaced",
    "TEXT_LINE_BREAK", "invalid_spans",
    "apply_corrections", "correction_prompt", "escape", "find_problems", "line_context",
    "line_spans", "parse_corrections", "position", "safe_replacement", "text_lines",
]

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
    _recording.spans = spans = []
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


def _window(cells: Sequence[str], column: int, width: int) -> str:
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
        return _window(self.cells(line), column, width)


def line_context(content: bytes, line: int, column: int, width: int = CONTEXT_WIDTH) -> str:
    """:meth:`LineView.context` for one position."""
    return LineView(content).context(line, column, width)


# -- the correction prompt ----------------------------------------------------------------------

REPLY_FORMAT = "L<line>: <the whole corrected line>"
#: How the prompt sums up the UTF-8 problems of a line (the issues' messages have the details).
SHORT_REASONS = {
    UTF8_INVALID: "invalid UTF-8 bytes, shown as \\x escapes",
    REPLACEMENT_CHAR: "U+FFFD replacement character: the character that was meant was lost",
    CONTROL_CHAR: "control character, shown as a \\x escape",
}


def _entries(issues: Sequence[Issue]) -> list[tuple[list[int], str, str]]:
    """``(columns, reason, code)`` for the prompt: the UTF-8 problems of a line summed up per
    code, every other issue on its own."""
    entries: list[tuple[list[int], str, str]] = []
    merged: dict[str, list[int]] = {}
    for issue in issues:
        if issue.code in SHORT_REASONS:
            if issue.code not in merged:
                merged[issue.code] = []
                entries.append((merged[issue.code], SHORT_REASONS[issue.code], issue.code))
            merged[issue.code].append(issue.column)
        else:
            entries.append(([issue.column], issue.message, issue.code))
    return entries


def _ranges(numbers: Sequence[int]) -> str:
    """``1-3, 7``."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def correction_prompt(issues: Iterable[Issue], content: bytes, round: int, max_rounds: int,
                      *, path: str | None = None) -> str:
    """One batched prompt for every issue: each line with a problem, shown with the bad bytes
    and characters escaped, the reasons, and the reply format :func:`parse_corrections` reads."""
    issues = sorted(issues, key=lambda i: (i.line, i.column, i.code))
    view = LineView(content)
    by_line: dict[int, list[Issue]] = {}
    for issue in issues:
        by_line.setdefault(issue.line, []).append(issue)
    where = f" for {path}" if path else ""
    count = len(issues)
    parts = [f"Correction round {round} of {max_rounds}: the content you wrote{where} has "
             f"{count} {'problem' if count == 1 else 'problems'} on {len(by_line)} "
             f"{'line' if len(by_line) == 1 else 'lines'}."]
    if view.problems:
        parts.append("Bytes that are not valid UTF-8, U+FFFD replacement characters and control "
                     "characters are shown as escapes (\\xed, \\ufffd, \\x00). The escapes show "
                     "what is wrong; they are not text to keep.")
    parts.append("")
    for line, found in by_line.items():
        cells = view.cells(line)
        if not 1 <= line <= len(view):
            parts.append(f"L{line}: (past the end of the content, which has {len(view)} "
                         f"{'line' if len(view) == 1 else 'lines'})")
        elif len(cells) <= MAX_PROMPT_LINE:
            parts.append(f"L{line}: {''.join(cells)}")
        else:
            parts.append(f"L{line}: (a line of {len(cells)} characters; shown around each "
                         "problem)")
        for columns, text, code in _entries(found):
            where = f"column {columns[0]}" if len(columns) == 1 else f"columns {_ranges(columns)}"
            rule = ", blocks the write" if any(i.blocking and i.code == code for i in found) \
                else ""
            parts.append(f"  - {where}: {text} [{code}{rule}]")
            if 1 <= line <= len(view) and len(cells) > MAX_PROMPT_LINE:
                parts.append(f"    {_window(cells, columns[0], CONTEXT_WIDTH)}")
    parts += ["",
              "Reply with the corrected lines and nothing else, one per line:",
              REPLY_FORMAT,
              "Write each line in full, with the characters you meant in place of the escapes "
              "(or without them). `L<line>:` with nothing after it makes the line empty. To "
              "put several lines in place of one, repeat its number (`L7: first`, "
              "`L7: second`). Lines you do not list stay as they are; line numbers are those "
              "of the content as shown above."]
    if round >= max_rounds:
        parts.append("This is the last round: whatever is still invalid afterwards is removed "
                     "automatically"
                     + ("; while a problem that blocks the write remains, the file is not "
                        "written at all." if any(i.blocking for i in issues) else "."))
    return "\n".join(parts) + "\n"


# -- the model's corrections --------------------------------------------------------------------

_CORRECTION = re.compile(r"[ \t]*L(\d+):(.*)", re.S)
_FENCE = re.compile(r"[ \t]*(```+|~~~+)[^`]*")
_DONE = re.compile(r"\s*DONE(?: \S+)?\s*")


def parse_corrections(reply: str) -> tuple[dict[int, str], list[str]]:
    """Read ``L<line>: <corrected line>`` lines from the model's reply.

    Exactly one space after the colon separates; anything more is the line's content
    (indentation). ``L12:`` with nothing after it is an empty line. A line number given more
    than once gets all of its lines, in order (joined with ``\\n``). Blank lines, code fence
    lines and a line ``DONE`` (or ``DONE <id>``) are ignored; any other line is returned in the
    problems list."""
    corrections: dict[int, list[str]] = {}
    problems: list[str] = []
    for raw in reply.split("\n"):
        text = raw[:-1] if raw.endswith("\r") else raw
        match = _CORRECTION.fullmatch(text)
        if match is None:
            if text.strip() and not _FENCE.fullmatch(text) and not _DONE.fullmatch(text):
                problems.append(f"not a correction (expected {REPLY_FORMAT}): {text[:200]!r}")
            continue
        number, rest = int(match.group(1)), match.group(2)
        if number < 1:
            problems.append(f"L{match.group(1)}: line numbers start at 1")
            continue
        corrections.setdefault(number, []).append(rest[1:] if rest.startswith(" ") else rest)
    return {number: "\n".join(lines) for number, lines in corrections.items()}, problems


@dataclass(frozen=True)
class CorrectionResult:
    """The content with the corrections applied; ``applied`` and ``out_of_range`` are the line
    numbers that were (not) replaced, sorted."""

    content: bytes
    applied: list[int] = field(default_factory=list)
    out_of_range: list[int] = field(default_factory=list)


def apply_corrections(content: bytes, corrections: dict[int, str]) -> CorrectionResult:
    """Replace lines (1-based) with corrected text, each keeping its original line break. A
    text with ``\\n`` becomes several lines, with the line's break between them. Lines past the
    end are not applied but listed in ``out_of_range``."""
    spans = line_spans(content)
    applied = sorted(n for n in corrections if 1 <= n <= len(spans))
    out_of_range = sorted(n for n in corrections if not 1 <= n <= len(spans))
    if not applied:
        return CorrectionResult(content, [], out_of_range)
    parts: list[bytes] = []
    pos = 0
    for number in applied:
        start, text_end, end = spans[number - 1]
        ending = content[text_end:end]
        between = ending or _dominant_break(content)
        text = corrections[number].replace("\r\n", "\n").replace("\r", "\n")
        lines = [line.encode("utf-8", "surrogatepass") for line in text.split("\n")]
        parts += [content[pos:start], between.join(lines), ending]
        pos = end
    parts.append(content[pos:])
    return CorrectionResult(b"".join(parts), applied, out_of_range)


def _dominant_break(content: bytes) -> bytes:
    return b"\r\n" if content.count(b"\r\n") * 2 > content.count(b"\n") else b"\n"


# -- safe replacement ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Replaced:
    """One place the safe replacement changed: its position in the original content, what was
    there (escaped, as in the issues) and what it became."""

    line: int
    column: int
    original: str
    replacement: str
    code: str = ""


def safe_replacement(content: bytes, replacement: str = "") -> tuple[bytes, list[Replaced]]:
    """Drop (or replace with ``replacement``) every invalid UTF-8 sequence, U+FFFD and reported
    control character. The result is valid UTF-8 without any of them; every other byte, and so
    every line without a problem, is kept exactly."""
    encoded = replacement.encode("utf-8")
    if find_problems(encoded) or LINE_BREAK.search(encoded):
        raise ValueError(f"the safe replacement {replacement!r} must be valid text without "
                         "U+FFFD, control characters or line breaks")
    problems = find_problems(content)
    if not problems:
        return content, []
    parts: list[bytes] = []
    pos = 0
    for problem in problems:
        parts += [content[pos:problem.start], encoded]
        pos = problem.end
    parts.append(content[pos:])
    return b"".join(parts), [Replaced(p.line, p.column, p.escaped, replacement, p.code)
                             for p in problems]
