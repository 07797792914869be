"""The scripted model: answers model requests from a script, checking ``expect`` entries.

It shares a :class:`~orion.models.script.ScriptCursor` with the runner. Each request first
consumes the ``expect`` entries at the cursor (each must match the request's newest Orion
message), then exactly one ``model`` entry, whose reply it streams as normalized events.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

from orion.models.base import ModelRequest, ScriptError
from orion.models.events import (
    LeadingThink,
    ModelEvent,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    Usage,
    normalize_finish,
)
from orion.models.script import (
    Entry,
    ExpectEntry,
    ModelEntry,
    ModelReply,
    Script,
    ScriptCursor,
    UserEntry,
    WaitEntry,
)


class ExpectationFailed(ScriptError):
    """An ``expect`` entry did not match: ``expected`` is its text, ``actual`` the newest
    message Orion added to the request (``None`` when it added none)."""

    def __init__(self, message: str, *, expected: str, actual: str | None,
                 entry: ExpectEntry, request: int):
        super().__init__(message)
        self.expected, self.actual = expected, actual
        self.entry, self.request = entry, request


class ScriptDesync(ScriptError):
    """A model request came where the script has no ``model`` entry (exhausted, or the next
    entry is a user line or a wait). ``entry`` is that entry, or ``None`` when exhausted."""

    def __init__(self, message: str, *, request: int, entry: Entry | None):
        super().__init__(message)
        self.request, self.entry = request, entry


@dataclass(frozen=True)
class ServedRequest:
    """One request the scripted model answered: its number, the ``model`` entry it played,
    and the ``expect`` entries it checked first."""

    request: int
    entry: int
    line: int
    expects: tuple[int, ...] = ()
    #: What the runtime sent (messages and advertised tools), for tests and diagnostics.
    sent: ModelRequest | None = field(default=None, compare=False, repr=False)


class ScriptedModel:
    """A :class:`~orion.models.base.Model` that plays the ``model`` entries of a script."""

    name = "scripted"
    provider = "orion.scripted"  # gen_ai.provider.name in traces

    def __init__(self, cursor: ScriptCursor | Script):
        self.cursor = cursor.cursor() if isinstance(cursor, Script) else cursor
        #: The requests served so far, in order (for diagnostics).
        self.log: list[ServedRequest] = []

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Check the expectations at the cursor, then stream the next ``model`` entry (both
        when the stream is first read, as for any model)."""
        return _play(lambda: self._serve(request), request.number)

    def _serve(self, request: ModelRequest) -> ModelReply:
        entry, expects = self._take(request)
        self.log.append(ServedRequest(request.number, entry.index, entry.line, expects, request))
        return entry.model

    def _take(self, request: ModelRequest) -> tuple[ModelEntry, tuple[int, ...]]:
        """Consume the expectations and the ``model`` entry for ``request``, or raise."""
        checked: list[int] = []
        while isinstance(entry := self.cursor.peek(), ExpectEntry):
            self.cursor.next()
            self._check(entry, request)
            checked.append(entry.index)
        entry = self.cursor.peek()
        number = request.number
        if entry is None:
            total = len(self.cursor.script.entries)
            raise ScriptDesync(
                f"script exhausted at request {number}: all {total} entries were used and "
                "Orion asked the model for another reply", request=number, entry=None)
        if isinstance(entry, ModelEntry):
            self.cursor.next()
            return entry, tuple(checked)
        if isinstance(entry, UserEntry):
            what = f"a user line ({entry.user!r})"
        elif isinstance(entry, WaitEntry):
            what = f"a wait (wait_ms: {_number(entry.wait_ms)})"
        else:  # pragma: no cover - every entry kind is handled above
            what = f"a {entry.kind} entry"
        raise ScriptDesync(
            f"request {number} came but the next entry, {entry.where}, is {what}, not a model "
            "reply: the script and the conversation disagree (Orion asked the model again "
            "where the script ends the turn)", request=number, entry=entry)

    @staticmethod
    def _check(entry: ExpectEntry, request: ModelRequest) -> None:
        actual = request.newest_orion_message
        if actual is not None and entry.expect.casefold() in actual.casefold():
            return
        if actual is None:
            seen = ("Orion added no message to this request (the newest message is not a "
                    "prompt or a tool result)")
        else:
            seen = f"it was: {actual!r}"
        raise ExpectationFailed(
            f"{entry.where}: expected the newest message Orion added to contain "
            f"{entry.expect!r} (request {request.number}); {seen}",
            expected=entry.expect, actual=actual, entry=entry, request=request.number)


def stream_reply(reply: ModelReply, number: int) -> AsyncIterator[ModelEvent]:
    """The events of one scripted reply to request ``number``: reasoning, text in chunks, tool
    calls, usage and the finish, with ``chunk_delay_ms`` of real time between pieces."""
    return _play(lambda: reply, number)


async def _play(take: Callable[[], ModelReply], number: int) -> AsyncIterator[ModelEvent]:
    """:func:`stream_reply` of the reply ``take`` gives when the stream is first read. One
    generator for the whole reply, with a loop of its own for the text once its start is
    read: a reply of megabytes is streamed in 16-character chunks, each a pass of that loop."""
    reply = take()
    delay = reply.chunk_delay_ms / 1000.0
    # Explicit chunks arrive a pass of the event loop apart, as separate reads from a network
    # do, so the runtime's listeners see each on its own; a text cut every chunk_size
    # characters arrives in a burst (joined for them) unless chunk_delay_ms paces it.
    paced = delay > 0 or reply.chunks is not None
    think, chunks = LeadingThink(), reply.text_chunks()
    started = False  # no pause before the first piece
    for events in _start(reply, think, chunks):
        if started and paced:
            await asyncio.sleep(delay)
        started = True
        for event in events:
            yield event
    if paced:
        for chunk in chunks:
            await asyncio.sleep(delay)
            yield TextDelta(chunk)
    else:
        for chunk in chunks:
            yield TextDelta(chunk)
    for paced, events in _end(reply, think, number):
        if paced and started and delay > 0:
            await asyncio.sleep(delay)
        started = started or paced
        for event in events:
            yield event


def _start(reply: ModelReply, think: LeadingThink,
           chunks: Iterator[str]) -> Iterator[list[ModelEvent]]:
    """The events of each piece up to where the text is plain text: the reasoning, then the
    text's chunks until ``think`` has read whether it starts with a ``<think>`` block (a
    server's content is read so too)."""
    for chunk in reply.reasoning_chunks():
        yield [ReasoningDelta(chunk)]
    for chunk in chunks:
        yield think.feed(chunk)
        if think.phase == "text":
            return


def _end(reply: ModelReply, think: LeadingThink,
         number: int) -> Iterator[tuple[bool, list[ModelEvent]]]:
    """The events after the text, each with whether a pause comes before it: what ``think``
    still holds, the tool calls (paced), usage and the finish."""
    yield False, think.end()
    for n, call in enumerate(reply.tool_calls, start=1):
        yield True, [ToolCall(call.id or f"call_{number}_{n}", call.name, call.arguments_text())]
    usage = reply.usage
    yield False, [*([Usage(usage.prompt_tokens, usage.completion_tokens, usage.total)]
                    if usage is not None else []),
                  normalize_finish(reply.raw_finish_reason(), bool(reply.tool_calls))]


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


__all__ = ["ExpectationFailed", "ScriptDesync", "ScriptedModel", "ServedRequest", "stream_reply"]
