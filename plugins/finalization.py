"""The ``finalize`` action: statecharts name it, and it hands over to the ``finalize`` hook."""

from __future__ import annotations

from orion.api import OrionError, hookimpl


class NothingFinalized(OrionError):
    """No plugin handled a lifecycle's finalization."""


def finalize(lifecycle, transition) -> None:
    result = lifecycle.plugins.hook.finalize(lifecycle=lifecycle, transition=transition)
    if result is None:
        raise NothingFinalized(f"no plugin finalizes lifecycle {lifecycle.name!r}; "
                               "implement the finalize hook for it")
    transition.result = result


@hookimpl
def register_actions(register):
    register("finalize", finalize)
