"""``orion chat``: a conversation with a real OpenAI-compatible endpoint, in real time.

On a terminal the prompt is a line editor (:mod:`orion.terminal.prompt`) that stays at the
bottom while replies stream above it. Otherwise (a script, a pipe) lines are read from stdin as
they come, and end of input ends the chat. Either way Ctrl-C during a reply stops the reply,
not the chat: the part that arrived stays in the conversation, marked as interrupted for the
model, and an open write session is saved first.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from rich.markup import escape

from orion.clock import RealClock
from orion.config import WorkspaceConfig
from orion.terminal.console import is_terminal
from orion.errors import OrionError
from orion.models.base import ModelAuthError
from orion.models.openai_compat import OpenAICompatibleModel
from orion.hooks.blame import plugin_failure_line
from orion.hooks.manager import PluginFailure, PluginManager
from orion.runtime.runtime import CommandError, Runtime
from orion.terminal.screen import ChatScreen
from orion.runtime.stop_signals import CHAT_SIGNALS, StopSignals
from orion.trace import events as trace_events

#: Where the chat's history of messages is kept, in the state directory (``.orion``).
HISTORY_FILE = "chat_history"


def make_model(config: WorkspaceConfig, *, base_url: str | None,
               model_name: str | None) -> OpenAICompatibleModel:
    """The endpoint from the options, else ``orion.yaml`` (with its ``ORION_*`` overrides), else
    what the SDK reads itself (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``)."""
    settings = config.model.model
    return OpenAICompatibleModel(model=model_name or settings.model,
                                 base_url=base_url or settings.base_url,
                                 api_key=os.environ.get(settings.api_key_env),
                                 max_tokens=settings.max_tokens,
                                 temperature=settings.temperature,
                                 context_window=settings.context_window)


def on_terminal() -> bool:
    """A person at a terminal: stdin is one, and so is stdout or stderr (for the prompt)."""
    return is_terminal(sys.stdin) and (is_terminal(sys.stderr) or is_terminal(sys.stdout))


async def run_chat(config: WorkspaceConfig, plugins: PluginManager, *, base_url: str | None,
                   model_name: str | None) -> int:
    """Read messages until ``/quit``, Ctrl-D or end of input. Returns the exit code: 1 when the
    endpoint cannot be used (authentication), else 0."""
    screen = ChatScreen(out=sys.stdout)
    model = make_model(config, base_url=base_url, model_name=model_name)
    # Said before the runtime starts: its plugins' start-up notices (the write sessions a
    # crashed chat left) come after it.
    screen.notice(f"orion chat with {model.name} in {config.workspace.resolve()}; /help lists "
                  "commands")
    tell_failures(plugins, screen)
    runtime = Runtime(model=model, plugins=plugins, workspace=config.workspace, config=config,
                      clock=RealClock(), reporter=screen)
    screen.attach(runtime)
    chat = Chat(runtime, screen)
    with StopSignals(CHAT_SIGNALS) as signals:
        try:
            async with model.session():  # one connection pool for the whole conversation
                talk = chat.at_terminal() if on_terminal() else chat.from_lines()
                try:
                    code = await signals.run(talk)
                finally:
                    # The reply to an idle prompt ends with the chat, before its connection.
                    await runtime.stop_replies()
        finally:
            screen.close()
            runtime.close()  # a write session still open says what stays and how to finish it
        late = await signals.settle()  # a signal while the chat closed: it closed first
    if late is not None:
        raise late
    return code


def tell_failures(plugins: PluginManager, screen: ChatScreen) -> None:
    """Show a plugin's failure that nothing else tells (an observer's, a gate's) on the
    screen, once per plugin and hook, instead of a log line across the prompt: an observer
    that fails at every transition would fill the screen."""
    told: set[tuple[str, str]] = set()

    def tell(failure: PluginFailure) -> None:
        if (failure.plugin, failure.hook) in told:
            return
        told.add((failure.plugin, failure.hook))
        screen.notice(f"plugin {failure.plugin!r} failed in {failure.hook} ({failure.where}): "
                      f"{failure.error}; the chat goes on without it (the next failures of "
                      "it are not shown)")
    plugins.on_failure.append(tell)
    # The orion.plugins log has somewhere to go: Python's last-resort handler would print
    # each warning across the prompt.
    log = logging.getLogger("orion.plugins")
    if not any(isinstance(handler, logging.NullHandler) for handler in log.handlers):
        log.addHandler(logging.NullHandler())


class Chat:
    """The conversation loop: one message at a time, the reply that runs, and Ctrl-C."""

    def __init__(self, runtime: Runtime, screen: ChatScreen) -> None:
        self.runtime = runtime
        self.screen = screen
        self.reply: asyncio.Task[int | None] | None = None
        self._stopping = False

    # -- one reply -------------------------------------------------------------------------

    async def turn(self, work: Coroutine[Any, Any, Any]) -> int | None:
        """Run one reply (a message, a command, or the answer to a pending prompt); Ctrl-C
        stops it, not the chat. Returns an exit code when the chat must end."""
        self.reply = asyncio.ensure_future(_guarded(self.runtime, self.screen, work))
        try:
            return await self.reply
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            self._stopping = False
            self.screen.notice(stopped(self.runtime, kept=self._keep_what_arrived()))
            return None
        finally:
            self.reply = None

    def stop(self) -> bool:
        """Stop the reply that runs; False when none does."""
        if self.reply is None or self.reply.done():
            return False
        self._stopping = True
        self.reply.cancel()
        return True

    def _keep_what_arrived(self) -> bool:
        """The stopped reply's text joins the conversation as the model sent it, marked as
        interrupted, when a request was answering the last message (a write's content is its
        session's, and a stopped command leaves the conversation as it was). Returns whether
        it did."""
        said = self.screen.stop_message()
        messages = self.runtime.conversation.messages
        if said is None or not messages or messages[-1].role == "assistant":
            return False
        self.runtime.conversation.add_interrupted(said)
        return True

    # -- a person at a terminal ------------------------------------------------------------

    async def at_terminal(self) -> int:
        from orion.terminal.prompt import ChatPrompt

        runtime, screen = self.runtime, self.screen
        commands = runtime.plugins.registry.commands
        editor = ChatPrompt(
            terminal=sys.stderr if is_terminal(sys.stderr) else sys.stdout,
            history=runtime.state_dir / HISTORY_FILE, workspace=runtime.workspace,
            commands=lambda: {name: command.help for name, command in commands.items()},
            footer=screen.footer, stop_reply=self.stop, notice=screen.notice)
        screen.editor, screen.echo = editor, False
        # The terminal stays in the prompt's mode for the whole chat: keys typed between two
        # prompts are read by the next one, not echoed into the reply, and Ctrl-C is a key.
        # SIGINT comes from `kill -INT` only, and does what the key does.
        restore = _on_sigint(editor.interrupt)
        try:
            with editor.keys():
                try:
                    editor.start()
                    return await self._messages(editor.read, editor.replying)
                finally:
                    await editor.close()
        finally:
            restore()
            screen.editor, screen.echo = None, True

    # -- lines from a pipe or a file -------------------------------------------------------

    async def from_lines(self) -> int:
        lines = _Lines()

        def interrupt() -> None:  # Ctrl-C stops the reply that runs, else ends the chat
            if not self.stop():
                lines.end()
        restore = _on_sigint(interrupt)
        try:
            return await self._messages(lines.read, lambda replying: None)
        finally:
            restore()
            lines.close()

    async def _messages(self, read: Callable[[], Coroutine[Any, Any, str | None]],
                        replying: Callable[[bool], None]) -> int:
        runtime = self.runtime
        work: Coroutine[Any, Any, str | None] | None = (
            runtime.pump() if runtime.pending else None)  # an adopted session continues
        while True:
            if work is not None:
                replying(True)
                try:
                    code = await self.turn(work)
                finally:
                    replying(False)
                if code is not None:
                    return code
            if runtime.closing:
                return 0
            line = await read()
            if line is None:
                return 0
            line = line.strip()
            work = runtime.handle(line) if line else None


def _on_sigint(handler: Callable[[], object]) -> Callable[[], None]:
    """Route SIGINT to ``handler`` on the running loop; returns what undoes it."""
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
        return lambda: None

    def restore() -> None:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    return restore


class _Lines:
    """Lines from standard input when it is not a terminal. A pipe is read by the event loop
    when it has input (a thread blocked in ``readline`` would keep the program from ending);
    a regular file by a thread."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._fd: int | None = None
        self._pending = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            fd = sys.stdin.fileno()
            self.loop.add_reader(fd, self._readable, fd)
            self._fd = fd
        except (OSError, ValueError, NotImplementedError, AttributeError):
            threading.Thread(target=self._read_file, name="orion-chat-stdin",
                             daemon=True).start()

    async def read(self) -> str | None:
        return await self.queue.get()

    def end(self) -> None:
        """Ctrl-C while no reply runs: the chat ends now."""
        self.queue.put_nowait(None)

    def _readable(self, fd: int) -> None:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:  # end of input (a closed pipe, Ctrl-D)
            self.loop.remove_reader(fd)
            self._fd = None
            tail = self._pending + self._decoder.decode(b"", final=True)
            if tail:
                self.queue.put_nowait(tail)
            self.queue.put_nowait(None)
            return
        *complete, self._pending = (self._pending + self._decoder.decode(data)).split("\n")
        for line in complete:
            self.queue.put_nowait(line + "\n")

    def _read_file(self) -> None:
        for line in sys.stdin or ():  # no standard input at all: end of input
            self.loop.call_soon_threadsafe(self.queue.put_nowait, line)
        self.loop.call_soon_threadsafe(self.queue.put_nowait, None)

    def close(self) -> None:
        if self._fd is not None:
            self.loop.remove_reader(self._fd)


# -- what the user is told when a reply stops ---------------------------------------------------


def stopped(runtime: Runtime, *, kept: bool) -> str:
    """What Ctrl-C during a reply left behind, for the user (``kept``: the reply's text joined
    the conversation); a plugin whose work the reply was (a write session's content) says what
    it saved (``reply_stopped``)."""
    said = [line for line in runtime.plugins.hook.reply_stopped(host=runtime) if line]
    if said:
        return "; ".join(said)
    return ("reply stopped; what arrived stays in the conversation, marked as interrupted"
            if kept else "stopped")


async def _guarded(runtime: Runtime, screen: ChatScreen, work) -> int | None:
    """Run ``work``; report errors. Returns an exit code when the chat must end."""
    try:
        await work
    except CommandError as exc:
        screen.notice(str(exc))
    except OrionError as exc:
        runtime.tracer.emit(trace_events.error("orion chat", exc,
                                               at_ms=runtime.clock.now_ms(),
                                               conversation_id=runtime.conversation.id))
        if isinstance(exc, ModelAuthError):
            screen.say(f"[red]error:[/red] {escape(str(exc))}")
            return 1  # the key is refused: every further line would fail too
        if getattr(exc, "told", False):
            return None  # already said where it happened (a write held by a failing guard)
        # Anything else (the endpoint down, a 5xx after the SDK's retries) may pass: one line,
        # and the conversation (an open write session too) goes on with the next message.
        screen.say(f"[red]error:[/red] {escape(str(exc))}; the conversation is "
                   "kept, type your next message or /quit")
    except Exception as exc:
        # Not Orion's own error: when a plugin's code raised it (a team's pipeline system, a
        # hook wrapper), the plugin fails alone and the conversation goes on.
        line = plugin_failure_line(exc, runtime.plugins)
        if line is None:
            raise
        runtime.tracer.emit(trace_events.error("orion chat", exc,
                                               at_ms=runtime.clock.now_ms(),
                                               conversation_id=runtime.conversation.id))
        screen.say(f"[red]error:[/red] {escape(line)}; the conversation is kept, type your "
                   "next message or /quit")
    return None
