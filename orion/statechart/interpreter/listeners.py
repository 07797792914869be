"""Who hears what a lifecycle does.

The engine reports to listeners: plain objects with any of the methods of :class:`Listener`.
It knows nothing of plugins; :class:`PluginHooks` is the listener that passes a lifecycle's
events on to the ``lifecycle_*`` hooks of a plugin manager (the pluggy bridge). A lifecycle
created on its own reports to its definition's plugin manager through one; the runtime gives
every lifecycle it hosts its own listeners (the bridge, and the queue of prompts for the
model).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from orion.statechart.interpreter.lifecycle import Lifecycle, Transition


class Listener(Protocol):
    """What a listener may implement; every method is optional. Listeners are observers: an
    exception they raise propagates to whoever drove the lifecycle (the plugin bridge isolates
    each plugin, as pluggy's observer hooks do in Orion)."""

    def lifecycle_started(self, lifecycle: Lifecycle) -> None:
        """The initial states were entered (not called on restore)."""

    def lifecycle_transition(self, lifecycle: Lifecycle, transition: Transition) -> None:
        """A transition was taken (targetless ones too), after its exit and entry actions."""

    def lifecycle_event_discarded(self, lifecycle: Lifecycle, trigger: str,
                                  payload: dict[str, Any], reason: str) -> None:
        """A queued or raised event was dropped: nothing answered it when its turn came."""

    def lifecycle_finished(self, lifecycle: Lifecycle) -> None:
        """A top-level final state was entered; the lifecycle accepts no more events."""

    def lifecycle_prompt(self, lifecycle: Lifecycle, text: str) -> None:
        """An action asked the model something (:meth:`Lifecycle.prompt`)."""

    def guard_failed(self, lifecycle: Lifecycle, guard: str, owner: str,
                     error: BaseException) -> None:
        """A guard raised; the event stops with a ``GuardError``. ``owner`` is who provided it
        (a plugin)."""

    def action_failed(self, lifecycle: Lifecycle, action: str, owner: str,
                      error: BaseException) -> None:
        """An action raised; the trigger raises an ``ActionError``. ``owner`` is who provided
        it (a plugin)."""


METHODS = ("lifecycle_started", "lifecycle_transition", "lifecycle_event_discarded",
           "lifecycle_finished", "lifecycle_prompt", "guard_failed", "action_failed")


class Listeners:
    """A fixed set of listeners, resolved once into one tuple of bound methods per event, so
    that reporting costs a loop over the listeners that care."""

    __slots__ = ("listeners", "started", "transition", "discarded", "finished", "prompt",
                 "guard_failed", "action_failed")

    def __init__(self, listeners: Iterable[Any] = ()):
        self.listeners = tuple(listeners)
        methods = [tuple(getattr(listener, name) for listener in self.listeners
                         if callable(getattr(listener, name, None))) for name in METHODS]
        (self.started, self.transition, self.discarded, self.finished, self.prompt,
         self.guard_failed, self.action_failed) = methods

    def __add__(self, other: Iterable[Any]) -> Listeners:
        return Listeners((*self.listeners, *other))

    def __repr__(self) -> str:
        return f"Listeners({', '.join(type(x).__name__ for x in self.listeners)})"


class PluginHooks:
    """The pluggy bridge: a lifecycle's events, passed to a plugin manager's ``lifecycle_*``
    hooks with the lifecycle's ``host``; a failing guard is reported on the manager's
    ``failures``, as every plugin failure is."""

    def __init__(self, plugins: Any):
        self.plugins = plugins
        hook = plugins.hook
        # Hook callers are fixed once the hookspecs are added: look them up once.
        self._started = hook.lifecycle_started
        self._transition = hook.lifecycle_transition
        self._discarded = hook.lifecycle_event_discarded
        self._finished = hook.lifecycle_finished

    def lifecycle_started(self, lifecycle: Lifecycle) -> None:
        self._started(lifecycle=lifecycle, host=lifecycle.host)

    def lifecycle_transition(self, lifecycle: Lifecycle, transition: Transition) -> None:
        self._transition(lifecycle=lifecycle, transition=transition, host=lifecycle.host)

    def lifecycle_event_discarded(self, lifecycle: Lifecycle, trigger: str,
                                  payload: dict[str, Any], reason: str) -> None:
        self._discarded(lifecycle=lifecycle, trigger=trigger, payload=payload, reason=reason,
                        host=lifecycle.host)

    def lifecycle_finished(self, lifecycle: Lifecycle) -> None:
        self._finished(lifecycle=lifecycle, host=lifecycle.host)

    def guard_failed(self, lifecycle: Lifecycle, guard: str, owner: str,
                     error: BaseException) -> None:
        # The GuardError the trigger raises names the plugin: whoever catches it tells.
        self.plugins.report_failure(owner, f"guard {guard}", error, told=True)

    def action_failed(self, lifecycle: Lifecycle, action: str, owner: str,
                      error: BaseException) -> None:
        # As a guard's: the ActionError names the plugin; the record keeps its traceback. A
        # built-in action's refusal (a target changed since the plan) is Orion's, not a failure.
        origin = getattr(self.plugins, "origins", {}).get(owner)
        if origin is None or origin.kind != "builtin":
            self.plugins.report_failure(owner, f"action {action}", error, told=True)
