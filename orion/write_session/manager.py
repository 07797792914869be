"""The write sessions of one runtime: starting one, adopting one a crashed process left behind
(``orion sessions recover ID --continue``), finding the active one, reporting them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orion.clock import since_boot
from orion.errors import OrionError, SnapshotError
from orion.runtime.run_report import FileReport
from orion.write_session.journal import Journal, file_mode
from orion.write_session.operations import WriteResult
from orion.write_session.plan import WritePlan, check_plan
from orion.write_session.session import (SessionSummary, WriteSession, lifecycle_key,
                                         session_dir)
from orion.write_session.view import WriteStatus

if TYPE_CHECKING:
    from orion.hooks.host import Host
    from orion.runtime.runtime import Runtime
    from orion.statechart.interpreter.definition import Definition
    from orion.statechart.interpreter.lifecycle import Lifecycle
    from orion.write_session.orphans import Orphan

SERVICE = "write_sessions"


class SessionBusy(OrionError):
    """A second ``WritePlanTool_begin`` while a session is open."""


#: Ended sessions a runtime keeps whole (``write_sessions()``, ``/sessions``); older ones are
#: kept as their summaries only, so a long conversation of writes stays bounded.
KEEP_ENDED = 100


class SessionManager:
    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        #: The open sessions and the latest :data:`KEEP_ENDED` ended ones, oldest first.
        self.sessions: list[WriteSession] = []
        #: The summaries of the ended sessions older than those.
        self.retired: list[SessionSummary] = []
        #: The files this runtime wrote (sessions and ``WritePlanTool_execute``), each once, in
        #: the order first written, as its last write left it: what ``orion run`` reports as its
        #: own. One entry per file, not per write, so a long conversation of writes to the same
        #: files keeps the same memory (:meth:`wrote`).
        self.files: dict[str, FileReport] = {}
        #: How many writes this runtime made.
        self.write_count = 0
        #: What start-up did with the write sessions of earlier runs
        #: (:class:`orion.write_session.startup.StartupAction`, one per orphan handled).
        self.at_start: list[Any] = []

    @property
    def active(self) -> WriteSession | None:
        for session in reversed(self.sessions):
            if session.active and session.status is WriteStatus.ACTIVE:
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
        lifecycle = definition.create(clock=runtime.lifecycle_clock, host=runtime)
        settings = lifecycle.settings
        journal = Journal.create(
            session_dir(runtime.state_dir, lifecycle.id),
            {"session_id": lifecycle.id, "conversation_id": runtime.conversation.id,
             "intent": plan.intent, "target_file": checked.relative,
             "operation": plan.operation.value, "plan": plan.model_dump(mode="json")},
            flush_lines=settings["flush_lines"], flush_interval_ms=settings["flush_interval_ms"],
            now_ms=runtime.clock.now_ms, mode=file_mode(checked.mode),
            since_boot=lambda: since_boot(runtime.clock))
        session = WriteSession(runtime, checked, lifecycle, journal, wrote=self.wrote,
                               ended=self.ended)
        runtime.lifecycles[lifecycle_key(lifecycle.id)] = lifecycle
        self.sessions.append(session)
        lifecycle.trigger("begin", target_file=checked.relative, operation=plan.operation.value)
        session.checkpoint()
        session.listen()
        return {"session_id": lifecycle.id, "stage": "awaiting_content",
                "target_file": checked.relative, "operation": plan.operation.value,
                "session_dir": str(journal.directory),
                "instruction": instruction(checked.relative, session.terminator)}

    def wrote(self, result: WriteResult) -> None:
        """Note a write this runtime made."""
        self.files.pop(result.relative, None)  # a file written again moves to the end
        self.files[result.relative] = FileReport(result.relative, result.bytes, result.sha256)
        self.write_count += 1

    def summaries(self) -> list[SessionSummary]:
        return self.retired + [session.summary() for session in self.sessions]

    def ended(self, session: WriteSession) -> None:
        """``session`` has ended: beyond :data:`KEEP_ENDED` ended sessions, the oldest is kept
        as its summary only."""
        ended = [s for s in self.sessions if s.status is not WriteStatus.ACTIVE or not s.active]
        for old in ended[:max(0, len(ended) - KEEP_ENDED)]:
            self.retired.append(old.summary().retired())
            self.sessions.remove(old)

    def adopt(self, orphan: Orphan) -> WriteSession:
        """Take over a session a crashed process left behind and go on with it: reopen its
        journal, restore the lifecycle from its saved snapshot, make it this
        runtime's active session, and take the statechart's continuing path: ``truncated`` with
        the saved bytes, lines and last lines, so the model is asked to continue after the last
        saved line (the prompt waits in the runtime; the caller lets the runtime answer it).

        A session that crashed after DONE (``finalizing``) is finalized again instead, and one
        that waited for corrections (``needs_corrections``) is validated again, which asks for
        the corrections anew. One in a state a team's statechart added, which takes none of
        these steps, is restored in that state and waits there (its entry actions do not run
        again; a notice says where it is). A snapshot of another version of the statechart is replaced by a
        fresh lifecycle with the saved counters. Raises :class:`OrionError` (the orphan is left
        as it was) when the plan no longer fits the workspace or the session had ended."""
        from orion.write_session.orphans import RecoveryError

        runtime = self.runtime
        active = self.active
        if active is not None:
            raise SessionBusy(f"write session {active.id[:8]} for {active.plan.relative} is "
                              "open in this runtime")
        checked = check_plan(orphan.plan(), workspace=runtime.workspace,
                             state_dir=runtime.state_dir)
        definition = runtime.definition("write_session")
        settings = definition.settings
        journal = Journal.open(orphan.directory, flush_lines=settings["flush_lines"],
                               flush_interval_ms=settings["flush_interval_ms"],
                               now_ms=runtime.clock.now_ms, mode=file_mode(checked.mode),
            since_boot=lambda: since_boot(runtime.clock))
        try:
            lifecycle = self._restore(definition, journal, orphan)
            if lifecycle.finished:
                raise RecoveryError(f"write session {orphan.id[:8]} had already ended "
                                    f"({lifecycle.state}); recover it with --finalize or "
                                    "discard it")
        except BaseException:
            journal.close()
            raise
        session = WriteSession(runtime, checked, lifecycle, journal, wrote=self.wrote,
                               ended=self.ended)
        runtime.lifecycles[lifecycle_key(lifecycle.id)] = lifecycle
        self.sessions.append(session)
        if session.active:  # in a state of the team's own, the model's text is not content
            session.listen()
        (orphan.directory / "resume").unlink(missing_ok=True)
        self._go_on(session)
        return session

    def _restore(self, definition: Definition, journal: Journal, orphan: Orphan) -> Lifecycle:
        runtime = self.runtime
        snapshot = journal.state.get("snapshot")
        if isinstance(snapshot, dict):
            # The dead conversation's model was asked; the new one has not been yet.
            snapshot = {**snapshot, "context": {**(snapshot.get("context") or {}),
                                                "asked": False}}
            try:
                return definition.restore(snapshot, clock=runtime.lifecycle_clock,
                                          host=runtime)
            except SnapshotError:
                pass
        lifecycle = definition.create(clock=runtime.lifecycle_clock, instance_id=orphan.id,
                                      host=runtime, context={
                                          "continuations": orphan.continuations,
                                          "corrections": orphan.corrections})
        lifecycle.trigger("begin", target_file=orphan.target_file, operation=orphan.operation)
        return lifecycle

    @staticmethod
    def _go_on(session: WriteSession) -> None:
        lifecycle = session.lifecycle
        if lifecycle.has_tag("correcting"):
            lifecycle.trigger("corrections_received")
            session.finalize()
        elif lifecycle.has_tag("finalizing"):
            session.finalize()
        elif "truncated" in lifecycle.allowed_triggers():
            session.continue_after_cut()
        else:
            # A state the team's statechart added (a review before the write, say): the session
            # waits there again, and what leaves it (a command calling ``fire``) still can.
            session.runtime.reporter.notice(
                f"write session {session.id[:8]} for {session.plan.relative} is back in state "
                f"{lifecycle.state}; its statechart goes on from there")

    def close(self) -> None:
        """Release the journals of sessions still open (flushed, lock removed), as a process
        that ends does: ``orion sessions`` and the next start then see them as orphans."""
        failure: Exception | None = None
        for session in self.sessions:
            try:
                session.release()
            except Exception as exc:  # noqa: BLE001 - the others are released all the same
                failure = failure or exc
        if failure is not None:
            raise failure


def instruction(target: str, terminator: str) -> str:
    """What the begin result tells the model: the rules that decide what its text is."""
    return (f"Now output the content for {target} as plain text in your next message, not in "
            "a tool call and not wrapped in a code fence, and end it with a line that is exactly "
            f"{terminator}. Everything you write as plain text until that line is added to the "
            "file, in as many messages as it takes. Text in a message that also calls a tool "
            f"is set aside, not added, and so is text after the {terminator} line; Orion tells "
            "you when it sets text aside, and WritePlanTool_keep puts it back. If the file's "
            "last line has no line break, end your message with it and Orion asks. If your "
            "output is cut off, Orion saves what arrived and asks you to continue.")


def manager_for(host: Host | None) -> SessionManager:
    """The SessionManager of ``host``, made on first use. Write sessions run in Orion's runtime
    (they start lifecycles and read the stream), so a host of another kind (or none) is a TypeError."""
    from orion.runtime.runtime import Runtime

    if not isinstance(host, Runtime):
        raise TypeError(f"write sessions run in Orion's runtime, not in {type(host).__name__}")
    runtime = host
    manager = runtime.services.get(SERVICE)
    if manager is None:
        manager = runtime.services[SERVICE] = SessionManager(runtime)
    return manager
