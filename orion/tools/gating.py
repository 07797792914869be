"""Which tools are advertised, and whether a call may run. Both go through plugin hooks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from orion.hooks.host import ContextRequest as GateRequest
from orion.hooks.types import Decision, ToolCall, ToolSpec

if TYPE_CHECKING:
    from orion.hooks.manager import PluginManager

__all__ = ["Decision", "GateRequest", "advertised", "authorize"]


def advertised(pm: PluginManager, tools: Sequence[ToolSpec],
               request: GateRequest) -> list[ToolSpec]:
    """The tools no plugin withholds, in their given order."""
    withheld: set[str] = set()
    for names in pm.hook.gate_tools(tools=list(tools), request=request):
        if isinstance(names, str):  # one name, not an iterable of its characters
            withheld.add(names)
        elif names:
            withheld.update(names)
    return [tool for tool in tools if tool.name not in withheld]


def authorize(pm: PluginManager, call: ToolCall, request: GateRequest) -> Decision:
    """The first plugin decision, or allowed. A failing plugin denies (fail closed), and so does
    a result that is not a :class:`Decision`; the denial names the plugin."""
    try:
        decision = pm.hook.authorize_tool_call(call=call, request=request)
    except Exception as exc:
        # Plain implementations are wrapped by the plugin manager and deny on their own; this
        # catches wrappers (and managers that are not Orion's).
        culprit = getattr(pm, "culprit", None)
        plugin = culprit("authorize_tool_call", exc) if culprit is not None else "?"
        pm.report_failure(plugin, "authorize_tool_call", exc)
        return Decision(False, f"authorization failed in plugin {plugin!r}, so the call is "
                               f"denied: {type(exc).__name__}: {exc}", plugin)
    if decision is None:
        return Decision(True)
    if not isinstance(decision, Decision):
        return Decision(False, f"authorization returned {type(decision).__name__}, not a Decision; "
                               "the call is denied")
    return decision
