"""Every hook Orion calls. ``docs/plugins.md`` documents each one; a test keeps them in step.

Implement hooks in a module or class and mark them with :data:`orion.hookimpl`::

    from orion import hookimpl

    @hookimpl
    def lifecycle_transition(lifecycle, transition):
        print(lifecycle.name, transition.source, "->", transition.dest)

A hook implementation may accept any subset of the arguments named here, in any order.

Observer hooks (``lifecycle_*`` and ``store_traces``) are isolated: an implementation that
raises is reported on the plugin manager's ``failures`` and in the ``orion.plugins`` log, and the
lifecycle goes on. Guards and ``authorize_tool_call`` fail closed: an error denies (a guard's
stops the event with ``GuardError``), and the denial names the plugin and the line of its
code. Other hooks' errors propagate to the caller as ``orion.errors.PluginFailed``, which names
the plugin, the line of its code and the hook (the plugin's exception is its ``__cause__``):
``orion chat`` and ``orion run`` say it in one line and keep the conversation and the write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import pluggy

if TYPE_CHECKING:
    from orion.hooks.host import ContextRequest, Host
    from orion.hooks.host import ContextRequest as GateRequest
    from orion.hooks.types import ContextBlock, Decision, ToolSpec
    from orion.hooks.types import ToolCall as ParsedCall
    from orion.runtime.conversation import Budget, Message
    from orion.runtime.pipeline import System
    from orion.runtime.report import OpenWrite
    from orion.runtime.run_report import RunReport
    from orion.statechart.interpreter.lifecycle import Lifecycle, Transition
    from orion.trace.events import TraceEvent
    from orion.validation import Issue, ValidationRequest

hookspec = pluggy.HookspecMarker("orion")

#: Every hook that receives the runtime calls it ``host``. The three runtime hooks called it
#: ``runtime`` before 0.2.0: an implementation that still asks for ``runtime`` receives the same
#: object, with a DeprecationWarning when it is registered; the old name goes in 0.3.0.
_RUNTIME_IS_HOST = {"runtime": DeprecationWarning(
    "the hook argument 'runtime' is now called 'host' (same object); 'runtime' goes in 0.3.0")}

# ---------------------------------------------------------------------------------------------
# Lifecycle transitions (observers)


@hookspec
def lifecycle_started(lifecycle: Lifecycle, host: Host | None) -> None:
    """A lifecycle instance was created and entered its initial state (after the initial
    states' entry actions ran). Not called for instances restored from a snapshot.

    ``host`` (in every ``lifecycle_*`` hook) is the runtime the lifecycle runs in (the
    :class:`orion.api.Host`), or ``None`` for a lifecycle created on its own."""


@hookspec
def lifecycle_transition(lifecycle: Lifecycle, transition: Transition,
                         host: Host | None) -> None:
    """A transition was taken. ``transition`` records the trigger, the active state before
    (``source``) and after (``dest``), the payload, the start time (``at_ms``, from the
    lifecycle's clock) and ``duration_ms`` (guards, exit, actions and entry, measured with a
    monotonic timer). ``wrapper=True`` implementations wrap the other observers, for timing
    or tracing them."""


@hookspec
def lifecycle_event_discarded(lifecycle: Lifecycle, trigger: str, payload: dict[str, Any],
                              reason: str, host: Host | None) -> None:
    """A queued trigger (sent while another was being processed, a timer's, or a
    ``done.state.<id>`` completion event) was dropped when its turn came: no transition
    answered it in the active state, every guard said no, the lifecycle had finished, or an
    action failed before it. ``reason`` says which. A direct ``trigger()`` raises instead."""


@hookspec
def lifecycle_finished(lifecycle: Lifecycle, host: Host | None) -> None:
    """The lifecycle entered a top-level final state. Its timers are cancelled and it accepts
    no more triggers."""


# ---------------------------------------------------------------------------------------------
# Registration


@hookspec
def register_guards(register: Callable[..., None]) -> None:
    """Provide named guards for statecharts: ``register(name, fn)``, where
    ``fn(lifecycle, transition) -> bool``. A guard that raises stops the event: no transition
    is taken, and the trigger raises ``orion.errors.GuardError`` naming the plugin."""


@hookspec
def register_actions(register: Callable[..., None]) -> None:
    """Provide named actions for statecharts: ``register(name, fn)``, where
    ``fn(lifecycle, transition) -> None``. A failing action raises
    :class:`orion.errors.ActionError` from the trigger."""


@hookspec
def register_tools(register: Callable[[ToolSpec], None]) -> None:
    """Provide tools for the model: ``register(ToolSpec(...))``. The spec's pydantic
    argument model produces the OpenAI function definition."""


@hookspec
def register_statecharts(register: Callable[..., None]) -> None:
    """Ship statecharts: ``register(path)`` for each YAML file, a whole chart or an overlay
    (``extends:``). A chart is found by the name it declares; a plugin's replaces the built-in
    of that name, and a workspace's (``orion.yaml`` ``statecharts:``) replaces the plugin's.
    Two plugins shipping one name is an error that names both."""


@hookspec
def register_commands(cli: click.Group) -> None:
    """Add commands to the ``orion`` command line: ``@cli.command()``."""


@hookspec
def register_systems(register: Callable[[System], None]) -> None:
    """Provide turn-pipeline systems: ``register(system)``, where ``system`` has a ``name``
    and an ``async def run(self, turn)``. ``statecharts/pipeline.yaml`` orders them by name,
    and a workspace's ``orion.yaml`` can insert, replace or remove them. A system that replies
    to the user in the built-in ``model``'s place sets ``replies = True``: a pipeline must have
    one."""


@hookspec
def register_slash_commands(register: Callable[..., None]) -> None:
    """Provide slash commands for conversations: ``register(name, handler, help)``, where
    ``handler(runtime, args) -> str | None`` (or a coroutine) handles ``/name args`` and returns
    a message for the user."""


# ---------------------------------------------------------------------------------------------
# Context building


@hookspec
def build_context(request: ContextRequest) -> ContextBlock | Iterable[ContextBlock] | None:
    """Return system context blocks for the next model request. Blocks are rebuilt on every
    turn, so what they carry survives compaction of the conversation."""


@hookspec(firstresult=True)
def compact_conversation(messages: list[Message], budget: Budget) -> list[Message] | None:
    """Shrink a conversation that passed its budget (``budget.max_messages``,
    ``budget.max_tokens``): return the messages to keep (older turns dropped or summarized),
    or ``None`` to leave it to the next plugin. System context is not in ``messages``: it is
    rebuilt on every turn, so it survives compaction."""


@hookspec(warn_on_impl_args=_RUNTIME_IS_HOST)
def runtime_started(host: Host, runtime: Host) -> None:
    """A runtime was created (``orion run``, ``orion chat``, a test's world), its plugins and
    configuration loaded, before its first turn: set up per-runtime services here
    (``host.services[name] = ...``). Errors propagate: the runtime does not start.
    ``runtime`` (here and in ``runtime_closing`` and ``conversation_reset``) is the old name of
    ``host``, kept until 0.3.0."""


@hookspec(warn_on_impl_args=_RUNTIME_IS_HOST)
def runtime_closing(host: Host, runtime: Host) -> None:
    """The runtime is closing (the process ends, a test's world is torn down): release what
    ``runtime_started`` set up. Called before the runtime flushes its traces and closes its
    services. Errors are reported on ``PluginManager.failures`` and do not stop the others."""


@hookspec
def report_run(host: Host) -> RunReport | None:
    """``orion run`` played its script, and the runtime is about to close: return what the run
    did that your plugin knows of, as a :class:`orion.runtime.run_report.RunReport` (its
    sections of the JSON report, the files written, the problems that fail the run), or
    ``None``. The runner knows no feature: the answers are the report."""


@hookspec
def reply_stopped(host: Host) -> str | None:
    """The user stopped the model's reply (Ctrl-C in ``orion chat``): save what the reply was
    doing and return one sentence for the user that says what is kept and where, or ``None``
    when the reply touched nothing of yours. The sentences are shown in place of the chat's
    own "stopped"."""


@hookspec(firstresult=True)
def open_write(host: Host) -> OpenWrite | None:
    """The write open in ``host`` now, if it is yours: an
    :class:`orion.runtime.report.OpenWrite` (its id, a word for what it does, and a function
    that says where it stands), else ``None``. ``orion chat`` asks when a message starts (the
    text of a write's message is its content, not a reply to show) and when it draws the live
    line; keep it cheap. The first answer wins."""


@hookspec(warn_on_impl_args=_RUNTIME_IS_HOST)
def conversation_reset(host: Host, runtime: Host) -> None:
    """The user reset the conversation (``/reset``); the history is already cleared. End what
    belongs to the old conversation (plan work, for example)."""


# ---------------------------------------------------------------------------------------------
# Finalization


@hookspec(firstresult=True)
def finalize(lifecycle: Lifecycle, transition: Transition) -> Any:
    """Carry out what a lifecycle has collected, when its statechart runs the built-in
    ``finalize`` action (a write plan, a plan draft). The first implementation that returns
    something other than ``None`` owns the result; return ``None`` for lifecycles you do not
    handle (check ``lifecycle.name``)."""


# ---------------------------------------------------------------------------------------------
# Content validation


@hookspec(firstresult=True)
def normalize_content(path: str, content: bytes) -> bytes | None:
    """Rewrite the content of a finished write before it is validated (for example, unwrap a
    file the model wrapped in one fenced code block). Return the new bytes, or ``None`` to leave
    it; the first implementation that returns bytes wins. Disable a normalizer by disabling its
    plugin in ``orion.yaml``."""



@hookspec
def validate_content(request: ValidationRequest) -> Iterable[Issue] | None:
    """Return the issues found in ``request.content`` (bytes) bound for ``request.path``:
    each with a line, a column, a code and a message. ``None`` (or nothing) when it is fine.
    For checks whose every issue depends on one line alone, implement
    :func:`validate_lines` instead: Orion can then run them while the content streams."""


@hookspec
def validate_lines(request: ValidationRequest) -> Iterable[Issue] | None:
    """Like :func:`validate_content`, for checks where each issue depends only on the line it
    is on (encoding, placeholders). ``request.content`` is a run of whole lines of the content:
    all of it, or, while a write session's content streams, one piece of it that ends with a
    line break (the last piece may not). Number lines from the piece's first line; Orion moves
    the issues to their lines in the content. Running the check on the pieces must find what
    running it on the whole content finds; then the write does not wait for it after ``DONE``."""


# ---------------------------------------------------------------------------------------------
# Trace storage (observer)


@hookspec
def store_traces(events: Sequence[TraceEvent], blobs: Mapping[str, str], state_dir: Path) -> None:
    """Persist or export a batch of trace events, flushed after every model request and at
    least every ``trace.flush_interval_ms``. Events are JSON-safe and content-free: long
    strings are summaries (length, sha256, head). ``blobs`` maps sha256 to the full text of
    those strings, and is empty unless ``trace.capture_content`` is on. ``state_dir`` is the
    workspace's state directory (``.orion/``). A store that fails must not raise into the
    runtime: failures are isolated (this is an observer hook)."""


@hookspec
def close_traces(state_dir: Path) -> None:
    """A runtime stored its last traces (after the final ``store_traces`` of its close): a
    store releases what it holds for ``state_dir`` (a connection, a file), and opens it again
    if traces come later. Without it, a process that runs many runtimes (a test suite, a
    service) would keep every workspace's store open. An observer hook: failures are
    isolated."""


@hookspec
def prune_traces(state_dir: Path, keep_ms: float, now_ms: float) -> int | None:
    """Retention (``trace.keep_days``), asked once as a runtime starts: remove the events of
    ``state_dir``'s store that are more than ``keep_ms`` older than the newest event it holds,
    or than ``now_ms`` when the clock is behind that event (a clock stepped ahead must not age
    what was recorded), and return how many went; ``None`` for a store that keeps nothing or
    has no retention. The runtime announces the count. Do not create a store that does not
    exist yet. An observer hook: failures are isolated."""


# ---------------------------------------------------------------------------------------------
# Tool gating


@hookspec
def gate_tools(tools: Sequence[ToolSpec], request: GateRequest) -> Iterable[str] | None:
    """Return the names of tools to withhold from the next model request (an iterable of
    names, or one name), or ``None``. A tool is advertised when no implementation withholds
    it."""


@hookspec(firstresult=True)
def authorize_tool_call(call: ParsedCall, request: GateRequest) -> Decision | None:
    """Decide one tool call before it runs. The first non-``None`` decision wins; with none the
    call is allowed. An implementation that raises, or returns something other than a
    ``Decision``, denies the call (fail closed) with a reason that names the plugin."""
