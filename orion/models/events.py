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


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """``reasoning_content`` (DeepSeek and others): kept and sent back, never shown as text."""

    text: str


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
    provider said (``None`` when the stream ended without a reason). ``response_id`` and
    ``response_model`` are the response's ``id`` and ``model`` when the endpoint sent them
    (for traces; they take no part in comparisons)."""

    reason: Literal["stop", "tool_calls", "truncated"]
    raw: str | None = None
    response_id: str | None = field(default=None, compare=False)
    response_model: str | None = field(default=None, compare=False)

    @property
    def truncated(self) -> bool:
        return self.reason == "truncated"


ModelEvent = TextDelta | ReasoningDelta | ToolCall | Usage | Finish


def normalize_finish(raw: str | None, saw_tool_calls: bool) -> Finish:
    """``stop`` with tool calls becomes ``tool_calls`` (some providers say stop); anything that
    is not a clean end is ``truncated``."""
    if raw in CLEAN_FINISH:
        return Finish("tool_calls" if saw_tool_calls else raw, raw)  # type: ignore[arg-type]
    if raw == "function_call":
        return Finish("tool_calls", raw)
    return Finish("truncated", raw)
