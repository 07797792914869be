"""``orion chat``: a REPL against a real OpenAI-compatible endpoint, in real time."""

from __future__ import annotations

import asyncio
import os
import sys

from rich.markup import escape

from orion.clock import RealClock
from orion.config import WorkspaceConfig
from orion.errors import OrionError
from orion.models.base import ModelAuthError
from orion.models.openai_compat import OpenAICompatibleModel
from orion.plugins import PluginManager
from orion.runtime.report import ConsoleReporter
from orion.runtime.runtime import CommandError, Runtime
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


async def _read_line(prompt: str) -> str | None:
    if sys.stdin.isatty():
        sys.stderr.write(prompt)
        sys.stderr.flush()
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    return line if line else None  # "" is end of input


async def run_chat(config: WorkspaceConfig, plugins: PluginManager, *, base_url: str | None,
                   model_name: str | None) -> int:
    """Read lines until ``/quit`` or end of input. Returns the exit code: 1 when the endpoint
    cannot be used (authentication, connection), else 0."""
    reporter = ConsoleReporter(stream=True, out=sys.stdout)
    model = make_model(config, base_url=base_url, model_name=model_name)
    runtime = Runtime(model=model, plugins=plugins, workspace=config.workspace, config=config,
                      clock=RealClock(), reporter=reporter)
    reporter.notice(f"orion chat with {model.name} in {runtime.workspace}; /help lists commands")
    try:
        startup(runtime)  # orphaned write sessions: notices, and --continue adopts one
        return await _loop(runtime, reporter)
    finally:
        runtime.close()


async def _loop(runtime: Runtime, reporter: ConsoleReporter) -> int:
    if runtime.pending:  # an adopted write session asks the model to continue
        code = await _guarded(runtime, reporter, runtime.pump())
        if code is not None:
            return code
    while not runtime.closing:
        line = await _read_line("you> ")
        if line is None:
            break
        line = line.strip()
        if not line:
            continue
        code = await _guarded(runtime, reporter, runtime.handle(line))
        if code is not None:
            return code
    return 0


async def _guarded(runtime: Runtime, reporter: ConsoleReporter, work) -> int | None:
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
            reporter.console.print(f"[red]error:[/red] {escape(str(exc))}")
            return 1  # the key is refused: every further line would fail too
        # Anything else (the endpoint down, a 5xx after the SDK's retries) may pass: one line,
        # and the conversation (an open write session too) goes on with the next message.
        reporter.console.print(f"[red]error:[/red] {escape(str(exc))}; the conversation is "
                               "kept, type your next message or /quit")
    return None
