"""What a plugin imports: Orion's public API, in one module.

Everything a plugin needs is here, and what is here stays: hook markers, the types hooks
receive and return, the host (the runtime a hook runs in) and its services, and the accessors
of write sessions. Orion's other modules are its implementation; a plugin that imports them
may break with any release. Orion's built-in plugins use this module only (their own
subsystem's package aside: the plan plugin drives ``orion.plan``, the trace stores
``orion.trace``). A plugin that adds ``orion`` commands also imports :mod:`orion.commands`, the
options and errors every command shares.

The host is the runtime, typed :class:`Host`. Every hook that receives it calls it ``host``
(the ``lifecycle_*`` hooks, ``runtime_started``, ``runtime_closing``, ``conversation_reset``);
requests, tool contexts and turns carry it as ``.host`` too; from a guard or an action,
:func:`host_of` (``host_of(lifecycle)``). Write sessions are seen through
:class:`WriteSessionView`, whose ``status`` is a :class:`WriteStatus`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from orion import hookimpl

#: Where each name lives. They are imported on first use (PEP 562): a plugin that imports
#: ``hookimpl`` and a few types does not pay for the statechart engine or the write sessions
#: when it is loaded, and ``orion --help`` loads every plugin.
_WHERE = {
    "ContextBlock": "orion.hooks.types", "ContextRequest": "orion.hooks.host",
    "Host": "orion.hooks.host", "build_context": "orion.runtime.context",
    "ActionError": "orion.errors", "ConfigError": "orion.errors", "Diagnostic": "orion.errors",
    "OrionError": "orion.errors", "PluginError": "orion.errors",
    "StatechartError": "orion.errors", "TriggerNotAllowed": "orion.errors",
    "UnknownTag": "orion.errors",
    "ModelRequest": "orion.models.base",
    "Finish": "orion.models.events", "ReasoningDelta": "orion.models.events",
    "TextDelta": "orion.models.events", "ToolCall": "orion.models.events",
    "Usage": "orion.models.events",
    "OpenWrite": "orion.runtime.report", "Reporter": "orion.runtime.report",
    "FileReport": "orion.runtime.run_report", "RunReport": "orion.runtime.run_report",
    "Budget": "orion.runtime.conversation", "Message": "orion.runtime.conversation",
    "Turn": "orion.runtime.pipeline",
    "Lifecycle": "orion.statechart.interpreter.lifecycle",
    "Step": "orion.statechart.interpreter.lifecycle",
    "Transition": "orion.statechart.interpreter.lifecycle",
    "Listener": "orion.statechart.interpreter.listeners",
    "ToolContext": "orion.hooks.host", "execute_call": "orion.tools.executor",
    "Decision": "orion.hooks.types", "GateRequest": "orion.hooks.host:ContextRequest",
    "advertised": "orion.tools.gating",
    "ToolSpec": "orion.hooks.types",
    # the call as gating sees it, arguments parsed (``ToolCall`` is the stream's event)
    "ParsedCall": "orion.hooks.types:ToolCall",
    "Kind": "orion.trace.events", "TraceEvent": "orion.trace.events",
    "Issue": "orion.validation", "ValidationRequest": "orion.validation",
    "PathOutsideWorkspace": "orion.workspace", "resolve_inside": "orion.workspace",
    "MARKDOWN_INFO": "orion.write_session.protocol",
    "LineView": "orion.validation", "find_problems": "orion.validation",
    "line_spans": "orion.validation", "position": "orion.validation",
    "WriteSessionView": "orion.write_session.view", "WriteStatus": "orion.write_session.view",
    "WriteContext": "orion.write_session.context",
}


def __getattr__(name: str) -> Any:
    if name == "trace_events":
        value: Any = importlib.import_module("orion.trace.events")
    elif name in _WHERE:
        module, _, attribute = _WHERE[name].partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # the next lookup is a plain one
    return value


if TYPE_CHECKING:
    from orion.errors import (ActionError, ConfigError, Diagnostic, OrionError, PluginError,
                              StatechartError, TriggerNotAllowed, UnknownTag)
    from orion.hooks.host import ContextRequest, Host, ToolContext
    from orion.hooks.host import ContextRequest as GateRequest
    from orion.hooks.types import ContextBlock, Decision, ToolSpec
    from orion.hooks.types import ToolCall as ParsedCall
    from orion.models.base import ModelRequest
    from orion.models.events import Finish, ReasoningDelta, TextDelta, ToolCall, Usage
    from orion.runtime.context import build_context
    from orion.runtime.conversation import Budget, Message
    from orion.runtime.pipeline import Turn
    from orion.runtime.report import OpenWrite, Reporter
    from orion.runtime.run_report import FileReport, RunReport
    from orion.statechart.interpreter.lifecycle import Lifecycle, Step, Transition
    from orion.statechart.interpreter.listeners import Listener
    from orion.tools.executor import execute_call
    from orion.tools.gating import advertised
    from orion.trace import events as trace_events
    from orion.trace.events import Kind, TraceEvent
    from orion.validation import (Issue, LineView, ValidationRequest, find_problems, line_spans,
                                  position)
    from orion.workspace import PathOutsideWorkspace, resolve_inside
    from orion.write_session.protocol import MARKDOWN_INFO
    from orion.write_session.context import WriteContext
    from orion.write_session.view import WriteSessionView, WriteStatus

__all__ = [
    "ActionError", "Budget", "ConfigError", "ContextBlock", "ContextRequest", "Decision",
    "Diagnostic", "FileReport", "Finish", "GateRequest", "Host", "Issue", "Kind", "Lifecycle",
    "LineView", "Listener", "MARKDOWN_INFO", "Message", "ModelRequest", "OpenWrite", "OrionError",
    "ParsedCall", "PathOutsideWorkspace", "PluginError", "ReasoningDelta", "Reporter", "RunReport",
    "StatechartError", "Step", "TextDelta", "ToolCall", "ToolContext", "ToolSpec", "TraceEvent",
    "Transition", "TriggerNotAllowed", "Turn", "UnknownTag", "Usage", "ValidationRequest",
    "WriteContext", "WriteSessionView", "WriteStatus", "advertised", "build_context", "execute_call",
    "find_problems", "hookimpl", "host_of", "line_spans", "position", "resolve_inside",
    "trace_events", "write_session_of", "write_sessions",
]


def host_of(source: Any) -> Host | None:
    """The host of a lifecycle (in a guard or an action), a request, a tool context or a
    turn; ``None`` when there is none (a lifecycle run on its own, as in tests)."""
    from orion.statechart.interpreter.lifecycle import Lifecycle

    host: Host | None = source.host if isinstance(source, Lifecycle) \
        else getattr(source, "host", None)
    return host


def write_sessions(host: Host) -> list[WriteSessionView]:
    """The write sessions of ``host``, oldest first (open and finished ones of this run). A
    host that is not Orion's runtime (a test's own) has none."""
    from orion.runtime.runtime import Runtime
    from orion.write_session.manager import manager_for
    from orion.write_session.view import WriteSessionView

    if not isinstance(host, Runtime):
        return []
    return [WriteSessionView(session) for session in manager_for(host).sessions]


def write_session_of(lifecycle: Lifecycle) -> WriteSessionView | None:
    """The write session a ``write_session`` lifecycle belongs to (in a guard or an action), or
    ``None``: the lifecycle's context links it to its session."""
    from orion.write_session.context import session_of
    from orion.write_session.view import WriteSessionView

    session = session_of(lifecycle)  # the session is in the lifecycle's context
    return WriteSessionView(session) if session is not None else None
