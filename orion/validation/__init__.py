"""Content validation: plugins report issues, each with a position.

Two hooks collect them: ``validate_content`` sees the whole content, ``validate_lines`` any run
of whole lines. A line check can therefore run while a write session's content streams
(:class:`StreamedLines`), so that after ``DONE`` only the last piece is left to check.

The line checks share their positions and problems (:func:`find_problems`,
:class:`LineView`, :func:`line_spans`, :func:`position`), defined in :mod:`orion.validation.lines`:

Positions (the same everywhere, see ``docs/validation.md``):

* **Lines** are 1-based and end at ``\n``, ``\r\n`` or a lone ``\r`` (what Python, YAML and
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


Three modules: :mod:`~orion.validation.issues` (the issues and their collection),
:mod:`~orion.validation.streamed` (line checks while content streams) and
:mod:`~orion.validation.lines` (positions and problems of lines). Validators import what
they use from here."""

from __future__ import annotations

from orion.validation.issues import (
    Issue, ValidationRequest, collect_issues,
)
from orion.validation.streamed import (
    PIECE_BYTES, line_breaks, StreamedLines,
)
from orion.validation.lines import (
    UTF8_INVALID, REPLACEMENT_CHAR, CONTROL_CHAR, CONTEXT_WIDTH, MAX_PROMPT_LINE, CUT,
    LINE_BREAK, TEXT_LINE_BREAK, CONTROL_NAMES, invalid_spans, Problem, escape,
    describe_invalid, line_spans, find_problems, text_lines, position, cut_around, LineView,
    line_context,
)

__all__ = [
    'Issue', 'ValidationRequest', 'collect_issues', 'PIECE_BYTES', 'line_breaks',
    'StreamedLines', 'UTF8_INVALID', 'REPLACEMENT_CHAR', 'CONTROL_CHAR', 'CONTEXT_WIDTH',
    'MAX_PROMPT_LINE', 'CUT', 'LINE_BREAK', 'TEXT_LINE_BREAK', 'CONTROL_NAMES',
    'invalid_spans', 'Problem', 'escape', 'describe_invalid', 'line_spans', 'find_problems',
    'text_lines', 'position', 'cut_around', 'LineView', 'line_context',
]
