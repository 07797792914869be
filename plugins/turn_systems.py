"""The three systems of the default turn pipeline: context, model and tools.

Each is an ordinary plugin system: a team can replace any of them by name in ``orion.yaml``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from orion.api import (ContextRequest, Finish, GateRequest, Kind, ModelRequest,
                       ReasoningDelta, TextDelta, ToolCall, ToolContext, Usage, advertised,
                       build_context, execute_call, hookimpl, trace_events)

if TYPE_CHECKING:
    from collections.abc import Callable

    from orion.api import Host, Message, Turn


def gate_request(runtime: Host) -> GateRequest:
    return GateRequest(conversation_id=runtime.conversation.id, states=runtime.states(),
                       tags=runtime.tags(), host=runtime)


def _server(base_url: str | None) -> tuple[str, int] | None:
    """``server.address`` and ``server.port`` of the model endpoint, for its spans."""
    if not base_url:
        return None
    try:
        parts = urlsplit(base_url)
        return (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)) \
            if parts.hostname else None
    except ValueError:
        return None


class ContextSystem:
    """System context blocks from every plugin, and the tools gating lets through. Both are
    rebuilt for every request, so they survive compaction."""

    name = "context"

    async def run(self, turn: Turn) -> None:
        runtime = turn.host
        request = ContextRequest(conversation_id=runtime.conversation.id,
                                 states=runtime.states(), tags=runtime.tags(),
                                 host=runtime)
        turn.blocks = build_context(runtime.plugins, request)
        turn.tools = advertised(runtime.plugins, list(runtime.plugins.registry.tools.values()),
                                gate_request(runtime))


def repeats(messages: list[Message], text: str) -> bool:
    """Whether ``text`` is the reply before it again, with only prompts Orion injected in
    between (a model answering each prompt with the same words): the conversation would grow
    by the same reply until the turn's request limit, and tell the model nothing new."""
    if not text:
        return False
    for message in reversed(messages):
        if message.injected:
            continue
        return (message.role == "assistant" and not message.tool_calls
                and not message.interrupted and message.content == text)
    return False


class ModelSystem:
    """One streamed request. Text goes to the runtime's text sinks as it arrives (the write
    session reads its content there); the reply joins the conversation when it ends.

    Text a sink takes over (it returns True: a write session's content, kept by its journal) is
    not kept in ``turn.text`` as well: a streamed file is held once, not once per listener. The
    sink gives the message its content when the message ends (see ``Runtime.text_sinks``)."""

    name = "model"
    replies = True  # the pipeline's reply to the user comes from here

    async def run(self, turn: Turn) -> None:
        runtime = turn.host
        request = ModelRequest(
            messages=runtime.request_messages(turn.blocks),
            tools=[tool.openai_definition() for tool in turn.tools], number=turn.number,
            newest_orion_message=runtime.conversation.newest_from_orion())
        turn.request = request
        sinks = runtime.text_sinks
        reporter = runtime.reporter
        # Bound once: this loop runs for every chunk of a reply (a long write: 100,000s).
        keep, show = turn.text.append, reporter.text
        sunk = False  # a sink took some of the text (a write session's content)
        model = runtime.model
        # The request's span (an LLM span): what happens while the reply streams (a write
        # session's transitions) nests under it; a request that fails is a failed span.
        with runtime.tracer.span(Kind.MODEL_REQUEST, f"chat {model.name}",
                                 trace_events.request_attributes(
                                     model.name, turn.number, getattr(model, "provider", None),
                                     _server(getattr(model, "base_url", None)))) as span:
            async for event in model.stream(request):
                if type(event) is TextDelta:
                    text = event.text
                    show(text)
                    taken = False
                    for sink in sinks:
                        if sink(text) is True:  # True only: a sink returning text keeps none
                            taken = True
                    if not taken:
                        keep(text)
                    else:
                        sunk = True
                elif type(event) is ReasoningDelta:
                    turn.reasoning.append(event.text)
                    if event.raw is not None:
                        turn.thought.append(event.raw)
                elif type(event) is ToolCall:
                    turn.tool_calls.append(event)
                elif type(event) is Usage:
                    turn.usage = event
                elif type(event) is Finish:
                    turn.finish = event
            if turn.finish is None:  # an adapter that ended without saying why: cut off
                turn.finish = Finish("truncated", None)
            span.update(trace_events.response_attributes(turn.finish, turn.usage))
            if runtime.tracer.capture_content:  # opt-in: the messages, for the team's backend
                span.update(trace_events.message_content(request.messages, turn.response_text,
                                                         turn.tool_calls))
        reporter.message_end(turn.finish)
        text = turn.response_text
        if not (turn.tool_calls or sunk) \
                and repeats(runtime.conversation.messages, text):
            reporter.notice(f"the model sent the same reply again ({len(text):,} characters) "
                            "to a prompt of Orion's; the conversation keeps it once")
            return
        runtime.conversation.add_assistant(
            turn.response_text,
            tool_calls=[{"id": c.id, "type": "function",
                         "function": {"name": c.name, "arguments": c.arguments}}
                        for c in turn.tool_calls],
            reasoning="".join(turn.reasoning) or None)


class ToolsSystem:
    """Every tool call of the reply: parsed, authorized, run, and answered in order."""

    name = "tools"

    async def run(self, turn: Turn) -> None:
        if not turn.tool_calls:
            return
        runtime = turn.host
        tools = {tool.name: tool for tool in turn.tools}
        context = ToolContext(workspace=runtime.workspace,
                              conversation_id=runtime.conversation.id, host=runtime)
        conversation_id = runtime.conversation.id
        for call in turn.tool_calls:
            with runtime.tracer.span(Kind.TOOL_CALL, trace_events.tool_span_name(call.name),
                                     {"gen_ai.operation.name": "execute_tool",
                                      "gen_ai.tool.call.id": call.id}) as span:
                outcome = await execute_call(call, tools=tools, pm=runtime.plugins,
                                             gate=gate_request(runtime), context=context)
                span.name = trace_events.tool_span_name(outcome.name, outcome.kind)
                span.update(trace_events.tool_attributes(outcome))
                if runtime.tracer.capture_content:
                    span.update({trace_events.TOOL_ARGUMENTS: call.arguments,
                                 trace_events.TOOL_RESULT: outcome.content})
                if outcome.kind == "denied":
                    detail = json.loads(outcome.content)
                    runtime.tracer.emit(trace_events.policy_denial(
                        outcome, detail.get("error", ""), detail.get("plugin", ""), at_ms=0.0,
                        conversation_id=conversation_id))
            turn.outcomes.append(outcome)
            runtime.conversation.add_tool_result(call.id, outcome.content)
            runtime.reporter.tool(outcome)
        turn.follow_up = True


@hookimpl
def register_systems(register: Callable[[Any], None]) -> None:
    register(ContextSystem())
    register(ModelSystem())
    register(ToolsSystem())
