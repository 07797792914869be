"""Compile a checked statechart once per file: its ``transitions`` machine (states, events and
transitions, see :mod:`orion.statechart.interpreter.semantics`), its timers, and an index of
its transitions by state and event.

One definition serves every instance: instances are plain objects holding their active leaf,
context and timers, so creating one costs microseconds.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from orion.clock import Clock, VirtualClock
from orion.errors import ActionError, GuardError, StatechartError
from orion.hooks.blame import where_raised
from orion.hooks.types import Registered
from orion.statechart.interpreter.lifecycle import Lifecycle
from orion.statechart.interpreter.listeners import Listeners, PluginHooks
from orion.statechart.interpreter.model_methods import model_class
from orion.statechart.interpreter.semantics import (
    ChartState,
    LifecycleEventData,
    LifecycleMachine,
    LifecycleState,
    LifecycleTransition,
    done_event,
    entry_path,
    transition_domain,
)
from orion.statechart.interpreter.settings import resolve
from orion.statechart.io.source import parse
from orion.statechart.model.contract import state_tagged, tags_by_state
from orion.statechart.model.events import answers, descriptors
from orion.statechart.model.schema import StatechartSpec
from orion.statechart.model.tree import SEPARATOR, edges, flatten, lineage, settle

__all__ = ["Callables", "Definition", "load_definition", "parse"]

_NO_TAGS: frozenset[str] = frozenset()


class _Action:
    """A named action as a ``transitions`` callback: ``fn(lifecycle, transition)``."""

    __slots__ = ("name", "function", "owner", "where")

    def __init__(self, registered: Registered, where: str):
        self.name, self.function, self.owner = registered.name, registered.function, registered.plugin
        self.where = where

    def __call__(self, event_data: LifecycleEventData) -> None:
        lifecycle = event_data.model
        try:
            self.function(lifecycle, lifecycle.current)
        except ActionError:
            raise
        except Exception as exc:
            # An action given as a function (no plugin manager) is named by its name alone.
            plugin = None if self.owner == Callables.OWNER else self.owner
            lifecycle._action_failed(self.name, self.owner, exc)
            raise ActionError(lifecycle.name, self.name, self.where, exc, plugin=plugin,
                              at=where_raised(exc, self.function) if plugin else None) from exc

    def __repr__(self) -> str:
        return f"<action {self.name}>"


class _Guard:
    """A named guard as a ``transitions`` condition. Fails closed (SM-4, CU-5): a guard that
    raises is reported to the lifecycle's listeners and stops the event with a
    :class:`GuardError`: no transition is taken, not even a later candidate that needs no
    guard, because "could not decide" is not "no objection"."""

    __slots__ = ("name", "function", "owner")

    def __init__(self, registered: Registered):
        self.name, self.function, self.owner = registered.name, registered.function, registered.plugin

    def __call__(self, event_data: LifecycleEventData) -> bool:
        lifecycle = event_data.model
        try:
            return bool(self.function(lifecycle, lifecycle.current))
        except Exception as exc:
            lifecycle._guard_failed(self.name, self.owner, exc)
            current = lifecycle.current
            raise GuardError(lifecycle.name, self.name, self.owner,
                             where_raised(exc, self.function),
                             current.trigger if current is not None else "?", lifecycle.state,
                             exc) from exc

    def __repr__(self) -> str:
        return f"<guard {self.name}>"


@dataclass(frozen=True)
class Callables:
    """Guards and actions given as functions, for a lifecycle that runs without a plugin
    manager (the engine's own tests, a script): what a plugin manager's registry holds."""

    guards: Mapping[str, Registered]
    actions: Mapping[str, Registered]

    OWNER = "callables"

    @classmethod
    def of(cls, guards: Mapping[str, Callable[..., Any]] | None,
           actions: Mapping[str, Callable[..., Any]] | None) -> Callables:
        return cls({n: Registered(n, f, cls.OWNER) for n, f in (guards or {}).items()},
                   {n: Registered(n, f, cls.OWNER) for n, f in (actions or {}).items()})


class Definition:
    """A compiled statechart. Create instances with :meth:`create` or :meth:`restore`."""

    def __init__(self, spec: StatechartSpec, *, source: str, plugins: Any,
                 settings: Mapping[str, Any], registry: Any = None):
        self.spec = spec
        self.source = source
        #: The plugin manager whose guards and actions run, and whose lifecycle hooks observe
        #: the instances by default (``None`` with :class:`Callables`).
        self.plugins = plugins
        self.settings = settings
        self.name = spec.statechart
        canonical = json.dumps(_canonical(spec), sort_keys=True, separators=(",", ":"))
        self.hash = hashlib.sha256(canonical.encode()).hexdigest()
        self.nodes = flatten(spec)
        self.leaves = frozenset(p for p, n in self.nodes.items() if not n.compound)
        #: The active tags of each state (its own and its ancestors'): what ``has_tag`` reads.
        self.tags: dict[str, frozenset[str]] = tags_by_state(self.nodes)
        #: Every tag some state has: ``has_tag`` of any other raises.
        self.all_tags: frozenset[str] = frozenset().union(*self.tags.values())
        self.initial_leaf = settle(self.nodes, spec.initial)
        self.finals = frozenset(p for p, n in self.nodes.items()
                                if n.spec.final and SEPARATOR not in p)
        self._context = spec.context
        self._context_is_flat = all(not isinstance(v, (dict, list)) for v in spec.context.values())
        #: The guards and actions this definition was compiled with.
        self.registry = registry if registry is not None else plugins.registry
        #: ``(trigger, delay_ms)`` of each state's ``after`` entries.
        self.timers: dict[str, tuple[tuple[str, float], ...]] = {
            path: tuple((a.trigger, float(settings[a.ms] if isinstance(a.ms, str) else a.ms))
                        for a in node.spec.after)
            for path, node in self.nodes.items() if node.spec.after}
        #: The delayed transition of each ``after`` entry, by ``(state, index)``: a timer takes
        #: its own transition even when another timer or a deeper state shares its trigger.
        self.timer_transitions: dict[tuple[str, int], LifecycleTransition] = {}
        #: The machine that runs every instance.
        self.machine = self._compile()
        #: The event descriptors the chart's transitions answer.
        self.triggers = frozenset(self.machine.events)
        self._allowed: dict[str, list[str]] = {}
        self._tag_changes: dict[str, dict[str, tuple[frozenset[str], frozenset[str]]]] = {}
        self._default_listeners: Listeners | None = None
        #: Whether instances get ``transitions``' model methods (``is_<state>()``,
        #: ``may_<trigger>()``, ``to_<state>()``, ``<trigger>()``) unless ``create`` or
        #: ``restore`` says otherwise. Off by default: they are methods a team asks for, in the
        #: chart (``model_methods: true``) or here.
        self.model_methods = spec.model_methods
        self._model_class: type[Lifecycle] | None = None

    # -- instances ----------------------------------------------------------------------------

    @property
    def initial_context(self) -> dict[str, Any]:
        return dict(self._context) if self._context_is_flat else copy.deepcopy(self._context)

    def create(self, *, clock: Clock | None = None, instance_id: str | None = None,
               context: dict[str, Any] | None = None, host: Any = None,
               listeners: Iterable[Any] | None = None, plugins: Any = None,
               model_methods: bool | None = None) -> Lifecycle:
        """A new instance in the initial state, with its entry actions run and timers armed.

        It reports to ``listeners``; by default to the lifecycle hooks of ``plugins`` (the
        definition's plugin manager unless given), or, when ``host`` (the runtime, there for
        plugins from the first hook on) has ``lifecycle_listeners``, to those. With
        ``model_methods`` (default: :attr:`model_methods`) it has ``transitions``' model
        methods (:mod:`~orion.statechart.interpreter.model_methods`)."""
        lifecycle = self._class(model_methods)(
            self, clock=clock or VirtualClock(), instance_id=instance_id, context=context,
            host=host, listeners=self.listeners(host, listeners, plugins))
        return lifecycle.start()

    def restore(self, snapshot: dict[str, Any], *, clock: Clock | None = None,
                host: Any = None, listeners: Iterable[Any] | None = None,
                plugins: Any = None, model_methods: bool | None = None) -> Lifecycle:
        """An instance resumed from a snapshot (see :meth:`Lifecycle.restore`); its listeners
        and model methods are chosen as for :meth:`create`."""
        return self._class(model_methods).restore(
            self, snapshot, clock=clock or VirtualClock(), host=host, listeners=listeners,
            plugins=plugins)

    def _class(self, model_methods: bool | None) -> type[Lifecycle]:
        if not (self.model_methods if model_methods is None else model_methods):
            return Lifecycle
        if self._model_class is None:
            self._model_class = model_class(self)
        return self._model_class

    def listeners(self, host: Any = None, listeners: Iterable[Any] | None = None,
                  plugins: Any = None) -> Listeners:
        """Who hears an instance: see :meth:`create`."""
        if listeners is not None:
            return listeners if isinstance(listeners, Listeners) else Listeners(listeners)
        if plugins is not None:
            return Listeners([PluginHooks(plugins)])
        hosted = getattr(host, "lifecycle_listeners", None)
        if hosted is not None:
            return hosted if isinstance(hosted, Listeners) else Listeners(hosted)
        if self._default_listeners is None:
            self._default_listeners = Listeners(
                [PluginHooks(self.plugins)] if self.plugins is not None else [])
        return self._default_listeners

    # -- queries ------------------------------------------------------------------------------

    def lineage(self, path: str) -> list[str]:
        return lineage(path)

    def state_tagged(self, tag: str) -> str | None:
        """The first leaf (in file order) that has ``tag``: where code that restores a lifecycle
        by meaning puts it."""
        return state_tagged(self.nodes, tag)

    def tag_changes(self, before: str, after: str) -> tuple[frozenset[str], frozenset[str]]:
        """The tags gained and lost from leaf ``before`` to leaf ``after``, computed once per
        pair (a step reports them; the pairs a chart's transitions make are few)."""
        by_after = self._tag_changes.get(before)
        if by_after is None:
            by_after = self._tag_changes[before] = {}
        found = by_after.get(after)
        if found is None:
            was, now = self.tags.get(before, _NO_TAGS), self.tags.get(after, _NO_TAGS)
            found = by_after[after] = (now - was, was - now)
        return found

    def knows(self, trigger: str) -> bool:
        """Whether some transition of the chart answers ``trigger``: a descriptor matches it
        (the name, a dot-separated prefix of it, or ``*``)."""
        return answers(self.triggers, trigger)

    def allowed_triggers(self, leaf: str) -> list[str]:
        """The descriptors some transition of ``leaf``, an ancestor or the root answers."""
        allowed = self._allowed.get(leaf)
        if allowed is None:
            allowed = self._allowed[leaf] = sorted(self.machine.descriptors_of(leaf))
        return allowed

    def candidates(self, leaf: str, trigger: str) -> list[LifecycleTransition]:
        """The transitions ``trigger`` may take in ``leaf``, in priority order (the leaf's own
        first, then each ancestor's outwards, then the root's; document order within a
        state)."""
        return list(self.machine.candidates(leaf, trigger))

    # -- compilation --------------------------------------------------------------------------

    def _compile(self) -> LifecycleMachine:
        nodes = self.nodes
        guards, actions = self._named()
        states: dict[str, LifecycleState] = {}
        for path in reversed(nodes):  # children before their parents
            node = nodes[path]
            spec = node.spec
            state = ChartState(
                node.name, path=path, final=spec.final, initial=spec.initial,
                on_enter=[_Action(actions[n], f"on entry to {path!r}") for n in spec.entry],
                on_exit=[_Action(actions[n], f"on exit from {path!r}") for n in spec.exit],
                tags=spec.tags, timers=self.timers.get(path, ()), done=done_event(nodes, path))
            state.add_substates([states[child] for child in node.children])
            states[path] = state
        machine = LifecycleMachine(
            name=self.name, initial=self.spec.initial, nodes=nodes,
            states=[states[p] for p, node in nodes.items() if node.parent is None])
        tops = [p for p, node in nodes.items() if node.parent is None]
        for edge in edges(self.spec, nodes):
            t = edge.spec
            domain: str | None = None
            enter: tuple[str, ...] = ()
            if t.dest is not None:
                domain = transition_domain(nodes, edge.owner, t.dest, t.type == "internal")
                enter = entry_path(nodes, domain, t.dest)
            conditions = [_Guard(guards[g]) for g in t.guards]
            unless = [_Guard(guards[g]) for g in t.unless]
            before = [_Action(actions[a], edge.where) for a in t.actions]
            # A ``*`` transition is the root's; transitions keeps it under each top-level state.
            for source in (tops if edge.owner is None else [edge.owner]):
                transition = machine.add_chart_transition(
                    edge.trigger, descriptors(edge.trigger), source, t.dest, conditions=conditions,
                    unless=unless, before=before, owner=edge.owner, domain=domain,
                    enter=enter, index=edge.index, where=edge.where)
                if edge.timer is not None:
                    self.timer_transitions[(source, edge.timer)] = transition
        machine.freeze()
        return machine

    def _named(self) -> tuple[Mapping[str, Registered], Mapping[str, Registered]]:
        """The guards and actions of this chart: the ones provided for it by name (a
        registry's ``guards_for``), else the shared ones."""
        registry = self.registry
        if hasattr(registry, "actions_for"):
            return registry.guards_for(self.name), registry.actions_for(self.name)
        return registry.guards, registry.actions


def _deprecated_default_plugins() -> Any:
    """Orion's plugin manager, for the call ``load_definition(path)`` written before the engine
    took its guards and actions from the caller. Deprecated: it is looked up by name, so the
    engine imports no plugin manager, and it goes with the warning."""
    warnings.warn(
        "load_definition() without plugins=, guards= or actions= is deprecated: pass the "
        "plugin manager whose guards and actions the chart uses "
        "(orion.hooks.manager.make_plugin_manager())",
        DeprecationWarning, stacklevel=3)
    manager = importlib.import_module("orion.hooks.manager")
    return manager.default_plugin_manager()


def _canonical(spec: StatechartSpec) -> dict[str, Any]:
    """The spec as JSON data for the hash, without the default ``type: external`` of each
    transition and the contract's version and history: a chart written before they existed
    keeps its hash, so its snapshots still restore."""
    data = spec.model_dump(mode="json")
    # Which contract version a chart was written for, its contract's history and the settings
    # it lists say nothing about how it runs: a chart that gains them keeps its hash.
    for part in ("version", "history", "settings"):
        data["contract"].pop(part)
    # Model methods are methods of the instances, not a rule of how they step.
    data.pop("model_methods")
    edges = list(data["transitions"])
    states = list(data["states"].values())
    while states:  # a loop, not recursion: nesting depth is bounded by the checks, not here
        state = states.pop()
        edges.extend(state["after"])
        states.extend(state["states"].values())
    for edge in edges:
        if edge.get("type") == "external":
            del edge["type"]
    return data


# -- loading ----------------------------------------------------------------------------------

# Parsing, checking and compiling cost milliseconds; resolving settings costs microseconds. So
# checked specs are cached per file content and plugin manager, definitions per settings too,
# the most recently used kept: a process that makes a plugin manager per conversation (a
# server, a test suite) would otherwise keep every one, and what its charts hold, for good.
CACHED = 64
_specs: dict[tuple[str, str, int, int], tuple[Any, Any, StatechartSpec]] = {}
_definitions: dict[tuple, Definition] = {}


def _recent(cache: dict[Any, Any], key: Any) -> Any:
    """``cache[key]`` (or None), marked most recently used."""
    value = cache.pop(key, None)
    if value is not None:
        cache[key] = value
    return value


def _keep(cache: dict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """Store ``value``; past ``limit`` entries, the least recently used goes."""
    cache[key] = value
    while len(cache) > limit:
        del cache[next(iter(cache))]


def load_definition(source: str | Path, *, plugins: Any = None,
                    overrides: Mapping[str, Any] | None = None,
                    env: Mapping[str, str] | None = None,
                    overrides_origin: str = "orion.yaml",
                    guards: Mapping[str, Callable[..., Any]] | None = None,
                    actions: Mapping[str, Callable[..., Any]] | None = None) -> Definition:
    """Load, check and compile ``source``, with its settings resolved from ``overrides`` and
    ``env`` (default: ``os.environ``). Raises :class:`StatechartError` with every finding.

    Guards and actions come from ``plugins`` (a plugin manager: its registry names them), or,
    when ``guards`` or ``actions`` are given, from those functions alone: such a definition
    needs no plugin manager, and its instances report to the listeners given to ``create``.
    The engine looks up no plugin manager of its own: a call naming neither is deprecated."""
    env = os.environ if env is None else env
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = None  # parse() reports it with a position
    if plugins is None and (guards is not None or actions is not None):
        callables = Callables.of(guards, actions)
        _, spec, diagnostics = parse(path, SimpleNamespace(registry=callables), text=text)
        if diagnostics or spec is None:
            raise StatechartError(diagnostics)
        return Definition(spec, source=str(path), plugins=None, registry=callables,
                          settings=resolve(spec, overrides, env, origin=overrides_origin))
    if plugins is None:
        plugins = _deprecated_default_plugins()
    # The registry is rebuilt whenever a plugin is (un)registered, so keying on it means a
    # definition never keeps calling guards and actions of a plugin that is gone, and a file is
    # re-checked against the names the plugins provide now.
    registry = plugins.registry
    spec_key = (str(path.resolve()), hashlib.sha256((text or "").encode()).hexdigest(),
                id(plugins), id(registry))
    cached = _recent(_specs, spec_key)
    if cached is not None and cached[0] is plugins and cached[1] is registry:
        spec = cached[2]
    else:
        _, parsed, diagnostics = parse(path, plugins, text=text)
        if diagnostics or parsed is None:
            raise StatechartError(diagnostics)
        spec = parsed
        _keep(_specs, spec_key, (plugins, registry, spec), CACHED)
    settings = resolve(spec, overrides, env, origin=overrides_origin)
    key = (spec_key, tuple(settings.items()))
    definition = _recent(_definitions, key)
    if definition is None or definition.plugins is not plugins \
            or definition.registry is not registry:
        definition = Definition(spec, source=str(path), plugins=plugins, settings=settings)
        _keep(_definitions, key, definition, CACHED)
    return definition
