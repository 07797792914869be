"""``orion chat``: a REPL against a real OpenAI-compatible endpoint, in real time."""

from __future__ import annotations

import asyncio
import codecs
import os
import signal
import sys
import threading
from typing import Any

from rich.markup import escape

from orion.clock import RealClock
from orion.config import WorkspaceConfig
from orion.errors import OrionError
from orion.models.base import ModelAuthError
from orion.models.openai_compat import OpenAICompatibleModel
from orion.plugins import PluginManager
from orion.runtime.screen import ChatScreen
from orion.runtime.runtime import CommandError, Runtime
from orion.runtime.stop_signals import CHAT_SIGNALS, until_stopped
from orion.trace import events as trace_events
from orion.write_session.recovery import startup


def make_model(config: WorkspaceConfig, *, base_url: str | None,
               model_name: str | None) -> OpenAICompatibleModel:
    """The endpoint from the options, else ``orion.yaml`` (with its ``ORION_*`` overrides), else
    what the SDK reads itself (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``)."""
    settings = config.model.model
    return OpenAICompatibleModel(model=model_name or settings.model,
                                 base_url=base_url or settings.base_url,
                                 api_key=os.environ.get(settings.api_key_env),
                                 max_tokens=settings.max_tokens,
                                 temperature=settings.temperature)


class _Keyboard:
    """Lines from standard input, and Ctrl-C as an event: at the prompt it ends the chat at
    once; during a reply it stops the reply. A terminal or a pipe is read by the event loop
    when it has input (a thread blocked in ``readline`` would keep the program from ending
    until Enter, and from exiting cleanly at all); a regular file by a thread, at once."""

    def __init__(self, screen: ChatScreen) -> None:
        self.loop = asyncio.get_running_loop()
        self.screen = screen
        self.lines: asyncio.Queue[str | None] = asyncio.Queue()
        self.reply: asyncio.Task[Any] | None = None
        self.interrupted = False
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
        try:
            self.loop.add_signal_handler(signal.SIGINT, self._interrupt)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            pass

    def _readable(self, fd: int) -> None:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:  # end of input (Ctrl-D at the start of a line, a closed pipe)
            self.loop.remove_reader(fd)
            self._fd = None
            tail = self._pending + self._decoder.decode(b"", final=True)
            if tail:
                self.lines.put_nowait(tail)
            self.lines.put_nowait(None)
            return
        *complete, self._pending = (self._pending + self._decoder.decode(data)).split("\n")
        for line in complete:
            self.lines.put_nowait(line + "\n")

    def _read_file(self) -> None:
        for line in sys.stdin or ():  # no standard input at all: end of input
            self.loop.call_soon_threadsafe(self.lines.put_nowait, line)
        self.loop.call_soon_threadsafe(self.lines.put_nowait, None)

    def _interrupt(self) -> None:
        if self.reply is not None and not self.reply.done():
            self.interrupted = True
            self.reply.cancel()
        else:
            self.lines.put_nowait(None)  # at the prompt: the chat ends now

    async def read_line(self, prompt: str) -> str | None:
        if sys.stdin is not None and sys.stdin.isatty():
            self.screen.ask(prompt)
        try:
            return await self.lines.get()
        finally:
            self.screen.answered()

    def close(self) -> None:
        if self._fd is not None:
            self.loop.remove_reader(self._fd)
        try:
            self.loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError, ValueError):
            pass


async def run_chat(config: WorkspaceConfig, plugins: PluginManager, *, base_url: str | None,
                   model_name: str | None) -> int:
    """Read lines until ``/quit`` or end of input. Returns the exit code: 1 when the endpoint
    cannot be used (authentication, connection), else 0."""
    reporter = ChatScreen(out=sys.stdout)
    model = make_model(config, base_url=base_url, model_name=model_name)
    runtime = Runtime(model=model, plugins=plugins, workspace=config.workspace, config=config,
                      clock=RealClock(), reporter=reporter)
    reporter.notice(f"orion chat with {model.name} in {runtime.workspace}; /help lists commands")
    try:
        startup(runtime)  # orphaned write sessions: notices, and --continue adopts one
        async with model.session():  # one connection pool for the whole conversation
            return await until_stopped(_loop(runtime, reporter), CHAT_SIGNALS)
    finally:
        runtime.close()


async def _loop(runtime: Runtime, reporter: ChatScreen) -> int:
    keyboard = _Keyboard(reporter)
    try:
        if runtime.pending:  # an adopted write session asks the model to continue
            code = await _reply(keyboard, runtime, reporter, runtime.pump())
            if code is not None:
                return code
        while not runtime.closing:
            line = await keyboard.read_line("you> ")
            if line is None:
                break
            line = line.strip()
            if not line:
                continue
            code = await _reply(keyboard, runtime, reporter, runtime.handle(line))
            if code is not None:
                return code
        return 0
    finally:
        keyboard.close()
        reporter.close()


async def _reply(keyboard: _Keyboard, runtime: Runtime, reporter: ChatScreen,
                 work) -> int | None:
    """Run one reply; Ctrl-C stops it (not the chat) and says where an open write stands."""
    keyboard.reply = asyncio.ensure_future(_guarded(runtime, reporter, work))
    try:
        return await keyboard.reply
    except asyncio.CancelledError:
        if not keyboard.interrupted:
            raise
        keyboard.interrupted = False
        reporter.notice(_stopped(runtime))
        return None
    finally:
        keyboard.reply = None


def _stopped(runtime: Runtime) -> str:
    """What Ctrl-C during a reply left behind, for the user."""
    from orion.write_session.manager import manager_for

    session = manager_for(runtime).active
    if session is None:
        return "reply stopped"
    session.checkpoint()
    journal, short = session.journal, session.id[:8]
    if journal.degraded is not None:
        return (f"reply stopped; write session {short} holds {journal.lines} lines in memory "
                f"only ({journal.degraded}): they are lost if this chat ends")
    return (f"reply stopped; write session {short} saved ({journal.lines} lines); it stays "
            f"open here, and `orion sessions recover {short}` finishes it from another shell")


async def _guarded(runtime: Runtime, reporter: ChatScreen, work) -> int | None:
    """Run ``work``; report errors. Returns an exit code when the chat must end."""
    try:
        await work
    except CommandError as exc:
        reporter.notice(str(exc))
    except OrionError as exc:
        runtime.tracer.emit(trace_events.error("orion chat", exc,
                                               at_ms=runtime.clock.now_ms(),
                                               conversation_id=runtime.conversation.id))
        if isinstance(exc, ModelAuthError):
            reporter.say(f"[red]error:[/red] {escape(str(exc))}")
            return 1  # the key is refused: every further line would fail too
        # Anything else (the endpoint down, a 5xx after the SDK's retries) may pass: one line,
        # and the conversation (an open write session too) goes on with the next message.
        reporter.say(f"[red]error:[/red] {escape(str(exc))}; the conversation is "
                     "kept, type your next message or /quit")
    return None
