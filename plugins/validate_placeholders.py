"""Built-in validator: lines a model writes *instead of* content.

Models elide what they think is obvious: ``// ... existing code ...``, ``# rest of the file
unchanged``, ``[truncated]``, ``(implementation omitted for brevity)``. Written to disk, such a
line silently destroys the part of the file it stands for. Each one is reported with code
``placeholder`` at its first non-blank character.

A line is a placeholder only when the *whole line* is one: its comment markers (``//``, ``#``,
``/* */``, ``<!-- -->``, ``--``, ``;``, ``%``, ``*``, ``{/* */}``, ``{# #}``), brackets
(``[...]``, ``(...)``, ``<...>``, ``{...}``), ellipses (``...``, ``…``) and runs of dashes are
taken off, and what is left must match one of :data:`PATTERNS` in full (case-insensitive). So
prose that merely talks about "the rest of the file" or "truncated output" is not reported, and
the phrases that are also ordinary comments (``# Existing routes``, ``// other settings``) count
only with an ellipsis around them (``// ... other settings ...``). Bare elisions (``...``,
``# ...``, ``/* ... */``, ``<!-- ... -->``) are not reported: they are common in real code and
documentation. Lines longer than :data:`MAX_LINE` characters are not examined.

Disable with ``plugins: {disable: [orion_plugins.validate_placeholders]}`` in ``orion.yaml``.
Every issue depends on its line alone, so this is a ``validate_lines`` check: a write session
runs it on the content in pieces while it streams.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass

from orion import hookimpl
from orion.validation import Issue
from orion.write_session.repair import LineView

#: Longer lines are not placeholders.
MAX_LINE = 160

#: What a pattern needs around it: nothing, a comment marker / brackets / ellipsis / dashes
#: ("decorated"), or an ellipsis.
NONE, DECORATED, ELLIPSIS = 0, 1, 2

_OBJECT = (r"(?:file|code|content|contents|file contents?|source|implementation|module|class|"
           r"function|method|component|document|script|config|configuration|text|page|"
           r"section|logic|body|tests?|template|stylesheet|styles|markup|html|css|json|yaml)")
_ITEMS = (r"(?:code|content|contents|implementation|imports|methods|functions|functionality|"
          r"classes|fields|properties|attributes|members|tests|test cases|cases|routes|"
          r"handlers|endpoints|components|styles|rules|settings|options|config|configuration|"
          r"keys|entries|items|sections|lines|logic|helpers|definitions|declarations|exports|"
          r"dependencies|steps|code below|code above)")
_QUALIFIER = r"(?:existing|original|previous|prior|old|other|remaining|unchanged|same)"
_BE = (r"(?:(?:is|are|remains?|remain|stays?|stay|kept|left|was|were|has been|have been|"
       r"should be|should stay|should remain|can be|would be|goes|go) )?")
_UNCHANGED = (r"(?:unchanged|the same|as (?:is|before|it was|above|previously|in the original"
              r"(?: file)?)|as-is|identical|untouched|unmodified|not shown|omitted|elided|"
              r"truncated|here|goes here|follows|continues(?: below| here)?|below|above|"
              r"same as before|same as above)")
_VERB = r"(?:keep|keeping|retain|preserve|leave|insert|add|put|paste|include|copy|place)"
#: A count: "12", "1,000", "1.5k"; not a number that ends in "." or "," ("## 12. More lines" is
#: a numbered section title).
_COUNT = r"\d(?:[\d,.]*\d)?k?"
_GONE = (r"(?:omitted|elided|truncated|trimmed|shortened|abbreviated|removed|skipped|hidden|"
         r"left out|not shown|cut|snipped)")


@dataclass(frozen=True)
class Pattern:
    what: str
    regex: re.Pattern[str]
    needs: int


def _p(what: str, regex: str, needs: int) -> Pattern:
    return Pattern(what, re.compile(regex), needs)


#: Matched in full against what is left of a line once its decoration is taken off (lowercase,
#: spaces collapsed, trailing ``.,:;!`` removed).
PATTERNS: tuple[Pattern, ...] = (
    _p("the rest of the file elided",
       rf"(?:the )?(?:rest|remainder) of (?:the |this |your |my )?(?:original |existing |"
       rf"previous |current )?{_OBJECT} {_BE}{_UNCHANGED}", NONE),
    _p("the rest of the file elided",
       rf"(?:{_VERB} )?(?:the )?(?:rest|remainder) of (?:the |this |your |my )?(?:original |"
       rf"existing |previous |current )?{_OBJECT}(?: {_BE}{_UNCHANGED})?", DECORATED),
    _p("the rest of the file elided",
       rf"(?:{_VERB} )?(?:the )?(?:rest|remainder) {_BE}{_UNCHANGED}", DECORATED),
    _p("the rest of the file elided", r"(?:the )?(?:rest|remainder)", ELLIPSIS),
    _p("existing code elided",
       rf"{_VERB} (?:the |all |your )?{_QUALIFIER} {_ITEMS}(?: {_BE}{_UNCHANGED})?", DECORATED),
    _p("existing code elided",
       rf"(?:the |all |your )?{_QUALIFIER} {_ITEMS} {_BE}{_UNCHANGED}", DECORATED),
    _p("existing code elided",
       rf"(?:(?:and|plus) )?(?:the |all |your |any )?(?:{_QUALIFIER} )?{_ITEMS}"
       rf"(?: {_BE}{_UNCHANGED})?", ELLIPSIS),
    _p("a truncation marker",
       rf"(?:(?:the |this )?(?:content|contents|output|input|file|text|code|response|message|"
       rf"data|log|remaining (?:code|content|lines|text)) )?{_BE}(?:truncated|trimmed|cut off|"
       rf"clipped|snipped)(?: (?:here|for brevity|for length|due to length|to save space))?",
       DECORATED),
    _p("content omitted for brevity",
       rf"(?:[\w'-]+ ){{0,4}}{_GONE} (?:here )?for (?:brevity|space|length)",
       DECORATED),
    _p("a count of omitted lines",
       rf"(?:(?:and|plus) )?{_COUNT} (?:more |other |additional |remaining |similar |"
       rf"further |more similar )?(?:lines?|characters?|chars|bytes|tokens|items|entries|"
       rf"rows|methods|functions|tests|cases|fields|elements) {_BE}{_GONE}(?: here)?",
       DECORATED),
    _p("a count of omitted lines",
       rf"(?:(?:and|plus) )?{_COUNT} (?:more|other|additional|remaining|further) "
       r"(?:lines?|characters?|chars|bytes|tokens|items|entries|rows|methods|functions|tests|"
       r"cases|fields|elements)", DECORATED),
    _p("'same as before' instead of content",
       rf"(?:{_OBJECT} )?(?:is )?(?:same as|identical to|unchanged from) (?:before|above|the "
       rf"original(?: {_OBJECT})?|the previous version|previous(?: version)?|the existing "
       rf"{_OBJECT})", DECORATED),
    _p("'unchanged' instead of content",
       r"(?:no changes?|unchanged|no change (?:here|below)|nothing changed|as before)",
       ELLIPSIS),
    _p("a snip marker", r"(?:snip|snipped|cut|8<|✂)", DECORATED),
)

#: Matched at the start of the (stripped) line: markers that tools and models put in place of
#: content, whatever follows them.
PREFIXES: tuple[Pattern, ...] = (
    _p("a trimmed-input marker",
       r"\[\s*(?:trimmed|truncated|omitted|elided) (?:input|output|content|text|file|"
       r"response|data|lines?)\b", NONE),
    _p("a trimmed-input marker",
       r"\[\s*(?:content|contents|output|input|text|file|response|data) (?:trimmed|truncated|"
       r"omitted|elided)\b", NONE),
)

_OPENERS = ("<!--", "{/*", "{#", "/*", "//", "#", "--", ";", "%", "*")
_CLOSERS = ("-->", "*/}", "#}", "*/")
_BRACKETS = {"[": "]", "(": ")", "<": ">", "{": "}"}
_ELLIPSIS_START = re.compile(r"^(?:\.{3,}|…+|(?:\. ){2,}\.)\s*")
_ELLIPSIS_END = re.compile(r"\s*(?:\.{3,}|…+|(?: \.){3,})$")
_DASHES_START = re.compile(r"^[-=~]{2,}\s*")
_DASHES_END = re.compile(r"\s*[-=~]{2,}$")
_ELLIPSIS_CHARS = (".", "…")
_DASH_CHARS = ("-", "=", "~")
_WHITESPACE = re.compile(r"\s+")
#: Every pattern needs one of these (in lowercase): a cheap first filter.
KEYWORDS = ("rest", "remainder", "existing", "original", "previous", "prior", "old", "other",
            "remaining", "unchanged", "same", "identical to", "truncat", "trimm", "cut", "clipp",
            "snip", "brevity", "for space", "for length", "omit", "elid", "shorten", "abbreviat",
            "remov", "skipp", "hidden", "left out", "not shown", "more", "additional",
            "further", "...", "…", ". .", "8<", "✂")


def strip_decoration(line: str) -> tuple[str, int]:
    """What is left of a line without its decoration, and how decorated it was
    (:data:`NONE`, :data:`DECORATED`, or :data:`ELLIPSIS`)."""
    text = line.strip()
    level = NONE
    changed = True
    while changed and text:
        changed = False
        for opener in _OPENERS:
            if text.startswith(opener):
                text, changed, level = text[len(opener):].strip(), True, max(level, DECORATED)
                break
        for closer in _CLOSERS:
            if text.endswith(closer):
                text, changed, level = text[:-len(closer)].strip(), True, max(level, DECORATED)
                break
        # text never starts or ends with whitespace here: these expressions can only match
        # when it starts or ends with their characters (the tests only save time).
        if text.startswith(_ELLIPSIS_CHARS) or text.endswith(_ELLIPSIS_CHARS):
            for ellipsis in (_ELLIPSIS_START, _ELLIPSIS_END):
                stripped = ellipsis.sub("", text)
                if stripped != text:
                    text, changed, level = stripped, True, ELLIPSIS
        if text.startswith(_DASH_CHARS) or text.endswith(_DASH_CHARS):
            for dashes in (_DASHES_START, _DASHES_END):
                stripped = dashes.sub("", text)
                if stripped != text:
                    text, changed, level = stripped, True, max(level, DECORATED)
        if len(text) >= 2 and _BRACKETS.get(text[0]) == text[-1]:
            text, changed, level = text[1:-1].strip(), True, max(level, DECORATED)
    text = _WHITESPACE.sub(" ", text.rstrip(".,:;!").strip()).lower()
    return text, level


def placeholder(line: str) -> str | None:
    """What kind of placeholder ``line`` is, or ``None``."""
    stripped = line.strip()
    if not stripped or len(stripped) > MAX_LINE:
        return None
    lower = stripped.lower()
    if not any(word in lower for word in KEYWORDS):
        return None
    for prefix in PREFIXES:
        if prefix.regex.match(lower):
            return prefix.what
    core, level = strip_decoration(stripped)
    if not core:
        return None
    for pattern in PATTERNS:
        if level >= pattern.needs and pattern.regex.fullmatch(core):
            return pattern.what
    return None


# -- finding the lines worth examining ----------------------------------------------------------
#
# Examining every line that contains a keyword is slow on large files: a Markdown file of 50 MB
# has 700,000 lines, and "more", "other" or "old" are in a good share of them. But a line can
# only be a placeholder when
#
# * it starts with "[" (every one of PREFIXES does), or
# * strip_decoration takes something off it (every pattern but the first needs DECORATED or
#   ELLIPSIS), so its stripped text starts with an opener, an ellipsis, two dashes or an opening
#   bracket, or ends with a closer, an ellipsis or two dashes, or
# * its stripped text starts as the first pattern (the only one that needs NONE) does: "rest",
#   "remainder", or "the" and whitespace.
#
# One regular expression, _SCAN, looks at every line break of the bytes: does the line before it
# end like that, or the line after it start like that (after ASCII blanks)? The words it needs
# are ASCII, and ``str.lower`` makes them of nothing else (U+0130 becomes "i" and U+0307). It
# finds more lines than it must, and stays simple: lines that end with whitespace, with the last
# byte of a non-ASCII space or of "…", or with two of ".-=~" or " ."; lines that start with the
# first byte of a non-ASCII space or of "…", or with "the" and one. The lines it finds then go
# through the tests placeholder() makes: their length, a keyword (looked for in all these lines
# at once), and placeholder() itself. So the validator reports exactly the lines placeholder()
# accepts, as it did when it examined every line with a keyword.

#: Whitespace that ``str.strip`` takes off and ``\s`` matches, apart from the line breaks: ASCII
#: and the rest (the characters for which ``str.isspace()`` is true).
_SPACE = b"\t\x0b\x0c\x1c\x1d\x1e\x1f "
WIDE_SPACES = ("\x85", "\xa0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004",
               "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a", "\u2028", "\u2029",
               "\u202f", "\u205f", "\u3000")
_ELLIPSIS = "…".encode()


def _byte_class(values: set[int]) -> bytes:
    return b"[" + b"".join(re.escape(bytes([value])) for value in sorted(values)) + b"]"


_SPACE_CLASS = _byte_class(set(_SPACE))
#: The first bytes of the non-ASCII spaces and of "…".
_WIDE_FIRST = {space.encode()[0] for space in WIDE_SPACES} | {_ELLIPSIS[0]}
_START = b"|".join([
    _byte_class(set(b"<{/#;%*[(") | _WIDE_FIRST),  # openers <!-- {/* {# /* // # ; % *,
    # brackets [ ( < {; a non-ASCII space (the stripped text starts after it), …
    rb"[-=~][-=~]",  # the opener --, dashes
    rb"\.[. ]",  # ellipses ... and . . .
    rb"[tT][hH][eE]" + _byte_class(set(_SPACE) | _WIDE_FIRST),  # the rest, the remainder
    rb"[rR][eE](?:[sS][tT]|[mM][aA][iI][nN][dD][eE][rR])",  # rest, remainder
])
#: The last byte of a line that ends like a placeholder: closers --> */} #} */, whitespace (the
#: stripped text ends before it), the last bytes of the non-ASCII spaces and of "…".
_END_BYTE = _byte_class(set(b">}/") | set(_SPACE) | {space.encode()[-1] for space in WIDE_SPACES}
                        | {_ELLIPSIS[-1]})
_END_PAIR = rb"[-=~. ][-=~.]"  # dashes, ellipses ... and . . .
_SCAN = re.compile(rb"\n(?:(?<=(?:[\x00-\xff]" + _END_BYTE + rb"|" + _END_PAIR + rb")\n)"
                   rb"|" + _SPACE_CLASS + rb"*+(?:" + _START + rb")[^\n]*+)")
#: The keywords, and U+212A (Kelvin sign), which ``str.lower`` turns into "k". (It turns U+0130
#: into "i" and U+0307, which no keyword goes on with; the other keyword characters are ASCII
#: or have no case.)
_KEYWORD_BYTES = tuple(word.encode() for word in KEYWORDS) + ("\u212a".encode(),)


def _line_spans(data: bytes) -> list[tuple[int, int]]:
    """``(start, end)`` of the lines of ``data`` (which end at ``\\n``) that can be
    placeholders, and of some that cannot, in order."""
    size = len(data)
    first = data.find(b"\n")
    spans = {0: size if first == -1 else first}
    if not data.endswith(b"\n"):
        spans[data.rfind(b"\n") + 1] = size
    find, rfind = data.find, data.rfind
    for match in _SCAN.finditer(data):
        at, end = match.span()
        if end > at + 1:  # the line after the break starts like a placeholder
            spans[at + 1] = end
            continue
        # The line before the break ends like one. The line after it has not been looked at.
        spans[rfind(b"\n", 0, at) + 1] = at
        after = find(b"\n", at + 1)
        spans[at + 1] = size if after == -1 else after
    return sorted(spans.items())


def _lines_to_examine(data: bytes) -> list[tuple[int, bytes]]:
    """``(start, line)`` of the lines of ``data`` (which end at ``\\n``) that can be
    placeholders: the lines of :func:`_line_spans` that are short enough and have a keyword."""
    lines = []
    for start, end in _line_spans(data):
        line = data[start:end]
        if len(line) > MAX_LINE and len(line.decode("utf-8", "replace").strip()) > MAX_LINE:
            continue  # (a line has at least as many bytes as characters)
        lines.append((start, line))
    blob = b"\n".join([line for _, line in lines]).lower()
    starts = list(itertools.accumulate([len(line) + 1 for _, line in lines], initial=0))
    chosen: set[int] = set()
    for word in _KEYWORD_BYTES:
        at = blob.find(word)
        while at != -1:
            index = bisect.bisect_right(starts, at) - 1
            chosen.add(index)
            at = blob.find(word, starts[index + 1])
    return [lines[index] for index in sorted(chosen)]


@hookimpl
def validate_lines(request):
    data = request.content
    if b"\r" in data:  # lines end at \r\n, \n and \r: the same lines, ending at \n
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    found = []
    number, counted = 1, 0
    for start, raw in _lines_to_examine(data):
        line = raw.decode("utf-8", "replace")
        what = placeholder(line)
        if what is None:
            continue
        number += data.count(b"\n", counted, start)
        counted = start
        column = len(line) - len(line.lstrip()) + 1
        message = (f"placeholder instead of content: {line.strip()!r} ({what}); write the "
                   "actual lines")
        # The line on its own has the same context (problems escaped) as in the content.
        found.append(Issue(number, column, "placeholder", message,
                           LineView(raw).context(1, column)))
    return found or None
