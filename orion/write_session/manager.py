"""The write sessions of one runtime: starting one, finding the active one, reporting them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orion.errors import OrionError
from orion.write_session.journal import Journal
from orion.write_session.plan import WritePlan, check_plan
from orion.write_session.session import (SessionSummary, WriteSession, lifecycle_key,
                                         session_dir)

if TYPE_CHECKING:
    from orion.runtime.runtime import Runtime

SERVICE = "write_sessions"


class SessionBusy(OrionError):
    """A second ``WritePlanTool_begin`` while a session is open."""


class SessionManager:
    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self.sessions: list[WriteSession] = []

    @property
    def active(self) -> WriteSession | None:
        for session in reversed(self.sessions):
            if session.active and session.status == "active":
                return session
        return None

    def get(self, session_id: str) -> WriteSession | None:
        for session in self.sessions:
            if session.id == session_id or session.id.startswith(session_id):
                return session
        return None

    def begin(self, plan: WritePlan) -> dict[str, Any]:
        """``WritePlanTool_begin``: check the plan before any content streams, then open the
        session and its journal."""
        runtime = self.runtime
        active = self.active
        if active is not None:
            raise SessionBusy(
                f"write session {active.id[:8]} for {active.plan.relative} is still open "
                f"({active.state}); finish it with a line {active.terminator} before starting "
                "another")
        checked = check_plan(plan, workspace=runtime.workspace, state_dir=runtime.state_dir)
        definition = runtime.definition("write_session")
        lifecycle = definition.create(clock=runtime.lifecycle_clock, owner=runtime)
        settings = lifecycle.settings
        journal = Journal.create(
            session_dir(runtime.state_dir, lifecycle.id),
            {"session_id": lifecycle.id, "conversation_id": runtime.conversation.id,
             "intent": plan.intent, "target_file": checked.relative,
             "operation": plan.operation.value, "plan": plan.model_dump(mode="json")},
            flush_lines=settings["flush_lines"], flush_interval_ms=settings["flush_interval_ms"],
            now_ms=runtime.clock.now_ms)
        session = WriteSession(runtime, checked, lifecycle, journal)
        runtime.lifecycles[lifecycle_key(lifecycle.id)] = lifecycle
        self.sessions.append(session)
        lifecycle.trigger("begin", target_file=checked.relative, operation=plan.operation.value)
        journal.flush(session._journal_state())
        runtime.text_sinks.append(session.feed)
        return {"session_id": lifecycle.id, "stage": "awaiting_content",
                "target_file": checked.relative, "operation": plan.operation.value,
                "instruction": instruction(checked.relative, session.terminator)}

    def summaries(self) -> list[SessionSummary]:
        return [session.summary() for session in self.sessions]


def instruction(target: str, terminator: str) -> str:
    return (f"Now output the content for {target} as plain text in your next message, not in "
            "a tool call and not wrapped in a code fence, and end it with a line that is exactly "
            f"{terminator}. If your output is cut off, Orion saves what arrived and asks you to "
            "continue.")


def manager_for(runtime: Runtime) -> SessionManager:
    manager = runtime.services.get(SERVICE)
    if manager is None:
        manager = runtime.services[SERVICE] = SessionManager(runtime)
    return manager
