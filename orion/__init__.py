"""Orion: reliable LLM tool runtimes, with lifecycles declared as YAML statecharts and pluggy
plugins on every transition."""

from __future__ import annotations

import importlib
import importlib.abc as _abc
import importlib.util as _util
import sys as _sys
import warnings as _warnings

import pluggy

__version__ = "0.2.0"

#: Mark a function as an implementation of an Orion hook (see ``orion.hookspecs``).
hookimpl = pluggy.HookimplMarker("orion")

__all__ = ["__version__", "hookimpl"]


# -- modules that moved into packages in 0.2.0 --------------------------------------------------
# A plugin that imports one by its old name keeps working, with a DeprecationWarning naming the
# new one, until 0.3.0; ``orion.api`` is the import path that stays.

MOVED_MODULES = {
    "orion.plugins": "orion.hooks.manager",
    "orion.registry": "orion.hooks.registry",
    "orion.check": "orion.commands.check",
    "orion.demo": "orion.commands.demo",
    "orion.console": "orion.terminal.console",
    "orion.commands.console": "orion.terminal.console",
    "orion.runtime.chat": "orion.terminal.chat",
    "orion.runtime.prompt": "orion.terminal.prompt",
    "orion.runtime.screen": "orion.terminal.screen",
    "orion.runtime.render": "orion.terminal.render",
    "orion.confined": "orion.workspace.confined",
    "orion.statedb": "orion.workspace.statedb",
    "orion.sourcefile": "orion.config.sourcefile",
    "orion.yamlsource": "orion.config.yamlsource",
    "orion.examples": "orion.models.examples",
    "orion.context": "orion.runtime.context",
    "orion.statechart.catalog": "orion.statechart.io.catalog",
    "orion.statechart.definition": "orion.statechart.interpreter.definition",
    "orion.statechart.diagram": "orion.statechart.io.diagrams",
    "orion.statechart.lifecycle": "orion.statechart.interpreter.lifecycle",
    "orion.statechart.schema": "orion.statechart.model.schema",
    "orion.statechart.settings": "orion.statechart.interpreter.settings",
    "orion.statechart.tree": "orion.statechart.model.tree",
}


class _MovedModule(_abc.MetaPathFinder, _abc.Loader):
    """Finds a moved module under its old name: the new module itself, so both names share
    one module object (its functions, its state)."""

    def __init__(self) -> None:
        self.specs: dict[str, object] = {}

    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name not in MOVED_MODULES:
            return None
        return _util.spec_from_loader(name, self)

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        new = MOVED_MODULES[spec.name]
        _warnings.warn(f"{spec.name} moved to {new} in 0.2.0; the old name goes in 0.3.0 "
                       "(orion.api is the import path that stays)", DeprecationWarning,
                       stacklevel=2)
        module = importlib.import_module(new)
        self.specs[new] = module.__spec__
        return module

    def exec_module(self, module):  # type: ignore[no-untyped-def]
        # The import system gave the module the old name's spec; it keeps its own.
        module.__spec__ = self.specs[module.__name__]


_sys.meta_path.append(_MovedModule())
