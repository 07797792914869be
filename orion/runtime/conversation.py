"""The conversation: the messages the model sees, apart from the system context.

System context is not stored here. It is rebuilt from plugins before every model request, so
whatever it carries (plan mode, the write-session protocol) survives compaction.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant", "tool"]


@dataclass
class Message:
    role: Role
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None  # OpenAI format, on assistant messages
    tool_call_id: str | None = None  # on tool results
    reasoning_content: str | None = None  # round-tripped for providers that send it
    injected: bool = False  # a prompt Orion added for the model, not the user's words

    @property
    def from_orion(self) -> bool:
        """Added by Orion: an injected prompt or a tool result."""
        return self.injected or self.role == "tool"

    def to_openai(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        if self.reasoning_content is not None:
            message["reasoning_content"] = self.reasoning_content
        return message

    def approx_tokens(self) -> int:
        """About four characters a token: cheap, and close enough for a budget."""
        size = len(self.content or "") + len(self.reasoning_content or "")
        if self.tool_calls:
            size += len(json.dumps(self.tool_calls))
        return size // 4 + 4


@dataclass(frozen=True)
class Budget:
    """When a conversation must be compacted: past either limit (0 means no limit)."""

    max_messages: int = 0
    max_tokens: int = 0

    def exceeded_by(self, messages: list[Message]) -> bool:
        if self.max_messages and len(messages) > self.max_messages:
            return True
        return bool(self.max_tokens) and sum(m.approx_tokens() for m in messages) > self.max_tokens


@dataclass
class Conversation:
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    messages: list[Message] = field(default_factory=list)
    compacted: int = 0  # how many messages compaction has removed so far

    def add(self, message: Message) -> Message:
        self.messages.append(message)
        return message

    def add_user(self, text: str) -> Message:
        return self.add(Message("user", text))

    def inject(self, text: str) -> Message:
        return self.add(Message("user", text, injected=True))

    def add_assistant(self, text: str, tool_calls: list[dict[str, Any]] | None = None,
                      reasoning: str | None = None) -> Message:
        return self.add(Message("assistant", text or None if tool_calls else text,
                                tool_calls=tool_calls or None, reasoning_content=reasoning))

    def add_tool_result(self, call_id: str, content: str) -> Message:
        return self.add(Message("tool", content, tool_call_id=call_id))

    def newest_from_orion(self) -> str | None:
        """The text of the newest message Orion added, if any came after the user's last."""
        for message in reversed(self.messages):
            if message.from_orion:
                return message.content
            if message.role == "user":
                return None
        return None

    def to_openai(self) -> list[dict[str, Any]]:
        return [m.to_openai() for m in self.messages]

    def reset(self) -> None:
        """A new, empty conversation: a new id too, so nothing keyed by the old one carries
        over."""
        self.id = uuid.uuid4().hex
        self.messages.clear()
        self.compacted = 0
