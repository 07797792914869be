"""The runtime: a conversation with a model, driven through the turn pipeline.

A user line is either a slash command or a message. A message starts a user turn: the pipeline
runs once per model request, and again while a system asks for a follow-up (tool results went
back to the model) or Orion injected a prompt (a lifecycle asked the model something).
Lifecycles ask with ``lifecycle.prompt(text)``; the runtime, one of the listeners of every
lifecycle it hosts, keeps the prompts and moves them into the conversation after every
pipeline pass and after every timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orion.clock import Clock, TimerHandle, VirtualClock
from orion.config import WorkspaceConfig, load_config
from orion.runtime.context import ContextBlock, with_state_note
from orion.errors import OrionError
from orion.hooks.blame import where_raised
from orion.models.base import Model
from orion.hooks.manager import PluginManager
from orion.runtime.conversation import Budget, Conversation, Message
from orion.runtime.pipeline import Turn, apply_edit, default_order, resolve
from orion.runtime.report import Reporter
from orion.statechart.io.catalog import Catalog
from orion.statechart.interpreter.definition import Definition
from orion.statechart.interpreter.listeners import Listeners, PluginHooks
from orion.statechart.interpreter.lifecycle import Lifecycle
from orion.trace.recorder import Recorder, capture_content
from orion.workspace import state_directory


class CommandError(OrionError):
    """An unknown slash command, or one that failed; the message is for the user."""


class TurnLimitError(OrionError):
    """A user turn needed more model requests than ``max_requests_per_turn`` allows."""


class OutOfMemory(OrionError):
    """A model request ran out of memory (``MemoryError``). The turn ends; the conversation
    and the process go on (what the request held is let go)."""


def window_budget(window: int, max_output: int | None) -> int:
    """The (approximate) tokens a conversation may take in a context window of ``window``
    tokens: what the reply's limit (a quarter of the window when none is set) leaves, less a
    quarter for the system message, the tool definitions and the error of the four-characters-a-
    token estimate (dense text, code and other languages take more tokens)."""
    room = window - (max_output if max_output and max_output < window else window // 4)
    return max(1, room * 3 // 4)


class _NotifyingClock:
    """The runtime's clock as lifecycles see it: after each timer callback, the runtime moves
    the prompts it produced into the conversation."""

    def __init__(self, clock: Clock, after: Callable[[], None]):
        self._clock, self._after = clock, after

    def now_ms(self) -> float:
        return self._clock.now_ms()

    def call_at(self, deadline_ms: float, callback: Callable[[], object]) -> TimerHandle:
        def fire() -> None:
            try:
                callback()
            finally:
                self._after()
        return self._clock.call_at(deadline_ms, fire)


class _Prompts:
    """The listener that keeps what lifecycles ask the model, until the runtime delivers it:
    never in the middle of a step (a tool call's result must follow the call)."""

    def __init__(self) -> None:
        self.due: list[str] = []

    def lifecycle_prompt(self, lifecycle: Lifecycle, text: str) -> None:
        self.due.append(text)


class Runtime:
    def __init__(self, *, model: Model, plugins: PluginManager, workspace: str | Path,
                 state_dir: str | Path | None = None, config: WorkspaceConfig | None = None,
                 clock: Clock | None = None, reporter: Reporter | None = None,
                 env: dict[str, str] | None = None):
        self.workspace = Path(workspace).resolve()
        self.state_dir = state_directory(self.workspace, state_dir, create=True)
        self.config = config if config is not None else load_config(self.workspace)
        self.settings = self.config.model.runtime
        self.plugins = plugins
        plugins.validator_deadline_ms = self.settings.validator_deadline_ms
        self.model = model
        self.clock = clock if clock is not None else VirtualClock()
        self.reporter = reporter if reporter is not None else Reporter()
        self.env = env
        self.conversation = Conversation()
        self.budget = Budget(self.settings.max_messages, self.settings.max_tokens)
        origin = str(self.config.path)
        order = apply_edit(default_order(), self.config.model.pipeline, origin)
        self.pipeline = resolve(order, plugins.registry.systems, origin)
        self.lifecycles: dict[str, Lifecycle] = {}
        self.prompts: list[str] = []  # every prompt Orion injected, in order
        self.requests = 0  # model requests made so far
        self.closing = False  # set by /quit
        #: Called with every text delta the model streams, on the hot path: keep them cheap.
        #: A sink that returns True (the object, not any true value) has taken the text over
        #: (a write session: it is the file's content, in the session's journal), and the
        #: model system does not keep it in ``turn.text``; that sink sets the message's
        #: content when the message ends.
        self.text_sinks: list[Callable[[str], bool | None]] = []
        #: How many more lines of text a sink takes before it wants them handed on, asked at
        #: the start of each burst (the model system joins deltas that arrive together): a
        #: write session's lines until its journal saves, so it saves at the same lines however
        #: the text is chunked.
        self.text_lines_due: list[Callable[[], int]] = []
        #: Called with every message the user types, before it joins the conversation; a gate
        #: that returns True holds the message itself (an open write session does, since the
        #: model's answer would stream into the file).
        self.user_gates: list[Callable[[str], bool]] = []
        #: Per-runtime state of plugins and subsystems, by name (e.g. the write sessions).
        self.services: dict[str, Any] = {}
        self._pending = False  # an injected prompt the model has not answered yet
        #: Replies to a timer's prompt (the idle prompt) that no caller awaits: the command
        #: that ends stops them first (:meth:`stop_replies`), so none acts on a closed runtime.
        self._timer_replies: set[asyncio.Task[None]] = set()
        self._prompts = _Prompts()
        #: What every lifecycle this runtime hosts reports to: the plugins' lifecycle hooks,
        #: and the prompts it asks the model.
        self.lifecycle_listeners = Listeners([PluginHooks(plugins), self._prompts])
        self.lifecycle_clock = _NotifyingClock(self.clock, self._after_timer)
        trace = self.config.model.trace
        # Spans run on the wall clock, whatever clock the lifecycles' timers use; a turn and
        # its conversation (the trace's session) are the recorder's to track.
        self.tracer = Recorder(plugins, self.state_dir,
                               capture_content=capture_content(trace.capture_content, env),
                               max_text=trace.max_text,
                               flush_interval_ms=trace.flush_interval_ms,
                               keep_days=trace.keep_days,
                               conversation=lambda: self.conversation.id)
        self._turn_lock = asyncio.Lock()
        self._catalog: Catalog | None = None
        plugins.hook.runtime_started(host=self, runtime=self)

    # -- lifecycles ---------------------------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        """The lifecycles this runtime can start: built-in, shipped by plugins, or the
        workspace's (``orion.yaml``), the strongest of each name (see
        :mod:`orion.statechart.io.catalog`)."""
        if self._catalog is None:
            self._catalog = Catalog(self.plugins, self.config)
        return self._catalog

    def definition(self, name: str) -> Definition:
        """The compiled statechart named ``name`` (its ``statechart:`` field), with the
        workspace's setting overrides: a workspace's chart replaces (or extends) a plugin's,
        which replaces (or extends) the built-in of the same name, whatever its file is called."""
        return self.catalog.definition(name, overrides=self.config.overrides(name),
                                       env=self.env, overrides_origin=self.config.origin(name))

    def start_lifecycle(self, name: str, *, key: str | None = None,
                        context: dict[str, Any] | None = None) -> Lifecycle:
        """Create an instance of statechart ``name``, kept under ``key`` (default: its name)."""
        lifecycle = self.definition(name).create(clock=self.lifecycle_clock, context=context,
                                                 host=self)
        self.lifecycles[key or name] = lifecycle
        self.deliver_prompts()
        return lifecycle

    def states(self) -> dict[str, str]:
        """The active state of each lifecycle, by key: what gating and context plugins see."""
        return {key: lc.state for key, lc in self.lifecycles.items()}

    def tags(self) -> dict[str, frozenset[str]]:
        """The active tags of each lifecycle, by key (see ``Lifecycle.has_tag``)."""
        return {key: lc.definition.tags.get(lc.state, frozenset())
                for key, lc in self.lifecycles.items()}

    def deliver_prompts(self) -> None:
        """Move the prompts lifecycles asked for the model into the conversation."""
        due = self._prompts.due
        while due:
            self.inject(due.pop(0))

    #: The name this had while prompts waited in each lifecycle's context ``outbox``.
    drain_outboxes = deliver_prompts

    # -- the conversation ---------------------------------------------------------------------

    def inject(self, text: str) -> Message:
        """Add a prompt from Orion; the model will be asked to answer it."""
        self.prompts.append(text)
        self._pending = True
        self.reporter.prompt(text)
        return self.conversation.inject(text)

    @property
    def pending(self) -> bool:
        return self._pending

    def system_message(self, blocks: list[ContextBlock]) -> dict[str, Any]:
        """The system prompt and the blocks that are not volatile."""
        parts = [self.settings.system_prompt.strip()]
        parts.extend(block.text.strip() for block in blocks
                     if block.text.strip() and not block.volatile)
        return {"role": "system", "content": "\n\n".join(p for p in parts if p)}

    def request_messages(self, blocks: list[ContextBlock]) -> list[dict[str, Any]]:
        """The messages of a model request: the system message, the conversation, and the
        volatile blocks last (see :func:`state_note`), so that everything before them is the
        same bytes as in the request before."""
        messages = self.conversation.to_openai(self.system_message(blocks))
        return with_state_note(messages, blocks)

    async def handle(self, line: str) -> str | None:
        """One user line: a slash command (its reply is returned) or a message."""
        if line.startswith("/"):
            return await self.command(line)
        self.reporter.user(line)
        with self.tracer.user_turn(line):  # one trace per user message
            for gate in list(self.user_gates):
                if gate(line):
                    self.deliver_prompts()
                    await self.pump()
                    return None
            self.conversation.add_user(line)
            await self.run_turn()
        return None

    async def command(self, line: str) -> str | None:
        name, _, args = line[1:].strip().partition(" ")
        commands = self.plugins.registry.commands
        command = commands.get(name)
        if command is None:
            available = ", ".join(f"/{n}" for n in sorted(commands))
            raise CommandError(f"unknown command /{name} (available: {available or 'none'})")
        try:
            result = command.handler(self, args.strip())
            if asyncio.iscoroutine(result):
                result = await result
        except CommandError:
            raise
        except Exception as exc:
            origin = self.plugins.origins.get(command.plugin)
            if isinstance(exc, OrionError | MemoryError) and (origin is None
                                                              or origin.kind == "builtin"):
                raise  # Orion's own refusal, said as it is
            self.plugins.report_failure(command.plugin, f"slash command /{name}", exc,
                                        command.handler, told=True)
            raise CommandError(f"/{name} failed: plugin {command.plugin!r} failed in slash "
                               f"command /{name} ({where_raised(exc, command.handler)}): "
                               f"{type(exc).__name__}: {exc}; the conversation is kept") from exc
        self.deliver_prompts()
        if result:
            self.reporter.notice(str(result))
        await self.pump()
        return result

    async def run_turn(self) -> None:
        """Model requests until nothing asks for another one."""
        async with self._turn_lock:
            for _ in range(self.settings.max_requests_per_turn):
                self._pending = False
                self.compact()
                self.requests += 1
                turn = Turn(self, self.requests)
                failed: OutOfMemory | None = None
                try:
                    for system in self.pipeline:
                        await system.run(turn)
                        if turn.stop:
                            break
                except MemoryError:
                    failed = OutOfMemory(f"out of memory during model request {self.requests};"
                                         " the reply was dropped")
                if failed is not None:  # raised outside the handler: its frames are let go
                    del turn
                    raise failed
                self.deliver_prompts()
                if not (turn.follow_up or self._pending):
                    return
            raise TurnLimitError(f"one user turn needed more than "
                                 f"{self.settings.max_requests_per_turn} model requests; "
                                 "raise runtime.max_requests_per_turn in orion.yaml if that "
                                 "is expected")

    async def pump(self) -> None:
        """Answer pending prompts (after a timer fired, or a command queued one)."""
        if self._pending:
            await self.run_turn()

    def advance(self, ms: float) -> None:
        """Let ``ms`` of virtual time pass (the clock must be a VirtualClock)."""
        if not isinstance(self.clock, VirtualClock):
            raise TypeError("advance() needs a VirtualClock; real time passes by itself")
        self.clock.advance(ms)

    def request_budget(self) -> Budget:
        """The compaction budget: ``runtime.max_messages`` and ``runtime.max_tokens``, and
        within the model's context window when it is known (see :func:`window_budget`)."""
        window = getattr(self.model, "context_window", None)
        if not window:
            return self.budget
        room = window_budget(window, getattr(self.model, "max_tokens", None))
        if self.budget.max_tokens and self.budget.max_tokens <= room:
            return self.budget
        return Budget(self.budget.max_messages, room)

    def compact(self, force: bool = False) -> int:
        """Drop the oldest turns when the conversation is past its budget (or, ``force``, to
        half its size: ``/compact``). Returns how many messages went."""
        messages = self.conversation.messages
        budget = self.request_budget()
        if force:
            budget = Budget(0, max(1, self.conversation.approx_tokens() // 2))
        elif not budget.exceeded(len(messages), self.conversation.approx_tokens()):
            return 0
        kept = self.plugins.hook.compact_conversation(messages=list(messages), budget=budget)
        if kept is None:
            return 0
        self.conversation.compacted += len(messages) - len(kept)
        self.conversation.messages = list(kept)
        self.reporter.notice(f"compacted the conversation to {len(kept)} messages")
        return len(messages) - len(kept)

    def reset(self) -> None:
        """``/reset``: a new, empty conversation; plugins end what belonged to the old one."""
        self.conversation.reset()
        self._pending = False
        self.plugins.hook.conversation_reset(host=self, runtime=self)
        self.deliver_prompts()

    def close(self) -> None:
        """Record the open turn, flush what is still batched for the trace stores, and close
        the services (the write sessions' journals, the plan store). Each step runs even when
        one before it failed (a terminal that went away with SIGHUP fails every notice): the
        first failure is raised once all have run."""
        steps = [lambda: self.plugins.hook.runtime_closing(host=self, runtime=self), self.tracer.close]
        steps += [close for service in self.services.values()
                  if callable(close := getattr(service, "close", None))]
        failure: Exception | None = None
        for step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - raised below, after the other steps
                failure = failure or exc
        if failure is not None:
            raise failure

    def _after_timer(self) -> None:
        self.deliver_prompts()
        if self._pending and not isinstance(self.clock, VirtualClock):
            # Real time: nobody else will notice the prompt, so answer it on the loop the
            # timer fired on. (With a virtual clock, whoever advanced it calls pump().)
            task = asyncio.get_running_loop().create_task(self._pump_after_timer())
            self._timer_replies.add(task)
            task.add_done_callback(self._timer_replies.discard)

    async def stop_replies(self) -> None:
        """Stop the replies to a timer's prompt that still stream (the command ends): what
        arrived stays with the write session, which the close then saves and names."""
        tasks = [task for task in self._timer_replies if not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _pump_after_timer(self) -> None:
        # No caller awaits this task: an endpoint error is reported here, in one line, and the
        # conversation goes on (the next user line, or the next timer, asks again).
        try:
            await self.pump()
        except OrionError as exc:
            self.reporter.notice(f"error: {exc}")

