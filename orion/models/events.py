"""The normalized stream every model adapter produces, whatever the provider sent.

A stream is zero or more :class:`TextDelta`, :class:`ReasoningDelta` and :class:`ToolCall`
events, at most one :class:`Usage`, and exactly one :class:`Finish`, last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

#: Finish reasons that end a message cleanly. Everything else (``length``,
#: ``insufficient_system_resource``, ``content_filter``, a reason nobody documented, or no reason
#: at all) means the output was cut off.
CLEAN_FINISH = frozenset({"stop", "tool_calls"})
#: ``Finish.raw`` of a stream the network cut in the middle of the reply: what arrived is kept
#: and the message counts as cut off (the write session continues it).
CONNECTION_LOST = "connection_lost"
#: ``Finish.raw`` of a stream that carried an error event after content had arrived (OpenAI's
#: ``{"error": ...}`` event, OpenRouter's ``finish_reason: "error"``, llama.cpp's ``error:``
#: line, vLLM's ``{"object": "error"}``, Ollama's bare JSON error line, or data that is not
#: JSON): a cut-off like ``length``, with the server's message in ``Finish.error``.
STREAM_ERROR = "error"
#: ``Finish.raw`` of a reply the provider's content filter stopped (OpenAI, Azure).
CONTENT_FILTER = "content_filter"


@dataclass(frozen=True, slots=True, init=False)
class TextDelta:
    text: str

    def __init__(self, text: str) -> None:
        # The dataclass's own __init__ of a frozen class looks object.__setattr__ up on every
        # call; a stream makes one of these per chunk (a long reply: millions), so the field's
        # slot is set directly. Still frozen, hashable and compared by value.
        _set_text(self, text)


_set_text = vars(TextDelta)["text"].__set__  # the slot's descriptor


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """``reasoning_content`` (DeepSeek and others): kept and sent back, never shown as text.

    ``raw``: for reasoning read from a ``<think>`` block in the content (see
    :class:`LeadingThink`), the content text it stands for, exactly as it arrived (the tags,
    the white space before the block and the line breaks after it): a write session sets it
    aside, so a file that starts with a ``<think>`` element can be put back whole."""

    text: str
    raw: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete tool call. ``arguments`` is the raw string the model produced: it may be
    invalid or truncated JSON, and is parsed (with a clear error) by the tool loop."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Finish:
    """``reason`` is normalized: ``stop``, ``tool_calls`` or ``truncated``; ``raw`` is what the
    provider said (``None`` when the stream ended without a reason); ``error`` is the server's
    message when the stream ended with an error event (``raw`` is then :data:`STREAM_ERROR`).
    ``response_id`` and ``response_model`` are the response's ``id`` and ``model`` when the
    endpoint sent them (for traces; they take no part in comparisons)."""

    reason: Literal["stop", "tool_calls", "truncated"]
    raw: str | None = None
    error: str | None = None
    response_id: str | None = field(default=None, compare=False)
    response_model: str | None = field(default=None, compare=False)

    @property
    def truncated(self) -> bool:
        return self.reason == "truncated"


ModelEvent = TextDelta | ReasoningDelta | ToolCall | Usage | Finish


class LeadingThink:
    """Reads a message's content for a leading ``<think>...</think>`` block (a reasoning model
    served without a reasoning parser): the block becomes reasoning, the line breaks after it
    are dropped, and the rest is text. Content that does not start with the block (white space
    aside) passes through unchanged; the decision is made as soon as the first characters rule
    the block in or out, whatever the chunking."""

    OPEN, CLOSE = "<think>", "</think>"
    __slots__ = ("phase", "held")

    def __init__(self) -> None:
        self.phase = "start"  # start | think | after | text
        self.held = ""

    def feed(self, text: str) -> list[ModelEvent]:
        if self.phase == "text":
            return [TextDelta(text)]
        opened = ""  # the white space and the opening tag, consumed by this call
        if self.phase == "start":
            held = self.held + text
            begun = held.lstrip()
            if not begun or (len(begun) < len(self.OPEN) and self.OPEN.startswith(begun)):
                self.held = held  # white space, or a start of "<think>": not decided yet
                return []
            self.held = ""
            if not begun.startswith(self.OPEN):
                self.phase = "text"
                return [TextDelta(held)]
            self.phase = "think"
            cut = len(held) - len(begun) + len(self.OPEN)
            opened, text = held[:cut], held[cut:]
        if self.phase == "think":
            held = self.held + text
            end = held.find(self.CLOSE)
            if end < 0:
                keep = _partial_suffix(held, self.CLOSE)
                self.held = held[len(held) - keep:] if keep else ""
                out = held[:len(held) - keep]
                return [ReasoningDelta(out, opened + out)] if out or opened else []
            self.held = ""
            self.phase = "after"
            events: list[ModelEvent] = [
                ReasoningDelta(held[:end], opened + held[:end + len(self.CLOSE)])]
            return events + self.feed(held[end + len(self.CLOSE):])
        rest = text.lstrip("\r\n")  # after </think>: the answer starts at its first character
        dropped: list[ModelEvent] = [ReasoningDelta("", text[:len(text) - len(rest)])] \
            if len(rest) < len(text) else []
        if not rest:
            return dropped
        self.phase = "text"
        return [*dropped, TextDelta(rest)]

    def end(self) -> list[ModelEvent]:
        held, self.held = self.held, ""
        if not held:
            return []
        return [ReasoningDelta(held, held)] if self.phase == "think" else [TextDelta(held)]


def _partial_suffix(text: str, word: str) -> int:
    """The length of the longest end of ``text`` that is a start of ``word``."""
    for size in range(min(len(word) - 1, len(text)), 0, -1):
        if text.endswith(word[:size]):
            return size
    return 0


def normalize_finish(raw: str | None, saw_tool_calls: bool) -> Finish:
    """``stop`` with tool calls becomes ``tool_calls`` (some providers say stop); anything that
    is not a clean end is ``truncated``."""
    if raw in CLEAN_FINISH:
        return Finish("tool_calls" if saw_tool_calls else raw, raw)  # type: ignore[arg-type]
    if raw == "function_call":
        return Finish("tool_calls", raw)
    return Finish("truncated", raw)

