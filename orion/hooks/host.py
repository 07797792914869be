"""The host under one name: requests, tool contexts and turns carry it as ``host``, as the hooks
receive it. ``runtime``, its name before 0.2.0, still reads the same object, with a warning,
until 0.3.0 (:data:`orion.hooks.renames.RENAMES`)."""

from __future__ import annotations

from orion.hooks.renames import renamed


def runtime_alias(owner: str) -> property:
    """A read-only ``runtime`` attribute of ``owner`` that is ``host``, with a
    DeprecationWarning."""
    return renamed(owner, "runtime")
