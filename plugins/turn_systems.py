"""The three systems of the default turn pipeline: context, model and tools.

Each is an ordinary plugin system: a team can replace any of them by name in ``orion.yaml``.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from orion.api import (ContextRequest, Finish, GateRequest, Kind, ModelRequest,
                       ReasoningDelta, TextDelta, ToolCall, ToolContext, Usage, advertised,
                       build_context, execute_call, hookimpl, trace_events)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

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


#: Text that arrives faster than the model system reads it (a burst: deltas the endpoint sent
#: before the event loop goes round) reaches the listeners joined, in pieces of about this
#: many characters: a listener costs mostly per call, and a long write streams 100,000s.
BURST_CHARS = 4096


class Burst:
    """The text deltas of one burst, not handed on yet: given to the reporter and the text
    sinks (see :class:`ModelSystem`) joined, when the event loop goes round, at
    :data:`BURST_CHARS` characters, at the line a sink asked for (``Runtime.text_lines_due``:
    a write session's next journal save, so it saves at the same lines as chunk by chunk), at
    an event that is not text, and when the stream ends or fails. Text that trickles (a
    delta per pass of the loop) is handed on delta by delta, as it arrives."""

    __slots__ = ("parts", "_turn", "_show", "_sinks", "_budgets", "_loop", "_soon", "_error",
                 "sunk")

    def __init__(self, turn: Turn, show: Callable[[str], None]) -> None:
        runtime = turn.host
        self.parts: list[str] = []
        self._turn, self._show = turn, show
        self._sinks = runtime.text_sinks
        self._budgets = runtime.text_lines_due
        self._loop = asyncio.get_running_loop()
        self._soon: asyncio.Handle | None = None
        self._error: BaseException | None = None
        self.sunk = False  # a sink took some of the text (a write session's content)

    def opened(self) -> int:
        """The first delta of a burst is about to join it: raise what the last one's delivery
        raised outside the turn, hand this one on when the loop goes round, and return after
        how many lines it is handed on at the latest (the caller counts the burst's
        characters and lines)."""
        self.raise_error()
        self._soon = self._loop.call_soon(self._deliver_soon)
        budgets = self._budgets
        return min(due() for due in budgets) if budgets else 1 << 62

    def deliver(self) -> None:
        """Hand the burst on: to the reporter, then each sink; the turn keeps what no sink
        took."""
        parts = self.parts
        if not parts:
            return
        text = parts[0] if len(parts) == 1 else "".join(parts)
        parts.clear()
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
        self._show(text)
        taken = False
        for sink in self._sinks:
            if sink(text) is True:  # True only: a sink returning text keeps none
                taken = True
        if taken:
            self.sunk = True
        else:
            self._turn.text.append(text)

    def _deliver_soon(self) -> None:
        # Run by the event loop, outside the turn: an error surfaces at the next delta or at
        # the stream's end, where it would have been raised had the text been handed on then.
        self._soon = None
        try:
            self.deliver()
        except Exception as exc:  # noqa: BLE001 - re-raised by raise_error
            self._error = exc

    def raise_error(self) -> None:
        exc, self._error = self._error, None
        if exc is not None:
            raise exc

    def close(self) -> None:
        """The stream ended (or failed): hand on what is left (which cancels the hand-on
        the loop would make), then raise what an earlier one raised outside the turn."""
        self.deliver()
        self.raise_error()


class ModelSystem:
    """One streamed request. Text goes to the runtime's text sinks as it arrives (the write
    session reads its content there), joined in bursts (:class:`Burst`); the reply joins the
    conversation when it ends.

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
        model = runtime.model
        burst = Burst(turn, runtime.reporter.text)
        # The request's span (an LLM span): what happens while the reply streams (a write
        # session's transitions) nests under it; a request that fails is a failed span.
        with runtime.tracer.span(Kind.MODEL_REQUEST, f"chat {model.name}",
                                 trace_events.request_attributes(
                                     model.name, turn.number, getattr(model, "provider", None),
                                     _server(getattr(model, "base_url", None)))) as span:
            try:
                await _read(model.stream(request), turn, burst)
            except BaseException as exc:
                try:  # what arrived before the stream failed still reaches its listeners
                    burst.close()
                except Exception as late:  # noqa: BLE001 - the stream's error is raised
                    exc.add_note(f"handing on the text received before it: "
                                 f"{type(late).__name__}: {late}")
                raise
            burst.close()
            if turn.finish is None:  # an adapter that ended without saying why: cut off
                turn.finish = Finish("truncated", None)
            span.update(trace_events.response_attributes(turn.finish, turn.usage))
            if runtime.tracer.capture_content:  # opt-in: the messages, for the team's backend
                span.update(trace_events.message_content(request.messages, turn.response_text,
                                                         turn.tool_calls))
        runtime.reporter.message_end(turn.finish)
        _answer(turn, sunk=burst.sunk)


async def _read(stream: AsyncIterator[object], turn: Turn, burst: Burst) -> None:
    """The stream's events into ``turn``, its text through ``burst``."""
    # Bound once, and the burst's counts kept in locals (reset whenever the burst was handed
    # on, which empties ``parts``): this loop runs for every chunk of a reply (a long write:
    # 100,000s).
    parts, opened, deliver = burst.parts, burst.opened, burst.deliver
    chars = lines = line_limit = 0
    burst_chars = BURST_CHARS
    async for event in stream:
        if type(event) is TextDelta:
            text = event.text
            if not parts:
                line_limit = opened()
                chars = lines = 0
            parts.append(text)
            chars += len(text)
            lines += text.count("\n")
            if chars >= burst_chars or lines >= line_limit:
                deliver()
            continue
        deliver()  # the text before it first, in order
        if type(event) is ReasoningDelta:
            turn.reasoning.append(event.text)
            if event.raw is not None:
                turn.thought.append(event.raw)
        elif type(event) is ToolCall:
            turn.tool_calls.append(event)
        elif type(event) is Usage:
            turn.usage = event
        elif type(event) is Finish:
            turn.finish = event


def _answer(turn: Turn, *, sunk: bool) -> None:
    """The reply joins the conversation, unless it is the same reply again."""
    runtime = turn.host
    text = turn.response_text
    if not (turn.tool_calls or sunk) and repeats(runtime.conversation.messages, text):
        runtime.reporter.notice(f"the model sent the same reply again ({len(text):,} "
                                "characters) to a prompt of Orion's; the conversation keeps "
                                "it once")
        return
    runtime.conversation.add_assistant(
        text,
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
