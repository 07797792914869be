"""Finalize: the content validated, corrected if need be, and written once (the internal
``finalizeSession`` of the design; the model never calls it), then the report; or, when the
session ends without a write, the content kept where it can be recovered.

Whatever ends a session, the text set aside beside its content moves with it: to the state
directory's ``set_aside/`` once the journal is removed (``orion sessions show ID``), or it
stays in the journal directory while the journal stays.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from orion.errors import GuardError, PluginFailed
from orion.trace.events import Kind
from orion.write_session.edit_validation import validate_write
from orion.write_session.journal import CONTENT, mark, read_private
from orion.write_session.operations import TargetChanged, WriteResult, execute
from orion.write_session.repair import (apply_corrections, correction_prompt, parse_corrections,
                                        safe_replacement)
from orion.write_session.undo import prune_after_write, write_undo_record
from orion.write_session.view import WriteStatus

if TYPE_CHECKING:
    from orion.validation import Issue
    from orion.write_session.members import SessionMembers
else:
    SessionMembers = object  # the declarations are for the type checker only

#: Why a part was set aside when the process ended before the reply's start was read.
UNREAD_REPLY = "the start of a reply Orion had not read when it ended"


class Finalizer(SessionMembers):
    """Validation, corrections, the write and the endings of a
    :class:`~orion.write_session.session.WriteSession` (a mixin)."""

    def content(self) -> bytes:
        """The content as it stands: the journal, with the corrections applied so far."""
        self._take_batch()
        return self._fixed if self._fixed is not None else self.journal.content()

    def finalize(self) -> None:
        """Validate (normalized) content; ask for corrections, or write it. A plugin that fails
        while it normalizes or validates holds the write: nothing is written, the content stays
        in the journal for ``orion sessions recover``, and the user and the model are told which
        plugin failed and where."""
        self.checkpoint()
        try:
            content = self._checked_content()
            if self.issues:
                self._decide(content)
            else:
                self.fire("valid")
        except PluginFailed as exc:
            if self.status != "active":
                raise
            self._failed(exc)

    def _checked_content(self) -> bytes:
        """The content, normalized once, and validated: its issues in ``self.issues``."""
        content = self.content()
        pm = self.runtime.plugins
        if not self._normalized:
            # Once, on the content as it streamed: the correction prompt's line numbers refer
            # to the normalized content, and normalizing it again could shift them.
            self._normalized = True
            normalized = pm.hook.normalize_content(path=self.plan.relative, content=content)
            if normalized is not None and normalized != content:
                content = normalized
                self._fixed = content
                self._trace(Kind.VALIDATION_ISSUE, "content normalized", {
                    "orion.code": "normalized", "orion.bytes.before": len(self.journal.content()),
                    "orion.bytes.after": len(content)})
        # The streamed checks saw the journal's bytes: they hold for content that is still those.
        streamed = self._streamed if self._fixed is None else None
        self.issues = validate_write(pm, self.plan, content, dict(self.lifecycle.settings),
                                     streamed=streamed)
        for issue in self.issues:
            self._trace(Kind.VALIDATION_ISSUE, f"issue {issue.code}", {
                "orion.line": issue.line, "orion.column": issue.column,
                "orion.code": issue.code, "orion.message": issue.message})
        return content

    def _decide(self, content: bytes) -> None:
        """Issues were found in ``content``: a correction round, or the last resort."""
        pm = self.runtime.plugins
        rounds, limit = (self.lifecycle.context.get("corrections", 0),
                         self.lifecycle.settings["max_corrections"])
        if rounds < limit:
            # The prompt quotes the lines: it reaches the action through the context (kept in
            # the journal's snapshot), not the traced payload.
            self.lifecycle.context["correction_prompt"] = correction_prompt(
                self.issues, content, rounds + 1, limit, path=self.plan.relative)
            self._trigger("issues_found", issues=[
                {"line": i.line, "column": i.column, "code": i.code} for i in self.issues])
            return
        blocking = [issue for issue in self.issues if issue.blocking]
        if blocking:  # a rule, not bytes: no replacement makes it hold, so nothing is written
            self._blocked(blocking, limit)
            return
        repaired, replaced = safe_replacement(content, self.lifecycle.settings.get(
            "safe_replacement", ""))
        self._fixed, self.replaced = repaired, len(replaced)
        self.remaining = validate_write(pm, self.plan, repaired, dict(self.lifecycle.settings))
        self.runtime.reporter.notice(
            f"{len(self.issues)} issue(s) left after {limit} correction rounds; the safe "
            f"replacement changed {len(replaced)} place(s)"
            + (f", {len(self.remaining)} issue(s) remain in the written file"
               if self.remaining else ""))
        self.fire("issues_found", issues=[])

    def _corrections(self, reply: str) -> None:
        corrections, problems = parse_corrections(reply)
        fixed = apply_corrections(self.content(), corrections)
        self._fixed = fixed.content
        self._trace(Kind.VALIDATION_ISSUE, "corrections received", {
            "orion.corrections": len(corrections), "orion.unparsed": len(problems),
            "orion.out_of_range": list(fixed.out_of_range)})
        self._trigger("corrections_received")
        self.finalize()

    # -- the write -----------------------------------------------------------------------------

    def write(self) -> WriteResult:
        """Run by the ``finalize`` action: the plan, executed once, atomically."""
        content = self.content()
        mark(self.journal.directory, "finalizing")  # a crash from here on is repaired at start
        self.journal.flush(self._journal_state(finalizing=True))
        result = execute(self.plan, content, state_dir=self.runtime.state_dir,
                         session_id=self.id)
        self.result = result
        from orion.write_session.manager import manager_for
        manager_for(self.runtime).wrote(result)
        if self.lifecycle.context.get("status") == "incomplete":
            self.status = WriteStatus.INCOMPLETE
        elif self.aside.pending:
            self.status = WriteStatus.WRITTEN_WITH_SET_ASIDE
        else:
            self.status = WriteStatus.WRITTEN
        report = result.report
        if self.status is WriteStatus.INCOMPLETE:
            reason = self.lifecycle.context.get("incomplete_reason") or "the output was cut off"
            report += f" (incomplete: {reason})"
        report += self._set_aside_report()
        if self.replaced:
            report += f"; the safe replacement changed {self.replaced} place(s)"
        if self.remaining:
            shown = "; ".join(str(issue) for issue in self.remaining[:3])
            more = len(self.remaining) - 3
            report += (f"; {len(self.remaining)} issue(s) remain after "
                       f"{self.lifecycle.settings['max_corrections']} correction rounds: {shown}"
                       + (f" (and {more} more)" if more > 0 else ""))
        self.report = report
        return result

    def _set_aside_report(self) -> str:
        """``; 3 lines set aside, not written: part 1 (...) after DONE; ...``: what the report
        says of the text set aside, with the figures the user saw, and how to get it."""
        pending = self.aside.pending
        if not pending:
            return ""
        lines = sum(part.lines for part in pending)
        parts = "; ".join(f"{part.describe()} {part.why}" for part in pending)
        return (f"; {lines} line{'s' if lines != 1 else ''} set aside, not written: {parts}. "
                f"`orion sessions show {self.id[:8]}` prints them; if they belong in "
                f"{self.plan.relative}, write them with WritePlanTool_begin")

    def after_write(self) -> None:
        """The target is written: tell the model and the user, shrink the history, clean up."""
        result = self.result
        assert result is not None
        self._trace(Kind.WRITE_REPORT, f"wrote {result.relative}", {
            "orion.target": result.relative, "orion.operation": self.plan.plan.operation.value,
            "orion.status": self.status, "orion.bytes": result.bytes,
            "orion.lines": result.lines, "orion.sha256": result.sha256,
            "orion.backup": bool(result.backup), "orion.continuations":
            self.lifecycle.context.get("continuations", 0), "orion.corrections":
            self.lifecycle.context.get("corrections", 0), "orion.degraded": self.journal.degraded,
            "orion.set_aside.lines": self.aside.lines})
        self._shrink_history(f"[wrote {result.relative}: {result.lines} lines, sha256 "
                             f"{result.sha256[:12]}]", f"[continued: {result.relative}]")
        self.runtime.inject(self._with_news(self.report))
        self._deliver_held()
        self._record_undo(result)
        self._archive_set_aside()
        self.journal.remove()
        self._detach()

    def _shrink_history(self, reference: str, continued: str) -> None:
        """Replace the streamed content in the conversation by a one-line reference: the file
        holds it now, and sending it with every request would only cost tokens. Text after the
        terminator line stays, after the reference."""
        commentary = self.marker.commentary.strip()
        for i, message in enumerate(self.messages):
            message.content = reference if i == 0 else continued
            if commentary and message is self._commentary_message:
                message.content += "\n\n" + commentary

    def _record_undo(self, result: WriteResult) -> None:
        """What ``orion sessions undo`` needs once the journal is gone: the target, the hash
        it was written with, and the pre-image (none for a created file). The write is done
        when this runs: a disk that refuses the record costs only the undo, and says so."""
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

    def _archive_set_aside(self) -> None:
        """The journal goes: its text set aside stays where ``orion sessions show`` finds it."""
        if self.aside.parts and self.aside.archive(self.runtime.state_dir, self.id,
                                                   self.plan.relative) is None:
            self.runtime.reporter.notice(
                f"write session {self.id[:8]}: the text set aside could not be kept in "
                f"{self.runtime.state_dir / 'set_aside'}; it is in this conversation's history")

    # -- endings without a write ---------------------------------------------------------------

    def _failed(self, cause: BaseException) -> None:
        self.status = WriteStatus.FAILED
        reason = str(cause).rstrip().rstrip(".")
        short = self.id[:8]
        kept = self._keep_content()
        if kept is None:
            saved = (f"The content is saved in write session {short}; "
                     f"`orion sessions recover {short} --finalize` writes it")
            saved += (" onto the file as it is now" if isinstance(cause, TargetChanged)
                      else " once the problem is fixed")
        elif kept.startswith("/"):
            saved = (f"The write session's journal could not be saved ({self.journal.degraded})"
                     f", so the content ({self.journal.lines} lines) was written to {kept} "
                     "instead; copy it from there")
        else:
            saved = (f"The content ({self.journal.lines} lines) could not be saved anywhere "
                     f"({kept}); it is lost when this process ends")
        retry = (" To retry, read the file again and call WritePlanTool_begin with a new plan."
                 if isinstance(cause, TargetChanged) else "")
        message = (f"{self.plan.relative} is held, not written: {reason}. {saved}."
                   if isinstance(cause, GuardError) else
                   f"Could not write {self.plan.relative}: {reason}. {saved}.{retry}")
        self.runtime.reporter.notice(message)
        self._trace(Kind.ERROR, "write failed", {"orion.where": "write session",
                                                 "orion.error": str(cause)})
        self.runtime.inject(self._with_news(message))
        self._deliver_held()
        self.journal.close()
        self._detach()

    def _blocked(self, blocking: list[Issue], rounds: int) -> None:
        """Issues that block the write remain after the last correction round: the target is
        not written, the content stays in the journal (``orion sessions`` lists the session as
        ``blocked``, with the issues), and the model and the user are told why."""
        self.status = WriteStatus.BLOCKED
        shown = "; ".join(f"line {i.line}: {i.message} [{i.code}]" for i in blocking[:3])
        more = f" (and {len(blocking) - 3} more)" if len(blocking) > 3 else ""
        self.journal.flush({**self._journal_state(), "blocked": [str(i) for i in blocking]})
        kept = self._keep_content()
        where = (f"its content stays in write session {self.id[:8]} (`orion sessions list` "
                 f"shows it; fix {self.journal.directory / CONTENT} and `orion sessions "
                 f"recover {self.id[:8]} --finalize` writes it, or `orion sessions discard "
                 f"{self.id[:8]}`)") if kept is None else self._unsaved("was blocked", kept)
        message = (f"{self.plan.relative} was not written: {len(blocking)} issue(s) that block a "
                   f"write remain after {rounds} correction rounds: {shown}{more}. The file is "
                   f"as it was; {where}.")
        if self.aside.pending:
            message += self._set_aside_report()
        self.runtime.reporter.notice(message)
        self._trace(Kind.WRITE_REPORT, f"blocked {self.plan.relative}", {
            "orion.target": self.plan.relative, "orion.status": "blocked",
            "orion.issues": len(blocking), "orion.code": blocking[0].code})
        self.runtime.inject(self._with_news(message))
        self._deliver_held()
        self.journal.close()
        self._detach()

    def _keep_content(self) -> str | None:
        """Make sure the content survives the failed write: None when the journal holds all
        of it on disk; else the path of a rescue file it was written to, or (no path) why
        nothing could hold it."""
        if self.journal.secure():
            return None
        places = [self.runtime.state_dir / "rescued", Path(tempfile.gettempdir()),
                  Path.home()]
        try:
            rescued = self.journal.rescue(places, f"{self.id[:8]}-{self.plan.target.name}")
        except OSError as exc:
            return f"{exc.strerror or exc}"
        return str(rescued)

    def _abandon_unless_held(self, why: str) -> None:
        """Orion itself found that no content arrived (FS-14): that is read from the journal,
        never from the last message alone, and a journal that holds content is kept."""
        if self._journal_holds_something():
            self._keep_instead(why)
        else:
            self._abandon(why)

    def _abandon(self, why: str) -> None:
        """The chart ended the session without a write because a plugin or the user asked (a
        team's ``/reject``): their decision stands, and the journal goes."""
        self.status = WriteStatus.ABANDONED
        message = f"The write session for {self.plan.relative} was abandoned: {why}."
        if self.aside.pending:
            message += self._set_aside_report()
        self.runtime.reporter.notice(message)
        self._trace(Kind.WRITE_REPORT, f"abandoned {self.plan.relative}", {
            "orion.target": self.plan.relative, "orion.status": "abandoned", "orion.why": why})
        self.runtime.inject(self._with_news(message))
        self._deliver_held()
        self._archive_set_aside()
        self.journal.remove()
        self._detach()

    def _journal_holds_something(self) -> bool:
        """Whether the session's content holds anything but blanks (FS-13), counted from the
        journal (its file once it is closed), never from the last message alone. (Text set
        aside goes to the archive and held messages to the conversation when a session is
        abandoned: neither is lost.)"""
        if not self.journal.closed:
            return bool(self.journal.content().strip())
        try:
            return bool(read_private(self.journal.content_path).strip())
        except OSError:
            return self.journal.bytes > 0

    def _keep_instead(self, why: str) -> None:
        """The statechart ended the session without a write, but its journal holds content:
        it is kept as an orphan with its recover line, never removed."""
        self.status = WriteStatus.SET_ASIDE
        self.runtime.reporter.progress_done()
        if not self.journal.closed:
            self.checkpoint()
            self.journal.close()
        short = self.id[:8]
        aside = f", {self.aside.lines} lines set aside" if self.aside.pending else ""
        self.runtime.reporter.notice(
            f"write session {short} for {self.plan.relative} ended without a write ({why}), "
            f"but its journal holds {self.journal.lines} lines{aside}: it is kept, "
            f"`orion sessions recover {short} --continue` lets the next orion run or orion "
            "chat finish it, `--finalize` writes what was saved")
        self._trace(Kind.WRITE_REPORT, f"kept {self.plan.relative}", {
            "orion.target": self.plan.relative, "orion.status": "set_aside", "orion.why": why,
            "orion.lines": self.journal.lines, "orion.bytes": self.journal.bytes})
        # The chart's decision stands (a user's /reject, a plugin's abandon): the model is told
        # and the session reads as abandoned; only its journal outlives it, for recovery.
        self.status = WriteStatus.ABANDONED
        self.runtime.inject(self._with_news(
            f"The write session for {self.plan.relative} was abandoned: {why}. Nothing was "
            f"written; its {self.journal.lines} saved lines are kept for the user to recover."))
        self._detach()

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
        self._trace(Kind.WRITE_REPORT, f"set aside {self.plan.relative}", {
            "orion.target": self.plan.relative, "orion.status": "set_aside", "orion.why": why,
            "orion.lines": self.journal.lines, "orion.bytes": self.journal.bytes})
        held = len(self.held_messages)
        kept_too = (f"; {held} message(s) you typed meanwhile are kept with it and sent once "
                    "it is continued with --continue" if held else "")
        if kept is None:
            self.runtime.reporter.notice(
                f"write session {self.id[:8]} for {self.plan.relative} was set aside ({why}); "
                f"its {self.journal.lines} lines are kept: `orion sessions recover "
                f"{self.id[:8]} --finalize` writes them, `--continue` lets the next run go on "
                "with the model" + kept_too)
        else:
            self.runtime.reporter.notice(self._unsaved(f"was set aside ({why})", kept)
                                         + kept_too)
        self.held_messages = []  # they belong to the conversation that was reset
        self._detach()

    def _keep_unread_start(self) -> None:
        """The process ends while the start of a reply to Orion's prompt is held unread (it
        was not yet known whether it goes on from the saved content or starts the file
        over): it is set aside as a part, so every line that arrived is kept and counted."""
        if self._mode != "hold" or not self._held:
            return
        text = "".join(self._held)
        self._held, self._mode = [], "ignore"
        if text.strip():
            self.aside.add(UNREAD_REPLY, text.encode("utf-8", "surrogateescape"),
                           self.journal.bytes)

    def release(self) -> None:
        """The process ends with the session open: close the journal, so the next start sees
        an orphan; content the journal could not save goes to a rescue file, and the user is
        told where (or that it could not be saved anywhere)."""
        try:
            self._take_batch()
            if self.status is WriteStatus.ACTIVE:
                self._keep_unread_start()
                self.checkpoint()  # with the held messages
                if self.journal.degraded is not None:
                    kept = self._keep_content()
                    if kept is not None:
                        self.runtime.reporter.notice(
                            self._unsaved("is still open as Orion ends", kept))
        finally:
            self.journal.close()
            # The process ends: nothing that comes after (a reply still streaming) may act on
            # a session whose journal is closed (end_message checks it too).
            self._stop_listening()

    def _unsaved(self, what: str, kept: str) -> str:
        where = (f"its content ({self.journal.lines} lines) was written to {kept}"
                 if kept.startswith("/") else
                 f"its content ({self.journal.lines} lines) could not be saved anywhere "
                 f"({kept})")
        return (f"write session {self.id[:8]} for {self.plan.relative} {what}; its journal "
                f"could not be saved ({self.journal.degraded}), so {where}")
