"""Which tools are advertised, and whether a call may run. Both go through plugin hooks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orion.tools.spec import ToolCall, ToolSpec

if TYPE_CHECKING:
    from orion.plugins import PluginManager


@dataclass(frozen=True)
class GateRequest:
    """What gating plugins may look at: the conversation and the active lifecycle states."""

    conversation_id: str = ""
    states: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""
    plugin: str = ""

    @classmethod
    def deny(cls, reason: str) -> Decision:
        return cls(False, reason)


def advertised(pm: PluginManager, tools: Sequence[ToolSpec], request: GateRequest) -> list[ToolSpec]:
    """The tools no plugin withholds, in their given order."""
    withheld: set[str] = set()
    for names in pm.hook.gate_tools(tools=list(tools), request=request):
        if names:
            withheld.update(names)
    return [tool for tool in tools if tool.name not in withheld]


def authorize(pm: PluginManager, call: ToolCall, request: GateRequest) -> Decision:
    """The first plugin decision, or allowed. A failing plugin denies (fail closed)."""
    try:
        decision = pm.hook.authorize_tool_call(call=call, request=request)
    except Exception as exc:
        pm.report_failure("?", "authorize_tool_call", exc)
        return Decision(False, f"authorization failed, so the call is denied: "
                               f"{type(exc).__name__}: {exc}")
    if decision is None:
        return Decision(True)
    if not isinstance(decision, Decision):
        return Decision(False, f"authorization returned {type(decision).__name__}, not a Decision; "
                               "denied")
    return decision
