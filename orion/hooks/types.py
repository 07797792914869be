"""The types Orion's parts hand one another and its plugins: the host a hook runs in, what the
context and gating hooks receive and return, a tool and its calls, and a registered guard or
action.

Data and protocols only. At run time this module imports nothing of Orion but the alias that
keeps the pre-0.2.0 ``runtime`` attribute readable, so the engine, the runtime, the tools and
the plugin manager each import these types without importing one another. Their modules of
old (``orion.api``, ``orion.runtime.context``, ``orion.tools.spec``, ``orion.tools.gating``,
``orion.tools.executor``, ``orion.hooks.registry``) hand out the same objects.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel

from orion.hooks.host import runtime_alias

if TYPE_CHECKING:
    from orion.clock import Clock
    from orion.hooks.manager import PluginManager
    from orion.runtime.conversation import Conversation, Message
    from orion.runtime.report import Reporter
    from orion.trace.recorder import Recorder

__all__ = ["TOOL_NAME", "ContextBlock", "ContextRequest", "Decision", "Host", "Registered",
           "ToolCall", "ToolContext", "ToolOutcome", "ToolSpec"]


# -- the host ---------------------------------------------------------------------------------


@runtime_checkable
class Host(Protocol):
    """The runtime a hook runs in, as plugins see it: what the built-in plugins use of it."""

    #: The workspace directory: every file a tool touches is resolved inside it.
    workspace: Path
    #: Where Orion keeps its state (``WORKSPACE/.orion`` unless ``--state-dir``).
    state_dir: Path
    #: Tells the user something: ``reporter.notice("...")``.
    reporter: Reporter
    #: Per-runtime state of plugins and subsystems, by name.
    services: dict[str, Any]
    #: The loaded plugins: ``plugins.hook.<name>(...)`` calls a hook, ``plugins.registry``
    #: holds what they registered (tools, commands, systems).
    plugins: PluginManager
    #: Records trace events: ``tracer.emit(event)``, ``with tracer.span(...)``.
    tracer: Recorder
    #: The conversation: its ``id``, its ``messages``, ``compacted`` (messages dropped so far).
    conversation: Conversation
    #: The runtime's clock (``clock.now_ms()``): virtual in tests, the wall's in a run.
    clock: Clock
    #: Set to end the conversation after this turn (``/quit``).
    closing: bool

    def states(self) -> dict[str, str]:
        """The active state of each running lifecycle, by key."""
        ...

    def tags(self) -> dict[str, frozenset[str]]:
        """The active tags of each running lifecycle, by key."""
        ...

    def inject(self, text: str) -> Message:
        """Add a message from Orion to the conversation, for the model to answer."""
        ...

    def reset(self) -> None:
        """Clear the conversation (``/reset``) and call ``conversation_reset``."""
        ...

    def compact(self, force: bool = False) -> int:
        """Drop the oldest turns past the budget (``force``: to half the conversation's size,
        ``/compact``); returns how many messages went."""
        ...


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
class ContextRequest:
    """What ``build_context`` and the gating hooks look at before a model request: the
    conversation and the active lifecycle states. One type for both (``GateRequest`` is another
    name of it): they see the same moment of the same turn."""

    conversation_id: str = ""
    states: Mapping[str, str] = field(default_factory=dict)
    #: The active tags of each lifecycle, by key: what a plugin asks instead of a state's name.
    tags: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: The runtime the request is made in (the host); ``None`` outside one.
    host: Host | None = None

    runtime = runtime_alias("ContextRequest")


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
class ToolContext:
    """What a handler receives besides its arguments."""

    workspace: Path
    conversation_id: str = ""
    #: The runtime the tool runs in (the host), for tools that need it; ``None`` outside one.
    host: Host | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    runtime = runtime_alias("ToolContext")


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
