"""The plain data Orion's parts hand one another and its plugins: a block of context, a
gating decision, a tool and its calls, a call's outcome, a registered guard or action.

Data only, and a leaf: this module imports nothing of Orion, not even to type-check, so the
engine, the runtime, the tools and the plugin registry share these types without importing one
another. The types that carry the host (:class:`~orion.hooks.host.Host`,
``ContextRequest``, ``ToolContext``) are in :mod:`orion.hooks.host`. The modules that held
them before (``orion.api``, ``orion.runtime.context``, ``orion.tools.spec``,
``orion.tools.gating``, ``orion.tools.executor``, ``orion.hooks.registry``) hand out the same
objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel

__all__ = ["TOOL_NAME", "ContextBlock", "Decision", "Registered", "ToolCall", "ToolOutcome",
           "ToolSpec"]


# -- context and gating -----------------------------------------------------------------------


@dataclass(frozen=True)
class ContextBlock:
    """A block of system context. ``volatile`` marks one whose text changes from request to
    request (a write session's progress, the plan's status): it is sent after the conversation,
    not in the system message, so the system message and the conversation so far stay
    byte-identical between requests and a server's prompt cache (llama.cpp, vLLM, OpenAI,
    Anthropic: the longest unchanged prefix) keeps them."""

    name: str
    text: str
    order: int = 100  # lower comes first
    volatile: bool = False


@dataclass(frozen=True)
class Decision:
    """Whether one tool call may run. ``plugin`` names the deciding plugin (filled in by the
    plugin manager when the plugin leaves it empty)."""

    allowed: bool
    reason: str = ""
    plugin: str = ""

    @classmethod
    def allow(cls, reason: str = "") -> Decision:
        return cls(True, reason)

    @classmethod
    def deny(cls, reason: str) -> Decision:
        return cls(False, reason)


# -- tools ------------------------------------------------------------------------------------

#: OpenAI's (and Anthropic's) rule for function names.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the model sees it: a name, a description and a pydantic argument model."""

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


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one call. ``content`` is the tool message content for the model;
    ``kind`` is ``None`` when ``ok``; ``arguments`` is the parsed arguments (``model_dump()``)
    when parsing succeeded, even if the call was then denied or failed."""

    call_id: str
    name: str
    ok: bool
    content: str
    kind: str | None
    arguments: dict[str, Any] | None = None


# -- the registry -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Registered:
    """A guard or an action a plugin registered: its name, the callable, the plugin."""

    name: str
    function: Callable[..., Any]
    plugin: str
