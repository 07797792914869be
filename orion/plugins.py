"""The plugin manager: built-ins, entry points (group ``orion``) and ``ORION_LOAD_PLUGINS``."""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
import pkgutil
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pluggy

from orion import hookspecs
from orion.errors import PluginError

logger = logging.getLogger("orion.plugins")

ENTRYPOINT_GROUP = "orion"
BUILTIN_PACKAGE = "orion_plugins"
#: Hooks whose failing implementations are reported and skipped instead of raised.
OBSERVER_HOOKS = frozenset({"lifecycle_started", "lifecycle_transition", "lifecycle_finished",
                            "store_traces"})


@dataclass(frozen=True)
class PluginFailure:
    """An isolated failure: which plugin, in which hook (or guard), and what it raised."""

    plugin: str
    hook: str
    error: str
    traceback: str = field(repr=False, default="")


@dataclass(frozen=True)
class PluginOrigin:
    kind: str  # "builtin", "entrypoint" or "registered"
    module: str | None = None
    distribution: str | None = None
    version: str | None = None


class PluginManager(pluggy.PluginManager):
    """pluggy's manager with Orion's contract: observer hooks isolated, clear load errors."""

    def __init__(self) -> None:
        super().__init__("orion")
        self.add_hookspecs(hookspecs)
        self.failures: list[PluginFailure] = []
        self.origins: dict[str, PluginOrigin] = {}
        self._registry: Any = None

    def register(self, plugin: object, name: str | None = None,
                 origin: PluginOrigin | None = None) -> str | None:
        label = name or getattr(plugin, "__name__", None) or repr(plugin)
        try:
            registered = super().register(plugin, name)
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"plugin {label!r} is invalid: {exc}") from exc
        except ValueError as exc:
            raise PluginError(f"plugin {label!r} cannot be registered: {exc}") from exc
        if registered is None:  # blocked
            return None
        self.origins[registered] = origin or PluginOrigin("registered", getattr(plugin, "__name__", None))
        for caller in self.get_hookcallers(plugin) or []:
            if caller.name in OBSERVER_HOOKS:
                for impl in caller.get_hookimpls():
                    if impl.plugin is plugin:
                        impl.function = self._isolated(impl, caller.name)
        self._registry = None
        return registered

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any:
        result = super().unregister(plugin, name)
        self._registry = None
        if name or result is not None:
            self.origins.pop(name or self.get_name(result) or "", None)
        return result

    def check(self) -> None:
        """Fail on hook implementations that match no hook (a typo in a hook name)."""
        try:
            self.check_pending()
        except pluggy.PluginValidationError as exc:
            name = self.get_name(exc.plugin) if exc.plugin is not None else "?"
            raise PluginError(f"plugin {name!r}: {exc}") from exc

    @property
    def registry(self):  # -> orion.registry.Registry
        """Guards, actions and tools from the ``register_*`` hooks, collected once."""
        if self._registry is None:
            from orion.registry import Registry

            self._registry = Registry.collect(self)
        return self._registry

    def report_failure(self, plugin: str, hook: str, exc: BaseException) -> None:
        failure = PluginFailure(plugin, hook, f"{type(exc).__name__}: {exc}",
                                "".join(traceback.format_exception(exc)))
        self.failures.append(failure)
        logger.warning("plugin %s failed in %s: %s", plugin, hook, failure.error)

    def _isolated(self, impl: pluggy.HookImpl, hook: str) -> Callable[..., Any]:
        function, plugin = impl.function, impl.plugin_name
        report = self.report_failure
        if impl.wrapper or impl.hookwrapper:
            def guarded_wrapper(*args: Any) -> Any:
                gen = function(*args)
                try:
                    next(gen)
                except Exception as exc:
                    report(plugin, hook, exc)
                    return (yield)
                result = yield
                try:
                    gen.send(result)
                except StopIteration as stop:
                    return stop.value if impl.wrapper else None
                except Exception as exc:
                    report(plugin, hook, exc)
                    return result
                gen.close()
                report(plugin, hook, RuntimeError("wrapper yielded more than once"))
                return result
            return guarded_wrapper

        def guarded(*args: Any) -> Any:
            try:
                return function(*args)
            except Exception as exc:
                report(plugin, hook, exc)
                return None
        return guarded


def parse_allow_list(value: str | None) -> set[str] | None:
    """``ORION_LOAD_PLUGINS``: unset loads every installed plugin; a comma-separated list
    loads only those (by entry-point or distribution name); an empty value loads none."""
    if value is None:
        return None
    return {part.strip() for part in value.split(",") if part.strip()}


def builtin_modules() -> list[str]:
    package = importlib.import_module(BUILTIN_PACKAGE)
    return sorted(f"{BUILTIN_PACKAGE}.{m.name}" for m in pkgutil.iter_modules(package.__path__)
                  if not m.name.startswith("_"))


def load_builtins(pm: PluginManager, *, skip: Iterable[str] = ()) -> None:
    skipped = set(skip)
    for module_name in builtin_modules():
        short = module_name.rsplit(".", 1)[-1]
        if module_name in skipped or short in skipped:
            continue
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise PluginError(f"built-in plugin {module_name!r} failed to import: "
                              f"{type(exc).__name__}: {exc}") from exc
        pm.register(module, module_name, PluginOrigin("builtin", module_name))


def load_entrypoints(pm: PluginManager, allow: set[str] | None) -> None:
    seen: set[str] = set()
    for ep in importlib.metadata.entry_points(group=ENTRYPOINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else None
        if ep.name in seen:
            continue
        seen.add(ep.name)
        if allow is not None and ep.name not in allow and dist not in allow:
            continue
        if pm.is_blocked(ep.name) or pm.has_plugin(ep.name):
            continue
        try:
            plugin = ep.load()
        except Exception as exc:
            raise PluginError(f"plugin {ep.name!r} ({ep.value}"
                              + (f", from distribution {dist}" if dist else "")
                              + f") failed to import: {type(exc).__name__}: {exc}") from exc
        pm.register(plugin, ep.name, PluginOrigin(
            "entrypoint", ep.value, dist, ep.dist.version if ep.dist is not None else None))
    if allow:
        missing = sorted(allow - seen - {d for d in _distributions_in_group()})
        if missing:
            raise PluginError(f"ORION_LOAD_PLUGINS names {', '.join(map(repr, missing))}, but no "
                              f"installed plugin has that name (installed: "
                              f"{', '.join(sorted(seen)) or 'none'})")


def _distributions_in_group() -> set[str]:
    return {ep.dist.name for ep in importlib.metadata.entry_points(group=ENTRYPOINT_GROUP)
            if ep.dist is not None}


def make_plugin_manager(*, builtins: bool = True, entrypoints: bool = True,
                        blocked: Iterable[str] = (),
                        env: dict[str, str] | os._Environ[str] | None = None) -> PluginManager:
    """A fully loaded and checked plugin manager."""
    env = os.environ if env is None else env
    pm = PluginManager()
    for name in blocked:
        pm.set_blocked(name)
    if builtins:
        load_builtins(pm, skip=blocked)
    if entrypoints:
        load_entrypoints(pm, parse_allow_list(env.get("ORION_LOAD_PLUGINS")))
    pm.check()
    return pm


_default: PluginManager | None = None


def default_plugin_manager() -> PluginManager:
    """The process-wide manager that the CLI uses, loaded on first use."""
    global _default
    if _default is None:
        _default = make_plugin_manager()
    return _default
