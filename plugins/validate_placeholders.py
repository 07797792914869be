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

import itertools
import re
import string
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orion.api import Issue, LineView, hookimpl

if TYPE_CHECKING:
    from orion.api import ValidationRequest

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
# has 700,000 lines, and "more", "other" or "old" are in a good share of them. Two steps narrow
# the lines down, each keeping every line placeholder() accepts (and some it does not), and
# placeholder() decides on the lines left. So the validator reports exactly the lines
# placeholder() accepts, as it did when it examined every line with a keyword.
#
# 1. The shape of the line. A line can only be a placeholder when
#
#    * it starts with "[" (every one of PREFIXES does), or
#    * strip_decoration takes something off it (every pattern but the first needs DECORATED or
#      ELLIPSIS): its stripped text starts with an opener, an ellipsis, two dashes or an opening
#      bracket, or ends with a closer, an ellipsis or two dashes, or
#    * its stripped text starts as the first pattern (the only one that needs NONE) does:
#      "rest", "remainder", or "the", whitespace and one of these.
#
#    And what strip_decoration leaves holds only what the patterns match: word characters,
#    whitespace and ,.'<- ("1,000", "8<", "as-is"). What it takes off the start is whitespace
#    and the characters of the openers, ellipses, dashes and opening brackets; off the end,
#    whitespace and those of the closers, ellipses, dashes and closing brackets, and the .,:;!
#    it strips last. So a line that starts like a placeholder goes on to its end as _TAIL says
#    (unless it is one of PREFIXES): a heading "## Words (12)", "(" in its middle, is not one.
#
#    One regular expression, _SCAN, looks at every line break of the bytes: does the line after
#    it start like that (after ASCII blanks) and go on as _TAIL says, or does the line before it
#    end like that? (When the line before does, _START looks at the line after.) The words it
#    needs are ASCII, and str.lower makes them of nothing else (U+0130 becomes "i" and U+0307).
#    It finds more lines than it must, and stays simple: every byte of a non-ASCII character
#    passes for any character _TAIL allows, a line that starts with a non-ASCII space is kept
#    whatever follows, and so is one that ends with a single "-", "=" or "~".
#
# 2. Keywords. placeholder() examines only lines with a keyword, and each pattern needs one: an
#    ellipsis, "8<", "✂", or a keyword of letters that starts a word of the pattern. So in a line
#    it accepts, such a keyword comes after something other than an ASCII letter, with a run of
#    whitespace for each of its spaces; or the line holds one of the other keywords, or U+212A
#    (Kelvin sign), which str.lower turns into "k". The lines of step 1 are joined, their bytes
#    but the ASCII letters made spaces (and these lowercase), and _WORD_KEYWORD looks at every
#    space for a keyword of letters; _OTHER_KEYWORDS look for the rest in the lines as they are.
#
# sre, Python's regular expression engine, is quick to find a literal byte such as the line
# break an expression starts with, and to skip an alternative that starts with a byte or a class
# the text does not have there; lookbehinds and alternatives that start otherwise cost more.
# The expressions are built that way.

#: Whitespace that ``str.strip`` takes off and ``\s`` matches, apart from the line breaks: ASCII
#: and the rest (the characters for which ``str.isspace()`` is true).
_SPACE = b"\t\x0b\x0c\x1c\x1d\x1e\x1f "
WIDE_SPACES = ("\x85", "\xa0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004",
               "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a", "\u2028", "\u2029",
               "\u202f", "\u205f", "\u3000")
_ELLIPSIS = "…".encode()
#: The non-ASCII characters at the edges of what strip_decoration takes off.
_WIDE_EDGES = (*(space.encode() for space in WIDE_SPACES), _ELLIPSIS)
_NON_ASCII = range(0x80, 0x100)


def _byte_class(values: Iterable[int], negate: bool = False) -> bytes:
    return (b"[^" if negate else b"[") + b"".join(
        re.escape(bytes([value])) for value in sorted(set(values))) + b"]"


def _either(alternatives: Iterable[bytes]) -> bytes:
    return b"(?:" + b"|".join(alternatives) + b")"


_BLANK = _byte_class(_SPACE)
_ANY_SPACE = _either([_BLANK, *(re.escape(space.encode()) for space in WIDE_SPACES)])
_EST = rb"(?:[sS][tT]|[mM][aA][iI][nN][dD][eE][rR])"  # "rest", "remainder" after their "re"
#: The rest of a line that starts like a placeholder, to its end: what strip_decoration takes off
#: the start, what the patterns match, what it takes off the end.
_TAIL = (_byte_class([*b"<!-{/*#;%.=~[(", *_SPACE, *_NON_ASCII]) + b"*+"
         + _byte_class([*(string.ascii_letters + string.digits + "_ ,.'<-").encode(), *_SPACE,
                        *_NON_ASCII]) + b"*+"
         + _byte_class([*b"->*/}#.=~]),:;!", *_SPACE, *_NON_ASCII]) + b"*+(?![^\n])")
#: The first byte of the stripped text of a line that starts like a placeholder ...
_FIRST = {*b"<{#;%*([/-=~.tTrR", *(edge[0] for edge in _WIDE_EDGES)}
#: ... and what follows, by that byte.
_AFTER_FIRST = _either([
    rb"(?<=[<{#;%*(])" + _TAIL,  # openers # ; % * and the first bytes of <!-- {/* {#, brackets
    rb"(?<=\[)[^\n]*+",  # "[": PREFIXES and a bracket
    rb"[/*](?<=/.)" + _TAIL,  # // /*
    rb"[-=~](?<=[-=~].)" + _TAIL,  # -- and dashes
    rb"[. ](?<=\..)" + _TAIL,  # ... and . . .
    rb"[hH][eE](?<=[tT]..)" + _ANY_SPACE + rb"++[rR][eE]" + _EST + _TAIL,  # the rest, ...
    rb"[eE](?<=[rR].)" + _EST + _TAIL,  # rest, remainder
    re.escape(_ELLIPSIS[1:]) + _TAIL,  # …
    # a non-ASCII space: the stripped text starts after it (maybe with "[")
    _either(re.escape(space.encode()[1:]) for space in WIDE_SPACES) + rb"[^\n]*+",
])
_START_ALTERNATIVES = [
    _byte_class(_FIRST - {ord("-")}) + _AFTER_FIRST,
    rb"-[-=~]" + _TAIL,  # "- item" lines are common: a quicker test of their own
    _BLANK + _BLANK + b"*+" + _byte_class(_FIRST) + _AFTER_FIRST,
]
#: The end of the line before a line break (looking back from after it) that can end a
#: placeholder: a closer --> */} #} */, dashes, an ellipsis ... . . . …, whitespace. Many lines
#: end with "." (but not after another "." or a " "); a few with the last byte of a
#: non-ASCII character that is neither a space nor "…" (the byte before it differs).
_END = (b"(?<=" + _byte_class([*b">}/-=~.", *_SPACE, *(edge[-1] for edge in _WIDE_EDGES)])
        + rb"\n)(?<![^. ]\.\n)(?<!"
        + _byte_class([edge[-2] for edge in _WIDE_EDGES], negate=True)
        + _byte_class([edge[-1] for edge in _WIDE_EDGES]) + b"\n)")
_SCAN = re.compile(b"\n" + _either([_END, *_START_ALTERNATIVES]))
_START = re.compile(_either(_START_ALTERNATIVES))

_LETTER_KEYWORDS = sorted(word.encode() for word in KEYWORDS
                          if word.isascii() and word.replace(" ", "").isalpha())
#: A keyword of letters after a space, with a run of spaces for each of its spaces, in text
#: whose bytes are spaces but for the ASCII letters (one alternative per first letter) ...
_WORD_KEYWORD = re.compile(b" " + _either(
    bytes([first]) + _either(word[1:].replace(b" ", b" +") for word in words)
    for first, words in itertools.groupby(_LETTER_KEYWORDS, key=lambda word: word[0])))
_LETTERS_ONLY = bytes(value if 0x61 <= value <= 0x7a else value + 0x20 if 0x41 <= value <= 0x5a
                      else 0x20 for value in range(256))
#: ... and the other keywords and U+212A, one expression for each first byte.
_OTHER_KEYWORDS = tuple(
    re.compile(re.escape(bytes([first])) + _either(re.escape(word[1:]) for word in words))
    for first, words in itertools.groupby(sorted(
        {word.encode() for word in KEYWORDS} - set(_LETTER_KEYWORDS) | {"\u212a".encode()}),
        key=lambda word: word[0]))


#: Every character ``str.strip()`` removes (``str.isspace()``), but the line break.
WHITE_SPACE = ("\t\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004"
               "\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_WHITE = b"|".join(re.escape(c.encode()) for c in WHITE_SPACE)
_WHITE_RUN = re.compile(b"(?:" + _WHITE + b")*")
#: The most bytes of a line that strips to MAX_LINE characters, not counting its white space.
_CORE = 4 * MAX_LINE


def _fits(data: bytes, start: int, end: int) -> bool:
    """Whether ``data[start:end]`` (one line) may strip to MAX_LINE characters or fewer, found
    without a copy of it: a line of a gigabyte is not sliced three times over to be looked at."""
    if end - start <= _CORE:
        return True
    run = _WHITE_RUN.match(data, start, end)
    lead = run.end() if run is not None else start
    # What stays after strip() starts at ``lead`` and ends by ``lead + _CORE``; white space
    # follows it up to the end. Its characters take at most 3 bytes, so one of the next three
    # positions starts one (or the end).
    return any(_WHITE_RUN.fullmatch(data, min(lead + _CORE + k, end), end) for k in range(3))


def _shaped_lines(data: bytes) -> tuple[list[int], list[bytes]]:
    """The starts and the lines of ``data`` (which end at ``\\n``) that can be placeholders by
    their shape (step 1), and of some that cannot, in order."""
    first = data.find(b"\n")
    first = len(data) if first == -1 else first
    starts, lines = [0], [data[:first] if _fits(data, 0, first) else b""]  # no break before
    for at, end in map(re.Match.span, _SCAN.finditer(data)):
        if end > at + 1:  # the line after the break starts like a placeholder
            starts.append(at + 1)
            lines.append(data[at + 1:end])
            continue
        # The line before the break ends like one (and may be there already) ...
        start = data.rfind(b"\n", 0, at) + 1
        if starts[-1] != start and _fits(data, start, at):
            starts.append(start)
            lines.append(data[start:at])
        # ... and the line after it has not been looked at.
        after = _START.match(data, at + 1)
        if after:
            starts.append(at + 1)
            lines.append(after.group())
    last = data.rfind(b"\n") + 1
    if last < len(data) and starts[-1] != last and _fits(data, last, len(data)):
        # no line break after the last line
        starts.append(last)
        lines.append(data[last:])
    return starts, lines


def _with_keywords(lines: list[bytes]) -> list[int]:
    """The indexes of the ``lines`` that can hold a keyword (step 2), in order."""
    text = b"\n".join([b"", *lines])  # every line after a line break
    chosen: set[int] = set()
    for pattern, searched, before in [(_WORD_KEYWORD, text.translate(_LETTERS_ONLY), 1),
                                      *((other, text, 0) for other in _OTHER_KEYWORDS)]:
        index, counted = -1, 0
        found = pattern.search(searched)
        while found:
            at = found.start() + before  # where the keyword starts
            index += text.count(b"\n", counted, at)
            counted = at
            chosen.add(index)
            end = text.find(b"\n", at)
            if end == -1:
                break
            found = pattern.search(searched, end + 1 - before)  # on from the next line
    return sorted(chosen)


def _lines_to_examine(data: bytes) -> list[tuple[int, bytes]]:
    """``(start, line)`` of the lines of ``data`` (which end at ``\\n``) that can be
    placeholders: those of :func:`_shaped_lines` that can hold a keyword."""
    starts, lines = _shaped_lines(data)
    return [(starts[index], lines[index]) for index in _with_keywords(lines)]


@hookimpl
def validate_lines(request: ValidationRequest) -> list[Issue] | None:
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
