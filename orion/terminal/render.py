"""What ``orion chat`` draws, as text for a terminal: replies rendered as Markdown (rich), and
the lines that stand for a write while it streams (a bounded preview of its last lines and the
live line). Everything here returns strings; :mod:`orion.terminal.screen` decides where they go.
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
    from rich.console import RenderableType

    from orion.runtime.report import Progress

#: How many of a write's last lines the preview shows while it streams.
PREVIEW_LINES = 3
#: How much of a write's streamed text the preview keeps: enough for its last lines, however
#: long the content (the journal has all of it).
PREVIEW_KEEP_CHARS = 4096

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_PADDING = re.compile(r" +\n")


def size_text(size: int) -> str:
    return f"{size / 1024:.1f} KiB" if size >= 1024 else f"{size} B"


def live_line(progress: Progress, word: str) -> str:
    """The live line of a write: ``writing notes.md: 120 lines, 4.1 KiB``, and the
    continuation while the model goes on after a cut-off."""
    lines = f"{progress.lines} line{'' if progress.lines == 1 else 's'}"
    line = f"{word} {progress.target}: {lines}, {size_text(progress.bytes)}"
    if progress.continuation:
        line += f", continuation {progress.continuation}/{progress.max_continuations}"
    return line


class WriteTail:
    """The end of a write's streamed text, for the preview: cheap to feed (it runs for every
    chunk of a file that may be megabytes), and never more than :data:`PREVIEW_KEEP_CHARS`
    characters after it is read."""

    def __init__(self) -> None:
        self._pieces: list[str] = []
        self._size = 0

    def add(self, delta: str) -> None:
        self._pieces.append(delta)
        self._size += len(delta)
        if self._size > 4 * PREVIEW_KEEP_CHARS:
            self._compact()

    def _compact(self) -> str:
        text = "".join(self._pieces)[-PREVIEW_KEEP_CHARS:]
        self._pieces, self._size = [text], len(text)
        return text

    def lines(self, count: int = PREVIEW_LINES) -> list[str]:
        """The last ``count`` lines (the one still streaming included), as they can be shown:
        tabs expanded, control characters as ``?``."""
        text = self._compact()
        if text.endswith("\n"):
            text = text[:-1]
        shown = text.split("\n")[-count:] if text else []
        return [_CONTROL.sub("?", line.replace("\r", "").expandtabs(4)) for line in shown]


class Renderer:
    """Renders rich renderables to text with the escape codes of the terminal they are for:
    its colours, at a width given at each call (the terminal's, which may change)."""

    def __init__(self, color_system: str | None) -> None:
        self._buffer = io.StringIO()
        self._console = Console(file=self._buffer, force_terminal=color_system is not None,
                                color_system=color_system,  # type: ignore[arg-type]
                                highlight=False, emoji=False, legacy_windows=False,
                                force_jupyter=False, force_interactive=False)

    def render(self, renderable: RenderableType, width: int, *, wrap: bool = True) -> str:
        """``renderable`` as text; with ``wrap`` false a long line stays one line, for the
        terminal to wrap (copied or captured, it reads whole)."""
        self._console.width = max(width, 20)
        self._console.print(renderable, soft_wrap=not wrap)
        text = self._buffer.getvalue()
        self._buffer.seek(0)
        self._buffer.truncate()
        return text

    def markdown(self, text: str, width: int) -> str:
        """``text`` as Markdown, word-wrapped at ``width``; links show their address. A line
        break in a paragraph stays one, as chat interfaces show it (Markdown would join the
        lines). Without the blank lines rich puts around some blocks (a list, a code block) and
        the spaces it pads lines with: blocks rendered one at a time are spaced by the
        caller."""
        from rich.markdown import Markdown

        markdown = Markdown(text, hyperlinks=False)
        for token in markdown.parsed:
            for child in token.children or ():
                if child.type == "softbreak":
                    child.type = "hardbreak"
        lines = _PADDING.sub("\n", self.render(markdown, width))
        return lines.strip("\n") + "\n" if lines.strip() else ""

    def dim(self, line: str, width: int) -> str:
        """A preview line: dim, cut to ``width`` columns."""
        from rich.text import Text

        text = Text(line, style="dim", no_wrap=True, overflow="ellipsis")
        text.truncate(width, overflow="ellipsis")
        return self.render(text, width)
