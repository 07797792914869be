"""The conversation: the messages the model sees, apart from the system context.

System context is not stored here. It is rebuilt from plugins before every model request, so
whatever it carries (plan mode, the write-session protocol) survives compaction.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, overload

Role = Literal["user", "assistant", "tool"]

#: Bumped whenever a field of an existing message changes (a write's content replaced by its
#: history reference): the conversation's cached request form and token total start again.
_edits = 0


#: What the model reads after a reply the user stopped: the reply as it arrived, then this line.
INTERRUPTED_NOTE = "[The user interrupted this reply here.]"

_SURROGATE = re.compile("[\ud800-\udfff]")
#: Characters encoded at a time to look for a surrogate: a small temporary copy.
_PROBE = 1 << 16


def _has_surrogate(text: str) -> bool:
    # Encoding refuses a surrogate, and runs about 15 times faster than a regular expression
    # looking for one (a streamed write's reply can be megabytes long).
    try:
        for at in range(0, len(text), _PROBE):
            text[at:at + _PROBE].encode("utf-16-le")
    except UnicodeEncodeError:
        return True
    return False


@overload
def _sendable(text: str) -> str: ...
@overload
def _sendable(text: None) -> None: ...
def _sendable(text: str | None) -> str | None:
    """``text`` with lone surrogates (valid in the model's JSON, not in UTF-8) replaced by
    U+FFFD: the history is sent back with every request, and one such character would make
    every later request fail to encode. A write session's journal keeps what was sent."""
    if not text or text.isascii() or not _has_surrogate(text):
        return text
    return _SURROGATE.sub("\ufffd", text)


@dataclass
class Message:
    role: Role
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None  # OpenAI format, on assistant messages
    tool_call_id: str | None = None  # on tool results
    reasoning_content: str | None = None  # round-tripped for providers that send it
    injected: bool = False  # a prompt Orion added for the model, not the user's words
    interrupted: bool = False  # a reply the user stopped: its content is what had arrived
    # Every request sends the whole conversation: each message's request form and size are
    # computed once, and again only after one of its fields changes.
    _openai: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)
    _tokens: int = field(default=-1, init=False, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name[0] != "_" and "_tokens" in self.__dict__:  # a change after __init__
            global _edits
            _edits += 1
            object.__setattr__(self, "_openai", None)
            object.__setattr__(self, "_tokens", -1)

    @property
    def from_orion(self) -> bool:
        """Added by Orion: an injected prompt or a tool result."""
        return self.injected or self.role == "tool"

    def to_openai(self) -> dict[str, Any]:
        """The message as the OpenAI API takes it. The same dict is returned until a field
        changes: callers must not modify it."""
        if self._openai is not None:
            return self._openai
        content = self.content
        if self.interrupted:  # the content stays as the model sent it; the request says why
            content = f"{content}\n\n{INTERRUPTED_NOTE}" if content else INTERRUPTED_NOTE
        message: dict[str, Any] = {"role": self.role, "content": content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        if self.reasoning_content is not None:
            message["reasoning_content"] = self.reasoning_content
        object.__setattr__(self, "_openai", message)
        return message

    def approx_tokens(self) -> int:
        """About four characters a token: cheap, and close enough for a budget."""
        if self._tokens >= 0:
            return self._tokens
        size = len(self.content or "") + len(self.reasoning_content or "")
        if self.tool_calls:
            size += len(json.dumps(self.tool_calls))
        tokens = size // 4 + 4
        object.__setattr__(self, "_tokens", tokens)
        return tokens


@dataclass(frozen=True)
class Budget:
    """When a conversation must be compacted: past either limit (0 means no limit)."""

    max_messages: int = 0
    max_tokens: int = 0

    def exceeded_by(self, messages: list[Message]) -> bool:
        if self.max_messages and len(messages) > self.max_messages:
            return True
        return bool(self.max_tokens) and sum(m.approx_tokens() for m in messages) > self.max_tokens

    def exceeded(self, messages: int, tokens: int) -> bool:
        """The same test on a conversation's running totals."""
        return bool(self.max_messages and messages > self.max_messages
                    or self.max_tokens and tokens > self.max_tokens)


@dataclass
class Conversation:
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    messages: list[Message] = field(default_factory=list)
    compacted: int = 0  # how many messages compaction has removed so far
    # Running forms of ``messages``, extended as messages are appended, so a request at turn
    # 2,000 does not redo the work of every earlier turn: valid while ``messages`` is the same
    # list, only grew (its last counted message is still in place), and no message changed
    # since (``_edits``).
    _wire: list[dict[str, Any]] = field(default_factory=list, init=False, repr=False)
    _tokens: int = field(default=0, init=False, repr=False)
    _counted: int = field(default=0, init=False, repr=False)
    _key: tuple[Any, int] = field(default=(None, -1), init=False, repr=False)

    def add(self, message: Message) -> Message:
        self.messages.append(message)
        return message

    def add_user(self, text: str) -> Message:
        return self.add(Message("user", text))

    def inject(self, text: str) -> Message:
        return self.add(Message("user", text, injected=True))

    def add_assistant(self, text: str, tool_calls: list[dict[str, Any]] | None = None,
                      reasoning: str | None = None) -> Message:
        text, reasoning = _sendable(text), _sendable(reasoning)
        # ``content`` is a string even beside tool calls: llama-cpp-python's server answers
        # HTTP 500 to ``content: null`` (and then to every later request of the conversation),
        # and every server takes "".
        return self.add(Message("assistant", text or "", tool_calls=tool_calls or None,
                                reasoning_content=reasoning))

    def add_interrupted(self, text: str) -> Message:
        """The part of a reply that arrived before the user stopped it, kept as sent; the
        requests mark it as interrupted (:data:`INTERRUPTED_NOTE`)."""
        return self.add(Message("assistant", _sendable(text), interrupted=True))

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

    def to_openai(self, system: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """The messages as the OpenAI API takes them, after ``system`` if given (a new list,
        built once per request; the dicts are built once per message and shared)."""
        self._catch_up()
        return self._wire.copy() if system is None else [system, *self._wire]

    def approx_tokens(self) -> int:
        """The sum of the messages' :meth:`Message.approx_tokens`."""
        self._catch_up()
        return self._tokens

    def _catch_up(self) -> None:
        messages, counted = self.messages, self._counted
        if (self._key[0] is not messages or self._key[1] != _edits or counted > len(messages)
                or counted and messages[counted - 1].to_openai() is not self._wire[-1]):
            self._wire, self._tokens, self._counted = [], 0, 0
            self._key = (messages, _edits)
        if self._counted < len(messages):
            new = messages[self._counted:]
            self._wire.extend(m.to_openai() for m in new)
            self._tokens += sum(m.approx_tokens() for m in new)
            self._counted = len(messages)

    def reset(self) -> None:
        """A new, empty conversation: a new id too, so nothing keyed by the old one carries
        over."""
        self.id = uuid.uuid4().hex
        self.messages.clear()
        self._key = (None, -1)
        self.compacted = 0
