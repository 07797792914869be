"""What a plugin imports: Orion's public API, in one module.

Everything a plugin needs is here, and what is here stays: hook markers, the types hooks
receive and return, the host (the runtime a hook runs in) and its services, and the accessors
of write sessions. Orion's other modules are its implementation; a plugin that imports them
may break with any release. Orion's built-in plugins use this module only (their own
subsystem's package aside: the plan plugin drives ``orion.plan``, the trace stores
``orion.trace``). A plugin that adds ``orion`` commands also imports :mod:`orion.commands`, the
options and errors every command shares.

The host is the runtime. A hook reaches it by name: ``request.runtime`` (context and gating
requests), ``context.runtime`` (tools), ``turn.runtime`` (pipeline systems), ``runtime``
(``conversation_reset``, ``runtime_started``, ``runtime_closing``); from a guard or an action,
:func:`host_of` (``host_of(lifecycle)``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from orion import hookimpl

#: Where each name lives. They are imported on first use (PEP 562): a plugin that imports
#: ``hookimpl`` and a few types does not pay for the statechart engine or the write sessions
#: when it is loaded, and ``orion --help`` loads every plugin.
_WHERE = {
    "ContextBlock": "orion.context", "ContextRequest": "orion.context",
    "build_context": "orion.context",
    "ActionError": "orion.errors", "ConfigError": "orion.errors", "Diagnostic": "orion.errors",
    "OrionError": "orion.errors", "PluginError": "orion.errors",
    "StatechartError": "orion.errors", "TriggerNotAllowed": "orion.errors",
    "ModelRequest": "orion.models.base",
    "Finish": "orion.models.events", "ReasoningDelta": "orion.models.events",
    "TextDelta": "orion.models.events", "ToolCall": "orion.models.events",
    "Usage": "orion.models.events",
    "Reporter": "orion.runtime.report",
    "Lifecycle": "orion.statechart.interpreter.lifecycle", "Transition": "orion.statechart.interpreter.lifecycle",
    "ToolContext": "orion.tools.executor", "execute_call": "orion.tools.executor",
    "Decision": "orion.tools.gating", "GateRequest": "orion.tools.gating",
    "advertised": "orion.tools.gating",
    "ToolSpec": "orion.tools.spec",
    "Kind": "orion.trace.events", "TraceEvent": "orion.trace.events",
    "Issue": "orion.validation", "ValidationRequest": "orion.validation",
    "PathOutsideWorkspace": "orion.workspace", "resolve_inside": "orion.workspace",
    "MARKDOWN_INFO": "orion.write_session.protocol",
    "LineView": "orion.write_session.repair", "find_problems": "orion.write_session.repair",
    "line_spans": "orion.write_session.repair", "position": "orion.write_session.repair",
}


def __getattr__(name: str) -> Any:
    if name == "trace_events":
        value: Any = importlib.import_module("orion.trace.events")
    elif name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # the next lookup is a plain one
    return value


if TYPE_CHECKING:
    from orion.context import ContextBlock, ContextRequest, build_context
    from orion.errors import (ActionError, ConfigError, Diagnostic, OrionError, PluginError,
                              StatechartError, TriggerNotAllowed)
    from orion.models.base import ModelRequest
    from orion.models.events import Finish, ReasoningDelta, TextDelta, ToolCall, Usage
    from orion.runtime.report import Reporter
    from orion.statechart.interpreter.lifecycle import Lifecycle, Transition
    from orion.tools.executor import ToolContext, execute_call
    from orion.tools.gating import Decision, GateRequest, advertised
    from orion.tools.spec import ToolSpec
    from orion.trace import events as trace_events
    from orion.trace.events import Kind, TraceEvent
    from orion.validation import Issue, ValidationRequest
    from orion.workspace import PathOutsideWorkspace, resolve_inside
    from orion.write_session.protocol import MARKDOWN_INFO
    from orion.write_session.repair import LineView, find_problems, line_spans, position
    from orion.write_session.session import WriteSession

__all__ = [
    "ActionError", "ConfigError", "ContextBlock", "ContextRequest", "Decision", "Diagnostic",
    "Finish", "GateRequest", "Host", "Issue", "Kind", "LineView", "Lifecycle", "MARKDOWN_INFO",
    "ModelRequest", "OrionError", "PathOutsideWorkspace", "PluginError", "ReasoningDelta",
    "Reporter", "StatechartError", "TextDelta", "ToolCall", "ToolContext", "ToolSpec",
    "TraceEvent", "Transition", "TriggerNotAllowed", "Usage", "ValidationRequest", "advertised",
    "build_context", "execute_call", "find_problems", "hookimpl", "host_of", "line_spans",
    "position", "resolve_inside", "trace_events", "write_session_of", "write_sessions",
]


@runtime_checkable
class Host(Protocol):
    """The runtime a hook runs in, as plugins see it."""

    #: The workspace directory: every file a tool touches is resolved inside it.
    workspace: Path
    #: Where Orion keeps its state (``WORKSPACE/.orion`` unless ``--state-dir``).
    state_dir: Path
    #: Tells the user something: ``reporter.notice("...")``.
    reporter: Reporter
    #: Per-runtime state of plugins and subsystems, by name.
    services: dict[str, Any]
    #: The loaded plugins.
    plugins: Any
    #: Records trace events; ``tracer.flush()`` hands them to the stores.
    tracer: Any

    def states(self) -> dict[str, str]: ...

    def tags(self) -> dict[str, frozenset[str]]: ...

    def inject(self, text: str) -> Any: ...


def host_of(source: Any) -> Host | None:
    """The host of a lifecycle (in a guard or an action), a request, a tool context or a
    turn; ``None`` when there is none (a lifecycle run on its own, as in tests)."""
    from orion.statechart.interpreter.lifecycle import Lifecycle

    if isinstance(source, Lifecycle):
        return source.host
    return getattr(source, "runtime", None)


def write_sessions(host: Host) -> list[WriteSession]:
    """The write sessions of ``host``, oldest first (open and finished ones of this run)."""
    from orion.write_session.manager import manager_for

    return list(manager_for(host).sessions)


def write_session_of(lifecycle: Lifecycle) -> WriteSession | None:
    """The write session a ``write_session`` lifecycle belongs to (in a guard or an action)."""
    from orion.write_session.manager import manager_for

    host = host_of(lifecycle)
    return manager_for(host).get(lifecycle.id) if host is not None else None
