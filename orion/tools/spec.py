"""A tool as the model sees it: a name, a description and a pydantic argument model; and a
call of it, arguments parsed. Both live in :mod:`orion.hooks.types` (the engine, the plugin
registry and the tools share them); this module hands out the same objects."""

from __future__ import annotations

from orion.hooks.types import TOOL_NAME, ToolCall, ToolSpec

__all__ = ["TOOL_NAME", "ToolCall", "ToolSpec"]
