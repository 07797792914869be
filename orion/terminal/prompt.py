"""The ``you>`` prompt of ``orion chat`` on a terminal, on prompt_toolkit.

prompt_toolkit is the line editor of IPython, ptpython, litecli and Aider: Emacs keys, history
with reverse search (Ctrl-R), multi-line input, bracketed paste (a pasted block is one
message, however many lines it has), completion, and a redraw that keeps the input line intact
while other output scrolls above it. It is imported only here, and this module only when
``orion chat`` runs on a terminal (``orion --help`` never pays for it).

The prompt stays at the bottom of the screen for the whole chat, a reply streaming or not:

- What the chat prints goes above it (:meth:`ChatPrompt.print_above`); the lines that change
  while a reply streams (the block of Markdown still growing, a write's preview and live line)
  are drawn just above the ``you>`` line, as part of the prompt, and replaced at each redraw.
- Text typed while a reply streams stays on the prompt's line, editable; Enter then queues it,
  and it is sent when the reply ends.
- Ctrl-C stops a reply that streams; otherwise it clears the line, and a second Ctrl-C on an
  empty line (or Ctrl-D) ends the chat.
- Alt+Enter (Esc then Enter) starts a new line in the message.

The history is one file per workspace (``.orion/chat_history``), readable only by its owner:
messages can hold anything.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ContextManager, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.application.current import set_app
from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.enums import DEFAULT_BUFFER
from prompt_toolkit.filters import Condition, has_focus
from prompt_toolkit.formatted_text import ANSI
from prompt_toolkit.history import History
from prompt_toolkit.input import create_input
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.output import create_output

from orion.runtime.chat_history import HistoryFile

PROMPT = "you> "
#: The prompt's redraws while a reply streams (each chunk asks for one) come at most this often.
REDRAW_INTERVAL_S = 0.05

HINT_AGAIN = "Ctrl-C again (or Ctrl-D) ends the chat"
HINT_QUEUED = "your message is sent when the reply ends (Ctrl-C stops the reply)"


class ChatPrompt:
    """One prompt_toolkit session for the whole chat.

    ``footer(width, height)`` gives the lines drawn above ``you>`` (text with escape codes,
    each line ending with a newline); ``stop_reply()`` stops the reply that streams and says
    whether there was one; ``commands()`` names the slash commands and their help, for
    completion."""

    def __init__(self, *, terminal: TextIO, history: Path, workspace: Path,
                 commands: Callable[[], Mapping[str, str]], footer: Callable[[int, int], str],
                 stop_reply: Callable[[], bool], notice: Callable[[str], None]) -> None:
        self.terminal = terminal
        self._footer = footer
        self._stop_reply = stop_reply
        self._lines: asyncio.Queue[str | None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._replying = False
        self._queued = False  # Enter was pressed while a reply streamed
        self._armed = False  # a Ctrl-C on the empty line: the next one ends the chat
        self._above: list[str] = []  # output waiting for the prompt to finish exiting
        self._waiting = False  # ... and a look again is scheduled
        self._ending: asyncio.Future[None] | None = None
        self._notice = notice
        self.session: PromptSession[str] = PromptSession(
            self._message, history=_PrivateHistory(history, notice),
            completer=ChatCompleter(commands, workspace), complete_while_typing=False,
            key_bindings=self._bindings(), prompt_continuation=" " * len(PROMPT),
            input=create_input(sys.stdin), output=create_output(stdout=terminal))
        self.session.app.min_redraw_interval = REDRAW_INTERVAL_S
        self.session.default_buffer.on_text_changed += self._edited

    # -- what the chat reads ---------------------------------------------------------------

    def keys(self) -> ContextManager[None]:
        """The terminal in the prompt's mode (keys are read, not echoed; Ctrl-C is a key) for
        as long as the context lasts, prompt or no prompt; as it was before afterwards."""
        return self.session.input.raw_mode()

    def start(self) -> None:
        """Show the prompt; it stays until :meth:`close`."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def read(self) -> str | None:
        """The next message the user sends, as typed (None: the chat ends)."""
        self.start()
        return await self._lines.get()

    async def _run(self) -> None:
        # The next prompt starts as soon as a message is sent, so what the reply prints goes
        # above it and the user can type meanwhile.
        while not self._closing:
            try:
                text = await self.session.prompt_async(handle_sigint=False,
                                                       set_exception_handler=False)
            except EOFError:  # Ctrl-D, or the second Ctrl-C: a reply still streaming stops
                self._stop_reply()
                break
            except Exception as exc:  # noqa: BLE001 - the chat must end, not hang, and say why
                self._lines.put_nowait(None)
                raise exc
            if not self._closing:
                self._lines.put_nowait(text)
        self._lines.put_nowait(None)

    # -- the chat's state ------------------------------------------------------------------

    def replying(self, on: bool) -> None:
        """A reply starts streaming (``on``), or has ended: a message queued meanwhile is
        sent now."""
        self._replying = on
        if not on and self._queued:
            self._queued = False
            app = self.session.app
            if app.is_running:
                with set_app(app):
                    self.session.default_buffer.validate_and_handle()

    def invalidate(self) -> None:
        """Draw the lines above ``you>`` again (they changed)."""
        app = self.session.app
        if app.is_running:
            app.invalidate()

    def print_above(self, text: str) -> None:
        """Print ``text`` (whole lines, escape codes allowed) above the prompt, which is drawn
        again below it."""
        self._above.append(text)
        self._print_above()

    def _print_above(self, again: bool = False) -> None:
        if self._waiting and not again:
            return
        self._waiting = False
        app = self.session.app
        if app.is_running and app.future is not None and app.future.done():
            # Exiting: the prompt is about to be drawn as sent (the line stays on the screen);
            # what comes now goes below that line, once it is drawn.
            self._waiting = True
            asyncio.get_running_loop().call_soon(self._print_above, True)
            return
        text = "".join(self._above)
        self._above.clear()
        if not text:
            return
        if not app.is_running:
            self.terminal.write(text)
            self.terminal.flush()
            return
        with set_app(app):
            app.renderer.erase()  # the prompt's lines, from its first; the cursor goes there
            # Erasing resets the renderer, which turns bracketed paste off until the next
            # redraw: a paste in between would arrive as lines typed one by one.
            app.output.enable_bracketed_paste()
            app.output.write_raw(text)
            app.output.flush()
            app.renderer.request_absolute_cursor_position()
            app.invalidate()

    async def close(self) -> None:
        """Take the prompt off the screen; ``read`` returns None from now on."""
        self._closing = True
        app = self.session.app
        if app.is_running and app.future is not None and not app.future.done():
            # The answers to its questions about the cursor's position are read first: arriving
            # once nothing reads them, the terminal would echo them (``^[[17;1R``).
            await app.renderer.wait_for_cpr_responses()
            app.erase_when_done = True  # the empty prompt goes; what was sent stays above
            if not app.future.done():
                app.exit(result="")
        if self._task is not None:
            try:
                await self._task
            except OSError:  # the terminal is gone (hung up): there is no prompt to take off
                pass
            finally:
                app.erase_when_done = False

    # -- drawing ---------------------------------------------------------------------------

    def size(self) -> tuple[int, int]:
        """The terminal's columns and rows."""
        size = self.session.app.output.get_size()
        return size.columns, size.rows

    def _message(self) -> ANSI:
        return ANSI(self._footer(*self.size()) + PROMPT)

    def _edited(self, _buffer: Any) -> None:
        self._armed = False

    # -- keys ------------------------------------------------------------------------------

    def _bindings(self) -> KeyBindings:
        bindings = KeyBindings()
        typing = has_focus(DEFAULT_BUFFER)

        @bindings.add("escape", "enter", filter=typing)
        def _new_line(event: Any) -> None:
            event.current_buffer.insert_text("\n")

        @bindings.add("enter", filter=typing)
        def _send(event: Any) -> None:
            if self._replying:
                if not self._queued:
                    self._queued = True
                    self._notice(HINT_QUEUED)
                return
            event.current_buffer.validate_and_handle()

        @bindings.add("c-c", filter=typing)
        def _interrupt(event: Any) -> None:
            self.interrupt()

        empty = Condition(lambda: not self.session.default_buffer.text)

        @bindings.add("c-d", filter=typing & empty)
        def _end(event: Any) -> None:
            self._end()

        return bindings

    def _end(self) -> None:
        """End the chat (Ctrl-D, a second Ctrl-C), once the terminal has answered the prompt's
        questions about the cursor: an answer arriving later would be left for the shell to
        read as typed text."""
        app = self.session.app

        async def end() -> None:
            await app.renderer.wait_for_cpr_responses()
            if app.is_running and app.future is not None and not app.future.done():
                app.exit(exception=EOFError(), style="class:exiting")
        if self._ending is None or self._ending.done():
            self._ending = asyncio.ensure_future(end())

    def interrupt(self) -> None:
        """Ctrl-C: stop the reply that streams; else clear the line; on an empty line, the
        second in a row ends the chat."""
        if self._stop_reply():
            return
        buffer = self.session.default_buffer
        if buffer.text:
            buffer.reset()
            self._armed = self._queued = False
        elif self._armed:
            self._end()
        else:
            self._armed = True
            self._notice(HINT_AGAIN)


class ChatCompleter(Completer):
    """Tab completes a slash command at the start of the line (with its help beside it) and,
    anywhere else, the path being typed, from the workspace."""

    def __init__(self, commands: Callable[[], Mapping[str, str]], workspace: Path) -> None:
        self.commands = commands
        self.paths = PathCompleter(get_paths=lambda: [str(workspace)], expanduser=True)

    def get_completions(self, document: Document,
                        complete_event: CompleteEvent) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and not any(c.isspace() for c in before):
            for name, help_text in sorted(self.commands().items()):
                if f"/{name}".startswith(before):
                    yield Completion(f"/{name}", start_position=-len(before),
                                     display_meta=help_text)
            return
        word = document.get_word_before_cursor(WORD=True)
        if word:
            yield from self.paths.get_completions(Document(word, len(word)), complete_event)


class _PrivateHistory(History):
    """prompt_toolkit's file history (its format), kept in a private regular file of bounded
    size (:mod:`orion.runtime.chat_history`, FS-23); a history that cannot be used is said once
    and the chat goes on with what is typed in it kept in memory."""

    def __init__(self, path: Path, notice: Callable[[str], None]) -> None:
        super().__init__()
        self.file = HistoryFile(path, notice)

    def load_history_strings(self) -> Iterable[str]:
        strings: list[str] = []
        lines: list[str] = []
        for raw in io.BytesIO(self.file.read()):  # lines end at "\n" only, as FileHistory's
            line = raw.decode("utf-8", "replace")
            if line.startswith("+"):
                lines.append(line[1:])
            elif lines:
                strings.append("".join(lines)[:-1])
                lines = []
        if lines:
            strings.append("".join(lines)[:-1])
        return reversed(strings)

    def store_string(self, string: str) -> None:
        entry = f"\n# {datetime.datetime.now()}\n" + "".join(
            f"+{line}\n" for line in string.split("\n"))
        self.file.append(entry.encode("utf-8", "replace"))
