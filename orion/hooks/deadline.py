"""A plugin's validator runs with a deadline, and a stop signal ends the wait at once.

An installed plugin's ``validate_content``, ``validate_lines`` and ``normalize_content`` run on
a thread of their own while the caller waits, at most ``runtime.validator_deadline_ms``. A
validator that hangs (a lock never released, a network call, a loop) cannot be stopped from
outside in Python, so it is left behind on its daemon thread, which never keeps the process
alive: the caller holds the write (nothing written, the content kept) and says which plugin
did not answer. SIGTERM, SIGHUP or SIGINT while the caller waits (:func:`request_stop`, from
:class:`~orion.runtime.stop_signals.StopSignals`) ends the wait the same way, so the signal's
own handling (the command's cleanup, its exit status) comes next instead of never.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

#: How often the wait looks for a stop signal, in seconds.
_SLICE_S = 0.05

_stop: int | None = None


class DeadlinePassed(TimeoutError):
    """A plugin's hook did not return within its deadline, or a stop signal came first."""


def request_stop(signum: int) -> None:
    """A stop signal arrived (called from the Python-level signal handler)."""
    global _stop
    _stop = signum


def clear_stop() -> None:
    global _stop
    _stop = None


def call_within(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                deadline_ms: float, what: str) -> Any:
    """``function(*args, **kwargs)`` on a daemon thread; its result, or what it raised. Raises
    :class:`DeadlinePassed` when it has not returned after ``deadline_ms``, or when a stop
    signal arrives first; ``what`` names it in the thread's name."""
    outcome: dict[str, Any] = {}
    finished = threading.Event()

    def run() -> None:
        try:
            outcome["result"] = function(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            outcome["error"] = exc
        finally:
            finished.set()

    threading.Thread(target=run, name=f"orion {what}", daemon=True).start()
    remaining = deadline_ms / 1000.0
    while not finished.wait(min(_SLICE_S, remaining)):
        remaining -= _SLICE_S
        if _stop is not None:
            raise DeadlinePassed(f"stopped by {signal.Signals(_stop).name} before it answered")
        if remaining <= 0:
            raise DeadlinePassed(f"no answer within {deadline_ms:g} ms "
                                 "(runtime.validator_deadline_ms)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")
