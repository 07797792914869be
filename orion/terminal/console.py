"""Rich consoles for the command line that do not cut output going to a pipe or a file.

Rich sizes its output to the terminal, and to 80 columns when there is none, so piped through
``grep`` or saved to a file, tables would be wrapped and messages broken at 80 columns. Not
on a terminal (and without ``COLUMNS`` set), these consoles are as wide as the longest line
needs: a table keeps one row per line.
"""

from __future__ import annotations

import os

from rich.console import Console, ConsoleDimensions

#: The width when not on a terminal: far beyond any line Orion prints (tables are as wide as
#: their content, so nothing is padded to it).
UNBOUNDED = 1 << 16


class PipeConsole(Console):
    """A :class:`rich.console.Console` that uses the terminal's width on a terminal and
    :data:`UNBOUNDED` otherwise. Decided at each print, so a console made at import time
    follows the stream it writes to then (as under ``click.testing.CliRunner``)."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        # A width given to the console (``width=`` or ``console.width = n``) is kept.
        if (self.is_terminal or self._width is not None
                or os.environ.get("COLUMNS", "").isdigit()):
            return size
        return ConsoleDimensions(UNBOUNDED, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


def is_terminal(stream: object) -> bool:
    """Whether ``stream`` (a file object, possibly closed or replaced) is a terminal."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False


def console(*, stderr: bool = False) -> Console:
    """The console for ``orion`` output: stdout (data, tables) or stderr (messages, which
    rich does not colour by guesswork)."""
    return PipeConsole(stderr=stderr, highlight=not stderr)
