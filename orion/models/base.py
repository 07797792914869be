"""What the runtime asks of a model, and the errors a model adapter raises."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from orion.errors import OrionError
from orion.models.events import ModelEvent


@dataclass(frozen=True)
class ModelRequest:
    """One chat-completions request: OpenAI-format messages and tool definitions."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    number: int = 1  # 1-based count of requests in this run
    #: The text of the newest message Orion itself added (an injected prompt or a tool result),
    #: which scripted conversations check with ``expect``.
    newest_orion_message: str | None = None


class Model(Protocol):
    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]: ...


class ModelError(OrionError):
    """The model could not be reached or refused the request; the message says what to fix."""


class ModelAuthError(ModelError):
    pass


class ModelConnectionError(ModelError):
    pass


class ScriptError(ModelError):
    """A scripted conversation did not go as written (exhausted, an expectation failed)."""


class ContextOverflowError(ModelError):
    """The request did not fit the model's context window. ``window`` is the window in tokens
    when the server said it (then the model adapter remembers it, and the runtime compacts
    before the next request would pass it); ``asked`` the tokens the request needed."""

    def __init__(self, message: str, *, window: int | None = None,
                 asked: int | None = None) -> None:
        super().__init__(message)
        self.window, self.asked = window, asked


#: What a user can do about a request that did not fit the context window.
OVERFLOW_HINT = ("/compact drops the oldest turns of the conversation, /reset starts a new one, "
                 "or send a shorter message; set model.context_window in orion.yaml to have "
                 "Orion compact before it is reached")
