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
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from orion import hookimpl
from orion.validation import Issue
from orion.write_session.repair import LineView, TEXT_LINE_BREAK

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
       rf"(?:(?:and|plus) )?\d[\d,.]*k? (?:more |other |additional |remaining |similar |"
       rf"further |more similar )?(?:lines?|characters?|chars|bytes|tokens|items|entries|"
       rf"rows|methods|functions|tests|cases|fields|elements) {_BE}{_GONE}(?: here)?",
       DECORATED),
    _p("a count of omitted lines",
       r"(?:(?:and|plus) )?\d[\d,.]*k? (?:more|other|additional|remaining|further) "
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
        for ellipsis in (_ELLIPSIS_START, _ELLIPSIS_END):
            stripped = ellipsis.sub("", text)
            if stripped != text:
                text, changed, level = stripped, True, ELLIPSIS
        for dashes in (_DASHES_START, _DASHES_END):
            stripped = dashes.sub("", text)
            if stripped != text:
                text, changed, level = stripped, True, max(level, DECORATED)
        if len(text) >= 2 and _BRACKETS.get(text[0]) == text[-1]:
            text, changed, level = text[1:-1].strip(), True, max(level, DECORATED)
    text = re.sub(r"\s+", " ", text.rstrip(".,:;!").strip()).lower()
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


def _candidates(lower: str) -> list[int]:
    """The 0-based numbers of the lines of ``lower`` that contain a keyword."""
    starts = [0] + [match.end() for match in TEXT_LINE_BREAK.finditer(lower)]
    found: set[int] = set()
    for word in KEYWORDS:
        index = lower.find(word)
        while index != -1:
            line = bisect.bisect_right(starts, index) - 1
            found.add(line)
            index = lower.find(word, starts[line + 1]) if line + 1 < len(starts) else -1
    return sorted(found)


@hookimpl
def validate_content(request):
    text = request.content.decode("utf-8", "replace")
    lines = TEXT_LINE_BREAK.split(text)
    found = []
    # Lowercasing may change lengths, never line breaks: line i of one is line i of the other.
    for index in _candidates(text.lower()):
        line = lines[index]
        what = placeholder(line)
        if what is not None:
            found.append((index + 1, len(line) - len(line.lstrip()) + 1,
                          f"placeholder instead of content: {line.strip()!r} ({what}); write "
                          "the actual lines"))
    if not found:
        return None
    view = LineView(request.content)
    return [Issue(line, column, "placeholder", message, view.context(line, column))
            for line, column, message in found]
