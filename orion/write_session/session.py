"""One write session, from ``WritePlanTool_begin`` to the target written once.

The session owns a ``write_session`` lifecycle (the statechart decides what may happen next), a
journal (the content on disk, for crash recovery), an end-marker scanner and the text set aside
beside the content. Its work is in three rooms, each a module:

- :mod:`orion.write_session.ingest`: the hot path, streamed text into the journal (no
  statechart trigger per chunk), and how a reply to a prompt of Orion's starts;
- :mod:`orion.write_session.message_end`: at each message's end, the decision of
  :mod:`orion.write_session.decision` carried out (finalize, set aside, continue, ask, wait);
- :mod:`orion.write_session.finalize`: validation, corrections, the write once, and the other
  endings.

This module holds the session's state and its public calls: what the user types while the
session is open (:meth:`WriteSession.hold`), putting text set aside back
(:meth:`WriteSession.keep`), and the calls a team's statechart uses (:meth:`WriteSession.fire`,
:meth:`WriteSession.checkpoint`). Only message boundaries become triggers: ``content``,
``message_end``, ``truncated``, ``unfinished``, ``done``, ``circular``, ``issues_found``,
``corrections_received`` and ``valid``.
"""

from __future__ import annotations

import hashlib
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orion.errors import ActionError, GuardError, OrionError
from orion.trace.events import Kind, TraceEvent
from orion.validation import Issue, StreamedLines
from orion.write_session.edit_validation import validate_write
from orion.write_session.finalize import Finalizer
from orion.write_session.flush_timer import FlushTimer
from orion.write_session.ingest import Ingest
from orion.write_session.journal import Journal
from orion.write_session.message_end import MessageEnds
from orion.write_session.operations import WriteResult
from orion.write_session.plan import CheckedPlan, Operation
from orion.write_session.protocol import EndMarker
from orion.write_session.set_aside import SetAside
from orion.write_session.view import WriteStatus

if TYPE_CHECKING:
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
    status: str
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


class KeepRefused(OrionError):
    """``WritePlanTool_keep`` for a part that is not there to put back."""

    refusal = True  # the model is told the message, not the class name


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


class WriteSession(Ingest, MessageEnds, Finalizer):
    def __init__(self, runtime: Runtime, checked: CheckedPlan, lifecycle: Lifecycle,
                 journal: Journal):
        self.runtime = runtime
        self.plan = checked
        self.lifecycle = lifecycle
        self.journal = journal
        self.id = lifecycle.id
        self.marker = EndMarker(self.terminator)
        #: The text set aside beside the content (an adopted session's parts too).
        self.aside = SetAside.of_journal(journal.directory)
        self.status = WriteStatus.ACTIVE
        self.result: WriteResult | None = None
        self.issues: list[Issue] = []
        self.replaced = 0
        self.remaining: list[Issue] = []  # issues still there after the last correction round
        self.messages: list[Message] = []  # assistant messages that carried content
        self._in_message = False
        # The current message's text: all of it, except in content mode, where the journal
        # keeps the content and only the last chunks are kept (_message_cut says so).
        self._message_text: list[str] = []
        self._message_cut = False
        # Where the current message's content, taken over from the model system (see feed),
        # starts in the journal; -1 when the message gave none.
        self._claimed_from = -1
        self._held: list[str] = []  # the start of a reply, held until read_start decides
        self._held_size = 0
        self._read_at = 0  # the held size at which the start is read again
        self._mode = "content"
        # Content chunks not taken in yet (see Ingest.feed): their characters and line breaks.
        self._batch: list[str] = []
        self._batch_chars = 0
        self._batch_lines = 0
        self._batch_error: BaseException | None = None
        self._last_live = 0.0
        # Saves pending content when the flush interval is up, whether or not text arrives.
        self._flush_timer = FlushTimer(runtime.clock, self._flush_due)
        self._fixed: bytes | None = None  # the content after normalizing and corrections
        self._normalized = False  # normalize_content runs once, on the content as streamed
        self._bytes_at_start = 0  # the journal's size when the current message started
        self._circular = False  # the current message started the file over
        self._commentary_message: Message | None = None  # the message whose DONE ended it
        self._marker_at_start: tuple | None = None  # the end marker before this message
        #: The end marker just before the last message ended in content (in the middle of a
        #: line, when it was cut there): a reply that sends that line again goes on from it.
        self._marker_at_end: tuple | None = None
        self._quoted_at_start: Any = None  # the tail the prompt before this message quoted
        #: Messages the user typed while the session was open: sent once it ends, saved in the
        #: journal meanwhile (an adopted session brings its own back).
        self.held_messages: list[str] = [str(m) for m in journal.state.get("held") or []]
        # The line checks run on the content as it streams, so a large write is checked before
        # DONE arrives. Edits are checked as the file after the edit (see validate_write).
        self._streamed = self._new_streamed()
        self.report = ""
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

    def summary(self) -> SessionSummary:
        self._take_batch()
        return SessionSummary(
            self.id, self.plan.relative, self.plan.plan.operation.value, self.status,
            self.lifecycle.context.get("continuations", 0),
            self.lifecycle.context.get("corrections", 0), self.journal.lines,
            self.journal.bytes, self.report or (self.result.report if self.result else ""),
            self.journal.degraded, tuple(map(str, self.issues)), self.aside.lines,
            len(self.held_messages), self.lifecycle.context.get("incomplete_reason"))

    def _degraded(self, reason: str) -> None:
        self.runtime.reporter.notice(
            f"write session {self.id[:8]}: cannot save {self.plan.relative}'s content to disk "
            f"({reason}); it is kept in memory and still written when complete, but a crash "
            "now would lose it")
        self._trace(Kind.ERROR, "journal in memory only", {
            "orion.where": "write session journal", "orion.error": reason})

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
        self.runtime.reporter.notice(
            f"write session {self.id[:8]} for {self.plan.relative} is open: your message is "
            "held and sent to the model once the file is written"
            + ("; the model is asked now whether it is finished" if asks else "")
            + " (/reset sets the session aside)")
        self._trace(Kind.WRITE_REPORT, "user message held", {
            "orion.target": self.plan.relative, "orion.held": len(self.held_messages)})
        if asks:
            self._trigger("user_message")
        else:
            self.checkpoint()
        return True

    def _deliver_held(self) -> None:
        held, self.held_messages = self.held_messages, []
        for line in held:
            self.runtime.conversation.add_user(line)

    def open_notice(self) -> str:
        """What an open session means for a user who leaves now (``/quit``, the end of a
        script): where its content is, what the user typed meanwhile, how to go on."""
        self._keep_unread_start()
        self.checkpoint()
        short = self.id[:8]
        aside = f", {self.aside.lines} lines set aside" if self.aside.pending else ""
        text = (f"write session {short} for {self.plan.relative} is still open "
                f"({self.journal.lines} lines saved{aside})")
        if self.held_messages:
            first = self.held_messages[0]
            first = first if len(first) <= 60 else first[:60] + "…"
            count = len(self.held_messages)
            text += (f"; {count} message{'s' if count != 1 else ''} you typed "
                     f"{'are' if count != 1 else 'is'} held with it ({first!r}) and sent once "
                     "the file is written")
        return (text + f": `orion sessions recover {short} --continue` lets the next orion "
                f"run or orion chat finish it, `--finalize` writes what was saved")

    # -- putting text set aside back -------------------------------------------------------------

    def keep(self, number: int) -> str:
        """``WritePlanTool_keep``: put part ``number`` of the text set aside back where it
        was in the content. Returns what the model is told."""
        part = self.aside.get(number)
        if part is None or part.kept:
            pending = ", ".join(str(p.number) for p in self.aside.pending) or "none"
            raise KeepRefused(f"write session {self.id[:8]} has no part {number} set aside to "
                              f"put back (parts set aside: {pending})")
        self._take_batch()
        at = min(part.at, self.journal.bytes)
        # The content first, then the index: a kill in between leaves the part both in the
        # content and in its file, never in neither.
        self.journal.insert(at, self.aside.read(number))
        self.aside.put_back(number)
        self._restart_streamed_checks(at)
        line = self.journal.content()[:at].count(b"\n") + 1
        self.runtime.reporter.notice(
            f"write session {self.id[:8]}: part {number} ({part.lines} lines) is back in "
            f"{self.plan.relative}, at line {line}")
        self._trace(Kind.WRITE_REPORT, "text put back", {
            "orion.target": self.plan.relative, "orion.part": number,
            "orion.lines": part.lines, "orion.bytes": part.bytes})
        self.checkpoint()
        return (f"Part {number} ({part.lines} lines) is back in {self.plan.relative} at line "
                f"{line}; {self.journal.lines} lines are saved. Go on with the content where "
                f"it stopped and end it with a line {self.terminator}.")

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
            # Orion's own refusal (a changed target, a full disk) is said as it is; a team's
            # action is named, with the line of its code, whatever it raised.
            origin = self.runtime.plugins.origins.get(exc.plugin or "")
            ours = origin is None or origin.kind == "builtin"
            cause = exc.cause if ours and isinstance(exc.cause, OrionError | OSError) else exc
            self._failed(cause)
            return self.status
        if self.result is not None:
            self.after_write()
        elif self.lifecycle.finished and self.status is WriteStatus.ACTIVE:
            self._abandon(str(payload.get("reason") or f"the statechart ended it ({trigger})"))
        return self.status

    def checkpoint(self) -> None:
        """Save the content received so far and the session's state (the lifecycle snapshot,
        the counters, the status, the messages the user typed) to the journal: what crash
        recovery restores."""
        self._take_batch()
        self.journal.flush(self._journal_state())

    # -- helpers ------------------------------------------------------------------------------

    def _trigger(self, trigger: str, **payload: Any) -> None:
        try:
            self.lifecycle.trigger(trigger, **payload)
        except GuardError as exc:
            # A guard that cannot decide holds the write (CU-5): nothing is written, the
            # content stays recoverable, the user and the model are told which plugin failed.
            # The error still stops whatever was to follow the trigger (a validation, a write).
            if self.status == "active":
                self._failed(exc)
            exc.told = True
            raise
        self.checkpoint()

    def _tell_now(self, text: str) -> None:
        """A message for the model with the next request, which is coming anyway (the tool
        results of the message that ended): the lifecycle's prompt, which the runtime
        delivers after the tool results."""
        self.lifecycle.prompt(self._with_news(text))

    def _tell_later(self, text: str) -> None:
        """A message for the model with the next prompt Orion sends it (the idle prompt, the
        continuation request, the report): no request of its own."""
        self.lifecycle.context.setdefault("news", []).append(text)

    def _with_news(self, text: str) -> str:
        news = self.lifecycle.context.pop("news", None) or []
        return "\n\n".join([*news, text])

    def _journal_state(self, *, finalizing: bool = False) -> dict[str, Any]:
        state: dict[str, Any] = {"snapshot": self.lifecycle.snapshot(),
                                 "continuations": self.lifecycle.context.get("continuations", 0),
                                 "corrections": self.lifecycle.context.get("corrections", 0),
                                 "status": self.status,
                                 "held": list(self.held_messages),
                                 "set_aside_lines": self.aside.lines,
                                 # what recovery asks of a session without its statechart
                                 "tags": sorted(self.lifecycle.definition.tags.get(
                                     self.lifecycle.state, ()))}
        if finalizing:
            # Enough to finish the job idempotently after a crash during the write: the target
            # still has its pre-image (write it), or it has what this content makes of the
            # pre-image (only clean up).
            target = self.plan.target
            before = target.read_bytes() if target.is_file() else None
            state["finalizing"] = {
                "content_sha256": self.journal.sha256() if self._fixed is None
                else hashlib.sha256(self._fixed).hexdigest(),
                "before_sha256": hashlib.sha256(before).hexdigest() if before is not None
                else None}
        return state

    def _detach(self) -> None:
        """The session has ended (written, failed, abandoned, set aside): it stops listening,
        and lets go of what only an open session needs (the corrected content, the streamed
        checks, the last chunks), so a long conversation of writes does not keep each one's."""
        self._stop_listening()
        self._fixed = self._streamed = None
        self._message_text, self._held, self._batch = [], [], []
        self.messages = []  # the conversation holds them (as references, once written)
        from orion.write_session.manager import manager_for

        manager_for(self.runtime).ended(self)

    def _stop_listening(self) -> None:
        """No more text, user messages or triggers reach this session."""
        self._flush_timer.cancel()
        if self.feed in self.runtime.text_sinks:
            self.runtime.text_sinks.remove(self.feed)
        if self.hold in self.runtime.user_gates:
            self.runtime.user_gates.remove(self.hold)
        self.runtime.lifecycles.pop(lifecycle_key(self.id), None)

    def _trace(self, kind: str, name: str, attributes: dict[str, Any]) -> None:
        self.runtime.tracer.emit(TraceEvent(kind, name, self.runtime.clock.now_ms(),
                                            self.runtime.conversation.id, self.id, attributes))


def session_dir(state_dir: Path, session_id: str) -> Path:
    return state_dir / "write_sessions" / session_id


def lifecycle_key(session_id: str) -> str:
    """The key of a session's lifecycle in ``runtime.lifecycles``."""
    return f"write_session:{session_id[:8]}"
