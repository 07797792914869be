"""A tool as the model sees it: a name, a description and a pydantic argument model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args_model: type[BaseModel]
    handler: Callable[..., Any] | None = None

    def openai_definition(self) -> dict[str, Any]:
        """The ``tools`` entry of an OpenAI chat-completions request."""
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return {"type": "function",
                "function": {"name": self.name, "description": self.description,
                             "parameters": schema}}


@dataclass(frozen=True)
class ToolCall:
    """One call the model made, with its arguments already parsed."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str = ""
