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
