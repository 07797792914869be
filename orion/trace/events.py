"""A trace event: what happened, when, in which conversation and session. Never content."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TraceEvent:
    kind: str
    name: str
    at_ms: float
    conversation_id: str = ""
    session_id: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
