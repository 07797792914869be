"""Built-in normalizer: take off the code fence a model wrapped around a whole file.

Models like to answer "write this file" with the file in a Markdown code block. When the whole
content, ignoring blank lines before and after it, is exactly one fenced code block,
``normalize_content`` returns what is inside, byte for byte (each inner line keeps its line
break); otherwise ``None`` and the content is left alone.

The rules:

* The first non-blank line opens the block: up to 3 spaces, then at least 3 backticks or at
  least 3 tildes, then an optional info string (``python``, ``json title="x"``; a backtick
  fence's info string may not contain a backtick). The last non-blank line closes it: up to 3
  spaces, the same character at least as many times, and nothing but spaces or tabs after.
* Nothing may close the block before the last line: a line in between that would close it
  means the content is two blocks, or a block with prose around it, and is left alone.
  Fences *inside* the block that open with an info string (```` ```python ````) or use the
  other fence character are taken as nested blocks, closed by their own fence, so a Markdown
  file with code blocks can be wrapped in ```` ```markdown ````.
* Markdown targets (``.md``, ``.markdown``, ``.mdx``, ``.mkd``, ``.mdown``, ``.qmd``,
  ``.rmd``) are unwrapped only when the info string is ``markdown``, ``md`` or ``mdx``: a
  Markdown file that is one ```` ```bash ```` block is a real Markdown file.

Disable with ``plugins: {disable: [orion_plugins.unwrap_fence]}`` in ``orion.yaml``.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from orion.api import MARKDOWN_INFO, hookimpl, line_spans

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdx", ".mkd", ".mdown", ".qmd", ".rmd"})

_FENCE = re.compile(rb" {0,3}(`{3,}|~{3,})(.*)")


def _fence(line: bytes) -> tuple[bytes, int, bytes] | None:
    """``(character, length, info string)`` of a fence line, or ``None``."""
    match = _FENCE.fullmatch(line)
    if match is None:
        return None
    run, info = match.group(1), match.group(2).strip(b" \t")
    if run[:1] == b"`" and b"`" in info:
        return None
    return run[:1], len(run), info


def _closes(fence: tuple[bytes, int, bytes] | None, char: bytes, length: int) -> bool:
    return fence is not None and fence[0] == char and fence[1] >= length and not fence[2]


_BLANK = b" \t\r\n"
_BREAK = re.compile(rb"\r\n|\r|\n")
#: How many bytes of each end are looked at: at most this much of the first and the last line.
_EDGE = 4096


def _content_bounds(content: bytes) -> tuple[int, int]:
    """``(start, end)`` such that ``content[start:end] == content.strip(_BLANK)``, found with
    slices of the ends (doubling while they are entirely blank) instead of a copy of the whole
    content."""
    size = len(content)
    start, step = 0, _EDGE
    while start < size:
        chunk = content[start:start + step]
        kept = chunk.lstrip(_BLANK)
        start += len(chunk) - len(kept)
        if kept:
            break
        step *= 2
    end, step = size, _EDGE
    while end > start:
        chunk = content[max(start, end - step):end]
        kept = chunk.rstrip(_BLANK)
        end -= len(chunk) - len(kept)
        if kept:
            break
        step *= 2
    return start, end


def _edge_lines(content: bytes) -> tuple[bytes, bytes]:
    """The first and the last non-blank line (without the blanks before the first and after the
    last, and at most :data:`_EDGE` bytes of each), found from both ends without splitting or
    copying the whole content (it can be tens of megabytes, and most content is not wrapped)."""
    start, end = _content_bounds(content)
    first = _BREAK.split(content[start:min(end, start + _EDGE)], maxsplit=1)[0]
    last = _BREAK.split(content[max(start, end - _EDGE):end])[-1]
    return first, last


def unwrap(path: str, content: bytes) -> bytes | None:
    """The inside of the one fenced code block that is the whole content, or ``None``."""
    first_line, last_line = _edge_lines(content)
    if _fence(first_line.rstrip(b" \t")) is None or _fence(last_line.rstrip(b" \t")) is None:
        return None  # the common case, decided without looking at the rest
    spans = [s for s in line_spans(content)]
    bodies = [content[start:text_end] for start, text_end, _ in spans]
    filled = [i for i, body in enumerate(bodies) if body.strip(b" \t")]
    if len(filled) < 2:
        return None
    first, last = filled[0], filled[-1]
    opening = _fence(bodies[first])
    if opening is None:
        return None
    char, length, info = opening
    if not _closes(_fence(bodies[last]), char, length):
        return None
    suffix = PurePosixPath(path.replace("\\", "/")).suffix.lower()
    if suffix in MARKDOWN_SUFFIXES:
        word = info.split()[0].decode("ascii", "replace").lower() if info else ""
        if word not in MARKDOWN_INFO:
            return None
    nested: list[tuple[bytes, int]] = []
    for body in bodies[first + 1:last]:
        fence = _fence(body)
        if fence is None:
            continue
        if nested:
            if _closes(fence, *nested[-1]):
                nested.pop()
        elif _closes(fence, char, length):
            return None  # the block ends before the last line
        elif fence[2] or fence[0] != char:
            nested.append((fence[0], fence[1]))
    if nested:
        return None  # the last line closes a nested block: the outer one is not closed
    if first + 1 == last:
        return b""
    return content[spans[first + 1][0]:spans[last - 1][2]]


@hookimpl
def normalize_content(path: str, content: bytes) -> bytes | None:
    return unwrap(path, content)
