"""The world a scenario runs in: a real workspace, the real runtime and plugins, a model whose
replies the steps queue, and a virtual clock. Nothing of Orion is replaced.

The conversation runs on the world's own event loop. When Orion asks the model something and
no reply is queued, the conversation *pauses* at that request, as it would while a real model
thinks: the step returns, later steps can look at the request (``Then the model is asked to
reply DONE``) and answer it (:meth:`World.reply`). Time only moves when a step advances the
virtual clock (:meth:`World.advance`), and it keeps moving across :meth:`World.restart` and
:meth:`World.crash`, so the age of what a crashed process left behind is measured in it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import sqlite3
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from orion.clock import BootTime, VirtualClock
from orion.config import load_config
from orion.errors import OrionError
from orion.models.base import ModelRequest, ScriptError
from orion.models.events import ModelEvent, TextDelta
from orion.models.script import ModelReply
from orion.models.scripted import stream_reply
from orion.hooks.manager import PluginManager, make_plugin_manager
from orion.runtime.report import Progress, Reporter
from orion.runtime.runtime import Runtime
from orion.workspace import state_dir_path

#: Where the virtual clock of a new world starts: 2026-01-01T00:00:00Z, a fixed date, so that
#: scenarios are reproducible and trace times are plausible dates.
DEFAULT_START_MS = 1_767_225_600_000.0
#: A process id no process can have (above any ``pid_max``): what the lock of a session names
#: once the process that owned it has died.
DEAD_PID = 2**31 - 2


class Transcript(Reporter):
    """What Orion told people and the model, kept for Then steps (across restarts)."""

    def __init__(self) -> None:
        self.notices: list[str] = []
        self.prompts: list[str] = []
        self.texts: list[str] = []
        self.tools: list[Any] = []  # ToolOutcome, in order
        self.progress_lines: list[Progress] = []
        self.users: list[str] = []

    def user(self, text: str) -> None:
        self.users.append(text)

    def text(self, delta: str) -> None:
        self.texts.append(delta)

    def tool(self, outcome: Any) -> None:
        self.tools.append(outcome)

    def prompt(self, text: str) -> None:
        self.prompts.append(text)

    def notice(self, text: str) -> None:
        self.notices.append(text)

    def progress(self, progress: Progress) -> None:
        self.progress_lines.append(progress)


class LogRecords(logging.Handler):
    """Every record of the ``orion.*`` loggers while a world lives, whatever their level."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._logger = logging.getLogger("orion")
        self._level = self._logger.level
        self._logger.addHandler(self)
        self._logger.setLevel(logging.DEBUG)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def close(self) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)
        super().close()


class Partial:
    """The start of a message: text the model streams before it stalls, in the middle of its
    message. The next reply continues the same message."""

    def __init__(self, text: str, chunk_size: int = 16, *, per_line: bool = False):
        self.text, self.chunk_size, self.per_line = text, max(1, chunk_size), per_line

    def chunks(self) -> list[str]:
        if self.per_line:
            return self.text.splitlines(keepends=True)
        size = self.chunk_size
        return [self.text[i:i + size] for i in range(0, len(self.text), size)]


class QueueModel:
    """The model of a scenario: each request takes the next queued reply. With none queued it
    waits (``pause_when_empty``, the default) until :meth:`World.reply` gives one; with
    ``pause_when_empty = False`` it raises :class:`ScriptError` instead."""

    name = "scenario"

    def __init__(self) -> None:
        self.replies: deque[ModelReply | Partial] = deque()
        self.requests: list[ModelRequest] = []
        self.pause_when_empty = True
        #: The reply the paused request waits for (None: no request is waiting).
        self.waiting: asyncio.Future[ModelReply | Partial] | None = None
        self._asked: asyncio.Event | None = None

    @property
    def asked(self) -> asyncio.Event:
        if self._asked is None:
            self._asked = asyncio.Event()
        return self._asked

    def queue(self, **reply: Any) -> None:
        self.replies.append(ModelReply.model_validate(reply))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        reply = await self._next(request)
        while isinstance(reply, Partial):  # the message goes on after a stall
            for chunk in reply.chunks():
                yield TextDelta(chunk)
            reply = await self._next(request)
        async for event in stream_reply(reply, request.number):
            yield event

    async def _next(self, request: ModelRequest) -> ModelReply | Partial:
        if self.replies:
            return self.replies.popleft()
        if not self.pause_when_empty:
            raise ScriptError(f"the model has no reply queued for request {request.number}; "
                              "the scenario did not expect Orion to ask the model again")
        self.waiting = asyncio.get_running_loop().create_future()
        self.asked.set()
        try:
            return await self.waiting
        finally:
            self.waiting = None
            self.asked.clear()


class World:
    def __init__(self, root: Path, *, plugins: PluginManager | None = None,
                 env: dict[str, str] | None = None, start_ms: float = DEFAULT_START_MS):
        self.root = root
        self.workspace = root / "workspace"
        self.outside = root / "outside"  # a neighbour of the workspace that must never change
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.outside.mkdir(parents=True, exist_ok=True)
        (self.outside / "keep.txt").write_text("outside the workspace\n")
        self._outside_before = self.outside_files()
        self.plugins = plugins
        #: The environment Orion sees (``WRITE_SESSION_IDLE_MS``, ``ORION_*``); never os.environ.
        self.env: dict[str, str] = dict(env or {})
        self.model = QueueModel()
        self.reporter = Transcript()
        self.loop = asyncio.new_event_loop()
        self._runtime: Runtime | None = None
        self._now_ms = float(start_ms)  # the time while no runtime runs
        #: The second clock (orion.clock.BootTime) while no runtime runs: a boot of the
        #: scenario's own, which wall-clock steps do not move.
        self._boot = BootTime("scenario", 0.0)
        self._task: asyncio.Task[Any] | None = None  # a conversation paused at a model request
        self.errors: list[OrionError] = []
        self.replies: list[str] = []  # what slash commands answered
        self.starts = 0  # runtimes started (1 + restarts)
        self.startup_actions: list[Any] = []  # what crash recovery did at the last start
        self._mark = (0, 0, 0, 0, 0)
        self._logs = LogRecords()
        #: Free room for step libraries (e.g. what a scenario streamed so far).
        self.data: dict[str, Any] = {}
        #: Called with the world before its first runtime starts, when the workspace is as
        #: the scenario made it (Orion's pytest plugin checks the charts and plugins there).
        self.before_start: list[Any] = []

    # -- the runtime ---------------------------------------------------------------------------

    @property
    def runtime(self) -> Runtime:
        """The running runtime; the first use starts one (as ``orion chat`` starts)."""
        if self._runtime is None:
            self._start()
        assert self._runtime is not None
        return self._runtime

    @property
    def started(self) -> bool:
        return self._runtime is not None

    def set_start_ms(self, ms: float) -> None:
        """Where the virtual clock starts (epoch milliseconds), before Orion starts: e.g. some
        minutes before the real time, for scenarios that hand sessions to an ``orion``
        command, whose clock is the real one."""
        if self._runtime is not None:
            raise RuntimeError("the clock's start is set before Orion starts")
        self._now_ms = float(ms)

    def _start(self) -> None:
        plugins = self.plugins or make_plugin_manager(env=self.env)
        self.plugins = plugins
        hooks, self.before_start = self.before_start, []
        for hook in hooks:
            hook(self)
        self._runtime = Runtime(model=self.model, plugins=plugins, workspace=self.workspace,
                                config=load_config(self.workspace, env=self.env),
                                clock=VirtualClock(start_ms=self._now_ms, boot=self._boot),
                                reporter=self.reporter, env=self.env)
        self.starts += 1
        # The runtime handled the write sessions a crashed process left behind as it started
        # (offer, expire, adopt one marked for --continue), as `orion run` and `orion chat` do.
        from orion.write_session.manager import manager_for

        self.startup_actions = list(manager_for(self._runtime).at_start)

    @property
    def state_dir(self) -> Path:
        return self._runtime.state_dir if self._runtime is not None \
            else state_dir_path(self.workspace)

    @property
    def now_ms(self) -> float:
        return self._runtime.clock.now_ms() if self._runtime is not None else self._now_ms

    @property
    def now_boot(self) -> BootTime:
        """The second clock (see :mod:`orion.clock`) now."""
        return _virtual(self._runtime).since_boot() if self._runtime is not None else self._boot

    def restart(self, after_ms: float = 0.0) -> None:
        """End the runtime as a process that exits does (journals flushed and released, traces
        flushed), let ``after_ms`` pass, and start a new one in the same workspace, as a new
        ``orion chat`` does: crash recovery runs, and a prompt it queued is answered."""
        if self._runtime is not None:
            self._abandon_task()
            runtime = self._runtime
            with contextlib.suppress(ImportError):
                from orion.write_session.manager import manager_for
                manager_for(runtime).close()
            runtime.close()
            self._stop_clock(runtime)
        self._pass(after_ms)
        self.start()

    def crash(self) -> None:
        """The process dies: nothing is flushed or closed. What the journals had not written to
        disk is lost, the trace batch too, and the session locks name a process that no longer
        runs. The next :meth:`start` (or use of :attr:`runtime`) is a new process."""
        if self._runtime is None:
            return
        self._abandon_task()
        runtime = self._runtime
        with contextlib.suppress(ImportError):
            from orion.write_session.manager import manager_for
            for session in manager_for(runtime).sessions:
                journal = session.journal
                close_fd = getattr(journal, "_close_fd", None)
                if close_fd is not None:
                    close_fd()  # no flush: unsaved bytes die with the process
                lock = journal.directory / "lock"
                with contextlib.suppress(OSError, ValueError, IndexError):
                    if int(lock.read_text(encoding="ascii").split()[0]) == os.getpid():
                        lock.write_text(f"{DEAD_PID}\n", encoding="ascii")
        self._stop_clock(runtime)

    def _stop_clock(self, runtime: Runtime) -> None:
        self._now_ms = runtime.clock.now_ms()
        self._boot = _virtual(runtime).since_boot()
        self._runtime = None

    def _pass(self, ms: float) -> None:
        """``ms`` pass while no runtime runs: both clocks move."""
        self._now_ms += ms
        self._boot = BootTime(self._boot.boot, self._boot.ms + ms)

    def step_wall_clock(self, ms: float) -> None:
        """The wall clock jumps by ``ms`` (an NTP correction, a virtual machine resumed): the
        second clock does not move."""
        if self._runtime is not None:
            _virtual(self._runtime).step(ms)
        else:
            self._now_ms += ms

    def start(self, after_ms: float = 0.0) -> None:
        """Start a runtime (after a crash: the new process), ``after_ms`` later."""
        if self._runtime is not None:
            return
        self._pass(after_ms)
        self._start()
        if self.runtime.pending:  # an adopted session asks the model to continue
            self._drive(self.runtime.pump())

    # -- driving the conversation --------------------------------------------------------------

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    @property
    def paused(self) -> bool:
        """Whether the conversation waits for the model's reply to a request."""
        return self._task is not None and not self._task.done()

    def say(self, line: str) -> None:
        """A user line; Orion errors are kept for Then steps instead of ending the step."""
        self.start()
        self._resume_if_answered()
        if self.paused:
            number = self.model.requests[-1].number if self.model.requests else "?"
            raise AssertionError(
                f"the model has not answered request {number} yet, so the user cannot type "
                f"{line!r}; give the model its reply first")
        self._drive(self.runtime.handle(line))

    def reply(self, **reply: Any) -> None:
        """The model's reply (ModelReply fields: text, chunks, chunk_size, tool_calls,
        finish_reason, reasoning, usage): it answers the paused request, or the next one."""
        self.model.queue(**reply)
        self._resume_if_answered()

    def stream_partial(self, text: str, chunk_size: int = 16, *, per_line: bool = False) -> None:
        """The model streams ``text`` (in chunks of ``chunk_size`` characters, or one line per
        chunk) and then stalls in the middle of its message (a slow network): the next
        :meth:`reply` continues the same message."""
        self.model.replies.append(Partial(text, chunk_size, per_line=per_line))
        if self.paused:
            self._resume_if_answered()
        else:
            self.say("Go on.")

    def advance(self, ms: float) -> None:
        """Let ``ms`` of virtual time pass: due timers fire, and a prompt they queued is put
        to the model (unless a request is already waiting for its reply)."""
        self.start()
        self._resume_if_answered()
        self.runtime.advance(ms)
        if not self.paused:
            self._drive(self.runtime.pump())

    def _resume_if_answered(self) -> None:
        model = self.model
        while self.paused and model.waiting is not None and not model.waiting.done() \
                and model.replies:
            model.waiting.set_result(model.replies.popleft())
            assert self._task is not None
            self._drive(self._task)

    def _drive(self, work: Any) -> None:
        task = work if isinstance(work, asyncio.Task) else self.loop.create_task(work)
        self.loop.run_until_complete(self._until_paused(task))
        if not task.done():
            self._task = task
            return
        self._task = None
        try:
            result = task.result()
        except OrionError as exc:
            self.errors.append(exc)
            return
        if isinstance(result, str) and result:
            self.replies.append(result)

    async def _until_paused(self, task: asyncio.Task[Any]) -> None:
        asked = self.model.asked
        while not task.done() and not asked.is_set():
            waiter = asyncio.ensure_future(asked.wait())
            try:
                await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter

    def _abandon_task(self) -> None:
        """The process ends while the model is asked: the request is never answered."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            self.loop.run_until_complete(asyncio.gather(task, return_exceptions=True))

    # -- what steps look at --------------------------------------------------------------------

    def mark(self) -> None:
        """Remember how far things got: what happened *since* is what a When step did."""
        self._mark = (len(self.model.requests), len(self.reporter.prompts),
                      len(self.reporter.notices), len(self.reporter.tools), len(self.replies))

    @property
    def requests_since_mark(self) -> list[ModelRequest]:
        return self.model.requests[self._mark[0]:]

    @property
    def prompts_since_mark(self) -> list[str]:
        return self.reporter.prompts[self._mark[1]:]

    @property
    def notices_since_mark(self) -> list[str]:
        return self.reporter.notices[self._mark[2]:]

    @property
    def tools_since_mark(self) -> list[Any]:
        return self.reporter.tools[self._mark[3]:]

    @property
    def replies_since_mark(self) -> list[str]:
        """What slash commands answered since the mark."""
        return self.replies[self._mark[4]:]

    @property
    def log_records(self) -> list[logging.LogRecord]:
        """Every record of the ``orion.*`` loggers since the world was made."""
        return list(self._logs.records)

    def trace_events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The trace events the store holds, oldest first (flushed first), optionally of one
        kind: ``kind``, ``name``, ``session_id`` and the parsed ``attributes``."""
        self.runtime.tracer.flush(wait=True)
        database = self.state_dir / "orion.db"
        if not database.exists():
            return []
        query = "SELECT kind, name, session_id, attributes FROM trace_events"
        with contextlib.closing(sqlite3.connect(database)) as connection:
            rows = connection.execute(query + (" WHERE kind = ?" if kind else "")
                                      + " ORDER BY id", (kind,) if kind else ()).fetchall()
        return [{"kind": k, "name": n, "session_id": s, "attributes": json.loads(a)}
                for k, n, s, a in rows]

    def outside_files(self) -> dict[str, str]:
        return {str(p.relative_to(self.root)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(self.root.rglob("*"))
                if p.is_file() and not p.is_relative_to(self.workspace)}

    def outside_changed(self) -> bool:
        return self.outside_files() != self._outside_before

    def close(self) -> None:
        self._abandon_task()
        if self._runtime is not None:
            with contextlib.suppress(ImportError):
                from orion.write_session.manager import manager_for
                manager_for(self._runtime).close()
            self._runtime.close()
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()
        self._logs.close()


def _virtual(runtime: Runtime) -> VirtualClock:
    """The world's runtime runs on the virtual clock the world gave it."""
    clock = runtime.clock
    assert isinstance(clock, VirtualClock), clock
    return clock
