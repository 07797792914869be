"""System context blocks, rebuilt from plugins for every model request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orion.hooks.host import ContextRequest
from orion.hooks.types import ContextBlock

if TYPE_CHECKING:
    from orion.hooks.manager import PluginManager

__all__ = ["STATE_NOTE", "ContextBlock", "ContextRequest", "build_context", "with_state_note"]


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
