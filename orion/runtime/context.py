"""System context blocks, rebuilt from plugins for every model request."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orion.hooks.host import runtime_alias

if TYPE_CHECKING:
    from orion.api import Host
    from orion.hooks.manager import PluginManager


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


def build_context(pm: PluginManager, request: ContextRequest) -> list[ContextBlock]:
    """Every plugin's blocks, ordered by ``order`` then by name."""
    blocks: list[ContextBlock] = []
    for result in pm.hook.build_context(request=request):
        if result is None:
            continue
        for block in [result] if isinstance(result, (ContextBlock, str, bytes)) else result:
            if not isinstance(block, ContextBlock):
                raise TypeError(f"build_context returned {type(block).__name__} "
                                f"{block!r:.60}, not a ContextBlock")
            blocks.append(block)
    return sorted(blocks, key=lambda b: (b.order, b.name))


#: What opens the text of the volatile blocks, so the model tells it from the user's words.
STATE_NOTE = "[Orion's state for this request, not the user's words]"


def with_state_note(messages: list[dict[str, Any]],
                    blocks: list[ContextBlock]) -> list[dict[str, Any]]:
    """``messages`` with the text of the volatile ``blocks`` after them: added to the last
    message when it is a user message (a copy: the conversation's own form is not touched),
    else as a user message of its own. Some chat templates refuse two user messages in a row,
    and none refuses a longer one."""
    texts = [block.text.strip() for block in blocks if block.volatile and block.text.strip()]
    if not texts:
        return messages
    note = "\n\n".join([STATE_NOTE, *texts])
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "user" and isinstance(last.get("content"), str):
        messages[-1] = {**last, "content": f"{last['content']}\n\n{note}"}
    else:
        messages.append({"role": "user", "content": note})
    return messages
