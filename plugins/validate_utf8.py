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

Every issue depends on its line alone, so this is a ``validate_lines`` check: a write session
runs it on the content in pieces while it streams.

Most content has none of these problems, so two quick checks come first (:func:`is_clean`): a
strict decode, in chunks cut between characters, and one ``bytes.translate`` that keeps only the
reported control bytes and ``EF`` (the first byte of U+FFFD). When both find nothing there is
nothing to report; otherwise :func:`~orion.validation.find_problems` does the exact
scan, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orion.api import Issue, LineView, find_problems, hookimpl

if TYPE_CHECKING:
    from orion.api import ValidationRequest

#: Bytes decoded per call in the quick check (a chunk stays in the CPU cache).
CHUNK = 1 << 18
#: What the quick check looks for after a clean decode: the reported control characters (C0
#: except tab, LF and CR; DEL) and EF, which every U+FFFD (EF BF BD) starts with.
_SUSPECT_BYTES = bytes(c for c in range(0x20) if c not in b"\t\n\r") + b"\x7f\xef"
_OTHER_BYTES = bytes(c for c in range(256) if c not in _SUSPECT_BYTES)
_REPLACEMENT = "\ufffd".encode()


def is_clean(content: bytes) -> bool:
    """``True`` when ``content`` has nothing to report: it is valid UTF-8 (strict decoding
    succeeds), without U+FFFD and without a reported control character. Exactly when
    :func:`~orion.validation.find_problems` returns nothing."""
    view, size, start = memoryview(content), len(content), 0
    try:
        while start < size:
            end = cut = min(start + CHUNK, size)
            # Cut before a byte that is not a continuation byte (10xxxxxx): no character of
            # valid UTF-8 spans such a cut, so the whole is valid exactly when every chunk is.
            # Four continuation bytes in a row are invalid anyway: the exact scan reports them.
            while end < size and 0x80 <= content[end] <= 0xBF:
                end += 1
                if end - cut > 3:
                    return False
            str(view[start:end], "utf-8")
            start = end
    except UnicodeDecodeError:
        return False
    finally:
        view.release()
    suspects = content.translate(None, _OTHER_BYTES)
    if not suspects:
        return True
    if suspects.strip(b"\xef"):
        return False  # a control character
    return _REPLACEMENT not in content  # EF bytes of other characters (U+F000..U+FFFF)


@hookimpl
def validate_lines(request: ValidationRequest) -> list[Issue] | None:
    if is_clean(request.content):
        return None
    problems = find_problems(request.content)
    if not problems:
        return None
    view = LineView(request.content, problems)
    return [Issue(p.line, p.column, p.code, p.message, view.context(p.line, p.column))
            for p in problems]
