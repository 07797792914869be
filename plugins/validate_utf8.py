"""Built-in validator: invalid UTF-8, U+FFFD and control characters, in any file.

Runs on the raw bytes of ``request.content``, whatever the file type. Reports

* ``utf8-invalid`` for each maximal invalid subpart, delimited exactly as Python's UTF-8
  decoder does (so each one is one U+FFFD with ``errors="replace"``): truncated sequences,
  overlong encodings, surrogates, code points above U+10FFFF, stray continuation bytes and the
  bytes that never occur in UTF-8;
* ``utf8-replacement-char`` for each U+FFFD already in the text (an earlier lossy decode lost
  the character that was meant);
* ``control-char`` for each C0 control character other than tab, line feed and carriage return,
  and for DEL (U+007F).

The column counts characters of the line decoded with ``errors="replace"`` (one per invalid
subpart); the message adds the byte column. The context is the line with every problem escaped
(``\\xed\\xa0\\x80``, ``\\x00``, ``\\ufffd``), cut around the position when it is long. Disable
with ``plugins: {disable: [orion_plugins.validate_utf8]}`` in ``orion.yaml``.
"""

from __future__ import annotations

from orion import hookimpl
from orion.validation import Issue
from orion.write_session.repair import LineView, find_problems


@hookimpl
def validate_content(request):
    problems = find_problems(request.content)
    if not problems:
        return None
    view = LineView(request.content, problems)
    return [Issue(p.line, p.column, p.code, p.message, view.context(p.line, p.column))
            for p in problems]
