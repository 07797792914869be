"""The model methods ``transitions`` binds onto a model (``is_<state>()``, ``may_<trigger>()``,
``to_<state>()`` and one method per trigger), offered on a chart's lifecycles on request:
``definition.create(model_methods=True)``, or ``definition.model_methods = True`` for every
instance created or restored afterwards.

The library binds them onto each model with ``add_model``; Orion builds them once per chart,
as methods of a subclass of :class:`Lifecycle`, so an instance still costs what a plain object
does. A state's path gives its name with ``_`` for ``.`` (``is_session_active_finalizing``),
as the library names nested states with its default separator.
"""

from __future__ import annotations

import keyword
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orion.statechart.interpreter.lifecycle import Lifecycle

if TYPE_CHECKING:
    from orion.statechart.interpreter.definition import Definition

__all__ = ["model_class"]


def model_class(definition: Definition) -> type[Lifecycle]:
    """A subclass of :class:`Lifecycle` with the model methods of ``definition``'s chart. A
    name that is taken (by :class:`Lifecycle` itself, such as ``start`` or ``state``, or by two
    states whose paths give one name) is not bound, and a warning names it: its trigger is
    still sent with ``lifecycle.trigger(name)``."""
    methods: dict[str, Callable[..., Any]] = {}
    taken: list[str] = []

    def bind(name: str, method: Callable[..., Any]) -> None:
        if hasattr(Lifecycle, name) or name in methods:
            taken.append(name)
            methods.pop(name, None)
            return
        method.__name__ = method.__qualname__ = name
        methods[name] = method

    clashing = set()
    for path in definition.nodes:
        name = path.replace(".", "_")
        if name in clashing:
            continue
        if f"is_{name}" in methods:  # two paths, one name: neither is bound
            clashing.add(name)
        bind(f"is_{name}", _is(path))
        bind(f"to_{name}", _to(path))
    for trigger in sorted(definition.triggers):
        if trigger.isidentifier() and not keyword.iskeyword(trigger):
            bind(trigger, _send(trigger))
            bind(f"may_{trigger}", _may(trigger))
    if taken:
        warnings.warn(
            f"statechart {definition.name!r}: model methods not bound, the names are taken: "
            f"{', '.join(sorted(set(taken)))}; use lifecycle.trigger(name), "
            f"lifecycle.may_trigger(name) or lifecycle.is_in(path)", UserWarning, stacklevel=3)
    name = f"Lifecycle[{definition.name}]"
    return type(name, (Lifecycle,), {"__slots__": (), "__module__": __name__,
                                     "__qualname__": name, **methods})


def _is(path: str) -> Callable[..., bool]:
    def is_state(self: Lifecycle, allow_substates: bool = False) -> bool:
        """Whether the lifecycle is in this state (with ``allow_substates``, in it or in one of
        its descendants), as ``transitions``' ``is_<state>``."""
        return self.is_in(path) if allow_substates else self.state == path
    return is_state


def _to(path: str) -> Callable[..., Any]:
    def to_state(self: Lifecycle, **payload: Any) -> Any:
        """``transitions``' ``to_<state>``: on a compiled chart, raises CompiledChartError
        naming Orion's way (a transition and its trigger)."""
        return self.machine.to_state(self, path, **payload)
    return to_state


def _send(trigger: str) -> Callable[..., Any]:
    def send(self: Lifecycle, **payload: Any) -> Any:
        """``lifecycle.trigger(<trigger>, **payload)``."""
        return self.trigger(trigger, **payload)
    return send


def _may(trigger: str) -> Callable[..., bool]:
    def may(self: Lifecycle, **payload: Any) -> bool:
        """``lifecycle.may_trigger(<trigger>, **payload)``."""
        return self.may_trigger(trigger, **payload)
    return may
