"""A ``marker_regex`` searched with a bound (FS-21, docs/design/faults.md).

The model writes the pattern, so it can be one that backtracks without end (``(a|aa)+$``
against a line of ``a`` and a ``!``): Python's own engine would search it for ever, holding
the interpreter so that not even SIGTERM gets through. The pattern is compiled by :mod:`re`
(its syntax, and its error messages, are the ones the model was told of) and searched by the
``regex`` engine, which takes the same syntax and stops when its time is up. The time is
counted for the whole file: one second, and one more per MiB.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import regex

#: The time a search may take, and how much more a MiB of file gives it.
SECONDS = 1.0
SECONDS_PER_MIB = 1.0


class PatternError(ValueError):
    """The pattern is not a regular expression (``why``: what is wrong, and where)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class SearchTooLong(TimeoutError):
    """The search ran out of time at line ``line`` (1-based) after ``seconds``."""

    def __init__(self, line: int, seconds: float) -> None:
        super().__init__(f"stopped at line {line} after {seconds:g} s")
        self.line, self.seconds = line, seconds


@dataclass(frozen=True)
class Found:
    """One match: its line's text, and where it starts and ends in that line."""

    line: int  # 0-based
    text: str
    start: int
    end: int


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """The pattern, ready to search; :class:`PatternError` when it is not one."""
    try:
        re.compile(pattern)
        return regex.compile(pattern, regex.VERSION0)
    except re.error as exc:
        at = f" at position {exc.pos}" if exc.pos is not None else ""
        raise PatternError(f"{exc.msg}{at}") from exc
    except regex.error as exc:  # a pattern re takes and regex does not: its words
        raise PatternError(str(exc)) from exc


def budget(size: int) -> float:
    """The seconds a search of a file of ``size`` bytes may take."""
    return SECONDS + SECONDS_PER_MIB * size / (1 << 20)


def search_lines(compiled: regex.Pattern[str], lines: list[str],
                 seconds: float) -> Iterator[Found]:
    """Every match of ``compiled`` in each of ``lines``, in order, within ``seconds`` for them
    all; :class:`SearchTooLong` when the time is up."""
    deadline = time.monotonic() + seconds
    for number, text in enumerate(lines):
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            found = list(compiled.finditer(text, timeout=left))
        except TimeoutError:
            raise SearchTooLong(number + 1, seconds) from None
        for match in found:
            yield Found(number, text, match.start(), match.end())
