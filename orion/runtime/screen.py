"""The chat's terminal: one place decides what goes where on the screen, so the model's streamed
text, Orion's lines, the live progress line of a write and the ``you>`` prompt never garble each
other.

Three rules keep it readable:

- The live progress line is always the bottom line, and is drawn only at the start of a line.
  While it shows, streamed text is written a whole line at a time above it (the unfinished line
  is held back until its newline, or until the message ends).
- Orion's own lines (notices, tool results) start on a line of their own: a half-written line of
  model text is ended first.
- Output that arrives while the prompt waits for the user (an idle prompt fired, the model
  answered it) starts below the prompt, and the prompt is drawn again once the screen is quiet.
"""

from __future__ import annotations

import asyncio
from typing import Any

from orion.runtime.report import ConsoleReporter
from orion.write_session.progress import Progress

CLEAR_LINE = "\r\x1b[2K"

#: How long the screen must stay quiet before the prompt is drawn again under background output.
PROMPT_REDRAW_S = 0.2


class ChatScreen(ConsoleReporter):
    """The reporter of ``orion chat``: streamed text on ``out`` (stdout), everything else on the
    console (stderr). When both are the same terminal the rules above apply; otherwise (output
    piped to a file) text passes through as it arrives and only the prompt is managed."""

    def __init__(self, console=None, *, out) -> None:
        super().__init__(console, stream=True, out=out)
        isatty = getattr(out, "isatty", None)
        self.shared = bool(self.console.is_terminal and isatty is not None and isatty())
        self._at_line_start = True  # on the screen, across both streams
        self._held = ""  # text of an unfinished line, held back under the live line
        self._drawn = False  # the live progress line is on the screen now
        self._prompt: str | None = None  # the prompt the user is answering, if any
        self._prompt_shown = False  # ... and it is the last thing on the screen
        self._in_message = False  # the model is streaming a message
        self._redraw: asyncio.TimerHandle | None = None
        self._last_output = 0.0  # the event loop's time of the last output under the prompt

    # -- the prompt ------------------------------------------------------------------------

    def ask(self, prompt: str) -> None:
        """The chat waits for a line: show ``prompt`` (terminal input only)."""
        self._prompt = prompt
        self._settle(keep_live=False)  # a reply that ends with a write open said where it is
        self._line_start()
        self._show_prompt()

    def answered(self) -> None:
        """A line was read (the terminal echoed its newline)."""
        self._prompt = None
        self._prompt_shown = False
        self._at_line_start = True
        self._cancel_redraw()

    def _show_prompt(self) -> None:
        self._err(self._prompt or "")
        self._prompt_shown = True
        self._at_line_start = False

    def _cancel_redraw(self) -> None:
        if self._redraw is not None:
            self._redraw.cancel()
            self._redraw = None

    def _redraw_later(self) -> None:
        """Output came while the prompt waits: draw the prompt again once it has stopped. One
        timer at a time, which looks again when it fires (a streamed reply is many outputs)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop: nobody will read the prompt's answer anyway
            return
        self._last_output = loop.time()
        if self._redraw is None:
            self._redraw = loop.call_later(PROMPT_REDRAW_S, self._redraw_if_quiet)

    def _redraw_if_quiet(self) -> None:
        self._redraw = None
        if self._prompt is None or self._prompt_shown:
            return
        loop = asyncio.get_running_loop()
        quiet_for = loop.time() - self._last_output
        if self._in_message or quiet_for < PROMPT_REDRAW_S:  # still going: look again later
            delay = PROMPT_REDRAW_S if self._in_message else PROMPT_REDRAW_S - quiet_for
            self._redraw = loop.call_later(delay, self._redraw_if_quiet)
            return
        self._settle(keep_live=False)
        self._line_start()
        self._show_prompt()

    # -- where output starts ---------------------------------------------------------------

    def _err(self, text: str) -> None:
        self.console.file.write(text)
        self.console.file.flush()

    def _write(self, text: str) -> None:
        if not text:
            return
        self.out.write(text)
        self.out.flush()
        if self.shared:
            self._at_line_start = text.endswith("\n")

    def _line_start(self) -> None:
        if not self._at_line_start:
            (self._write if self.shared else self._err)("\n")
            self._at_line_start = True

    def _before_output(self) -> None:
        """Something is about to be printed: below the prompt if it shows."""
        if self._prompt_shown:
            self._prompt_shown = False
            self._err("\n")
            self._at_line_start = True
        if self._prompt is not None:
            self._redraw_later()

    def _lift_live(self) -> None:
        if self._drawn:
            self._err(CLEAR_LINE)
            self._drawn = False

    def _drop_live(self) -> None:
        if self._live is not None and self._at_line_start:
            self._err(CLEAR_LINE + self._live.line())
            self._drawn = True

    # -- the reporter ----------------------------------------------------------------------

    def text(self, delta: str) -> None:
        self._before_output()
        self._in_message = True
        if not self.shared:
            self._write(delta)
            return
        if self._live is None:
            self._write(delta)
            return
        held = self._held + delta
        cut = held.rfind("\n") + 1
        if cut == 0:
            if self._drawn:
                self._held = held
            else:  # the live line waits for this line of text to end
                self._write(held)
                self._held = ""
            return
        self._lift_live()
        self._write(held[:cut])
        self._held = held[cut:]
        self._drop_live()

    def message_end(self, finish: Any) -> None:
        self._before_output()
        self._in_message = False
        if self._held:
            self._lift_live()
            self._write(self._held)
            self._held = ""
        if not self.shared:
            self._write("\n")  # as text arrived: the message ends its line
            return
        self._line_start()
        self._drop_live()

    def progress(self, progress: Progress) -> None:
        if not self.console.is_terminal:
            super().progress(progress)
            return
        self._before_output()
        self._live = progress
        if self._drawn or self._at_line_start:
            self._err(CLEAR_LINE + progress.line())
            self._drawn = True
            self._at_line_start = True  # the live line is rewritten, never continued

    def progress_done(self) -> None:
        self._settle()

    def _settle(self, keep_live: bool = True) -> None:
        """Put the live line away: the held text is written; the last progress line stays
        unless ``keep_live`` is false."""
        if self._held or not keep_live:
            self._lift_live()
            self._write(self._held)
            self._held = ""
        elif self._drawn:
            self._err("\n")  # the last progress line stays on the screen
            self._at_line_start = True
        self._drawn = False
        self._live = self._printed = None

    def say(self, markup: str) -> None:
        self._before_output()
        self._lift_live()
        self._line_start()
        self.console.print(markup)
        self._at_line_start = True
        self._drop_live()

    def close(self) -> None:
        self._cancel_redraw()
