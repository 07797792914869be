"""Trace events: what happened, when, in which conversation and session. Never content.

Attribute names follow the OpenTelemetry semantic conventions for generative AI where one
exists (``gen_ai.*``, pinned to :data:`SEMCONV_VERSION`); Orion's own use the ``orion.*``
prefix. Values pass through :func:`orion.trace.encoding.json_safe`, so they are JSON data and
strings longer than the threshold are stored as a length, a hash and a head, never whole.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

#: The OpenTelemetry semantic conventions version the ``gen_ai.*`` names follow.
SEMCONV_VERSION = "1.44.0"
SEMCONV_SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

CONVERSATION_ID = "gen_ai.conversation.id"
OPERATION_NAME = "gen_ai.operation.name"
REQUEST_MODEL = "gen_ai.request.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"


class Kind(StrEnum):
    TRANSITION = "transition"
    DISCARDED_EVENT = "discarded_event"
    MODEL_REQUEST = "model_request"
    TOOL_CALL = "tool_call"
    POLICY_DENIAL = "policy_denial"
    VALIDATION_ISSUE = "validation_issue"
    WRITE_REPORT = "write_report"
    RECOVERY = "recovery"
    ERROR = "error"


@dataclass(frozen=True)
class TraceEvent:
    """One event for the ``store_traces`` hook.

    ``at_ms`` is when it started, in milliseconds since the epoch; ``duration_ms`` how long it
    took (0 for a point in time). ``attributes`` hold JSON-safe, content-free details: names,
    counts, sizes, states, outcomes."""

    kind: str
    name: str
    at_ms: float
    conversation_id: str = ""
    session_id: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the attributes are copied, so a store may keep it)."""
        return {"kind": self.kind, "name": self.name, "at_ms": self.at_ms,
                "duration_ms": self.duration_ms, "conversation_id": self.conversation_id,
                "session_id": self.session_id, "attributes": dict(self.attributes)}


def transition(lifecycle: Any, record: Any, conversation_id: str) -> TraceEvent:
    """A lifecycle transition (``record`` is an :class:`orion.statechart.Transition`)."""
    return TraceEvent(
        Kind.TRANSITION, f"{lifecycle.name} {record.trigger}", record.at_ms, conversation_id,
        lifecycle.id,
        {"orion.lifecycle": lifecycle.name, "orion.event": record.trigger,
         "orion.source": record.source, "orion.dest": record.dest,
         "orion.payload": record.payload},
        record.duration_ms)


def discarded_event(lifecycle: Any, trigger: str, payload: dict[str, Any], reason: str,
                    at_ms: float, conversation_id: str) -> TraceEvent:
    """A queued lifecycle trigger that no transition took (see ``lifecycle_event_discarded``)."""
    return TraceEvent(
        Kind.DISCARDED_EVENT, f"{lifecycle.name} {trigger} discarded", at_ms, conversation_id,
        lifecycle.id,
        {"orion.lifecycle": lifecycle.name, "orion.event": trigger, "orion.state": lifecycle.state,
         "orion.reason": reason, "orion.payload": payload})


def model_request(model: str, number: int, finish: Any, usage: Any, *, at_ms: float,
                  duration_ms: float, conversation_id: str) -> TraceEvent:
    """One model request: the model, how it finished, the tokens it used."""
    attributes: dict[str, Any] = {
        OPERATION_NAME: "chat", REQUEST_MODEL: model, "orion.request.number": number,
        FINISH_REASONS: [finish.raw if finish.raw is not None else "none"],
        "orion.finish": finish.reason}
    if usage is not None:
        attributes[INPUT_TOKENS] = usage.prompt_tokens
        attributes[OUTPUT_TOKENS] = usage.completion_tokens
    return TraceEvent(Kind.MODEL_REQUEST, f"chat {model}", at_ms, conversation_id, "",
                      attributes, duration_ms)


#: Tool arguments that carry content (a file's text, a plan): traced as length and hash only,
#: whatever their size, so no content ever enters a trace.
CONTENT_ARGUMENTS = frozenset({"content", "plan_markdown", "text", "body", "data",
                               "raw_content", "file_content"})


def argument_summary(arguments: Any) -> Any:
    """The arguments of a tool call as traced: content-carrying ones reduced to their length
    and sha256; the others (paths, intents, markers) as they are."""
    if not isinstance(arguments, dict):
        return arguments
    summary: dict[str, Any] = {}
    for key, value in arguments.items():
        if key in CONTENT_ARGUMENTS and isinstance(value, str):
            data = value.encode("utf-8", "surrogatepass")
            summary[key] = {"$text": len(value), "sha256": hashlib.sha256(data).hexdigest()}
        else:
            summary[key] = value
    return summary


def tool_call(outcome: Any, *, at_ms: float, duration_ms: float,
              conversation_id: str) -> TraceEvent:
    """One tool call: its name, id, an argument summary and the outcome (``ok`` or the error
    kind). The result itself is not traced."""
    attributes: dict[str, Any] = {
        OPERATION_NAME: "execute_tool", TOOL_NAME: outcome.name, TOOL_CALL_ID: outcome.call_id,
        "orion.tool.outcome": "ok" if outcome.ok else outcome.kind,
        "orion.tool.arguments": argument_summary(outcome.arguments)}
    return TraceEvent(Kind.TOOL_CALL, f"execute_tool {outcome.name}", at_ms, conversation_id,
                      "", attributes, duration_ms)


def policy_denial(outcome: Any, reason: str, plugin: str, *, at_ms: float,
                  conversation_id: str) -> TraceEvent:
    return TraceEvent(Kind.POLICY_DENIAL, f"deny {outcome.name}", at_ms, conversation_id, "",
                      {TOOL_NAME: outcome.name, TOOL_CALL_ID: outcome.call_id,
                       "orion.policy.reason": reason, "orion.policy.plugin": plugin})


def error(where: str, exc: BaseException | str, *, at_ms: float, conversation_id: str = "",
          session_id: str = "") -> TraceEvent:
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return TraceEvent(Kind.ERROR, f"error in {where}", at_ms, conversation_id, session_id,
                      {"orion.where": where, "orion.error": text,
                       "error.type": "str" if isinstance(exc, str) else type(exc).__name__})
