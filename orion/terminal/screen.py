"""The chat's screen: one place decides what goes where, so the model's reply, Orion's lines,
a write's progress and the ``you>`` prompt never garble each other.

On a terminal (``orion chat`` typed by a person):

- A reply is rendered as Markdown, word-wrapped at the terminal's width (rich). Each block
  (a paragraph, a list, a code block: :mod:`orion.runtime.blocks`) is printed once, when it is
  finished; the block still growing is drawn above the prompt and replaced as it grows.
- A write's content is not printed: while it streams, a preview of its last few lines and one
  live line (``writing notes.md: 120 lines, 4.1 KiB``) are drawn above the prompt; when the
  write ends they go, and the write's report stays, with a short summary of what it changed
  in an existing file (``+12 -3 lines``; ``orion sessions diff ID`` has the whole diff).
- Orion's lines (notices, tool calls, its prompts to the model) start on lines of their own.
- The prompt (:mod:`orion.terminal.prompt`) stays at the bottom: everything above is printed
  above it; what the user typed shows once, on its line.

Not on a terminal (a script, a pipe, a file), the reply's text goes to stdout unchanged, as it
arrives, and everything else to stderr, one line at a time; progress is a plain line when the
write's state changes and every 50 lines. With stdin not a terminal but stdout one, replies are
still rendered, block by block, and the live line is the bottom line of the terminal.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from orion.terminal.console import is_terminal
from orion.runtime.blocks import MarkdownBlocks
from orion.terminal.render import Renderer, WriteTail, live_line
from orion.runtime.report import ConsoleReporter, OpenWrite

if TYPE_CHECKING:
    from collections.abc import Callable

    from orion.terminal.prompt import ChatPrompt
    from orion.runtime.report import Progress
    from orion.runtime.runtime import Runtime

CLEAR_LINE = "\r\x1b[2K"

#: The block still growing is previewed by its last lines: at most this share of the screen.
PREVIEW_SHARE = 3
#: ... rendered from at most this many of its last source lines (a long code block is not
#: rendered whole at every chunk; it is, once, when it ends).
PREVIEW_SOURCE_LINES = 40


class ChatScreen(ConsoleReporter):
    """The reporter of ``orion chat``: the reply on ``out`` (stdout), everything else on the
    console (stderr). :meth:`attach` gives it the runtime (the write open in it, if any, is
    asked of its plugins: ``open_write``); ``editor`` is the terminal's prompt while it
    runs."""

    def __init__(self, console=None, *, out) -> None:
        super().__init__(console, stream=True, out=out)
        self.markdown = is_terminal(out)  # replies are rendered on a terminal
        self.terminal = bool(self.console.is_terminal)  # Orion's lines go to one
        self.editor: ChatPrompt | None = None
        self.echo = True  # say what the user sent (the prompt shows it itself)
        self.runtime: Runtime | None = None
        color = self.console.color_system if self.terminal else None
        if self.markdown and not self.terminal:
            from rich.console import Console

            color = Console(file=out).color_system
        self._renderer = Renderer(color)
        self._in_message = False  # the model is streaming a message
        self._write = False  # ... which is a write's (a session was open when it started)
        self._reply: list[str] = []  # the message's text as sent, unless it is a write's
        self._blocks = MarkdownBlocks()
        self._blocks_shown = False  # a block of this message was printed
        self._tail: WriteTail | None = None  # the end of a write's text, for the preview
        self._progress: tuple[str, Progress | None] = ("", None)  # a session's, by its id
        self._preview: tuple[tuple[str, int, int], str] = (("", 0, 0), "")
        self._live_drawn = False  # without a prompt: the live line is on the terminal
        self._logged: tuple[str, str, int] | None = None  # not a terminal: the last progress
        self._changes: list[Callable[[], str]] = []  # files changed, said after the report

    def attach(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _open_write(self) -> OpenWrite | None:
        runtime = self.runtime
        if runtime is None:
            return None
        return runtime.plugins.hook.open_write(host=runtime)

    # -- where output goes -----------------------------------------------------------------

    def _width(self) -> int:
        if self.editor is not None:
            return self.editor.size()[0]
        for stream in (self.out, self.console.file):
            try:
                return os.get_terminal_size(stream.fileno()).columns
            except (OSError, ValueError, AttributeError):
                continue
        return 80

    def _emit(self, text: str, *, err: bool) -> None:
        """Whole lines that stay on the screen (escape codes allowed), to stderr or stdout."""
        on_terminal = self.terminal if err else self.markdown
        if self.editor is not None and on_terminal:
            self.editor.print_above(text)
            return
        lift = self._live_drawn and on_terminal
        if lift:
            self._err(CLEAR_LINE)
        stream = self.console.file if err else self.out
        stream.write(text)
        stream.flush()
        if lift:
            self._draw_live()

    def _err(self, text: str) -> None:
        self.console.file.write(text)
        self.console.file.flush()

    def _changed(self) -> None:
        """The lines drawn above the prompt changed."""
        if self.editor is not None:
            self.editor.invalidate()
        elif self._live_drawn:
            self._draw_live()

    # -- Orion's lines ---------------------------------------------------------------------

    def say(self, markup: str) -> None:
        if self.terminal:  # a line of Orion's is one line, however long (replies are wrapped)
            self._emit(self._renderer.render(markup, self._width(), wrap=False), err=True)
        else:
            self.console.print(markup)

    def user(self, text: str) -> None:
        if self.echo:
            super().user(text)

    def tool(self, outcome) -> None:
        super().tool(outcome)
        self._announce_writes()

    def prompt(self, text: str) -> None:
        super().prompt(text)
        self._announce_writes()  # a write session's report is its prompt to the model

    # -- the reply -------------------------------------------------------------------------

    def text(self, delta: str) -> None:
        if not self._in_message:
            self._start_message()
        if self._write:
            if not self.markdown:
                self.out.write(delta)  # not a terminal: the text as it arrives, unchanged
                self.out.flush()
            elif self._tail is not None:
                self._tail.add(delta)  # drawn with the live line, which the session updates
            return
        self._reply.append(delta)
        if not self.markdown:
            self.out.write(delta)
            self.out.flush()
            return
        for block in self._blocks.feed(delta):
            self._show_block(block)
        if self.editor is not None:
            self.editor.invalidate()

    def _start_message(self) -> None:
        self._in_message = True
        self._write = self._open_write() is not None
        self._reply = []
        if self._write and self.markdown and self.editor is not None:
            self._tail = WriteTail()

    def _show_block(self, block: str) -> None:
        if not block.strip():
            return
        rendered = self._renderer.markdown(block, self._width())
        self._emit(("\n" if self._blocks_shown else "") + rendered, err=False)
        self._blocks_shown = True

    def message_end(self, finish: Any) -> None:
        if self._in_message:
            self.stop_message()
        elif not self.markdown:
            self.out.write("\n")  # as text arrived: the message ends its line
            self.out.flush()

    def stop_message(self) -> str | None:
        """The message ends (or the user stopped it): what it said, as sent, or None when it
        was a write's (the write session has that). What showed stays on the screen."""
        if not self._in_message:
            return ""
        said = None if self._write else "".join(self._reply)
        if not self.markdown:
            self.out.write("\n")
            self.out.flush()
        elif not self._write:
            self._show_block(self._blocks.end())
        self._in_message = self._write = self._blocks_shown = False
        self._reply, self._tail = [], None
        self._changed()
        return said

    # -- a write ---------------------------------------------------------------------------

    def progress(self, progress: Progress) -> None:
        write = self._open_write()
        self._progress = (write.id if write is not None else "", progress)
        if self.editor is not None:
            self.editor.invalidate()
        elif self.terminal:
            self._draw_live()
        else:
            self._log_progress(progress)

    def progress_done(self) -> None:
        if self._live_drawn:
            self._err(CLEAR_LINE)
            self._live_drawn = False
        self._changed()

    def _live_text(self) -> str | None:
        """The live line of the write session that is open, if any; the word comes from its
        lifecycle's tags as it is now."""
        write = self._open_write()
        if write is None:
            return None
        write_id, progress = self._progress
        if write_id != write.id or progress is None:  # none from this write yet (it began,
            progress = write.progress()               # or was adopted)
            self._progress = (write.id, progress)
        return live_line(progress, write.word)

    def _draw_live(self) -> None:
        text = self._live_text()
        if text is None:
            if self._live_drawn:
                self._err(CLEAR_LINE)
                self._live_drawn = False
            return
        self._err(CLEAR_LINE + text[:self._width() - 1])
        self._live_drawn = True

    def _log_progress(self, progress: Progress) -> None:
        text = self._live_text()
        if text is None:
            return
        word = text.split(" ", 1)[0]
        last = self._logged
        if last is None or last[:2] != (word, progress.target) or \
                progress.lines // self.PLAIN_EVERY_LINES > last[2] // self.PLAIN_EVERY_LINES:
            self._logged = (word, progress.target, progress.lines)
            from rich.markup import escape

            self.console.print(escape(text), highlight=False)

    def footer(self, width: int, height: int) -> str:
        """The lines drawn above the prompt: the reply's block still growing, or a write's
        last lines and its live line."""
        lines = ""
        if self._in_message and not self._write:
            lines = self._growing_block(width, height)
        elif self._tail is not None:
            lines = "".join(self._renderer.dim(line, width) for line in self._tail.lines())
        live = self._live_text()
        if live is not None:
            lines += self._renderer.render(f"[cyan]{_escape(live)}[/cyan]", width)
        return lines

    def _growing_block(self, width: int, height: int) -> str:
        source = self._blocks.tail(PREVIEW_SOURCE_LINES)
        if not source.strip():
            return ""
        key = (source, width, height)
        if self._preview[0] != key:  # drawn again at every redraw: rendered once per change
            rendered = self._renderer.markdown(source, width).splitlines(keepends=True)
            keep = max(3, height // PREVIEW_SHARE)
            self._preview = (key, "".join(rendered[-keep:]))
        return self._preview[1]

    def changed(self, summary: Callable[[], str]) -> None:
        self._changes.append(summary)

    def _announce_writes(self) -> None:
        """After a write's report: what it changed in a file that existed."""
        changes, self._changes = self._changes, []
        for summary in changes:
            self.notice(summary())

    def close(self) -> None:
        if self._live_drawn:
            self._err(CLEAR_LINE)
            self._live_drawn = False


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
