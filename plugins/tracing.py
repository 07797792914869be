"""Tracing through the public hooks: every lifecycle transition is a span of its turn's trace
(and each state it rests in a phase span), the ``finalize`` action (the write) a span of its
own, and the ``trace`` system of the pipeline flushes the batch after every model request. As a
runtime starts, the stores apply ``trace.keep_days`` (``prune_traces``), and what they removed
is announced."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orion.api import Kind, hookimpl
from orion.api import trace_events as events

if TYPE_CHECKING:
    from collections.abc import Callable

    from orion.api import Host, Lifecycle, Transition, Turn


@hookimpl
def runtime_started(host: Host) -> None:
    removed = host.tracer.prune()
    if removed:
        days = host.tracer.keep_days
        host.reporter.notice(
            f"traces: removed {removed:,} events more than {days:g} days older than the newest "
            f"(trace.keep_days in orion.yaml; 0 keeps every event)")


@hookimpl
def lifecycle_transition(lifecycle: Lifecycle, transition: Transition,
                         host: Host | None) -> None:
    if host is not None:
        host.tracer.transition(lifecycle, transition)


@hookimpl
def lifecycle_finished(lifecycle: Lifecycle, host: Host | None) -> None:
    if host is not None:
        host.tracer.lifecycle_finished(lifecycle)


@hookimpl
def lifecycle_event_discarded(lifecycle: Lifecycle, trigger: str, payload: dict[str, Any],
                              reason: str, host: Host | None) -> None:
    if host is not None:
        host.tracer.emit(events.discarded_event(lifecycle, trigger, payload, reason, 0.0, ""))


@hookimpl(wrapper=True)
def finalize(lifecycle: Lifecycle, transition: Transition) -> Any:
    """The write a ``finalize`` action makes, timed: the spans inside nest under it."""
    host = lifecycle.host
    if host is None:
        return (yield)
    with host.tracer.span(Kind.FINALIZE, f"{lifecycle.name} finalize",
                          {"orion.lifecycle": lifecycle.name, "orion.event": transition.trigger},
                          session_id=lifecycle.id):
        return (yield)


class TraceSystem:
    """Hands the events of this request to the trace stores."""

    name = "trace"

    async def run(self, turn: Turn) -> None:
        turn.host.tracer.flush()


@hookimpl
def register_systems(register: Callable[[Any], None]) -> None:
    register(TraceSystem())
