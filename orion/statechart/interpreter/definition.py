"""Compile a checked statechart once per file: its states, timers, actions, and an index of
its transitions by state and trigger (see :mod:`orion.statechart.interpreter.semantics`).

One definition serves every instance: instances are plain objects holding their active leaf,
context and timers, so creating one costs microseconds.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orion.clock import Clock, VirtualClock
from orion.errors import ActionError, StatechartError
from orion.registry import Registered, Registry
from orion.statechart import checks
from orion.statechart.model.contract import state_tagged, tags_by_state
from orion.statechart.interpreter.lifecycle import Lifecycle
from orion.statechart.model.schema import WILDCARD, StatechartSpec, _Edge
from orion.statechart.interpreter.semantics import CompiledTransition, entry_path, transition_domain
from orion.statechart.interpreter.settings import resolve
from orion.statechart.model.tree import SEPARATOR, StateNode, flatten, lineage, settle
from orion.yamlsource import SourceDocument, YamlSourceError, load_yaml


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


class _Guard:
    """Fails closed: a guard that raises is reported and counts as ``False``."""

    __slots__ = ("name", "function", "plugin")

    def __init__(self, registered: Registered):
        self.name, self.function, self.plugin = registered.name, registered.function, registered.plugin

    def __call__(self, lifecycle: Lifecycle) -> bool:
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
        canonical = json.dumps(_canonical(spec), sort_keys=True, separators=(",", ":"))
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
        self.entry: dict[str, tuple[_Action, ...]] = {}
        self.exit: dict[str, tuple[_Action, ...]] = {}
        for path, node in self.nodes.items():
            if node.spec.after:
                self.timers[path] = tuple(
                    (a.trigger, float(settings[a.ms] if isinstance(a.ms, str) else a.ms))
                    for a in node.spec.after)
            if node.spec.entry:
                self.entry[path] = tuple(_Action(registry.actions[n], f"on entry to {path!r}")
                                         for n in node.spec.entry)
            if node.spec.exit:
                self.exit[path] = tuple(_Action(registry.actions[n], f"on exit from {path!r}")
                                        for n in node.spec.exit)
        #: Each state's transitions by trigger, in document order (its ``transitions`` entries,
        #: then its ``after`` entries); the root's (``*``) under ``None``.
        self.by_state: dict[str | None, dict[str, list[CompiledTransition]]] = {}
        #: The delayed transition of each ``after`` entry, by ``(state, index)``: a timer takes
        #: its own transition even when another timer or a deeper state shares its trigger.
        self.timer_transitions: dict[tuple[str, int], CompiledTransition] = {}
        self._compile(registry)
        self.triggers = frozenset(t for table in self.by_state.values() for t in table)
        self._allowed: dict[str, list[str]] = {}

    # -- instances ----------------------------------------------------------------------------

    @property
    def initial_context(self) -> dict[str, Any]:
        return dict(self._context) if self._context_is_flat else copy.deepcopy(self._context)

    def create(self, *, clock: Clock | None = None, instance_id: str | None = None,
               context: dict[str, Any] | None = None, host: Any = None) -> Lifecycle:
        """A new instance in the initial state, with its entry actions run and timers armed.
        ``host`` (the runtime) is there for plugins from the first hook on."""
        lifecycle = Lifecycle(self, clock=clock or VirtualClock(), plugins=self.plugins,
                              instance_id=instance_id, context=context)
        lifecycle.host = host
        return lifecycle.start()

    def restore(self, snapshot: dict[str, Any], *, clock: Clock | None = None,
                host: Any = None) -> Lifecycle:
        lifecycle = Lifecycle.restore(self, snapshot, clock=clock or VirtualClock(),
                                      plugins=self.plugins)
        lifecycle.host = host
        return lifecycle

    # -- queries ------------------------------------------------------------------------------

    def lineage(self, path: str) -> list[str]:
        return lineage(path)

    def state_tagged(self, tag: str) -> str | None:
        """The first leaf (in file order) that has ``tag``: where code that restores a lifecycle
        by meaning puts it."""
        return state_tagged(self.nodes, tag)

    def allowed_triggers(self, leaf: str) -> list[str]:
        """The triggers some transition of ``leaf``, an ancestor or the root answers."""
        allowed = self._allowed.get(leaf)
        if allowed is None:
            found: set[str] = set(self.by_state.get(None, ()))
            for path in lineage(leaf):
                found.update(self.by_state.get(path, ()))
            allowed = self._allowed[leaf] = sorted(found)
        return allowed

    def candidates(self, leaf: str, trigger: str) -> list[CompiledTransition]:
        """The transitions ``trigger`` may take in ``leaf``, in priority order: the leaf's own
        first, then each ancestor's outwards, then the root's (``*``); document order within
        a state."""
        found: list[CompiledTransition] = []
        for path in reversed(lineage(leaf)):
            found.extend(self.by_state.get(path, {}).get(trigger, ()))
        found.extend(self.by_state.get(None, {}).get(trigger, ()))
        return found

    # -- compilation --------------------------------------------------------------------------

    def _compile(self, registry: Registry) -> None:
        def compiled(edge: _Edge, trigger: str, source: str | None,
                     where: str) -> CompiledTransition:
            domain: str | None = None
            enter: tuple[str, ...] = ()
            if edge.dest is not None:
                domain = transition_domain(self.nodes, source, edge.dest,
                                           edge.type == "internal")
                enter = entry_path(self.nodes, domain, edge.dest)
            return CompiledTransition(
                trigger, source, edge.dest,
                tuple(_Guard(registry.guards[g]) for g in edge.guards),
                tuple(_Guard(registry.guards[g]) for g in edge.unless),
                tuple(_Action(registry.actions[a], where) for a in edge.actions),
                where, domain, enter)

        def add(source: str | None, transition: CompiledTransition) -> None:
            self.by_state.setdefault(source, {}).setdefault(transition.trigger,
                                                            []).append(transition)

        for t in self.spec.transitions:
            # ``*`` makes the transition the root's, whatever else the list names.
            sources: list[str | None] = [None] if WILDCARD in t.source \
                else list(dict.fromkeys(t.source))
            for source in sources:
                add(source, compiled(t, t.trigger, source, f"on {t.trigger!r}"))
        for path, node in self.nodes.items():
            for index, a in enumerate(node.spec.after):
                transition = compiled(a, a.trigger, path,
                                      f"on timer {a.trigger!r} of {path!r}")
                add(path, transition)  # sent by code, it competes like any other transition
                self.timer_transitions[(path, index)] = transition

def _canonical(spec: StatechartSpec) -> dict[str, Any]:
    """The spec as JSON data for the hash, without the default ``type: external`` of each
    transition: a chart written before ``type`` existed keeps its hash, so its snapshots still
    restore."""
    data = spec.model_dump(mode="json")
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
