"""The host: the runtime a hook runs in, as plugins see it (:class:`Host`), and what carries it
to a plugin besides the hooks' own ``host`` argument: a context or gating request
(:class:`ContextRequest`) and a tool's context (:class:`ToolContext`).

Types only. At run time this module imports nothing of Orion but the list of renames (the
pre-0.2.0 ``runtime`` attribute still reads the host, with a warning, until 0.3.0:
:data:`orion.hooks.renames.RENAMES`); what the host's attributes are is imported for the type
checker only. ``orion.api``, ``orion.runtime.context`` and ``orion.tools.executor`` hand out
the same objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from orion.hooks.renames import renamed

if TYPE_CHECKING:
    from orion.clock import Clock
    from orion.hooks.manager import PluginManager
    from orion.runtime.conversation import Conversation, Message
    from orion.runtime.report import Reporter
    from orion.trace.recorder import Recorder

__all__ = ["ContextRequest", "Host", "ToolContext", "runtime_alias"]


def runtime_alias(owner: str) -> property:
    """A read-only ``runtime`` attribute of ``owner`` that is ``host``, with a
    DeprecationWarning."""
    return renamed(owner, "runtime")


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


# -- what carries it --------------------------------------------------------------------------


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
class ToolContext:
    """What a handler receives besides its arguments."""

    workspace: Path
    conversation_id: str = ""
    #: The runtime the tool runs in (the host), for tools that need it; ``None`` outside one.
    host: Host | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    runtime = runtime_alias("ToolContext")
