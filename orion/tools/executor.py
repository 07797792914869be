"""Run one raw tool call from the model, end to end, and say what goes back to the model.

:func:`execute_call` takes the call as the model adapter produced it
(:class:`orion.models.events.ToolCall`: an id, a name and the raw arguments string) and
returns a :class:`ToolOutcome`. It never raises for anything the model or a tool did wrong;
each step that can fail ends the call with an error outcome:

1. **Unknown tool** (``"unknown_tool"``): the name is not among the tools advertised this turn.
   The error lists the available tools.
2. **Arguments** (``"invalid_json"`` or ``"invalid_arguments"``): parsed and validated by
   :func:`orion.tools.arguments.parse_arguments` (exact JSON error positions, truncation,
   field-level schema errors, a pointer to ``WritePlanTool_begin`` for large content when that
   tool is available).
3. **Authorization** (``"denied"``): :func:`orion.tools.gating.authorize` asks the
   ``authorize_tool_call`` plugins, failing closed. A denied call's handler is not called, so
   nothing changes.
4. **The handler** (``"failed"``): ``spec.handler(arguments, context)``, sync or async. The
   model is told the exception's type and message, never a traceback. An
   :class:`~orion.errors.OrionError` is a deliberate refusal (a rejected plan); any other
   exception is also reported on the plugin manager (``pm.report_failure(plugin, "tool
   <name>", exc)``, the plugin that registered the tool, or the tool's name). A spec without a
   handler fails the same way.

What a successful handler returns becomes the tool message content: a ``str`` as it is, a
``dict``, ``list`` or other JSON value as JSON, a pydantic model as its JSON, ``None`` as
``"ok"``.

Error contents are JSON objects, so that models (and the humans reading traces) can parse
them::

    {"error": "<what went wrong, for the model>", "kind": "<kind>"}

``kind`` is one of ``unknown_tool``, ``invalid_json``, ``invalid_arguments``, ``denied`` and
``failed``. ``unknown_tool`` errors also carry ``"available": [<tool names>]`` and ``denied``
errors ``"plugin": "<deciding plugin>"`` when it is known.
"""

from __future__ import annotations

import difflib
import inspect
import json
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from orion.errors import OrionError
from orion.hooks.host import ToolContext
from orion.hooks.types import Decision, ToolCall, ToolOutcome, ToolSpec
from orion.models.events import ToolCall as RawToolCall
from orion.tools.arguments import LARGE_CONTENT_TOOL, ToolArgumentError, parse_arguments
from orion.tools.gating import GateRequest, authorize
from orion.workspace import PathOutsideWorkspace, resolve_inside

if TYPE_CHECKING:
    from orion.hooks.manager import PluginManager

UNKNOWN_TOOL = "unknown_tool"
DENIED = "denied"
FAILED = "failed"
#: Exception messages longer than this are cut before they go to the model.
MAX_ERROR_CHARS = 2000


def error_content(message: str, kind: str, **more: Any) -> str:
    """The JSON error object sent to the model: ``{"error": ..., "kind": ..., **more}``."""
    return json.dumps({"error": message, "kind": kind, **more}, ensure_ascii=False)


async def execute_call(call: RawToolCall, *, tools: Mapping[str, ToolSpec], pm: PluginManager,
                       gate: GateRequest, context: ToolContext) -> ToolOutcome:
    """Run ``call`` against the tools advertised this turn (by name) and return its outcome."""

    def failure(kind: str, message: str, arguments: dict[str, Any] | None = None,
                **more: Any) -> ToolOutcome:
        return ToolOutcome(call.id, call.name, False, error_content(message, kind, **more),
                           kind, arguments)

    spec = tools.get(call.name)
    registered = getattr(getattr(pm, "registry", None), "tools", {})
    if spec is None and call.name in registered:
        # A real tool that gating withheld this turn (a plan tool while plan work is off): the
        # call is a policy question, so the authorization plugins decide and a denial is
        # traced as one. Allowed or not, a withheld tool does not run.
        decision = authorize(pm, ToolCall(call.name, {}, call.id), gate)
        if not decision.allowed:
            message, more = _denial(decision)
            return failure(DENIED, message, None, **more)
    if spec is None:
        available = sorted(tools)
        return failure(UNKNOWN_TOOL, _unknown_tool(call.name, available), available=available)

    try:
        args = parse_arguments(call.arguments, spec, hint_tool=(
            LARGE_CONTENT_TOOL if LARGE_CONTENT_TOOL in tools else None))
    except ToolArgumentError as exc:
        return failure(exc.kind, exc.for_model)
    arguments = args.model_dump()

    if spec.handler is None:
        return failure(FAILED, f"tool {spec.name!r} cannot be run: it has no handler "
                               "(a configuration error, not a mistake in the call)", arguments)

    parsed = ToolCall(spec.name, arguments, call.id, touched(spec, arguments, context.workspace))
    decision = authorize(pm, parsed, gate)
    if not decision.allowed:
        message, more = _denial(decision)
        return failure(DENIED, message, arguments, **more)

    try:
        result = spec.handler(args, context)
        if inspect.isawaitable(result):
            result = await result
        content = _content(result)
    except Exception as exc:
        return failure(FAILED, _handler_failed(pm, spec, exc), arguments)
    return ToolOutcome(call.id, call.name, True, content, None, arguments)


def touched(spec: ToolSpec, arguments: Mapping[str, Any],
            workspace: Path) -> tuple[PurePosixPath, ...]:
    """The workspace paths the arguments ``spec`` declares as paths name, relative to the
    workspace and resolved; one that leads outside it is left out (the tool refuses it)."""
    root = workspace.resolve()
    found: list[PurePosixPath] = []
    for name in spec.paths:
        value = arguments.get(name)
        for path in [value] if isinstance(value, str) else value or ():
            try:
                resolved = resolve_inside(root, str(path))
            except (PathOutsideWorkspace, OSError, RuntimeError):
                continue
            found.append(PurePosixPath(resolved.relative_to(root).as_posix()))
    return tuple(dict.fromkeys(found))


def _handler_failed(pm: PluginManager, spec: ToolSpec, exc: Exception) -> str:
    """What the model is told of a tool whose handler raised ``exc``."""
    # An OrionError is the tool refusing on purpose (a rejected plan, a size limit): the model
    # is told why, and it is not a plugin failure. Anything else is a bug to report.
    if not isinstance(exc, OrionError):
        pm.report_failure(_owner(pm, spec), f"tool {spec.name}", exc)
    message = str(exc)
    if len(message) > MAX_ERROR_CHARS:
        message = message[:MAX_ERROR_CHARS] + "..."
    # A refusal that says all in its message (``refusal = True``) is not named: its class
    # name tells the model nothing the message does not.
    if message and getattr(exc, "refusal", False):
        detail = message
    else:
        detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return f"tool {spec.name!r} failed: {detail}"


def _denial(decision: Decision) -> tuple[str, dict[str, Any]]:
    """What the model is told of a denial, and the plugin that denied (when one did)."""
    more = {"plugin": decision.plugin} if decision.plugin else {}
    return f"denied by policy: {decision.reason or 'no reason given'}", more


def _unknown_tool(name: str, available: list[str]) -> str:
    """What the model is told of a call to a tool it was not given, with the closest name."""
    close = difflib.get_close_matches(str(name), available, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return (f"unknown tool {name!r}; the available tools are: "
            f"{', '.join(available) or 'none'}.{hint}")


def _content(result: Any) -> str:
    """A handler's result as tool message content. Raises TypeError for what cannot be sent."""
    if result is None:
        return "ok"
    if isinstance(result, str):
        return result
    if isinstance(result, BaseModel):
        return result.model_dump_json()
    if isinstance(result, (dict, list, tuple, int, float, bool)):
        try:
            return json.dumps(result, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"the handler returned a {type(result).__name__} that is not "
                            f"JSON-serializable: {exc}") from exc
    raise TypeError(f"the handler returned {type(result).__name__}; a tool returns str, a JSON "
                    "value (dict, list, number), a pydantic model or None")


def _owner(pm: Any, spec: ToolSpec) -> str:
    """The plugin that registered ``spec``, or the tool's name when it was not registered
    through the plugin manager (or the registry cannot be collected)."""
    try:
        registry = pm.registry
        if registry.tools.get(spec.name) is spec:
            return registry.tool_plugins[spec.name]
    except Exception:  # a broken registry must not hide the tool's own failure
        pass
    return spec.name
