"""The ``finalize`` action: statecharts name it, and it hands over to the ``finalize`` hook."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orion.api import OrionError, hookimpl

if TYPE_CHECKING:
    from collections.abc import Callable

    from orion.api import Lifecycle, Transition


class NothingFinalized(OrionError):
    """No plugin handled a lifecycle's finalization."""


def finalize(lifecycle: Lifecycle, transition: Transition) -> None:
    result = lifecycle.plugins.hook.finalize(lifecycle=lifecycle, transition=transition)
    if result is None:
        raise NothingFinalized(f"no plugin finalizes lifecycle {lifecycle.name!r}; "
                               "implement the finalize hook for it")
    transition.result = result


@hookimpl
def register_actions(register: Callable[..., None]) -> None:
    register("finalize", finalize)
