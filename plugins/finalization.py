"""The ``finalize`` action: statecharts name it, and it hands over to the ``finalize`` hook.

A feature binds the ``finalize`` of its own chart with :func:`finalizer` (``register("finalize",
finalizer(carry_out), chart=NAME)``); a chart without one runs the shared action, which asks
the ``finalize`` hook."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orion.api import OrionError, hookimpl

if TYPE_CHECKING:
    from collections.abc import Callable

    from orion.api import Lifecycle, Transition


class NothingFinalized(OrionError):
    """No plugin handled a lifecycle's finalization."""


def finalize(lifecycle: Lifecycle, transition: Transition) -> None:
    _finalized(lifecycle, transition,
               lifecycle.plugins.hook.finalize(lifecycle=lifecycle, transition=transition))


def finalizer(carry_out: Callable[[Lifecycle, Transition], Any]
              ) -> Callable[[Lifecycle, Transition], None]:
    """The ``finalize`` action of one chart, made of ``carry_out(lifecycle, transition)``: what
    it returns is the transition's ``result``. It runs as the ``finalize`` hook's first
    implementation, so the hook's wrappers (the trace's finalize span) wrap it; when it returns
    ``None`` the hook's other implementations are asked."""
    def finalize(lifecycle: Lifecycle, transition: Transition) -> None:
        hook = lifecycle.plugins.hook.finalize
        _finalized(lifecycle, transition,
                   hook.call_extra([carry_out], {"lifecycle": lifecycle,
                                                 "transition": transition}))
    finalize.__name__ = f"finalize ({getattr(carry_out, '__name__', 'provided')})"
    return finalize


def _finalized(lifecycle: Lifecycle, transition: Transition, result: Any) -> None:
    if result is None:
        raise NothingFinalized(f"no plugin finalizes lifecycle {lifecycle.name!r}; "
                               "implement the finalize hook for it")
    transition.result = result


@hookimpl
def register_actions(register: Callable[..., None]) -> None:
    register("finalize", finalize)
