"""One write session, from ``WritePlanTool_begin`` to the target written once.

The session owns a ``write_session`` lifecycle (the statechart decides what may happen next), a
journal (the content on disk, for crash recovery) and an end-marker scanner. Streamed text
reaches :meth:`WriteSession.feed` on the hot path: plain code, no statechart trigger per chunk.
Only message boundaries become triggers: ``content``, ``message_end``, ``truncated``, ``done``,
``circular``, ``issues_found``, ``corrections_received`` and ``valid``.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orion.errors import ActionError, OrionError
from orion.models.events import Finish
from orion.runtime.report import Progress
from orion.trace.events import Kind, TraceEvent
from orion.validation import Issue, ValidationRequest, collect_issues
from orion.write_session.journal import Journal
from orion.write_session.operations import WriteResult, execute
from orion.write_session.plan import CheckedPlan, recheck
from orion.write_session.protocol import EndMarker
from orion.write_session.repair import (apply_corrections, correction_prompt, parse_corrections,
                                        safe_replacement)

if TYPE_CHECKING:
    from orion.runtime.conversation import Message
    from orion.runtime.runtime import Runtime
    from orion.statechart.lifecycle import Lifecycle

#: How much of a continuation is looked at before deciding whether it repeats what was saved.
OVERLAP_PROBE_CHARS = 400
#: How much of the content's beginning a continuation is compared with.
RESTART_PROBE_CHARS = 120
#: A continuation that repeats at least this much of the saved tail repeated it (shorter
#: matches are coincidence, unless they are whole lines).
MIN_OVERLAP_CHARS = 10
#: A continuation whose start matches this much of the content's start restarted the file.
MIN_RESTART_CHARS = 32
#: How many of the last lines the continuation prompt quotes.
QUOTED_LINES = 3
LIVE_LINE_INTERVAL_S = 0.1


@dataclass
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
    issues: list[str] = field(default_factory=list)


class WriteSession:
    def __init__(self, runtime: Runtime, checked: CheckedPlan, lifecycle: Lifecycle,
                 journal: Journal):
        self.runtime = runtime
        self.plan = checked
        self.lifecycle = lifecycle
        self.journal = journal
        self.id = lifecycle.id
        self.marker = EndMarker(self.terminator)
        self.status = "active"
        self.result: WriteResult | None = None
        self.issues: list[Issue] = []
        self.replaced = 0
        self.messages: list[Message] = []  # assistant messages that carried content
        self._in_message = False
        self._message_text: list[str] = []  # all text of the current message
        self._held: list[str] = []  # text held back at a message start (a reply, a continuation)
        self._held_size = 0
        self._mode = "content"
        self._last_live = 0.0
        self._fixed: bytes | None = None  # the content after normalizing and corrections

    # -- reading ------------------------------------------------------------------------------

    @property
    def terminator(self) -> str:
        return f"DONE {self.id[:8]}" if self.lifecycle.settings.get("strict_done") else "DONE"

    @property
    def state(self) -> str:
        return self.lifecycle.state.removeprefix("session_active.")

    @property
    def active(self) -> bool:
        return self.lifecycle.is_in("session_active")

    def summary(self) -> SessionSummary:
        return SessionSummary(
            self.id, self.plan.relative, self.plan.plan.operation.value, self.status,
            self.lifecycle.context.get("continuations", 0),
            self.lifecycle.context.get("corrections", 0), self.journal.lines,
            self.journal.bytes, self.result.report if self.result else "",
            self.journal.degraded, [str(i) for i in self.issues])

    # -- the hot path -------------------------------------------------------------------------

    def feed(self, text: str) -> None:
        """A text delta of the model's reply while this session is open."""
        if not self._in_message:
            self._start_message()
        self._message_text.append(text)
        mode = self._mode
        if mode == "content":
            content = self.marker.feed(text)
            if content:
                self.journal.append(content)
                if "\n" in content:
                    self._live()
        elif mode == "hold":
            self._held.append(text)
            self._held_size += len(text)
            if self._held_size >= OVERLAP_PROBE_CHARS or "\n" in text and self._decided():
                self._release()
        # mode "corrections" and "ignore": the text is kept in _message_text only

    def _start_message(self) -> None:
        self._in_message = True
        self._message_text = []
        self.marker.new_message()
        state = self.state
        if state in ("continuing", "awaiting_done_or_more_content"):
            self._mode, self._held, self._held_size = "hold", [], 0
        elif state == "needs_corrections":
            self._mode = "corrections"
        elif state == "awaiting_content":
            self._mode = "content"
        else:
            self._mode = "ignore"

    def _decided(self) -> bool:
        """Whether the held start of a message says enough: a full line that is not DONE."""
        held = "".join(self._held)
        first = held.split("\n", 1)[0].strip()
        return bool(first) and first != self.terminator

    def _release(self) -> None:
        """Decide what the held start of a message is, then pass it on as content."""
        held = "".join(self._held)
        self._held, self._held_size = [], 0
        if self.state == "continuing":
            held = self._strip_overlap(held)
            if held is None:
                self._mode = "ignore"
                self._trigger("circular")
                return
        self._trigger("content")
        self._mode = "content"
        content = self.marker.feed(held)
        if content:
            self.journal.append(content)

    def _strip_overlap(self, text: str) -> str | None:
        """The continuation without what repeats the saved content's tail; ``None`` when it
        starts the file over (a circular continuation)."""
        content = self.journal.content()
        saved = content[-max(len(text), OVERLAP_PROBE_CHARS) * 4:].decode("utf-8", "replace")
        head = content[:RESTART_PROBE_CHARS].decode("utf-8", "replace")
        probe = text.lstrip()
        n = min(len(probe), len(head))
        if n >= MIN_RESTART_CHARS and probe[:n] == head[:n] and len(content) > 2 * n:
            return None
        for size in range(min(len(saved), len(text)), 0, -1):
            if not saved.endswith(text[:size]):
                continue
            whole_lines = text[size - 1] == "\n" and (size == len(saved) or
                                                      saved[-size - 1] == "\n")
            if size >= MIN_OVERLAP_CHARS or whole_lines and size >= 4:
                return text[size:]
            break
        return text

    def _live(self) -> None:
        now = time.monotonic()
        if now - self._last_live >= LIVE_LINE_INTERVAL_S:
            self._last_live = now
            self.runtime.reporter.progress(self.progress())

    def progress(self) -> Progress:
        return Progress(self.plan.relative, self.journal.lines, self.journal.bytes, self.state,
                        self.lifecycle.context.get("continuations", 0),
                        self.lifecycle.settings["max_continuations"])

    # -- message boundaries -------------------------------------------------------------------

    def end_message(self, finish: Finish, message: Message | None) -> None:
        """The model's message ended: turn what it said into the session's next step."""
        if not self._in_message:
            return  # a message without text (only tool calls) does not touch the session
        self._in_message = False
        text = "".join(self._message_text)
        if message is not None and self._mode in ("content", "hold"):
            self.messages.append(message)
        if self._mode == "hold":
            if text.strip() == self.terminator:  # a reply that is only DONE
                self._mode = "content"
                self.marker.done = True
            elif text.strip():
                self._release()
        if self._mode == "corrections":
            self._corrections(text)
            return
        if self._mode == "content":
            rest = self.marker.end_message()
            if rest:
                self.journal.append(rest)
        if self._mode == "ignore":
            return
        self.journal.flush(self._journal_state())
        if self.marker.done:
            self._note_commentary()
            self.runtime.reporter.progress_done()
            self._trigger("done")
            self.finalize()
        elif finish.truncated:
            self._truncated()
        elif text:
            self._trigger("message_end")

    def _truncated(self) -> None:
        lines, size = self.journal.lines, self.journal.bytes
        before = self.lifecycle.context.get("continuations", 0)
        self._trigger("truncated", bytes=size, lines=lines,
                      last_lines=self.journal.tail_lines(QUOTED_LINES))
        state = self.state
        if state == "continuing":
            n = self.lifecycle.context["continuations"]
            limit = self.lifecycle.settings["max_continuations"]
            self.runtime.reporter.notice(f"part {before + 1} saved ({lines} lines), "
                                         f"continuing {n}/{limit}")
            self.runtime.reporter.progress(self.progress())
        elif state == "finalizing":
            self.runtime.reporter.progress_done()
            self.runtime.reporter.notice(
                f"continuations used up ({before}/{before}): writing {self.plan.relative} "
                f"as incomplete ({lines} lines)")
            self._trace(Kind.ERROR, "write incomplete", {
                "orion.where": "write session", "orion.error": "output still cut off after "
                f"{before} continuations; the file is written incomplete"})
            self.finalize()
        elif self.lifecycle.state == "abandoned":
            self.runtime.reporter.progress_done()
            self._abandon("no content arrived before the output was cut off")

    def _corrections(self, reply: str) -> None:
        corrections, problems = parse_corrections(reply)
        fixed = apply_corrections(self.content(), corrections)
        self._fixed = fixed.content
        self._trace(Kind.VALIDATION_ISSUE, "corrections received", {
            "orion.corrections": len(corrections), "orion.unparsed": len(problems),
            "orion.out_of_range": list(fixed.out_of_range)})
        self._trigger("corrections_received")
        self.finalize()

    # -- finalization -------------------------------------------------------------------------

    def content(self) -> bytes:
        """The content as it stands: the journal, with the corrections applied so far."""
        return self._fixed if self._fixed is not None else self.journal.content()

    def finalize(self) -> None:
        """Validate (normalized) content; ask for corrections, or write it. This is the
        internal ``finalizeSession``: the model never calls it."""
        self.journal.flush(self._journal_state())
        content = self.content()
        pm = self.runtime.plugins
        normalized = pm.hook.normalize_content(path=self.plan.relative, content=content)
        if normalized is not None:
            content = normalized
            self._fixed = content
        request = ValidationRequest(self.plan.relative, content, dict(self.lifecycle.settings))
        self.issues = collect_issues(pm, request)
        for issue in self.issues:
            self._trace(Kind.VALIDATION_ISSUE, f"issue {issue.code}", {
                "orion.line": issue.line, "orion.column": issue.column,
                "orion.code": issue.code, "orion.message": issue.message})
        if not self.issues:
            self._trigger_write("valid")
            return
        rounds, limit = (self.lifecycle.context.get("corrections", 0),
                         self.lifecycle.settings["max_corrections"])
        if rounds < limit:
            prompt = correction_prompt(self.issues, content, rounds + 1, limit)
            self._trigger("issues_found", prompt=prompt, issues=[
                {"line": i.line, "column": i.column, "code": i.code, "message": i.message}
                for i in self.issues])
            return
        repaired, replaced = safe_replacement(content, self.lifecycle.settings.get(
            "safe_replacement", ""))
        self._fixed, self.replaced = repaired, len(replaced)
        self.runtime.reporter.notice(
            f"{len(self.issues)} issue(s) left after {limit} correction rounds; the safe "
            f"replacement changed {len(replaced)} place(s)")
        self._trigger_write("issues_found", issues=[])

    def _trigger_write(self, trigger: str, **payload: Any) -> None:
        try:
            self._trigger(trigger, **payload)
        except ActionError as exc:
            cause = exc.cause if isinstance(exc.cause, OrionError | OSError) else exc
            self._failed(cause)
            return
        if self.result is not None:
            self.after_write()

    def write(self) -> WriteResult:
        """Run by the ``finalize`` action: the plan, executed once, atomically."""
        content = self.content()
        self.journal.flush(self._journal_state(finalizing=True))
        result = execute(recheck(self.plan), content, state_dir=self.runtime.state_dir,
                         session_id=self.id)
        self.result = result
        if self.lifecycle.context.get("status") == "incomplete":
            self.status = "incomplete"
        else:
            self.status = "written"
        report = result.report
        if self.status == "incomplete":
            report += " (incomplete: the output was cut off)"
        if self.replaced:
            report += f"; the safe replacement changed {self.replaced} place(s)"
        self.report = report
        return result

    def after_write(self) -> None:
        """The target is written: tell the model and the user, shrink the history, clean up."""
        result = self.result
        assert result is not None
        self._trace(Kind.WRITE_REPORT, f"wrote {result.relative}", {
            "orion.target": result.relative, "orion.operation": self.plan.plan.operation.value,
            "orion.status": self.status, "orion.bytes": result.bytes,
            "orion.lines": result.lines, "orion.sha256": result.sha256,
            "orion.backup": bool(result.backup)})
        reference = f"[wrote {result.relative}: {result.lines} lines, sha256 {result.sha256[:12]}]"
        for i, message in enumerate(self.messages):
            message.content = reference if i == 0 else f"[continued: {result.relative}]"
        self.runtime.inject(self.report)
        self._record_undo(result)
        self.journal.remove()
        self._detach()

    def _failed(self, cause: BaseException) -> None:
        self.status = "failed"
        message = (f"Could not write {self.plan.relative}: {cause}. The content is saved in "
                   f"write session {self.id[:8]}; `orion sessions recover {self.id[:8]} "
                   "--finalize` writes it once the problem is fixed.")
        self.runtime.reporter.notice(message)
        self._trace(Kind.ERROR, "write failed", {"orion.where": "write session",
                                                 "orion.error": str(cause)})
        self.runtime.inject(message)
        self.journal.close()
        self._detach()

    def _abandon(self, why: str) -> None:
        self.status = "abandoned"
        message = f"The write session for {self.plan.relative} was abandoned: {why}."
        self.runtime.reporter.notice(message)
        self._trace(Kind.WRITE_REPORT, f"abandoned {self.plan.relative}", {
            "orion.target": self.plan.relative, "orion.status": "abandoned", "orion.why": why})
        self.runtime.inject(message)
        self.journal.remove()
        self._detach()

    def _detach(self) -> None:
        if self.feed in self.runtime.text_sinks:
            self.runtime.text_sinks.remove(self.feed)
        self.runtime.lifecycles.pop(lifecycle_key(self.id), None)

    def _record_undo(self, result: WriteResult) -> None:
        """What ``orion sessions undo`` needs once the journal is gone: the target, the hash
        it was written with, and the pre-image (none for a created file)."""
        record = undo_record_path(self.runtime.state_dir, self.id)
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({
            "session_id": self.id, "target_file": result.relative,
            "operation": self.plan.plan.operation.value, "sha256": result.sha256,
            "backup": str(result.backup) if result.backup else None,
            "written_at_ms": self.runtime.clock.now_ms()}, indent=2), encoding="utf-8")

    # -- helpers ------------------------------------------------------------------------------

    def _trigger(self, trigger: str, **payload: Any) -> None:
        self.lifecycle.trigger(trigger, **payload)
        self.journal.flush(self._journal_state())

    def _journal_state(self, *, finalizing: bool = False) -> dict[str, Any]:
        state: dict[str, Any] = {"snapshot": self.lifecycle.snapshot(),
                                 "continuations": self.lifecycle.context.get("continuations", 0),
                                 "corrections": self.lifecycle.context.get("corrections", 0),
                                 "status": self.status}
        if finalizing:
            # Enough to finish the job idempotently after a crash during the write: the target
            # still has its pre-image (write it), or it has what this content makes of the
            # pre-image (only clean up).
            target = self.plan.target
            before = target.read_bytes() if target.is_file() else None
            state["finalizing"] = {
                "content_sha256": hashlib.sha256(self.content()).hexdigest(),
                "before_sha256": hashlib.sha256(before).hexdigest() if before is not None
                else None}
        return state

    def _note_commentary(self) -> None:
        commentary = self.marker.commentary.strip()
        if commentary:
            self._trace(Kind.WRITE_REPORT, "commentary after DONE", {
                "orion.commentary.chars": len(commentary), "orion.commentary": commentary})

    def _trace(self, kind: str, name: str, attributes: dict[str, Any]) -> None:
        self.runtime.tracer.emit(TraceEvent(kind, name, self.runtime.clock.now_ms(),
                                            self.runtime.conversation.id, self.id, attributes))


def describe_json(summary: SessionSummary) -> dict[str, Any]:
    return json.loads(json.dumps(summary.__dict__))


def session_dir(state_dir: Path, session_id: str) -> Path:
    return state_dir / "write_sessions" / session_id


def undo_record_path(state_dir: Path, session_id: str) -> Path:
    return state_dir / "backups" / session_id / "undo.json"


def lifecycle_key(session_id: str) -> str:
    """The key of a session's lifecycle in ``runtime.lifecycles``."""
    return f"write_session:{session_id[:8]}"
