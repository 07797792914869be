"""Orion: reliable LLM tool runtimes, with lifecycles declared as YAML statecharts and pluggy
plugins on every transition."""

from __future__ import annotations

import pluggy

__version__ = "0.2.0"

#: Mark a function as an implementation of an Orion hook (see ``orion.hookspecs``).
hookimpl = pluggy.HookimplMarker("orion")

__all__ = ["__version__", "hookimpl"]
