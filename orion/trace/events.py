"""Trace events: what happened, when, in which conversation, turn and session. Never content.

Every event is a span of one trace: a **turn** (a user message and everything it causes) is
one trace, its root span the ``turn`` event; model requests, tool calls, lifecycle transitions
and phases, the write are spans under it (``trace_id``, ``span_id``, ``parent_id``). A
lifecycle that lives through several turns (a write session, a plan) links its spans in later
turns to where it began (``links``). The conversation groups the turns (``conversation_id``,
exported as ``session.id``).

Attribute names follow the OpenTelemetry semantic conventions for generative AI where one
exists (``gen_ai.*``, pinned to :data:`SEMCONV_VERSION`); Orion's own use the ``orion.*``
prefix. What an event may hold is decided by :mod:`orion.trace.content`: sizes, counts,
hashes, ids and enums, never text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

#: The OpenTelemetry semantic conventions version the ``gen_ai.*`` names follow.
SEMCONV_VERSION = "1.44.0"
SEMCONV_SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

CONVERSATION_ID = "gen_ai.conversation.id"
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
AGENT_NAME = "gen_ai.agent.name"
ERROR_TYPE = "error.type"
#: Content, kept only when content capture is on (as text in the blobs, never in the event).
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"


class Kind(StrEnum):
    TURN = "turn"
    TRANSITION = "transition"
    PHASE = "phase"
    FINALIZE = "finalize"
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
    """One event for the ``store_traces`` hook: one span.

    ``at_ms`` is when it started, in wall-clock milliseconds since the epoch; ``duration_ms``
    how long it took (0 for a point in time). ``attributes`` hold JSON-safe, content-free
    details: names, counts, sizes, states, outcomes, hashes. ``trace_id`` (32 hex digits),
    ``span_id`` and ``parent_id`` (16 hex digits) place it in its turn's tree; ``links`` are
    the spans (``"<trace_id>-<span_id>"``) of earlier turns it continues. The recorder sets
    the times and ids: a plugin's ``tracer.emit(TraceEvent(kind, name, 0.0, ...))`` is
    recorded as ending when it is emitted, under the span that is open then."""

    kind: str
    name: str
    at_ms: float
    conversation_id: str = ""
    session_id: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0
    trace_id: str = ""
    span_id: str = ""
    parent_id: str = ""
    links: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the attributes are copied, so a store may keep it)."""
        return {"kind": self.kind, "name": self.name, "at_ms": self.at_ms,
                "duration_ms": self.duration_ms, "conversation_id": self.conversation_id,
                "session_id": self.session_id, "attributes": dict(self.attributes),
                "trace_id": self.trace_id, "span_id": self.span_id,
                "parent_id": self.parent_id, "links": list(self.links)}


_new = object.__new__


def make_event(kind: str, name: str, at_ms: float, conversation_id: str, session_id: str,
               attributes: dict[str, Any], duration_ms: float, trace_id: str, span_id: str,
               parent_id: str, links: tuple[str, ...]) -> TraceEvent:
    """``TraceEvent(...)`` with every field given, for the recorder's hot path: a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__`` (eleven calls,
    about 2 us), where filling the new instance's ``__dict__`` at once costs a third."""
    event = _new(TraceEvent)
    event.__dict__.update(kind=kind, name=name, at_ms=at_ms, conversation_id=conversation_id,
                          session_id=session_id, attributes=attributes, duration_ms=duration_ms,
                          trace_id=trace_id, span_id=span_id, parent_id=parent_id, links=links)
    return event


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


def model_request(model: str, number: int, finish: Any = None, usage: Any = None, *,
                  at_ms: float = 0.0, duration_ms: float = 0.0, conversation_id: str = "",
                  provider: str | None = None) -> TraceEvent:
    """One model request: the model, how it finished, the tokens it used (the ``chat`` span;
    the runtime opens it with :func:`request_attributes` and completes it with
    :func:`response_attributes`)."""
    attributes = request_attributes(model, number, provider)
    if finish is not None:
        attributes.update(response_attributes(finish, usage))
    return TraceEvent(Kind.MODEL_REQUEST, f"chat {model}", at_ms, conversation_id, "",
                      attributes, duration_ms)


def request_attributes(model: str, number: int, provider: str | None = None,
                       server: tuple[str, int] | None = None) -> dict[str, Any]:
    """What is known of a model request when it starts."""
    attributes: dict[str, Any] = {OPERATION_NAME: "chat", REQUEST_MODEL: model,
                                  "orion.request.number": number}
    if provider:
        attributes[PROVIDER_NAME] = provider
    if server is not None:
        attributes["server.address"], attributes["server.port"] = server
    return attributes


def response_attributes(finish: Any, usage: Any) -> dict[str, Any]:
    """What is known of a model request when its stream ends: how it finished, the response's
    id and model (when the endpoint said), the tokens used."""
    attributes: dict[str, Any] = {
        FINISH_REASONS: [finish.raw if finish.raw is not None else "none"],
        "orion.finish": finish.reason}
    response_id = getattr(finish, "response_id", None)
    if response_id:
        attributes[RESPONSE_ID] = response_id
    response_model = getattr(finish, "response_model", None)
    if response_model:
        attributes[RESPONSE_MODEL] = response_model
    if usage is not None:
        attributes[INPUT_TOKENS] = usage.prompt_tokens
        attributes[OUTPUT_TOKENS] = usage.completion_tokens
    return attributes


def message_content(messages: list[dict[str, Any]], text: str,
                    tool_calls: list[Any]) -> dict[str, Any]:
    """A request's messages and its reply, as the GenAI conventions capture them (JSON text):
    recorded only with content capture on, and then kept out of the events all the same (the
    recorder hashes them; the texts travel in the batch's blobs)."""
    reply: dict[str, Any] = {"role": "assistant", "parts": []}
    if text:
        reply["parts"].append({"type": "text", "content": text})
    for call in tool_calls:
        reply["parts"].append({"type": "tool_call", "id": call.id, "name": call.name,
                               "arguments": call.arguments})
    return {INPUT_MESSAGES: json.dumps(messages, ensure_ascii=False),
            OUTPUT_MESSAGES: json.dumps([reply], ensure_ascii=False)}


def tool_call(outcome: Any, *, at_ms: float = 0.0, duration_ms: float = 0.0,
              conversation_id: str = "") -> TraceEvent:
    """One tool call: its name, id, the arguments (their strings become lengths and hashes,
    see :mod:`orion.trace.content`) and the outcome (``ok`` or the error kind). The result
    itself is not traced."""
    return TraceEvent(Kind.TOOL_CALL, tool_span_name(outcome.name, outcome.kind), at_ms,
                      conversation_id, "", tool_attributes(outcome), duration_ms)


def tool_span_name(name: str, kind: str | None = None) -> str:
    """``execute_tool {name}``; a name the model made up (no such tool) is content, and is
    left out."""
    return "execute_tool" if kind == "unknown_tool" else f"execute_tool {name}"


def tool_attributes(outcome: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {OPERATION_NAME: "execute_tool", TOOL_CALL_ID: outcome.call_id,
                                  "orion.tool.outcome": "ok" if outcome.ok else outcome.kind,
                                  "orion.tool.arguments": outcome.arguments}
    if outcome.kind == "unknown_tool":
        attributes["orion.tool.requested"] = outcome.name  # the model's text: hashed
    else:
        attributes[TOOL_NAME] = outcome.name
    if not outcome.ok:
        attributes[ERROR_TYPE] = outcome.kind
    return attributes


def policy_denial(outcome: Any, reason: str, plugin: str, *, at_ms: float,
                  conversation_id: str) -> TraceEvent:
    return TraceEvent(Kind.POLICY_DENIAL, f"deny {outcome.name}", at_ms, conversation_id, "",
                      {TOOL_NAME: outcome.name, TOOL_CALL_ID: outcome.call_id,
                       "orion.policy.reason": reason, "orion.policy.plugin": plugin})


def error(where: str, exc: BaseException | str, *, at_ms: float = 0.0,
          conversation_id: str = "", session_id: str = "",
          attributes: dict[str, Any] | None = None) -> TraceEvent:
    """Something failed. The message (``orion.error``) may quote content (a file's line in a
    script's expectation, a path): it is traced as its length and hash, and only its type
    (``error.type``) as it is."""
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    return TraceEvent(Kind.ERROR, f"error in {where}", at_ms, conversation_id, session_id,
                      {"orion.where": where, "orion.error": text,
                       ERROR_TYPE: "str" if isinstance(exc, str) else type(exc).__name__,
                       **(attributes or {})})
