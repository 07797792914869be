"""A trace event: what happened, when, in which conversation and session. Never content."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TraceEvent:
    """One event for the ``store_traces`` hook. ``at_ms`` is milliseconds since the epoch (or
    the lifecycle clock's time); ``attributes`` hold JSON-safe, content-free details such as
    counts, sizes, durations and state names."""

    kind: str
    name: str
    at_ms: float
    conversation_id: str = ""
    session_id: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the attributes are copied, so a store may keep it)."""
        return {"kind": self.kind, "name": self.name, "at_ms": self.at_ms,
                "conversation_id": self.conversation_id, "session_id": self.session_id,
                "attributes": dict(self.attributes)}
