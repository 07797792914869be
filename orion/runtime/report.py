"""What the runtime tells people while it works. The base class says nothing; the command line
supplies one that prints."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from rich.markup import escape

if TYPE_CHECKING:
    from orion.models.events import Finish
    from orion.hooks.types import ToolOutcome


class Progress(Protocol):
    """Where a streaming write stands: what a live progress line shows (the write sessions
    report theirs with one)."""

    @property
    def target(self) -> str: ...
    @property
    def lines(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def continuation(self) -> int: ...
    @property
    def max_continuations(self) -> int: ...
    def line(self) -> str: ...


@dataclass(frozen=True)
class OpenWrite:
    """The write open in a runtime, as ``orion chat`` shows it: the ``open_write`` hook's
    answer. The model's text goes to it, not to the reply."""

    #: The write's id (a write session's).
    id: str
    #: What it is doing, in a word a user understands: writing, continuing, checking,
    #: correcting or waiting.
    word: str
    #: Where it stands now (called when the screen draws, not at every chunk).
    progress: Callable[[], Progress]


class Reporter:
    def user(self, text: str) -> None:
        """A user message entered the conversation."""

    def text(self, delta: str) -> None:
        """The model streamed text."""

    def message_end(self, finish: Finish) -> None:
        """The model's message ended."""

    def tool(self, outcome: ToolOutcome) -> None:
        """A tool call ran (or was refused)."""

    def prompt(self, text: str) -> None:
        """Orion injected a prompt for the model."""

    def notice(self, text: str) -> None:
        """Anything else worth a line: a command's reply, a compaction, a warning."""

    def progress(self, progress: Progress) -> None:
        """A write is streaming: update the live line."""

    def progress_done(self) -> None:
        """The write stopped streaming: end the live line."""

    def changed(self, summary: Callable[[], str]) -> None:
        """A write replaced a file that existed: ``summary()`` says what changed, in a line
        (called only by a reporter that shows it: reading both versions costs)."""


class ConsoleReporter(Reporter):
    """Lines for people on a rich console (stderr by default). With ``stream=True`` the model's
    text is written as it arrives (chat); otherwise each message is summarized when it ends."""

    def __init__(self, console=None, *, stream: bool = False, out=None):
        from rich.console import Console

        self.console = console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.stream = stream
        self.out = out  # where streamed text goes (chat: stdout)
        # A message's summary needs only its first line and its line count: the text itself
        # (a whole file, in a write session) is not kept here.
        self._first: list[str] = []  # the start of the first line, up to SUMMARY_CHARS
        self._first_done = False
        self._newlines = 0
        self._last_char = ""
        self._live: Progress | None = None  # what the live line shows now
        self._printed: Progress | None = None  # the last plain progress line (no terminal)

    #: How much of a message's first line its summary shows.
    SUMMARY_CHARS = 100

    def say(self, markup: str) -> None:
        """One of Orion's lines (rich markup)."""
        self.console.print(markup)

    def user(self, text: str) -> None:
        self.say(f"[bold]user[/bold]   {escape(text)}")

    def text(self, delta: str) -> None:
        if self.stream and self.out is not None:
            self.out.write(delta)
            self.out.flush()
            return
        if not delta:
            return
        self._newlines += delta.count("\n")
        self._last_char = delta[-1]
        if not self._first_done:
            head = delta.split("\n", 1)[0]
            self._first.append(head[:self.SUMMARY_CHARS])
            self._first_done = len(head) < len(delta) or \
                sum(map(len, self._first)) >= self.SUMMARY_CHARS

    def message_end(self, finish) -> None:
        if self.stream:
            if self.out is not None:
                self.out.write("\n")
                self.out.flush()
            return
        first = "".join(self._first)[:self.SUMMARY_CHARS].rstrip("\r")
        count = self._newlines + (self._last_char not in ("", "\n"))
        had_text = bool(self._last_char)
        self._first, self._first_done, self._newlines, self._last_char = [], False, 0, ""
        if had_text:
            more = f" … ({count} lines)" if count > 1 else ""
            self.say(f"[cyan]model[/cyan]  {escape(first)}{more}")
        # A reply that did not end cleanly is named by a notice: the write session's, or the
        # model system's outside one (orion.models.events.cut_notice).

    def tool(self, outcome) -> None:
        if outcome.ok:
            self.say(f"[yellow]tool[/yellow]   {escape(outcome.name)} [green]ok[/green]")
            return
        try:
            reason = str(json.loads(outcome.content).get("error", ""))
        except (ValueError, AttributeError):
            reason = outcome.content
        first = reason.splitlines()[0] if reason else ""
        self.say(f"[yellow]tool[/yellow]   {escape(outcome.name)} "
                 f"[red]{outcome.kind}[/red]: {escape(first[:160])}")

    def prompt(self, text: str) -> None:
        first = text.splitlines()[0] if text else ""
        self.say(f"[magenta]orion[/magenta]  {escape(first)}")

    def notice(self, text: str) -> None:
        self.say(f"[dim]{escape(text)}[/dim]")

    # A terminal gets one line rewritten in place; a log (not a TTY) gets a plain line when
    # the state changes and every PLAIN_EVERY_LINES lines, so it stays readable.
    PLAIN_EVERY_LINES = 50

    def progress(self, progress: Progress) -> None:
        if self.console.is_terminal:
            self._live = progress
            self.console.file.write("\r\x1b[2K" + progress.line())
            self.console.file.flush()
            return
        last = self._printed
        if last is None or last.state != progress.state or last.target != progress.target or \
                progress.lines // self.PLAIN_EVERY_LINES > last.lines // self.PLAIN_EVERY_LINES:
            self._printed = progress
            self.console.print(escape(progress.line()), highlight=False)

    def progress_done(self) -> None:
        if self._live is not None:
            self.console.file.write("\n")
            self.console.file.flush()
        self._live = self._printed = None
