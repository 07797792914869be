"""Named guards, actions and tools, collected from the ``register_*`` hooks.

A guard or an action is registered for every statechart, or provided for one chart only
(``register(name, fn, chart="plan_mode")``, as XState's ``provide`` binds implementations to
one machine): in that chart it takes the place of the one of the same name, so two features
each bind their own ``finalize`` and none has to ask which lifecycle it runs in."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orion.errors import PluginError
from orion.hooks.types import Registered, ToolSpec

if TYPE_CHECKING:
    from orion.hooks.manager import PluginManager

#: What a statechart accepts as a guard or action name (``orion.statechart.model.schema.PLUGIN_NAME``;
#: not imported from there, because that package imports this module).
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]*")


@dataclass(frozen=True)
class SlashCommand:
    name: str
    handler: Callable[..., Any]
    help: str
    plugin: str


@dataclass
class Registry:
    guards: dict[str, Registered] = field(default_factory=dict)
    actions: dict[str, Registered] = field(default_factory=dict)
    #: Guards and actions provided for one statechart, by the chart's name.
    chart_guards: dict[str, dict[str, Registered]] = field(default_factory=dict)
    chart_actions: dict[str, dict[str, Registered]] = field(default_factory=dict)
    tools: dict[str, ToolSpec] = field(default_factory=dict)
    tool_plugins: dict[str, str] = field(default_factory=dict)
    systems: dict[str, Any] = field(default_factory=dict)  # name -> orion.runtime.pipeline.System
    system_plugins: dict[str, str] = field(default_factory=dict)
    commands: dict[str, SlashCommand] = field(default_factory=dict)
    #: Statechart files from ``register_statecharts``: ``(path, plugin)``, in plugin order.
    statecharts: list[tuple[Path, str]] = field(default_factory=list)

    def guards_for(self, chart: str) -> dict[str, Registered]:
        """The guards statechart ``chart`` runs: those provided for it, else the shared ones."""
        return {**self.guards, **self.chart_guards.get(chart, {})}

    def actions_for(self, chart: str) -> dict[str, Registered]:
        """The actions statechart ``chart`` runs: those provided for it, else the shared ones."""
        return {**self.actions, **self.chart_actions.get(chart, {})}

    @classmethod
    def collect(cls, pm: PluginManager) -> Registry:
        """Call every plugin's ``register_*`` hooks, one plugin at a time, so that each name it
        registers is credited to it; a name registered twice is a PluginError naming both."""
        registry = cls()
        for hook, table, provided in (
                ("register_guards", registry.guards, registry.chart_guards),
                ("register_actions", registry.actions, registry.chart_actions)):
            kind = hook.removeprefix("register_")[:-1]
            for impl in getattr(pm.hook, hook).get_hookimpls():
                _call(impl, hook, register=partial(_add_named, impl.plugin_name, kind, table,
                                                   provided))
        for hook, add in (("register_tools", registry._add_tool),
                          ("register_systems", registry._add_system),
                          ("register_slash_commands", registry._add_command),
                          ("register_statecharts", registry._add_statechart)):
            for impl in getattr(pm.hook, hook).get_hookimpls():
                _call(impl, hook, register=partial(add, impl.plugin_name))
        return registry

    # What each hook's ``register`` does, with the plugin that calls it bound first.

    def _add_tool(self, plugin: str, spec: ToolSpec) -> None:
        if not isinstance(spec, ToolSpec):
            raise PluginError(f"plugin {plugin!r} registered a tool that is not a "
                              f"ToolSpec: {spec!r}")
        if spec.name in self.tools:
            raise PluginError(f"tool {spec.name!r} is registered twice: by plugin "
                              f"{self.tool_plugins[spec.name]!r} and by {plugin!r}")
        self.tools[spec.name] = spec
        self.tool_plugins[spec.name] = plugin

    def _add_system(self, plugin: str, system: Any) -> None:
        name = getattr(system, "name", None)
        if not isinstance(name, str) or not NAME.fullmatch(name) or \
                not callable(getattr(system, "run", None)):
            raise PluginError(f"plugin {plugin!r} registered a system without a valid "
                              f"'name' and a 'run(turn)' method: {system!r}")
        if name in self.systems:
            raise PluginError(f"system {name!r} is registered twice: by plugin "
                              f"{self.system_plugins[name]!r} and by {plugin!r}")
        self.systems[name] = system
        self.system_plugins[name] = plugin

    def _add_command(self, plugin: str, name: str, handler: Callable[..., Any],
                     help: str = "") -> None:
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
            raise PluginError(f"plugin {plugin!r} registered slash command {name!r}: "
                              "a name is lower-case letters, digits, '_' and '-'")
        if not callable(handler):
            raise PluginError(f"plugin {plugin!r} registered slash command /{name} "
                              "with a handler that is not callable")
        if name in self.commands:
            raise PluginError(f"slash command /{name} is registered twice: by plugin "
                              f"{self.commands[name].plugin!r} and by {plugin!r}")
        self.commands[name] = SlashCommand(name, handler, help, plugin)

    def _add_statechart(self, plugin: str, path: str | Path) -> None:
        file = Path(path)
        if not file.is_file():
            raise PluginError(f"plugin {plugin!r} registered statechart {str(path)!r}, "
                              "which is not a file")
        self.statecharts.append((file.resolve(), plugin))


def _add_named(plugin: str, kind: str, table: dict[str, Registered],
               provided: dict[str, dict[str, Registered]], name: str,
               function: Callable[..., Any], *, chart: str | None = None) -> None:
    """``register`` of ``register_guards`` and ``register_actions`` (``kind``: guard or
    action): into ``table``, or ``provided`` for ``chart`` only."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise PluginError(f"plugin {plugin!r} registered {kind} {name!r}: a "
                          f"name must match {NAME.pattern} to be usable in a "
                          "statechart")
    if not callable(function):
        raise PluginError(f"plugin {plugin!r} registered {kind} {name!r} "
                          "with something that is not callable")
    where = ""
    if chart is not None:
        if not isinstance(chart, str) or not NAME.fullmatch(chart):
            raise PluginError(f"plugin {plugin!r} provided {kind} {name!r} "
                              f"for statechart {chart!r}, which is not a "
                              "statechart name")
        table, where = provided.setdefault(chart, {}), f" for {chart!r}"
    if name in table:
        raise PluginError(f"{kind} {name!r} is registered twice{where}: by "
                          f"plugin {table[name].plugin!r} and by {plugin!r}")
    table[name] = Registered(name, function, plugin)


def _call(impl: Any, hook: str, **kwargs: Any) -> None:
    """Call one implementation directly, so that what it registers is credited to its plugin."""
    if impl.wrapper or impl.hookwrapper:
        raise PluginError(f"plugin {impl.plugin_name!r}: {hook} cannot be a wrapper; it is called "
                          "once per plugin, with nothing to wrap")
    try:
        impl.function(*(kwargs[name] for name in impl.argnames),
                      **{name: kwargs[name] for name in impl.kwargnames if name in kwargs})
    except PluginError:
        raise
    except Exception as exc:
        raise PluginError(f"plugin {impl.plugin_name!r} failed in {hook}: "
                          f"{type(exc).__name__}: {exc}") from exc
