"""One write session, from ``WritePlanTool_begin`` to the target written once.

The session coordinates parts that each own one thing:

- its ``write_session`` lifecycle: the statechart decides what may happen next; its context
  (:class:`~orion.write_session.context.WriteContext`) is what the session and the chart's
  actions tell each other, and links the lifecycle back to the session;
- the journal: the content on disk, for crash recovery;
- the :class:`~orion.write_session.intake.Intake`: the message being streamed (the hot path,
  the held start of a reply, the end marker), which returns the facts of a message's end;
- the pure decision of :mod:`orion.write_session.decision`: what a message's end means;
- the :class:`~orion.write_session.finalize.Finalizer`: checks, corrections and the write,
  each returning what it found (a :class:`~orion.write_session.finalize.Written`);
- the :class:`~orion.write_session.asides.Asides`: the text set aside beside the content,
  announced, and put back;
- the :class:`~orion.write_session.endings.Endings`: how the session ends without a write,
  each returning an :class:`~orion.write_session.endings.Ending`.

The session carries out what they return: a trigger, a notice, a prompt, the ending (a write's
in :meth:`WriteSession.after_write`, any other in one place, ``WriteSession._end``). Its public
calls: what the user types while the session is open (:meth:`WriteSession.hold`), putting text
set aside back (:meth:`WriteSession.keep`), and the calls a team's statechart uses
(:meth:`WriteSession.fire`, :meth:`WriteSession.checkpoint`). Only message boundaries become
triggers: ``content``, ``message_end``, ``truncated``, ``unfinished``, ``done``, ``circular``,
``issues_found``, ``corrections_received`` and ``valid``.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orion.errors import ActionError, GuardError, OrionError, PluginFailed
from orion.trace.events import Kind, TraceEvent
from orion.validation import Issue, StreamedLines
from orion.write_session import message_end as said
from orion.write_session.asides import Asides, KeepRefused
from orion.write_session.context import WriteContext
from orion.write_session.decision import REASONING, End, Next, decide_end
from orion.write_session.edit_validation import validate_write
from orion.write_session.endings import (Ending, Endings, Held, Remains, holds_content,
                                         keep_content)
from orion.write_session.finalize import Finalizer, Written
from orion.write_session.held import HeldMessages
from orion.write_session.intake import Intake, Mode
from orion.write_session.journal import Journal
from orion.write_session.operations import WriteResult
from orion.write_session.plan import CheckedPlan, Operation
from orion.write_session.progress import Progress
from orion.write_session.set_aside import Part, SetAside
from orion.write_session.view import WriteStatus

if TYPE_CHECKING:
    from orion.models.events import Finish
    from orion.runtime.conversation import Message
    from orion.runtime.runtime import Runtime
    from orion.statechart.interpreter.lifecycle import Lifecycle

__all__ = ["KeepRefused", "SessionSummary", "WriteSession", "lifecycle_key", "session_dir",
           "validate_write"]


@dataclass(slots=True)  # a runtime keeps one per ended session: no __dict__ each
class SessionSummary:
    """What ``orion run --json`` and ``orion sessions list`` say about a session."""

    id: str
    target_file: str
    operation: str
    status: WriteStatus
    continuations: int
    corrections: int
    lines: int = 0
    bytes: int = 0
    report: str = ""
    degraded: str | None = None
    issues: tuple[str, ...] = ()
    #: Lines of text set aside beside the content (not in the file).
    set_aside: int = 0
    #: Messages the user typed while the session was open, not sent yet.
    held: int = 0
    #: Why an incomplete session is incomplete (cut off, no DONE after the idle prompts).
    incomplete_reason: str | None = None

    def retired(self) -> SessionSummary:
        """What a runtime keeps of a session that ended long ago (beyond ``KEEP_ENDED``): what
        ``orion run --json`` and the session listing show. Its report and issues are left to
        its ``write_report`` trace event; a chat that writes all day keeps one of these per
        write, so the file's name is shared with the other writes to it."""
        return replace(self, target_file=sys.intern(self.target_file), report="", issues=())


def _weakly(method: Callable[[str], None]) -> Callable[[str], None]:
    """``method``, called while its object lives. The journal keeps its session's callback: a
    bound method there would make the two a reference cycle, which only the cyclic collector
    frees, so every ended session's content buffer would wait for a full collection."""
    ref = weakref.WeakMethod(method)

    def call(reason: str) -> None:
        target = ref()
        if target is not None:
            target(reason)
    return call


class _Outlet:
    """What the intake hands to its session (:class:`~orion.write_session.intake.Outlet`),
    held weakly for the reason :func:`_weakly` gives."""

    __slots__ = ("_session",)

    def __init__(self, session: WriteSession) -> None:
        self._session = weakref.ref(session)

    def _get(self) -> WriteSession:
        session = self._session()
        assert session is not None  # the session holds its intake
        return session

    def set_aside(self, why: str, data: bytes, at: int) -> Part:
        return self._get().asides.put(why, data, at)

    def trigger(self, trigger: str) -> None:
        self._get()._trigger(trigger)

    def failed(self, cause: BaseException) -> None:
        self._get()._failed(cause)

    def live(self) -> None:
        session = self._get()
        session.runtime.reporter.progress(session.progress())


class WriteSession:
    """One write session (see the module docstring)."""

    def __init__(self, runtime: Runtime, checked: CheckedPlan, lifecycle: Lifecycle,
                 journal: Journal, *, wrote: Callable[[WriteResult], None],
                 ended: Callable[[WriteSession], None]):
        self.runtime = runtime
        self.plan = checked
        self.lifecycle = lifecycle
        self.journal = journal
        self.id = lifecycle.id
        #: The lifecycle's context, typed; it links the lifecycle to this session.
        self.context = WriteContext.of(lifecycle)
        self.context.session = self
        self._wrote, self._ended = wrote, ended  # the manager's, bound when it made the session
        #: The text set aside beside the content (an adopted session's parts too).
        self.aside = SetAside.of_journal(journal.directory)
        self.status = WriteStatus.ACTIVE
        self.result: WriteResult | None = None
        self.messages: list[Message] = []  # assistant messages that carried content
        self._commentary_message: Message | None = None  # the message whose DONE ended it
        #: Messages the user typed while the session was open: sent once it ends, saved in the
        #: journal meanwhile (an adopted session brings its own back).
        self.held_messages = HeldMessages.of_state(journal.state)
        self.report = ""
        self.intake = Intake(journal, lifecycle, runtime.clock, self.terminator, _Outlet(self),
                             self._new_streamed)
        self.finalizer = Finalizer(journal, checked, runtime.plugins, lifecycle.settings,
                                   _tracer(runtime, self.id))
        self.endings = Endings(self.id, checked.relative, journal, self.aside)
        self.asides = Asides(self.aside, journal, self.intake, self.context, session_id=self.id,
                             relative=checked.relative, terminator=self.terminator,
                             notice=_notice(runtime), trace=_tracer(runtime, self.id))
        # A journal that cannot write to disk (full, read-only) goes on in memory: say so once.
        if journal.degraded is not None:
            self._degraded(journal.degraded)
        elif getattr(journal, "_on_degraded", None) is None:
            journal._on_degraded = _weakly(self._degraded)

    def _new_streamed(self) -> StreamedLines | None:
        if self.plan.plan.operation not in (Operation.CREATE, Operation.OVERWRITE):
            return None
        return StreamedLines(self.runtime.plugins, self.plan.relative,
                             dict(self.lifecycle.settings))

    # -- reading ------------------------------------------------------------------------------

    @property
    def terminator(self) -> str:
        return f"DONE {self.id[:8]}" if self.lifecycle.settings.get("strict_done") else "DONE"

    @property
    def state(self) -> str:
        """The active state's own name, without its ancestors (``awaiting_content``): what
        people read in the live line and the reports."""
        return self.lifecycle.state.rpartition(".")[2]

    @property
    def active(self) -> bool:
        return self.lifecycle.has_tag("open")

    @property
    def issues(self) -> list[Issue]:
        """The issues the last validation found."""
        return self.finalizer.issues

    def content(self) -> bytes:
        """The content as it stands: the journal, with the corrections applied so far."""
        return self.finalizer.content()

    def progress(self) -> Progress:
        return Progress(self.plan.relative, self.journal.lines, self.journal.bytes, self.state,
                        self.context.continuations, self.lifecycle.settings["max_continuations"])

    def summary(self) -> SessionSummary:
        return SessionSummary(
            self.id, self.plan.relative, self.plan.plan.operation.value, self.status,
            self.context.continuations, self.context.corrections, self.journal.lines,
            self.journal.bytes, self.report or (self.result.report if self.result else ""),
            self.journal.degraded, tuple(map(str, self.issues)), self.aside.lines,
            len(self.held_messages), self.context.incomplete_reason)

    def _degraded(self, reason: str) -> None:
        self.runtime.reporter.notice(
            f"write session {self.id[:8]}: cannot save {self.plan.relative}'s content to disk "
            f"({reason}); it is kept in memory and still written when complete, but a crash "
            "now would lose it")
        self._trace(Kind.ERROR, "journal in memory only", {
            "orion.where": "write session journal", "orion.error": reason})

    # -- the model's text ---------------------------------------------------------------------

    def feed(self, text: str) -> bool:
        """A text delta of the model's reply while this session is open (a runtime text sink).
        Returns True when it is the file's content: the journal keeps it, so the model system
        does not keep a copy, and ``end_message`` gives the message its content in the history
        (a reference to the saved lines, or the text itself when it was not content after
        all). See :meth:`Intake.feed <orion.write_session.intake.Intake.feed>`."""
        return self.intake.feed(text)

    def end_message(self, finish: Finish, message: Message | None, *,
                    tool_calls: bool = False, thought: str = "") -> None:
        """The model's message ended: turn what it said into the session's next step.

        A message with only tool calls (no text) does not touch the session; an empty message
        without tool calls is a message boundary like any other (a pause, or a cut-off).
        ``thought``: a ``<think>`` block at the start of the message's content, as it arrived
        (read as reasoning): set aside where the message's content starts. The rules are in
        docs/write-sessions.md ("What is content: the rules")."""
        if self.journal.closed:
            return  # released as the process ends: the journal on disk is the session now
        self._end_message(finish, message, tool_calls=tool_calls, thought=thought)

    def _end_message(self, finish: Finish, message: Message | None, *,
                     tool_calls: bool, thought: str) -> None:
        intake = self.intake
        if not intake.open_for_end(tool_calls=tool_calls, thought=thought):
            return
        if thought and intake.takes_thought:
            self.asides.put(REASONING, thought.encode("utf-8", "surrogateescape"),
                            intake.bytes_at_start)
        self.context.asked = False  # the reply to a prompt (if any) has ended
        if intake.mode is Mode.CORRECTIONS:
            self._corrections(intake.message())
            return
        ended = intake.end(said.cut_of(finish), tool_calls=tool_calls,
                           content=self.finalizer.content)
        if ended.fixed is not None:
            self.finalizer.fixed = ended.fixed
        end = decide_end(ended.facts)
        if tool_calls and end.next is Next.STAY and ended.facts.receiving:
            self._beside_a_tool_call(message, end)
            return
        self._carry_out(end, finish, message, ended.claimed, grew=ended.facts.grew)

    def _carry_out(self, end: End, finish: Finish, message: Message | None, claimed: int, *,
                   grew: bool) -> None:
        if message is not None and (grew or self.intake.circular):
            self.messages.append(message)  # replaced by a reference once the file is written
        if message is None or claimed < 0:
            self._next_step(end, finish, message, grew=grew)
            return
        # The model system did not keep the content it handed over. When the file is written
        # now (DONE, valid), the history gets a reference to it and the content never needs
        # to be text again; otherwise the model sees its own words with the next request.
        span = (claimed, self.journal.bytes)
        try:
            self._next_step(end, finish, message, grew=grew)
        finally:
            if self.result is None:
                message.content = self.intake.sent_text(message.content, *span,
                                                        done=end.next is Next.FINALIZE)

    def _next_step(self, end: End, finish: Finish, message: Message | None, *,
                   grew: bool) -> None:
        """After a message: finalize (DONE), continue (cut off), ask about the unfinished
        line, or wait (paused)."""
        if self.intake.circular:
            self._restarted(self.intake.message())
            return
        if end.next is Next.STAY:
            return
        self.checkpoint()
        if said.progressed(self.context, self.journal, grew):
            self.context.idle_prompts = 0
            self.context.asked_at_lines = None
        if end.next is Next.FINALIZE:
            self._commentary_message = message
            self.asides.after_done()
            self.runtime.reporter.progress_done()
            self._trigger("done")
            self.finalize()
        elif end.next is Next.CONTINUE:
            self.continue_after_cut(finish)
        elif end.next is Next.ASK_UNFINISHED and self._prompts_left():
            self._ask_unfinished()
        elif end.next is Next.ASK_UNFINISHED:
            self._pause(grew=False, reason=f"line {self.journal.lines + 1} still unfinished "
                                           f"after {self._prompt_limit()} prompts")
        else:
            self._pause(grew=grew)

    # -- text set aside ------------------------------------------------------------------------

    def _beside_a_tool_call(self, message: Message | None, end: End) -> None:
        """The message calls a tool: what it added is set aside (the begin result says so)
        and the session goes on as it was."""
        told = self.asides.beside_a_tool_call(message, end)
        if told is not None:
            self._tell_now(told)
        self.checkpoint()

    def _restarted(self, text: str) -> None:
        """The reply started the file over: it is set aside, and the session goes on."""
        self.asides.restarted(text)
        self.checkpoint()
        self._pause(grew=False)

    def keep(self, number: int) -> str:
        """``WritePlanTool_keep``: put part ``number`` of the text set aside back where it
        was in the content. Returns what the model is told."""
        told = self.asides.put_back(number)
        self.checkpoint()
        return told

    # -- waiting, continuing, asking -----------------------------------------------------------

    def _pause(self, *, grew: bool, reason: str | None = None) -> None:
        """The message ended without the terminator and was not cut off: wait (the idle
        prompt follows), unless ``max_idle_prompts`` prompts got nothing new."""
        self._trigger("message_end")
        limit = self._prompt_limit()
        if not grew and not self._prompts_left() \
                and "idle_exhausted" in self.lifecycle.allowed_triggers():
            self._idle_exhausted(
                reason or f"no {self.terminator} after {limit} idle prompts")

    def _prompt_limit(self) -> int | None:
        limit = self.lifecycle.settings.get("max_idle_prompts")
        return limit if isinstance(limit, int) else None

    def _prompts_left(self) -> bool:
        """Whether the model may be asked again: idle prompts and unfinished-line questions
        count together against ``max_idle_prompts`` (FS-20)."""
        limit = self._prompt_limit()
        return limit is None or self.context.idle_prompts < limit

    def continue_after_cut(self, finish: Finish | None = None) -> None:
        """The output was cut off (``finish`` says how; ``None``: a session taken over after
        a crash goes on): the model is asked at once to continue."""
        lines, size = self.journal.lines, self.journal.bytes
        if finish is not None and (cut := said.how_it_was_cut(
                finish, self.id, self.plan.relative, lines)) is not None:
            self.runtime.reporter.notice(cut)
        before = self.context.continuations
        # The quoted lines go through the context, not the payload: transition payloads are
        # traced, and a trace never holds content.
        self.context.quoted = said.quote(self.journal)
        self.context.target = self.plan.relative  # the request names the file
        blank = not self.journal.content().strip()
        self._trigger("truncated", bytes=size, lines=lines, blank=blank)
        if self.lifecycle.has_tag("continuing"):
            n = self.context.continuations
            limit = self.lifecycle.settings["max_continuations"]
            saved = "received, in memory only" if self.journal.degraded else "saved"
            self.runtime.reporter.notice(f"part {before + 1} {saved} ({lines} lines), "
                                         f"continuing {n}/{limit}")
            self.runtime.reporter.progress(self.progress())
        elif self.lifecycle.has_tag("finalizing"):
            self.runtime.reporter.progress_done()
            self._write_incomplete(
                f"continuations used up ({before}/{self.lifecycle.settings['max_continuations']})",
                f"output still cut off after {before} continuations; the file is written "
                "incomplete", lines)
        elif self.lifecycle.has_tag("abandoned"):
            self.runtime.reporter.progress_done()
            self._abandon_unless_held("no content arrived before the output was cut off")

    def _ask_unfinished(self) -> None:
        """The message stopped cleanly in the middle of a line: a file may end that way (a
        VERSION file), or a gateway reported a cut-off as ``stop``. The model is asked at once
        which it is."""
        self.context.quoted = said.quote(self.journal)
        self.context.asked_at_lines = self.journal.lines
        line = self.journal.lines + 1
        self.runtime.reporter.notice(
            f"write session {self.id[:8]}: the reply stopped in the middle of line {line} of "
            f"{self.plan.relative} without {self.terminator}: asking the model whether the "
            "file ends there")
        self._trigger("unfinished", lines=self.journal.lines, bytes=self.journal.bytes)

    def _idle_exhausted(self, reason: str) -> None:
        """``max_idle_prompts`` prompts got no new content and no terminator: write what
        was saved, marked incomplete (nothing saved: abandon). ``reason`` says which."""
        lines, size = self.journal.lines, self.journal.bytes
        self.context.incomplete_reason = reason
        self._trigger("idle_exhausted", bytes=size, lines=lines,
                      blank=not self.journal.content().strip())
        self.runtime.reporter.progress_done()
        if self.lifecycle.has_tag("finalizing"):
            self._write_incomplete(
                reason, f"{reason}; the file is written incomplete ({lines} lines)", lines)
        elif self.lifecycle.has_tag("abandoned"):
            self._abandon_unless_held(f"no content arrived and {reason}")

    def _write_incomplete(self, why: str, error: str, lines: int) -> None:
        """No more content comes (``why``): the ``lines`` saved are written, marked
        incomplete; the trace says so as an error."""
        self.runtime.reporter.notice(
            f"{why}: writing {self.plan.relative} as incomplete ({lines} lines)")
        self._trace(Kind.ERROR, "write incomplete", {
            "orion.where": "write session", "orion.error": error})
        self.finalize()

    # -- validation, corrections, the write ----------------------------------------------------

    def finalize(self) -> None:
        """Validate (normalized) content; ask for corrections, or write it. A plugin that fails
        while it normalizes or validates holds the write: nothing is written, the content stays
        in the journal for ``orion sessions recover``, and the user and the model are told which
        plugin failed and where."""
        self.checkpoint()
        try:
            content = self.finalizer.check(self.content(), self.intake.streamed)
            if self.issues:
                self._decide(content)
            else:
                self.fire("valid")
        except PluginFailed as exc:
            if self.status is not WriteStatus.ACTIVE:
                raise
            self._failed(exc)

    def _decide(self, content: bytes) -> None:
        """Issues were found in ``content``: a correction round, or the last resort."""
        verdict = self.finalizer.decide(content, self.context.corrections)
        if verdict.prompt is not None:
            # The prompt quotes the lines: it reaches the action through the context (kept in
            # the journal's snapshot), not the traced payload.
            self.context.give_correction_prompt(verdict.prompt)
            self._trigger("issues_found", issues=[
                {"line": i.line, "column": i.column, "code": i.code} for i in self.issues])
            return
        limit = self.lifecycle.settings["max_corrections"]
        if verdict.blocking:
            self._blocked(verdict.blocking, limit)
            return
        remaining, replaced = self.finalizer.remaining, self.finalizer.replaced
        self.runtime.reporter.notice(
            f"{len(self.issues)} issue(s) left after {limit} correction rounds; the safe "
            f"replacement changed {replaced} place(s)"
            + (f", {len(remaining)} issue(s) remain in the written file" if remaining else ""))
        self.fire("issues_found", issues=[])

    def _corrections(self, reply: str) -> None:
        self.finalizer.correct(self.content(), reply)
        self._trigger("corrections_received")
        self.finalize()

    def write(self) -> WriteResult:
        """Run by the ``finalize`` action: the plan, executed once, atomically."""
        content = self.content()
        written = self.finalizer.write(
            content, state=self._journal_state(),
            state_dir=self.runtime.state_dir, session_id=self.id, context=self.context,
            aside=self.aside)
        self._apply(written)
        return written.result

    def _apply(self, written: Written) -> None:
        self.result = written.result
        self._wrote(written.result)
        self.status = written.status
        self.report = written.report

    def after_write(self) -> None:
        """The target is written: tell the model and the user, shrink the history, clean up."""
        result = self.result
        assert result is not None
        self._trace(Kind.WRITE_REPORT, f"wrote {result.relative}", {
            "orion.target": result.relative, "orion.operation": self.plan.plan.operation.value,
            "orion.status": self.status, "orion.bytes": result.bytes,
            "orion.lines": result.lines, "orion.sha256": result.sha256,
            "orion.backup": bool(result.backup), "orion.continuations":
            self.context.continuations, "orion.corrections": self.context.corrections,
            "orion.degraded": self.journal.degraded, "orion.set_aside.lines": self.aside.lines})
        self._shrink_history(f"[wrote {result.relative}: {result.lines} lines, sha256 "
                             f"{result.sha256[:12]}]", f"[continued: {result.relative}]")
        self.runtime.inject(self._with_news(self.report))
        self._deliver_held()
        self._record_undo(result)
        self.asides.archive(self.runtime.state_dir)
        self.journal.remove()
        self._detach()

    def _shrink_history(self, reference: str, continued: str) -> None:
        """Replace the streamed content in the conversation by a one-line reference: the file
        holds it now, and sending it with every request would only cost tokens. Text after the
        terminator line stays, after the reference."""
        commentary = self.intake.marker.commentary.strip()
        for i, message in enumerate(self.messages):
            message.content = reference if i == 0 else continued
            if commentary and message is self._commentary_message:
                message.content += "\n\n" + commentary

    def _record_undo(self, result: WriteResult) -> None:
        """What ``orion sessions undo`` needs once the journal is gone: the target, the hash
        it was written with, and the pre-image (none for a created file). The write is done
        when this runs: a disk that refuses the record costs only the undo, and says so."""
        from orion.write_session.undo import prune_after_write, write_undo_record

        try:
            write_undo_record(self.runtime.state_dir, session_id=self.id,
                              relative=result.relative, operation=self.plan.plan.operation.value,
                              sha256=result.sha256, backup=result.backup,
                              written_at_ms=self.runtime.clock.now_ms(), status=self.status,
                              set_aside=self.aside.lines)
            prune_after_write(self.runtime.state_dir,
                              int(self.lifecycle.settings.get("keep_backups", 100)))
        except OSError as exc:
            self.runtime.reporter.notice(
                f"{result.relative} is written, but its undo record could not be saved "
                f"({exc.strerror or exc}); orion sessions undo cannot undo this write")

    # -- endings without a write: what each tells is in orion.write_session.endings ----------

    def _failed(self, cause: BaseException) -> None:
        ending = self.endings.failed(cause, self._keep_content())
        self._end(ending)

    def _blocked(self, blocking: list[Issue], rounds: int) -> None:
        """Issues that block the write remain after the last correction round: the journal
        keeps them with the content (``orion sessions`` shows them)."""
        self.status = WriteStatus.BLOCKED
        self.journal.flush({**self._journal_state(), "blocked": [str(i) for i in blocking]})
        self._end(self.endings.blocked(blocking, rounds, self._keep_content()))

    def _abandon_unless_held(self, why: str) -> None:
        """Orion itself found that no content arrived (FS-14): that is read from the journal,
        never from the last message alone, and a journal that holds content is kept."""
        if holds_content(self.journal):
            self._keep_instead(why)
        else:
            self._abandon(why)

    def _abandon(self, why: str) -> None:
        self._end(self.endings.abandoned(why))

    def _keep_instead(self, why: str) -> None:
        """Abandoned, but the journal holds content: it is saved as set aside (an orphan with
        its recover line), then the session reads as abandoned."""
        self.status = WriteStatus.SET_ASIDE
        self.runtime.reporter.progress_done()
        if not self.journal.closed:
            self.checkpoint()
            self.journal.close()
        self._end(self.endings.kept(why))

    def set_aside(self, why: str) -> None:
        """Stop listening without writing or deleting anything (``/reset``: the new
        conversation knows nothing of this session). The journal is flushed and closed with
        the content it holds, and the messages the user typed meanwhile, so ``orion sessions``
        lists the session and ``orion sessions recover`` can finish or resume it (and then
        deliver them)."""
        self.status = WriteStatus.SET_ASIDE
        self.runtime.reporter.progress_done()
        self.checkpoint()
        kept = self._keep_content()
        self.journal.close()  # its saved state keeps the snapshot of the open session
        self.lifecycle.trigger("discard", reason="set aside")  # ends it here: no timer fires
        self._end(self.endings.set_aside(why, kept, len(self.held_messages)))

    def _end(self, ending: Ending) -> None:
        """Carry out an ending without a write: the status, the notice and trace event, the
        model told, the held messages and the journal seen to, and the session let go."""
        self.status = ending.status
        self.runtime.reporter.notice(ending.notice)
        self._trace(ending.kind, ending.name, ending.figures)
        if ending.told is not None:
            self.runtime.inject(self._with_news(ending.told))
        if ending.held is Held.SENT:
            self._deliver_held()
        elif ending.held is Held.LEFT:
            self.held_messages.clear()  # they belong to the conversation that was reset
        if ending.remains is Remains.REMOVED:
            self.asides.archive(self.runtime.state_dir)
            self.journal.remove()
        else:
            self.journal.close()  # it keeps the content for orion sessions recover
        self._detach()

    def _keep_content(self) -> str | None:
        return keep_content(self.journal, self.runtime.state_dir,
                            f"{self.id[:8]}-{self.plan.target.name}")

    # -- the process ends with the session open -------------------------------------------------

    def release(self) -> None:
        """The process ends with the session open: close the journal, so the next start sees
        an orphan; content the journal could not save goes to a rescue file, and the user is
        told where (or that it could not be saved anywhere)."""
        try:
            if self.status is WriteStatus.ACTIVE:
                self.asides.keep_unread_start()
                self.checkpoint()  # with the held messages
                if self.journal.degraded is not None:
                    kept = self._keep_content()
                    if kept is not None:
                        self.runtime.reporter.notice(self.endings.unsaved_at_exit(kept))
        finally:
            self.journal.close()
            # The process ends: nothing that comes after (a reply still streaming) may act on
            # a session whose journal is closed (end_message checks it too).
            self._stop_listening()

    def open_notice(self) -> str:
        """What an open session means for a user who leaves now (``/quit``, the end of a
        script): where its content is, what the user typed meanwhile, how to go on."""
        self.asides.keep_unread_start()
        self.checkpoint()
        return self.endings.left_open(self.held_messages)

    # -- the user's messages while the session is open -----------------------------------------

    def hold(self, line: str) -> bool:
        """A message the user typed while this session is open. The model's answer to it
        would stream into the file, so it is held (and saved in the journal at once) and sent
        once the session ends (written, abandoned or failed); meanwhile the model is asked at
        once whether it is finished. Returns whether the message was held."""
        if self.status is not WriteStatus.ACTIVE or not self.active:
            return False
        self.held_messages.append(line)
        asks = "user_message" in self.lifecycle.allowed_triggers()
        self.runtime.reporter.notice(self.held_messages.notice(self.id, self.plan.relative,
                                                               asks=asks))
        self._trace(Kind.WRITE_REPORT, "user message held", {
            "orion.target": self.plan.relative, "orion.held": len(self.held_messages)})
        if asks:
            self._trigger("user_message")
        else:
            self.checkpoint()
        return True

    def _deliver_held(self) -> None:
        self.held_messages.send(self.runtime.conversation)

    # -- for the states a team adds to the statechart -------------------------------------------

    def fire(self, trigger: str, **payload: Any) -> WriteStatus:
        """Send ``trigger`` to the session's lifecycle and carry out what the statechart
        decided, as Orion does after DONE. A team's statechart that adds a state of its own (a
        review before the write, say) leaves it with this call.

        * The transition ran ``finalize`` and the target is written: the model and the user get
          the one-line report, the streamed content in the history becomes a reference, the
          journal is removed.
        * The write failed: the content stays in the journal for ``orion sessions recover``,
          and the model and the user are told why.
        * The lifecycle ended without a write (a final state such as ``abandoned``): the
          session is dropped, with ``payload["reason"]`` as the reason given.

        Returns the session's status, a :class:`~orion.write_session.view.WriteStatus`
        (``blocked`` too, when a validator's blocking issue stops the write). A trigger the
        current state does not take raises :class:`~orion.errors.TriggerNotAllowed`, and the
        session stays as it was."""
        try:
            self._trigger(trigger, **payload)
        except GuardError:
            return self.status  # held by _trigger: not written, the content kept
        except ActionError as exc:
            self._failed(self._cause(exc))
            return self.status
        if self.result is not None:
            self.after_write()
        elif self.lifecycle.finished and self.status is WriteStatus.ACTIVE:
            self._abandon(str(payload.get("reason") or f"the statechart ended it ({trigger})"))
        return self.status

    def _cause(self, exc: ActionError) -> BaseException:
        """What a failed action is reported as: Orion's own refusal (a changed target, a full
        disk) as it is; a team's action by name, with the line of its code, whatever it
        raised."""
        origin = self.runtime.plugins.origins.get(exc.plugin or "")
        ours = origin is None or origin.kind == "builtin"
        return exc.cause if ours and isinstance(exc.cause, OrionError | OSError) else exc

    def checkpoint(self) -> None:
        """Save the content received so far and the session's state (the lifecycle snapshot,
        the counters, the status, the messages the user typed) to the journal: what crash
        recovery restores."""
        self.journal.flush(self._journal_state())

    # -- helpers ------------------------------------------------------------------------------

    def _trigger(self, trigger: str, **payload: Any) -> None:
        try:
            self.lifecycle.trigger(trigger, **payload)
        except GuardError as exc:
            # A guard that cannot decide holds the write (CU-5): nothing is written, the
            # content stays recoverable, the user and the model are told which plugin failed.
            # The error still stops whatever was to follow the trigger (a validation, a write).
            if self.status is WriteStatus.ACTIVE:
                self._failed(exc)
            exc.told = True
            raise
        self.checkpoint()

    def _tell_now(self, text: str) -> None:
        """A message for the model with the next request, which is coming anyway (the tool
        results of the message that ended): the lifecycle's prompt, which the runtime
        delivers after the tool results."""
        self.lifecycle.prompt(self._with_news(text))

    def _with_news(self, text: str) -> str:
        return self.context.with_news(text)

    def _journal_state(self) -> dict[str, Any]:
        return {"snapshot": self.lifecycle.snapshot(),
                "continuations": self.context.continuations,
                "corrections": self.context.corrections,
                "status": self.status,
                "held": list(self.held_messages),
                "set_aside_lines": self.aside.lines,
                # what recovery asks of a session without its statechart
                "tags": sorted(self.lifecycle.definition.tags.get(self.lifecycle.state, ()))}

    def _detach(self) -> None:
        """The session has ended (written, failed, abandoned, set aside): it stops listening,
        and lets go of what only an open session needs (the corrected content, the streamed
        checks, the last chunks), so a long conversation of writes does not keep each one's."""
        self._stop_listening()
        self.finalizer.fixed = None
        self.intake.let_go()
        self.messages = []  # the conversation holds them (as references, once written)
        self._ended(self)

    def listen(self) -> None:
        """The model's text and the user's messages reach this session (an open one)."""
        runtime = self.runtime
        runtime.text_sinks.append(self.feed)
        runtime.text_lines_due.append(self.intake.lines_due)
        runtime.user_gates.append(self.hold)

    def _stop_listening(self) -> None:
        """No more text, user messages or triggers reach this session."""
        self.intake.stop()
        runtime = self.runtime
        if self.feed in runtime.text_sinks:
            runtime.text_sinks.remove(self.feed)
        if self.intake.lines_due in runtime.text_lines_due:
            runtime.text_lines_due.remove(self.intake.lines_due)
        if self.hold in runtime.user_gates:
            runtime.user_gates.remove(self.hold)
        runtime.lifecycles.pop(lifecycle_key(self.id), None)

    def _trace(self, kind: str, name: str, attributes: dict[str, Any]) -> None:
        self.runtime.tracer.emit(TraceEvent(kind, name, self.runtime.clock.now_ms(),
                                            self.runtime.conversation.id, self.id, attributes))


def _notice(runtime: Runtime) -> Callable[[str], None]:
    """The user's notices, for the session's parts (the runtime's reporter of the moment)."""
    def notice(text: str) -> None:
        runtime.reporter.notice(text)
    return notice


def _tracer(runtime: Runtime, session_id: str) -> Callable[[str, str, dict[str, Any]], None]:
    """The session's trace events, for its parts (no reference back to the session)."""
    def trace(kind: str, name: str, attributes: dict[str, Any]) -> None:
        runtime.tracer.emit(TraceEvent(kind, name, runtime.clock.now_ms(),
                                       runtime.conversation.id, session_id, attributes))
    return trace


def session_dir(state_dir: Path, session_id: str) -> Path:
    return state_dir / "write_sessions" / session_id


def lifecycle_key(session_id: str) -> str:
    """The key of a session's lifecycle in ``runtime.lifecycles``."""
    return f"write_session:{session_id[:8]}"
