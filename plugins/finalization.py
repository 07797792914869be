"""The ``finalize`` action: statecharts name it, and it hands over to the ``finalize`` hook.

A feature binds the ``finalize`` of its own chart with :func:`finalizer` (``register("finalize",
finalizer(carry_out), chart=NAME)``); a chart without one runs the shared action, which asks
the ``finalize`` hook."""

from __future__ import annotations

import inspect
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
        arguments = {"lifecycle": lifecycle, "transition": transition}
        _finalized(lifecycle, transition, hook.call_extra([carry_out], arguments))
        _tell_the_others(lifecycle, hook, arguments)
    finalize.__name__ = f"finalize ({getattr(carry_out, '__name__', 'provided')})"
    return finalize


def _tell_the_others(lifecycle: Lifecycle, hook: Any, arguments: dict[str, Any]) -> None:
    """An installed plugin's plain ``finalize`` (an audit of every write) runs for a chart
    that provides its own too: after it, with ``transition.result`` set. What it returns is
    not the result, and what it raises is reported, not raised: the provided finalize has
    done its work (the file is written) by then, and a failing audit must not undo what the
    user is told of it."""
    plugins = lifecycle.plugins
    for impl in reversed(hook.get_hookimpls()):
        origin = plugins.origins.get(impl.plugin_name)
        if impl.wrapper or impl.hookwrapper or origin is None or origin.kind == "builtin":
            continue
        function = inspect.unwrap(impl.function)
        try:
            function(*(arguments[name] for name in impl.argnames),
                     **{name: arguments[name] for name in impl.kwargnames
                        if name in arguments})
        except Exception as exc:  # noqa: BLE001 - reported with the plugin's line, see above
            plugins.report_failure(impl.plugin_name, "finalize", exc, function)


def _finalized(lifecycle: Lifecycle, transition: Transition, result: Any) -> None:
    if result is None:
        raise NothingFinalized(f"no plugin finalizes lifecycle {lifecycle.name!r}; "
                               "implement the finalize hook for it")
    transition.result = result


@hookimpl
def register_actions(register: Callable[..., None]) -> None:
    register("finalize", finalize)
