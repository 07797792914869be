"""A tool as the model sees it: a name, a description and a pydantic argument model."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel

#: OpenAI's (and Anthropic's) rule for function names.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args_model: type[BaseModel]
    handler: Callable[..., Any] | None = None
    #: The arguments that name workspace files or directories (a string, or a list of them):
    #: a call's :attr:`ToolCall.paths` resolves them, so gates decide on paths without
    #: knowing each tool's argument names.
    paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not TOOL_NAME.fullmatch(self.name):
            raise ValueError(f"tool name {self.name!r} must match {TOOL_NAME.pattern} "
                             "(what model APIs accept)")
        if not (isinstance(self.args_model, type) and issubclass(self.args_model, BaseModel)):
            raise TypeError(f"tool {self.name!r}: args_model must be a pydantic BaseModel "
                            f"subclass, not {self.args_model!r}")
        if self.handler is not None and not callable(self.handler):
            raise TypeError(f"tool {self.name!r}: handler is not callable")
        self._check_paths()

    def _check_paths(self) -> None:
        """``paths`` names arguments of the tool's model (a typo would leave a path ungated)."""
        unknown = [name for name in self.paths if name not in self.args_model.model_fields]
        if isinstance(self.paths, str) or unknown:
            raise ValueError(f"tool {self.name!r}: paths must be a tuple of argument names of "
                             f"{self.args_model.__name__}; unknown: {unknown or self.paths!r}")

    def openai_definition(self) -> dict[str, Any]:
        """The ``tools`` entry of an OpenAI chat-completions request (built once: generating a
        JSON schema costs far more than the rest of a turn; treat the result as read-only)."""
        return self._definition

    @cached_property
    def _definition(self) -> dict[str, Any]:
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
    #: The workspace paths the call touches, relative to the workspace and resolved (``..``
    #: and symbolic links followed): the values of the arguments its tool declares as
    #: :attr:`ToolSpec.paths`. A path that leads outside the workspace is not here: the tool
    #: refuses it.
    paths: tuple[PurePosixPath, ...] = ()

    def touches(self, directory: str) -> bool:
        """Whether one of :attr:`paths` is ``directory`` or inside it (``"secrets"``)."""
        return any(path.is_relative_to(PurePosixPath(directory)) for path in self.paths)
