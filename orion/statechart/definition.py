"""Compile a checked statechart into a ``transitions`` machine, once per file.

One machine serves every instance of a definition: instances are plain objects whose ``state``
attribute the machine reads and writes, so creating one costs microseconds.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from transitions.extensions.nesting import HierarchicalMachine, NestedState

from orion.clock import Clock, VirtualClock
from orion.errors import ActionError, StatechartError
from orion.registry import Registered, Registry
from orion.statechart import checks
from orion.statechart.contract import state_tagged, tags_by_state
from orion.statechart.lifecycle import Lifecycle
from orion.statechart.schema import WILDCARD, StatechartSpec
from orion.statechart.settings import resolve
from orion.statechart.tree import SEPARATOR, StateNode, flatten, lineage, settle
from orion.yamlsource import SourceDocument, YamlSourceError, load_yaml


class DotState(NestedState):
    """Nested states addressed as ``parent.child``. A subclass, so the library's global
    default separator (``_``, which breaks on names like ``session_active``) is untouched."""

    separator = SEPARATOR


class DotMachine(HierarchicalMachine):
    state_cls = DotState


class _Action:
    __slots__ = ("name", "function", "plugin", "where")

    def __init__(self, registered: Registered, where: str):
        self.name, self.function, self.plugin = registered.name, registered.function, registered.plugin
        self.where = where

    def __call__(self, lifecycle: Lifecycle) -> None:
        try:
            self.function(lifecycle, lifecycle.current)
        except ActionError:
            raise
        except Exception as exc:
            raise ActionError(lifecycle.name, self.name, self.where, exc) from exc


class _TransitionActions:
    """The ``actions`` of a transition, run after its guards pass and before any state exits,
    so an action that fails leaves the lifecycle where it was."""

    __slots__ = ("actions",)

    def __init__(self, actions: tuple[_Action, ...]):
        self.actions = actions

    def __call__(self, event_data: Any) -> None:
        for action in self.actions:
            action(event_data.model)


class _Guard:
    """Fails closed: a guard that raises is reported and counts as ``False``."""

    __slots__ = ("name", "function", "plugin")

    def __init__(self, registered: Registered):
        self.name, self.function, self.plugin = registered.name, registered.function, registered.plugin

    def __call__(self, event_data: Any) -> bool:
        lifecycle = event_data.model
        try:
            return bool(self.function(lifecycle, lifecycle.current))
        except Exception as exc:
            lifecycle.plugins.report_failure(self.plugin, f"guard {self.name}", exc)
            return False


class Definition:
    """A compiled statechart. Create instances with :meth:`create` or :meth:`restore`."""

    def __init__(self, spec: StatechartSpec, *, source: str, plugins: Any,
                 settings: Mapping[str, Any]):
        self.spec = spec
        self.source = source
        self.plugins = plugins
        self.settings = settings
        self.name = spec.statechart
        canonical = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        self.hash = hashlib.sha256(canonical.encode()).hexdigest()
        self.nodes: dict[str, StateNode] = flatten(spec)
        self.leaves = frozenset(p for p, n in self.nodes.items() if not n.compound)
        #: The active tags of each state (its own and its ancestors'): what ``has_tag`` reads.
        self.tags: dict[str, frozenset[str]] = tags_by_state(self.nodes)
        self.initial_leaf = settle(self.nodes, spec.initial)
        self.finals = frozenset(p for p, n in self.nodes.items()
                                if n.spec.final and SEPARATOR not in p)
        self._context = spec.context
        self._context_is_flat = all(not isinstance(v, (dict, list)) for v in spec.context.values())
        registry: Registry = plugins.registry
        self.registry = registry  # the guards and actions this definition was compiled with
        self.timers: dict[str, tuple[tuple[str, float], ...]] = {}
        #: The machine event of each ``after`` entry (parallel to ``timers``): a timer takes its
        #: own delayed transition even when another timer or a deeper state shares its trigger.
        self.timer_events: dict[str, tuple[str, ...]] = {}
        self.entry: dict[str, tuple[_Action, ...]] = {}
        self.exit: dict[str, tuple[_Action, ...]] = {}
        for path, node in self.nodes.items():
            if node.spec.after:
                self.timers[path] = tuple(
                    (a.trigger, float(settings[a.ms] if isinstance(a.ms, str) else a.ms))
                    for a in node.spec.after)
                self.timer_events[path] = tuple(f"after:{path}:{k}"
                                                for k in range(len(node.spec.after)))
            if node.spec.entry:
                self.entry[path] = tuple(_Action(registry.actions[n], f"on entry to {path!r}")
                                         for n in node.spec.entry)
            if node.spec.exit:
                self.exit[path] = tuple(_Action(registry.actions[n], f"on exit from {path!r}")
                                        for n in node.spec.exit)
        self.triggers = frozenset([t.trigger for t in spec.transitions]
                                  + [a.trigger for n in self.nodes.values() for a in n.spec.after])
        self._allowed = {leaf: self._compute_allowed(leaf) for leaf in self.leaves}
        self.machine = self._compile(registry)

    # -- instances ----------------------------------------------------------------------------

    @property
    def initial_context(self) -> dict[str, Any]:
        return dict(self._context) if self._context_is_flat else copy.deepcopy(self._context)

    def create(self, *, clock: Clock | None = None, instance_id: str | None = None,
               context: dict[str, Any] | None = None, owner: Any = None) -> Lifecycle:
        """A new instance in the initial state, with its entry actions run and timers armed.
        ``owner`` (the runtime) is there for plugins from the first hook on."""
        lifecycle = Lifecycle(self, clock=clock or VirtualClock(), plugins=self.plugins,
                              instance_id=instance_id, context=context)
        lifecycle.owner = owner
        return lifecycle.start()

    def restore(self, snapshot: dict[str, Any], *, clock: Clock | None = None,
                owner: Any = None) -> Lifecycle:
        lifecycle = Lifecycle.restore(self, snapshot, clock=clock or VirtualClock(),
                                      plugins=self.plugins)
        lifecycle.owner = owner
        return lifecycle

    # -- queries ------------------------------------------------------------------------------

    def lineage(self, path: str) -> list[str]:
        return lineage(path)

    def state_tagged(self, tag: str) -> str | None:
        """The first leaf (in file order) that has ``tag``: where code that restores a lifecycle
        by meaning puts it."""
        return state_tagged(self.nodes, tag)

    def allowed_triggers(self, leaf: str) -> list[str]:
        return self._allowed[leaf]

    def _compute_allowed(self, leaf: str) -> list[str]:
        active = set(lineage(leaf))
        found = {t.trigger for t in self.spec.transitions
                 if WILDCARD in t.source or active.intersection(t.source)}
        found.update(a.trigger for p in active for a in self.nodes[p].spec.after)
        return sorted(found)

    # -- compilation --------------------------------------------------------------------------

    def _compile(self, registry: Registry) -> DotMachine:
        def state_config(node: StateNode) -> dict[str, Any]:
            config: dict[str, Any] = {"name": node.name}
            path = node.path
            if path in self.timers or path in self.entry:
                config["on_enter"] = [lambda event_data, p=path: event_data.model._enter(p)]
            if path in self.timers or path in self.exit:
                config["on_exit"] = [lambda event_data, p=path: event_data.model._exit(p)]
            if node.compound:
                config["children"] = [state_config(self.nodes[c]) for c in node.children]
                config["initial"] = node.spec.initial
            return config

        def transition_config(trigger: str, source: list[str] | str, dest: str | None,
                              guards: list[str], unless: list[str], actions: list[str],
                              where: str) -> dict[str, Any]:
            config: dict[str, Any] = {"trigger": trigger, "source": source, "dest": dest}
            if guards:
                config["conditions"] = [_Guard(registry.guards[g]) for g in guards]
            if unless:
                config["unless"] = [_Guard(registry.guards[g]) for g in unless]
            if actions:
                config["before"] = [_TransitionActions(tuple(
                    _Action(registry.actions[a], where) for a in actions))]
            return config

        transitions = []
        for t in self.spec.transitions:
            source = WILDCARD if WILDCARD in t.source else list(t.source)
            transitions.append(transition_config(t.trigger, source, t.dest, t.guards, t.unless,
                                                 t.actions, f"on {t.trigger!r}"))
        for path, node in self.nodes.items():
            for a, event in zip(node.spec.after, self.timer_events.get(path, ())):
                where = f"on timer {a.trigger!r} of {path!r}"
                # Sent by code, the trigger behaves like any other: innermost state first.
                transitions.append(transition_config(a.trigger, path, a.dest, a.guards, a.unless,
                                                     a.actions, where))
                # Fired by the timer, it takes exactly this delayed transition.
                transitions.append(transition_config(event, path, a.dest, a.guards, a.unless,
                                                     a.actions, where))
        top = [state_config(n) for n in self.nodes.values() if n.parent is None]
        return DotMachine(model=None, states=top, transitions=transitions,
                          initial=self.spec.initial, auto_transitions=False, send_event=True,
                          ignore_invalid_triggers=False, name=f"{self.name}: ")


# -- loading ----------------------------------------------------------------------------------

# Parsing, checking and compiling cost milliseconds; resolving settings costs microseconds. So
# checked specs are cached per file content and plugin manager, definitions per settings too.
_specs: dict[tuple[str, str, int, int], tuple[Any, Any, StatechartSpec]] = {}
_definitions: dict[tuple, Definition] = {}


def parse(source: str | Path, plugins: Any, *, text: str | None = None,
          check_names: bool = True) -> tuple[SourceDocument | None, StatechartSpec | None,
                                             list[Any]]:
    """Parse and statically check one file: ``(document, spec, diagnostics)``."""
    try:
        doc = load_yaml(source, text=text)
    except YamlSourceError as exc:
        return None, None, exc.diagnostics
    names = None
    if check_names:
        registry: Registry = plugins.registry
        names = checks.Names(registry.guards, registry.actions)
    spec, diagnostics = checks.check(doc, names)
    return doc, spec, diagnostics


def load_definition(source: str | Path, *, plugins: Any = None,
                    overrides: Mapping[str, Any] | None = None,
                    env: Mapping[str, str] | None = None,
                    overrides_origin: str = "orion.yaml") -> Definition:
    """Load, check and compile ``source``, with its settings resolved from ``overrides`` and
    ``env`` (default: ``os.environ``). Raises :class:`StatechartError` with every finding."""
    from orion.plugins import default_plugin_manager

    plugins = plugins if plugins is not None else default_plugin_manager()
    env = os.environ if env is None else env
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = None  # parse() reports it with a position
    # The registry is rebuilt whenever a plugin is (un)registered, so keying on it means a
    # definition never keeps calling guards and actions of a plugin that is gone, and a file is
    # re-checked against the names the plugins provide now.
    registry = plugins.registry
    spec_key = (str(path.resolve()), hashlib.sha256((text or "").encode()).hexdigest(),
                id(plugins), id(registry))
    cached = _specs.get(spec_key)
    if cached is not None and cached[0] is plugins and cached[1] is registry:
        spec = cached[2]
    else:
        _, parsed, diagnostics = parse(path, plugins, text=text)
        if diagnostics or parsed is None:
            raise StatechartError(diagnostics)
        spec = parsed
        _specs[spec_key] = (plugins, registry, spec)
    settings = resolve(spec, overrides, env, origin=overrides_origin)
    key = (spec_key, tuple(settings.items()))
    definition = _definitions.get(key)
    if definition is None or definition.plugins is not plugins \
            or definition.registry is not registry:
        definition = Definition(spec, source=str(path), plugins=plugins, settings=settings)
        _definitions[key] = definition
    return definition
