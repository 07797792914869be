"""System context blocks, rebuilt from plugins for every model request."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orion.hooks.host import runtime_alias

if TYPE_CHECKING:
    from orion.api import Host
    from orion.hooks.manager import PluginManager


@dataclass(frozen=True)
class ContextBlock:
    name: str
    text: str
    order: int = 100  # lower comes first


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
