"""Default compaction: drop the oldest whole turns until the conversation fits its budget.

A turn starts at a message the user typed; a tool result is never separated from the call it
answers. The newest turn is always kept. A context block tells the model that older messages
are gone, so it does not reason about history it cannot see.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orion.api import ContextBlock, hookimpl

if TYPE_CHECKING:
    from orion.api import Budget, ContextRequest, Message


def _turn_starts(messages: list[Message]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.role == "user" and not m.injected]


@hookimpl(trylast=True)
def compact_conversation(messages: list[Message], budget: Budget) -> list[Message] | None:
    # One pass: the totals of what is kept shrink as whole turns are dropped from the front,
    # instead of summing the rest of the conversation again for every turn dropped.
    tokens = [m.approx_tokens() for m in messages]
    remaining, cut = sum(tokens), 0
    for start in _turn_starts(messages)[1:]:
        if not budget.exceeded(len(messages) - cut, remaining):
            break
        remaining -= sum(tokens[cut:start])
        cut = start
    return messages[cut:] if cut else None


@hookimpl
def build_context(request: ContextRequest) -> ContextBlock | None:
    runtime = request.host
    removed = runtime.conversation.compacted if runtime is not None else 0
    if removed:
        return ContextBlock("compaction",
                            f"{removed} earlier messages of this conversation were removed to fit "
                            "the context budget; what you need from them is in this system "
                            "context or can be read again with your tools.", order=900)
    return None
