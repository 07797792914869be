"""Finding and repairing bad bytes in written content: the 2-3-10 validation loop's tools.

After the model streamed a file, the validators (built-in plugins ``validate_utf8``,
``validate_syntax``, ``validate_placeholders``) report issues. The session then asks the model
for corrections in one batched prompt (:func:`correction_prompt`), reads its reply
(:func:`parse_corrections`), applies the corrected lines (:func:`apply_corrections`) and
validates again, for up to ``max_corrections`` rounds. What is still wrong after the last round
is removed by :func:`safe_replacement`, which never touches a line without a problem.

The positions and the problems it works with (lines, columns, invalid UTF-8, control
characters) are those of the line checks, in :mod:`orion.validation`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

# The line checks' positions and problems live beside the validator hooks; the names are
# imported here too, where Orion's own code found them before.
from orion.validation import (CONTEXT_WIDTH, CONTROL_CHAR, LINE_BREAK, MAX_PROMPT_LINE,
                              REPLACEMENT_CHAR, TEXT_LINE_BREAK, UTF8_INVALID, LineView, Problem,
                              cut_around, escape, find_problems, invalid_spans, line_context,
                              line_spans,
                              position, text_lines)

if TYPE_CHECKING:
    from orion.validation import Issue

__all__ = [
    "CONTEXT_WIDTH", "CorrectionResult", "LineView", "MAX_PROMPT_LINE", "Problem", "Replaced",
    "TEXT_LINE_BREAK", "invalid_spans",
    "apply_corrections", "correction_prompt", "escape", "find_problems", "line_context",
    "line_spans", "parse_corrections", "position", "safe_replacement", "text_lines",
]

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
                parts.append(f"    {cut_around(cells, columns[0], CONTEXT_WIDTH)}")
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
