"""Default compaction: drop the oldest whole turns until the conversation fits its budget.

A turn starts at a message the user typed; a tool result is never separated from the call it
answers. The newest turn is always kept. A context block tells the model that older messages
are gone, so it does not reason about history it cannot see.
"""

from __future__ import annotations

from orion.api import ContextBlock, hookimpl


def _turn_starts(messages) -> list[int]:
    return [i for i, m in enumerate(messages) if m.role == "user" and not m.injected]


@hookimpl(trylast=True)
def compact_conversation(messages, budget):
    starts = _turn_starts(messages)
    kept = list(messages)
    for start in starts[1:]:
        if not budget.exceeded_by(kept):
            break
        kept = messages[start:]
    return kept if len(kept) < len(messages) else None


@hookimpl
def build_context(request):
    runtime = request.runtime
    removed = runtime.conversation.compacted if runtime is not None else 0
    if removed:
        return ContextBlock("compaction",
                            f"{removed} earlier messages of this conversation were removed to fit "
                            "the context budget; what you need from them is in this system "
                            "context or can be read again with your tools.", order=900)
    return None
