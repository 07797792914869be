"""Orion's SCXML rules as an extension of ``transitions``' hierarchical machine.

A compiled chart is one :class:`LifecycleMachine`; every lifecycle of the chart is a model that
machine drives. ``transitions`` runs each step: the library's
``HierarchicalMachine._trigger_event`` processes the event (scope, ``on_exception``,
``finalize_event``), each candidate transition runs the library's ``Transition.execute``
(conditions: the chart's ``guards`` and ``unless``; ``before``: the chart's ``actions``; the
machine's ``before_state_change`` and ``after_state_change``), states run their ``on_enter``
and ``on_exit`` callbacks (the chart's ``entry`` and ``exit`` actions), and the library's
``NestedTransition._update_model`` records the new state. The classes below override the
library only where its rules differ from the W3C SCXML recommendation that Orion follows
(docs/statecharts.md, "On `transitions`", has the table), and call it for the rest:

* :meth:`LifecycleMachine._trigger_event_nested` and :meth:`LifecycleEvent.trigger_nested`
  select the transition: the active leaf's first, then each ancestor's outwards, then the
  root's (``*``), in document order within a state, and an event descriptor matches an event
  name or its dot-separated prefix (SCXML 3.12.1, 3.13); ``prepare_event`` runs first.
* :meth:`LifecycleMachine._check_event_result` tells the caller of an unanswered trigger, and
  discards and reports a queued one.
* :meth:`LifecycleTransition._change_state` exits and enters what the transition domain says
  (SCXML 3.13 ``getTransitionDomain``), internal and external alike;
  :meth:`LifecycleTransition.execute` reports to the lifecycle's listeners afterwards (not
  through ``after_state_change``, which Python code may reassign).
* :class:`LifecycleState` arms its timers on entry, cancels them on exit, and its entry raises
  the completion event ``done.state.<parent>`` when it is a nested final state (SCXML 3.7).
* :meth:`LifecycleMachine._process` runs each lifecycle to completion with a queue of its own.

Built with the library's arguments and no chart, the machine is a drop-in
``HierarchicalMachine`` with the same rules where they differ from the library's: the
transition domain (:meth:`LifecycleTransition._resolve_transition` hands the library's
``_change_state`` Orion's exits and entries), ``type="internal"``, ``done.state`` events
(:meth:`LifecycleState.enter`), one queue per model (:meth:`LifecycleMachine._process_model`)
and ``*`` ranked after every state's own (:meth:`LifecycleEvent.add_transition`).
``transitions``' own hierarchical tests run on it (tests/test_transitions_suite.py).

Everything a compiled chart's index needs (exit sets, candidates by state and event) is
computed once per chart, so a step costs a dictionary lookup and a walk over the transitions
it may take.
"""

from __future__ import annotations

import logging
import sys
from collections import deque
from collections.abc import Callable, Iterable
from functools import partial, reduce
from typing import TYPE_CHECKING, Any

from transitions.core import Machine
from transitions.extensions.nesting import (
    HierarchicalMachine,
    NestedEvent,
    NestedEventData,
    NestedState,
    NestedTransition,
)

from orion.errors import ActionError, CompiledChartError
from orion.statechart.model.events import DONE_PREFIX, matching_descriptors
from orion.statechart.model.tree import SEPARATOR, StateNode, lineage, settle

if TYPE_CHECKING:
    from collections import OrderedDict

    from orion.statechart.interpreter.lifecycle import Lifecycle


_LOGGER = logging.getLogger(__name__)


# -- the rules, computed once per chart ---------------------------------------------------------

def is_descendant(path: str, ancestor: str | None) -> bool:
    """Whether ``path`` lies strictly inside ``ancestor`` (``None``: the root holds all)."""
    return ancestor is None or path.startswith(ancestor + SEPARATOR)


def transition_domain(nodes: dict[str, StateNode], source: str | None, dest: str,
                      internal: bool) -> str | None:
    """SCXML's ``getTransitionDomain``: an internal transition from a compound state into one
    of its descendants keeps its source active; any other transition's domain is the innermost
    compound proper ancestor of the source that also contains the target (``findLCCA``)."""
    if source is None:
        return None
    if internal and nodes[source].compound and is_descendant(dest, source):
        return source
    for ancestor in reversed(lineage(source)[:-1]):
        if is_descendant(dest, ancestor):
            return ancestor
    return None


def entry_path(nodes: dict[str, StateNode], domain: str | None, dest: str) -> tuple[str, ...]:
    """The states a transition into ``dest`` enters below ``domain``, outermost first: the
    ancestors of ``dest``, ``dest``, then its ``initial`` descendants."""
    return tuple(p for p in lineage(settle(nodes, dest)) if is_descendant(p, domain))


def done_event(nodes: dict[str, StateNode], entered: str) -> str | None:
    """The completion event that entering ``entered`` raises, if it is a nested final."""
    node = nodes[entered]
    if node.spec.final and node.parent is not None:
        return DONE_PREFIX + node.parent
    return None


# -- the transitions extension -------------------------------------------------------------------
#
# The overrides below take this machine's own classes where the library's take its base ones
# (``LifecycleEventData`` for ``EventData``, ``Lifecycle`` for a model): the only event data a
# LifecycleMachine hands its states, transitions and events is the LifecycleEventData it made,
# for a Lifecycle, so mypy's ``override`` error is ignored on each of those methods.

class LifecycleEventData(NestedEventData):
    """One event being processed for one lifecycle (the machine is shared by all of them).

    ``direct``: sent by the caller of ``trigger()``, who is told when nothing answers it (a
    queued or raised event is discarded and reported instead). ``only``: the one delayed
    transition a timer takes. ``errors``: the exit and entry actions that failed, raised once
    the transition is complete."""

    machine: LifecycleMachine
    model: Lifecycle
    event: LifecycleEvent
    transition: LifecycleTransition | None

    # NestedEventData's attributes, as the library's own __init__ starts them (its stubs leave
    # the None out of ``state`` and ``event``): class defaults, which the library and the
    # overrides shadow when they set them. One event data is made per event, on the hot path.
    state = None  # type: ignore[assignment]
    event = None  # type: ignore[assignment]
    transition = None
    error = None
    result = False
    source_path: list[str] | None = None
    source_name: str | None = None
    reason: str | None = None
    only: LifecycleTransition | None = None
    started = 0.0  # perf_counter() when a transition began: its duration

    def __init__(self, machine: LifecycleMachine, lifecycle: Lifecycle, payload: dict[str, Any],
                 *, args: tuple[Any, ...] = (), direct: bool = False,
                 only: LifecycleTransition | None = None):
        self.machine, self.model = machine, lifecycle
        self.args, self.kwargs = args, payload
        self.direct = direct
        if only is not None:
            self.only = only
        self.errors: list[ActionError] = []


class LifecycleState(NestedState):
    """A state of the chart. Its ``on_enter``/``on_exit`` callbacks are its entry and exit
    actions; the first that fails ends its block (SCXML 5.10), and the error is raised once the
    whole transition is done (see :meth:`LifecycleTransition._change_state`)."""

    _name: str  # the library allows an Enum; a chart names its states
    # Its children, states of the chart too (the stubs narrow HierarchicalMachine.states from
    # Machine's with the same ignore).
    states: OrderedDict[str, LifecycleState]  # type: ignore[assignment]

    def __init__(self, name: str, on_enter: Any = None, on_exit: Any = None,
                 ignore_invalid_triggers: Any = None, final: bool = False,
                 initial: Any = None, on_final: Any = None, *, path: str | None = None,
                 tags: Iterable[str] = (), timers: tuple[tuple[str, float], ...] = (),
                 done: str | None = None):
        super().__init__(name, on_enter=on_enter, on_exit=on_exit,
                         ignore_invalid_triggers=ignore_invalid_triggers, final=final,
                         initial=initial, on_final=on_final)
        #: Its path in a compiled chart; "" for a state added the library's way (the machine
        #: used as a ``HierarchicalMachine``), which the library's rules drive alone.
        self.path = path or ""
        #: The innermost state still active once this one is exited ("" above the top level).
        self.parent_path = self.path.rpartition(SEPARATOR)[0]
        self.tags = list(tags)
        #: ``(trigger, delay_ms)`` of each ``after`` entry, armed on entry.
        self.timers = timers
        #: The completion event entering this state raises (a nested final state), or None.
        self.done = done

    def enter(self, event_data: LifecycleEventData) -> None:  # type: ignore[override]
        if not self.path:
            # A state added the library's way: the library enters it; a nested final state
            # raises its parent's completion event, as a chart's does (SCXML 3.7).
            super().enter(event_data)
            if self.final and self._scope:
                event_data.machine.raise_done(event_data.model, self.separator.join(self._scope))
            return None
        lifecycle = event_data.model
        # While its entry actions run, the state is the innermost active one; its timers are
        # armed first, at the entry time.
        lifecycle._enter(self)
        try:
            super().enter(event_data)
        finally:
            if self.done is not None:
                lifecycle._raise_event(self.done)

    def exit(self, event_data: LifecycleEventData) -> None:  # type: ignore[override]
        if not self.path:
            return super().exit(event_data)
        try:
            super().exit(event_data)
        finally:
            # Still active while its exit actions run; its timers go with it afterwards.
            event_data.model._exit(self)


class ChartState(LifecycleState):
    """A state of a compiled chart: its paths are dotted (``session_active.finalizing``),
    while the library's default separator (``NestedState.separator``, ``_``) is left alone for
    machines built the library's way."""

    separator = SEPARATOR

    @property
    def name(self) -> str:
        # Its own name. The library's property joins the names of the scope a state is entered
        # in, and the library's log calls read it several times a step; a chart's states are
        # never entered through a scope (their path is ``path``).
        return self._name


class LifecycleTransition(NestedTransition):
    """A transition of the chart: ``conditions`` are its guards (``unless`` ones with the
    target ``False``), ``before`` its actions, which run after the guards pass and before any
    state is exited (Orion's one documented difference from SCXML)."""

    def __init__(self, source: str, dest: str | None, conditions: Any = None, unless: Any = None,
                 before: Any = None, after: Any = None, prepare: Any = None, *,
                 trigger: str = "", owner: str | None = None, domain: str | None = None,
                 enter: tuple[LifecycleState, ...] = (), index: int = 0,
                 where: str | None = None, type: str = "external"):  # SCXML's name
        # ``dest`` None is the library's internal transition (no state change); the stubs type
        # it as always a state.
        super().__init__(source, dest, conditions, unless, before, after,  # type: ignore[arg-type]
                         prepare)
        if type not in ("external", "internal"):
            raise ValueError(f"transition {source!r} -> {dest!r}: type must be 'external' or "
                             f"'internal', not {type!r}")
        #: ``type: internal`` (SCXML): from a compound source into one of its descendants, the
        #: source stays active. Added the library's way as ``type="internal"``.
        self.internal = type == "internal"
        #: Its trigger as written: the event descriptors it answers, separated by spaces.
        self.trigger = trigger
        #: The state it belongs to (``None``: the chart's root, for a ``*`` source).
        self.owner = owner
        #: The SCXML transition domain: every active state strictly inside it is exited.
        self.domain = domain
        #: The states it enters below the domain, outermost first, down to a leaf.
        self.enter_states = enter
        #: Its position in the file: the order among the transitions of one state.
        self.index = index
        #: Where it is, for error messages ("on 'begin'", "on timer 'tick' of 'wait'");
        #: ``None`` for a transition added the library's way, which its rules drive alone.
        self.where = where

    def execute(self, event_data: LifecycleEventData) -> bool:  # type: ignore[override]
        """The library's ``Transition.execute`` (prepare, conditions, ``before_state_change``
        and ``before``, the state change, ``after`` and ``after_state_change``), then the
        lifecycle's listeners. They are Orion's own step, not an entry in the machine's
        ``after_state_change``, so assigning that list never cuts them off."""
        if not super().execute(event_data):
            return False
        if self.where is not None:
            lifecycle = event_data.model
            lifecycle._taken(event_data)
            machine = event_data.machine
            if lifecycle.finished and machine.on_final:
                machine.callbacks(machine.on_final, event_data)
        return True

    def _resolve_transition(self, event_data: Any) -> Any:
        """For a transition added the library's way: the library's state tree, exit and entry
        callables, with SCXML's transition domain (``getTransitionDomain``) deciding which
        active states are exited and where entering starts. The library keeps every active
        ancestor of the target (so ``A -> A.C`` from ``A.C.x`` only exits ``A.C.x`` and
        ``A.C``); Orion exits the source too unless the transition is ``type="internal"``.
        Parallel states, Enum states and states of a reused machine entered through a scope
        stay the library's."""
        machine = event_data.machine
        current = getattr(event_data.model, machine.model_attribute)
        if type(current) is not str or machine.prefix_path:
            return super()._resolve_transition(event_data)
        separator = machine.state_cls.separator
        source, dest = self.source.split(separator), (self.dest or "").split(separator)
        active = current.split(separator)
        if active[:len(source)] != source or not _is_path(machine, dest):
            return super()._resolve_transition(event_data)  # the library's answer, or error
        domain = _domain(machine, source, dest, self.internal)
        exits = [partial(machine.get_state(active[:depth]).scoped_exit, event_data,
                         active[:depth - 1])
                 for depth in range(len(active), len(domain), -1)]
        new_states, enters = self._enter_nested(list(domain), dest[len(domain):], list(domain),
                                                event_data)
        tree = machine.build_state_tree(current, separator)
        scoped = reduce(dict.get, domain, tree)
        scoped.clear()
        scoped.update(new_states)
        return tree, exits, enters

    def _change_state(self, event_data: LifecycleEventData) -> None:  # type: ignore[override]
        """Exit the active states inside the domain, innermost first, then enter the target's
        lineage below it. A failing exit or entry action does not stop the transition: every
        state is still exited or entered, so the active states stay one path from a top-level
        state to a leaf, and the errors are raised when the step is complete."""
        if self.where is None:
            return super()._change_state(event_data)
        machine: LifecycleMachine = event_data.machine
        for state in machine.exit_set(event_data.model.state, self.domain):
            try:
                state.exit(event_data)
            except ActionError as exc:
                event_data.errors.append(exc)
        for state in self.enter_states:
            try:
                state.enter(event_data)
            except ActionError as exc:
                event_data.errors.append(exc)
        # The library sets the model's state and the event's (``set_state``, ``get_state``).
        self._update_model(event_data, machine.state_tree(event_data.model.state))


def _is_path(machine: HierarchicalMachine, path: list[str]) -> bool:
    states = machine.states
    for name in path:
        state = states.get(name)
        if state is None:
            return False
        states = state.states
    return True


def _domain(machine: HierarchicalMachine, source: list[str], dest: list[str],
            internal: bool) -> list[str]:
    """:func:`transition_domain` for states added the library's way, as name paths."""
    if internal and len(dest) > len(source) and dest[:len(source)] == source \
            and machine.get_state(source).states:
        return source
    depth = 0
    while depth < len(source) - 1 and depth < len(dest) - 1 and source[depth] == dest[depth]:
        depth += 1
    return source[:depth]


class LifecycleEvent(NestedEvent):
    """An event name. Its transitions are those registered under it as a descriptor; the
    selection takes every matching descriptor's transitions into account."""

    def add_transition(self, transition: Any) -> None:
        """The library's, then a ``*`` transition added the library's way goes after the
        state's own ones: the root's transitions rank after every state's (the library expands
        ``*`` to the top-level states, ranked in the order they were added)."""
        super().add_transition(transition)
        if getattr(self.machine, "_adding_root", False):
            transition._orion_root = True  # any transition class the machine was given
            return
        ranked = self.transitions[transition.source]
        if len(ranked) > 1 and _is_root(ranked[-2]):
            ranked.sort(key=_is_root)  # stable: document order within each kind

    # None (no transition answers) is an answer the library's ``bool`` has no room for.
    def trigger_nested(  # type: ignore[override]
            self, event_data: LifecycleEventData) -> bool | None:
        """SCXML's ``selectTransitions`` for one active leaf: the first enabled transition of
        the candidates, in priority order, is executed. Returns ``None`` when no transition
        answers the event, ``False`` when every candidate's guards said no."""
        if not isinstance(event_data, LifecycleEventData):
            return super().trigger_nested(event_data)
        machine: LifecycleMachine = event_data.machine
        lifecycle = event_data.model
        only = event_data.only
        if only is None:
            candidates = machine.candidates(lifecycle.state, self.name)
        elif lifecycle.is_in(only.owner or ""):
            # A timer takes its own delayed transition, even when a deeper state or another
            # timer uses the same trigger name (every ``after`` defaults to ``timeout``).
            candidates = (only,)
        else:
            event_data.reason = f"its timer's state {only.owner!r} was exited"
            return None
        if not candidates:
            return None
        event_data.event = self
        lifecycle._begin(event_data, self.name)
        if machine.prepare_event:
            machine.callbacks(machine.prepare_event, event_data)
        for transition in candidates:
            event_data.transition = transition
            if transition.execute(event_data):
                event_data.result = True
                return True
        return False


class LifecycleMachine(HierarchicalMachine):
    """One compiled chart, or, built with the library's arguments and no ``nodes``, a
    drop-in ``HierarchicalMachine`` with Orion's rules where they differ from the library's
    (docs/statecharts.md, "On `transitions`"). A chart's lifecycles are its models; they are
    not registered with ``add_model`` (which binds a method per trigger and state on every
    instance), so creating one costs what creating a plain object does."""

    state_cls: type[LifecycleState] = LifecycleState
    transition_cls: type[LifecycleTransition] = LifecycleTransition
    event_cls: type[LifecycleEvent] = LifecycleEvent
    # Each event is made by ``event_cls`` (the stubs narrow HierarchicalMachine.events from
    # Machine's with the same ignore).
    events: dict[str, LifecycleEvent]  # type: ignore[assignment]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        refused = _refused_variant(cls)
        if refused:
            raise TypeError(f"{cls.__name__}: {refused}")

    def __init__(self, model: Any = Machine.self_literal, states: Any = None,
                 initial: Any = "initial", transitions: Any = None, *,
                 nodes: dict[str, StateNode] | None = None, **kwargs: Any):
        #: Whether this machine runs a compiled chart (Orion's rules), not a library model.
        self.chart = nodes is not None
        self._frozen = False
        if nodes is None:
            #: Library mode: each model's queue of events waiting for the one being processed.
            self._queues: dict[int, deque[Callable[[], Any]]] = {}
            #: Whether the event being processed was raised (a completion event).
            self._raised = False
            super().__init__(model, states, initial, transitions, **kwargs)
            return
        self.state_cls = ChartState
        chart = {"auto_transitions": False, "send_event": True, "ignore_invalid_triggers": False}
        super().__init__(model=None, states=states, initial=initial, **{**chart, **kwargs})
        self.paths: dict[str, LifecycleState] = {}
        pending = list(states)
        while pending:
            state = pending.pop()
            self.paths[state.path] = state
            pending.extend(state.states.values())
        #: Each state's active lineage, outermost first.
        self.lineages = {path: tuple(self.paths[p] for p in lineage(path)) for path in nodes}
        #: The states a lifecycle enters when it starts, outermost first.
        self.initial_states = self.lineages[settle(nodes, initial)]
        # Each state's transitions by descriptor, in document order; the root's under None.
        self._by_state: dict[str | None, dict[str, list[LifecycleTransition]]] = {}
        self._wildcards: dict[str, dict[str, list[LifecycleTransition]]] = {}
        self._candidates: dict[str, dict[str, tuple[LifecycleTransition, ...]]] = {}
        self._exit_sets: dict[str | None, dict[str, tuple[LifecycleState, ...]]] = {}
        self._occurring: dict[str, LifecycleEvent] = {}
        self._trees: dict[str, Any] = {}

    def freeze(self) -> None:
        """The chart is compiled: from now on the calls that would change its states or
        transitions behind the chart's back (``add_state``, ``add_transition``, ...) raise
        :class:`~orion.errors.CompiledChartError` naming Orion's way."""
        self._frozen = True

    # -- the library's calls a compiled chart answers differently --------------------------------

    def _refuse(self, call: str) -> None:
        if self._frozen:
            raise CompiledChartError(self.name.rstrip(": "), call, _INSTEAD[call])

    # Two settings a compiled chart takes from its file, whose change the library would make
    # and a chart's lifecycles would never see: refused, not ignored.

    @property
    def initial(self) -> Any:
        return self._initial

    @initial.setter
    def initial(self, value: Any) -> None:
        self._refuse("initial")
        self._initial = self._recursive_initial(value)  # type: ignore[assignment]

    @property
    def ignore_invalid_triggers(self) -> Any:
        return self._ignore_invalid_triggers

    @ignore_invalid_triggers.setter
    def ignore_invalid_triggers(self, value: Any) -> None:
        self._refuse("ignore_invalid_triggers")
        self._ignore_invalid_triggers = value

    def add_states(self, states: Any, *args: Any, **kwargs: Any) -> None:
        self._refuse("add_state")
        super().add_states(states, *args, **kwargs)

    def add_transition(self, trigger: Any, source: Any, dest: Any = None, *args: Any,
                       **kwargs: Any) -> None:
        self._refuse("add_transition")
        # A ``*`` source is the root's: ranked after every state's own (LifecycleEvent).
        self._adding_root = source == self.wildcard_all and dest != self.wildcard_same
        try:
            super().add_transition(trigger, source, dest, *args, **kwargs)
        finally:
            self._adding_root = False

    def remove_transition(self, trigger: Any, source: Any = "*", dest: Any = "*") -> None:
        self._refuse("remove_transition")
        super().remove_transition(trigger, source, dest)

    def add_model(self, model: Any, initial: Any = None) -> None:
        self._refuse("add_model")
        super().add_model(model, initial)

    def remove_model(self, model: Any) -> None:
        self._refuse("remove_model")
        super().remove_model(model)

    def dispatch(self, trigger: str, *args: Any, **kwargs: Any) -> bool:
        self._refuse("dispatch")
        return super().dispatch(trigger, *args, **kwargs)

    def to_state(self, model: Any, state_name: Any, *args: Any, **kwargs: Any) -> None:
        self._refuse("to_state")
        if self.chart:
            super().to_state(model, state_name, *args, **kwargs)
            return
        # Library-built: a jump is a step too, run to completion with the model's queue (a
        # completion event it raises waits for it; one sent from a callback waits its turn).
        carrier = NestedEventData(None, None, self, model, args, kwargs)  # type: ignore[arg-type]
        self._process_model(partial(self._to_state_now, carrier, state_name))

    def _to_state_now(self, carrier: Any, state_name: Any) -> None:
        super().to_state(carrier.model, state_name, *carrier.args, **carrier.kwargs)

    def get_state(self, state: Any, hint: Any = None) -> Any:
        # A compiled chart's states never change, and its steps look their paths up several
        # times (the library's ``_update_model``): a dictionary answers; the library answers
        # anything else (an Enum, a list path, a hint, a name it must reject).
        if self._frozen and hint is None and type(state) is str:
            found = self.paths.get(state)
            if found is not None:
                return found
        return super().get_state(state, hint)

    def set_state(self, state: Any, model: Any = None) -> None:
        # The library's transitions call it to record the new state; from outside a step it
        # would jump without exit or entry actions and leave the old state's timers armed.
        if self._frozen:
            if not getattr(model, "_busy", False):
                self._refuse("set_state")
            if type(state) is str and state in self.paths:
                # A path of the chart, set on the lifecycle being stepped: what the library
                # does for one model and one state, without its Enum and list cases.
                setattr(model, self.model_attribute, state)
                return
        super().set_state(state, model)

    # -- building -------------------------------------------------------------------------------

    def add_chart_transition(self, trigger: str, descriptors: list[str], source: str,
                             dest: str | None, *, conditions: list[Any], unless: list[Any],
                             before: list[Any], owner: str | None, domain: str | None,
                             enter: tuple[str, ...], index: int,
                             where: str) -> LifecycleTransition:
        """Register one transition of ``source`` (a top-level state for a ``*`` transition,
        which belongs to the root) under the event of each of its ``descriptors``.
        ``Machine.add_transition`` is bypassed: it would expand ``*`` to the top-level states
        as if they owned it, and reject a trigger named like the model attribute (``state``)."""
        transition = self.transition_cls(
            source, dest, conditions, unless, before, None, None, trigger=trigger, owner=owner,
            domain=domain, enter=tuple(self.paths[p] for p in enter), index=index, where=where)
        table = self._by_state.setdefault(owner, {}) if owner is not None \
            else self._wildcards.setdefault(source, {})
        for descriptor in descriptors:
            event = self.events.get(descriptor)
            if event is None:
                event = self.events[descriptor] = self.event_cls(descriptor, self)
            event.add_transition(transition)
            table.setdefault(descriptor, []).append(transition)
        return transition

    # -- the index --------------------------------------------------------------------------------

    def candidates(self, leaf: str, event: str) -> tuple[LifecycleTransition, ...]:
        """The transitions ``event`` may take in ``leaf``, in priority order: the leaf's own
        first, then each ancestor's outwards, then the root's (``*``); document order within
        a state, whichever of its descriptors matched."""
        # Nested by event, then leaf: a step looks its candidates up without building a key.
        by_leaf = self._candidates.get(event)
        found = by_leaf.get(leaf) if by_leaf is not None else None
        if found is None:
            descriptors = [d for d in matching_descriptors(event) if d in self.events]
            tables = [self._by_state.get(s.path) for s in reversed(self.lineages[leaf])]
            tables.append(self._wildcards.get(leaf.split(SEPARATOR, 1)[0]))
            ranked: list[LifecycleTransition] = []
            for table in tables:
                if table:
                    # One transition may list several matching descriptors: it counts once.
                    mine = list(dict.fromkeys(t for d in descriptors for t in table.get(d, ())))
                    ranked.extend(sorted(mine, key=_index) if len(descriptors) > 1 else mine)
            found = tuple(ranked)
            # Names come from the chart and from code; only the chart's own are kept, so an
            # unbounded run of dotted names matched by a prefix cannot grow the cache.
            if event in self.events or event.startswith(DONE_PREFIX):
                self._candidates.setdefault(event, {})[leaf] = found
        return found

    def descriptors_of(self, leaf: str) -> set[str]:
        """The descriptors some transition of ``leaf``, an ancestor or the root answers."""
        found = set(self._wildcards.get(leaf.split(SEPARATOR, 1)[0], ()))
        for state in self.lineages[leaf]:
            found.update(self._by_state.get(state.path, ()))
        return found

    def exit_set(self, leaf: str, domain: str | None) -> tuple[LifecycleState, ...]:
        """The active states a transition with ``domain`` exits from ``leaf``, innermost
        first (SCXML ``exitStates``)."""
        by_leaf = self._exit_sets.get(domain)
        if by_leaf is None:
            by_leaf = self._exit_sets[domain] = {}
        found = by_leaf.get(leaf)
        if found is None:
            found = by_leaf[leaf] = tuple(
                s for s in reversed(self.lineages[leaf]) if is_descendant(s.path, domain))
        return found

    def event_for(self, name: str) -> LifecycleEvent:
        """The event ``name`` occurs as: the registered one, or one that only prefixes match
        (``done.state.job`` answered by a transition on ``done``)."""
        event = self.events.get(name) or self._occurring.get(name)
        if event is None:
            event = self.event_cls(name, self)
            if name.startswith(DONE_PREFIX):  # bounded by the chart's states
                self._occurring[name] = event
        return event

    def state_tree(self, leaf: str) -> Any:
        """The library's tree of the active states for ``leaf`` (``build_state_tree``), once
        per leaf: what its ``_update_model`` records as the model's state."""
        tree = self._trees.get(leaf)
        if tree is None:
            tree = self._trees[leaf] = self.build_state_tree(leaf, SEPARATOR)
        return tree

    # -- processing -----------------------------------------------------------------------------

    def trigger_event(  # type: ignore[override]
            self, model: Lifecycle, trigger: str, *args: Any, **kwargs: Any) -> Any:
        """Process ``trigger`` for ``model`` as the caller's own event: when no transition
        answers it, the caller is told (see :meth:`_check_event_result`)."""
        if not self.chart:
            return super().trigger_event(model, trigger, *args, **kwargs)
        event_data = LifecycleEventData(self, model, kwargs, args=args, direct=True)
        return self._process(partial(self._trigger_event, event_data, trigger))

    def raise_event(self, lifecycle: Lifecycle, trigger: str) -> None:
        """Queue ``trigger`` behind the event being processed (a completion event)."""
        self._process(partial(self._trigger_event, LifecycleEventData(self, lifecycle, {}),
                              trigger))

    def fire(self, lifecycle: Lifecycle, transition: LifecycleTransition) -> Any:
        """A timer fell due: take its own delayed transition, if its guards let it."""
        event_data = LifecycleEventData(self, lifecycle, {}, only=transition)
        return self._process(partial(self._trigger_event, event_data, transition.trigger))

    def start(self, lifecycle: Lifecycle) -> Any:
        """Enter the initial states, outermost first, running their entry actions (SCXML's
        initial transition; ``transitions`` itself only sets a new model's state)."""
        event_data = LifecycleEventData(self, lifecycle, {}, direct=True)

        def enter() -> None:
            for state in self.initial_states:
                try:
                    state.enter(event_data)
                except ActionError as exc:
                    event_data.errors.append(exc)
            lifecycle._started(event_data.errors)

        return lifecycle._run(enter, "start")

    def raise_done(self, model: Any, parent: str) -> None:
        """A final child of ``parent`` (a state added the library's way) was entered: queue
        ``done.state.<parent>`` behind the event being processed. An event no transition
        could answer is discarded, as SCXML discards it."""
        name = DONE_PREFIX + parent
        events = self._stack[0][2] if self._stack else self.events
        if name not in events:
            _LOGGER.debug("%sdiscarded %s: no transition answers it", self.name, name)
            return
        event_data = NestedEventData(None, None, self, model, (), {})  # type: ignore[arg-type]
        event_data.result = None
        self._process(partial(self._trigger_raised, event_data, name))

    def _trigger_raised(self, event_data: Any, trigger: str) -> Any:
        self._raised = True
        try:
            return self._trigger_event(event_data, trigger)
        finally:
            self._raised = False

    def _process(self, trigger: Callable[[], Any]) -> Any:
        """Run to completion, one queue per lifecycle (``queued=True`` would share one queue
        among every lifecycle of the chart): an event sent while another is processed waits
        for it, and the call that sent it returns ``None``."""
        if not self.chart:
            return self._process_model(trigger)
        event_data: LifecycleEventData = trigger.args[0]  # type: ignore[attr-defined]
        lifecycle = event_data.model
        if lifecycle._busy:
            event_data.direct = False
            lifecycle._queue.append(trigger)
            return None
        return lifecycle._run(trigger, trigger.args[1])  # type: ignore[attr-defined]

    def _process_model(self, trigger: Callable[[], Any]) -> Any:
        """Library mode: run to completion with one queue per model, whatever ``queued``
        says. An event sent while one is processed for the same model waits for it (the call
        returns ``None``); when an event raises, the events queued behind it are dropped and
        the error propagates, as the library's queue does."""
        data = getattr(trigger, "args", None)
        model = getattr(data[0], "model", None) if data else None
        if model is None:
            return super()._process(trigger)
        key = id(model)
        queue = self._queues.get(key)
        if queue is not None:
            queue.append(trigger)
            return None
        queue = self._queues[key] = deque()
        try:
            result = trigger()
            while queue:
                queue.popleft()()
            return result
        finally:
            del self._queues[key]

    # The library's ``_trigger_event`` runs each event: it calls ``_trigger_event_nested`` to
    # select and take a transition and ``_check_event_result`` to judge the answer, hands an
    # exception to ``on_exception`` when the machine has one, and runs ``finalize_event``.

    def _trigger_event_nested(  # type: ignore[override]
            self, event_data: LifecycleEventData, trigger: str, _state_tree: Any) -> bool | None:
        if not self.chart:
            # The library's stubs leave this method out.
            return super()._trigger_event_nested(  # type: ignore[misc]
                event_data, trigger, _state_tree)
        lifecycle = event_data.model
        lifecycle._event = event_data
        event_data.source_name = lifecycle.state
        if lifecycle.finished:
            return None
        return self.event_for(trigger).trigger_nested(event_data)

    def _check_event_result(  # type: ignore[override]
            self, res: bool | None, model: Lifecycle, trigger: str) -> bool:
        if not self.chart:
            if res is None and self._raised:
                return False  # a completion event nothing answers is discarded (SCXML)
            # ``None`` (nothing answered) is the library's own answer; its stubs say bool.
            return super()._check_event_result(res, model, trigger)  # type: ignore[arg-type]
        # The event data is the one being processed: the library hands this method only the
        # answer, so Orion reads the rest from the event data it keeps on the lifecycle.
        event_data = model._event
        assert event_data is not None
        state = event_data.source_name or ""
        if res is None:
            if model.finished:
                return model._unanswered(event_data, trigger, "the lifecycle has finished",
                                         allowed=[])
            return model._unanswered(
                event_data, trigger, event_data.reason or f"no transition answers it in {state!r}")
        if not res:
            if not event_data.direct:
                model._discard(trigger, event_data.kwargs, f"every guard said no in {state!r}")
            return False
        raise_first(event_data.errors)
        return True


#: What a compiled chart offers instead of each library call it refuses.
_INSTEAD = {
    "add_state": "its states are the chart's; add them to the YAML file (or an overlay) and "
                 "load it again",
    "add_transition": "its transitions are the chart's; add them to the YAML file (or an "
                      "overlay) and load it again",
    "remove_transition": "its transitions are the chart's; remove them from the YAML file (or "
                         "guard them) and load it again",
    "initial": "its initial state is the chart's; change 'initial:' in the YAML file (or an "
               "overlay) and load it again",
    "ignore_invalid_triggers": "a trigger no transition answers raises TriggerNotAllowed or "
                               "UnknownTrigger for its caller, and a queued one is discarded and "
                               "reported; catch the error, or ask lifecycle.allowed_triggers() "
                               "or lifecycle.may_trigger(name) first",
    "add_model": "its models are lifecycles: create one with definition.create()",
    "remove_model": "its lifecycles are never registered with add_model, so there is nothing "
                    "to remove (the library would ignore the call); a lifecycle goes when "
                    "nothing refers to it",
    "dispatch": "send the trigger to each lifecycle with lifecycle.trigger(name)",
    "to_state": "add a transition to the chart and send its trigger with lifecycle.trigger()",
    "set_state": "it would skip exit and entry actions and keep the old state's timers; resume "
                 "a lifecycle in a state with definition.restore(snapshot)",
}


def _refused_variant(cls: type) -> str | None:
    """Why the library's locked or asyncio machine cannot carry Orion's rules, for a class
    that mixes one into :class:`LifecycleMachine` (as ``transitions.extensions`` builds
    ``LockedHierarchicalMachine``); ``None`` for any other subclass. A class that mixes one
    in has imported its module: looked up, not imported (asyncio costs a CLI's start)."""
    locking = sys.modules.get("transitions.extensions.locking")
    asyncio = sys.modules.get("transitions.extensions.asyncio")
    if locking is not None and issubclass(cls, locking.LockedMachine):
        return ("the locked variant is not offered: a compiled chart's machine is shared by "
                "all its lifecycles, so its lock would serialize every lifecycle of the chart, "
                "while each one already runs to completion with a queue of its own. Drive a "
                "lifecycle from one thread (the runtime's event loop), or hold a lock of your "
                "own around lifecycle.trigger()")
    if asyncio is not None and issubclass(cls, asyncio.AsyncMachine):
        return ("the asyncio variant is not offered: Orion's guards and actions are plain "
                "functions and its timers run on an injected clock (the asyncio loop in "
                "orion chat, a VirtualClock in tests); call lifecycle.trigger() from the loop")
    return None


def _is_root(transition: Any) -> bool:
    return getattr(transition, "_orion_root", False)


def _index(transition: LifecycleTransition) -> int:
    return transition.index


def raise_first(errors: list[ActionError]) -> None:
    """Raise the first error of a step; the later ones become notes on it."""
    if errors:
        first = errors[0]
        for later in errors[1:]:
            first.add_note(f"then: {later}")
        raise first


__all__ = ["ChartState", "LifecycleEvent", "LifecycleEventData", "LifecycleMachine", "LifecycleState",
           "LifecycleTransition", "done_event", "entry_path", "is_descendant", "raise_first",
           "transition_domain"]
