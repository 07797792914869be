"""Durations as people type them (``1h30m``) and read them (``5 min ago``)."""

from __future__ import annotations

from orion.clock import typed_duration_ms

# -- durations ----------------------------------------------------------------------------------


def parse_duration(text: str) -> float:
    """``1h``, ``30m``, ``1h30m``, ``2d``, ``500ms`` or ``0`` as milliseconds; ValueError
    otherwise."""
    compact = text.replace(" ", "").lower() if isinstance(text, str) else ""
    if compact in ("0", "0.0"):
        return 0.0
    ms = typed_duration_ms(compact, text)
    if ms is not None:
        return ms
    raise ValueError(f"invalid duration {text!r}: expected e.g. 30m, 1h, 2d, 1h30m or 0")


def format_duration(ms: float) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if ms >= size:
            value = ms / size
            return f"{value:.0f} {unit}" if value >= 10 or value == int(value) \
                else f"{value:.1f} {unit}"
    return f"{ms:.0f} ms"


def format_age(ms: float | None) -> str:
    """``5 min ago``; ``just now`` under a second."""
    if ms is None:
        return "at an unknown time"
    if ms < 1000:
        return "just now"
    return f"{format_duration(ms)} ago"
