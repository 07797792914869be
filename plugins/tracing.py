"""Tracing through the public hooks: every lifecycle transition becomes a trace event, and the
``trace`` system of the pipeline flushes the batch after every model request."""

from __future__ import annotations

from orion.api import hookimpl
from orion.api import trace_events as events


@hookimpl
def lifecycle_transition(lifecycle, transition, host):
    if host is not None:
        host.tracer.emit(events.transition(lifecycle, transition, host.conversation.id))


@hookimpl
def lifecycle_event_discarded(lifecycle, trigger, payload, reason, host):
    if host is not None:
        host.tracer.emit(events.discarded_event(lifecycle, trigger, payload, reason,
                                                lifecycle.clock.now_ms(), host.conversation.id))


class TraceSystem:
    """Hands the events of this request to the trace stores."""

    name = "trace"

    async def run(self, turn) -> None:
        turn.runtime.tracer.flush()


@hookimpl
def register_systems(register):
    register(TraceSystem())
