"""One write session, from ``WritePlanTool_begin`` to the target written once.

The session owns a ``write_session`` lifecycle (the statechart decides what may happen next), a
journal (the content on disk, for crash recovery) and an end-marker scanner. Streamed text
reaches :meth:`WriteSession.feed` on the hot path: plain code, no statechart trigger per chunk.
Only message boundaries become triggers: ``content``, ``message_end``, ``truncated``, ``done``,
``circular``, ``issues_found``, ``corrections_received`` and ``valid``.
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orion.errors import ActionError, OrionError
from orion.models.events import CONNECTION_LOST, Finish
from orion.write_session.progress import Progress
from orion.trace.events import Kind, TraceEvent
from orion.validation import Issue, StreamedLines, ValidationRequest, collect_issues
from orion.write_session.journal import ENCODING_ERRORS, Journal, mark
from orion.write_session.operations import (TargetChanged, WriteResult, apply_operation,
                                            execute)
from orion.write_session.plan import (CheckedPlan, Operation, line_ending, match_plan,
                                      split_bom)
from orion.write_session.protocol import EndMarker
from orion.write_session.undo import write_undo_record
from orion.write_session.repair import (LINE_BREAK, apply_corrections, correction_prompt,
                                        line_spans, parse_corrections, safe_replacement,
                                        text_lines)

if TYPE_CHECKING:
    from orion.runtime.conversation import Message
    from orion.runtime.runtime import Runtime
    from orion.statechart.lifecycle import Lifecycle

#: How much of a message's start is held back, and looked at, before deciding what it is: a
#: reply that is only DONE, a continuation that repeats the saved tail (the repeat is dropped)
#: or one that starts the file over. The decision reads exactly this prefix (or the whole
#: message when it is shorter), so it does not depend on how the stream was chunked.
OVERLAP_PROBE_CHARS = 1024
#: Content that arrives faster than it is taken in is taken in batches of about this many
#: characters: the end marker and the journal cost mostly per call (see WriteSession.feed).
FEED_BATCH_CHARS = 4096
#: A content message's chunks are not kept (the journal has them): only its last ones, at most
#: TAIL_CHUNKS, cut back to TAIL_KEEP, for the checks of how the message ends (its last line).
TAIL_CHUNKS = 64
TAIL_KEEP = 32
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
_monotonic = time.monotonic  # looked up once: the live line's clock, read on the hot path
# In asyncio.__all__ despite its underscore: the running loop or None, without the exception
# get_running_loop() raises outside a loop (a microsecond a chunk when feed runs outside one).
_running_loop = asyncio._get_running_loop


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
        self._held: list[str] = []  # text held back at a message start (a reply, a continuation)
        self._held_size = 0
        self._mode = "content"
        # Content chunks not taken in yet (see feed): their characters and line breaks.
        self._batch: list[str] = []
        self._batch_chars = 0
        self._batch_lines = 0
        self._batch_error: BaseException | None = None
        self._last_live = 0.0
        self._fixed: bytes | None = None  # the content after normalizing and corrections
        self._normalized = False  # normalize_content runs once, on the content as streamed
        self._bytes_at_start = 0  # the journal's size when the current message started
        self._circular = False  # the current message started the file over
        self._commentary_message: Message | None = None  # the message whose DONE ended it
        self._reply = False  # the current message answers a prompt of Orion's
        self._marker_at_start: tuple | None = None  # the end marker before this message
        #: Messages the user typed while the session was open: sent once it ends.
        self.held_messages: list[str] = []
        self.discarded_lines = 0  # lines after the terminator that were not written
        # The line checks run on the content as it streams, so a large write is checked before
        # DONE arrives. Edits are checked as the file after the edit (see validate_write).
        self._streamed = self._new_streamed()
        self.report = ""
        # A journal that cannot write to disk (full, read-only) goes on in memory: say so once.
        if journal.degraded is not None:
            self._degraded(journal.degraded)
        elif getattr(journal, "_on_degraded", None) is None:
            journal._on_degraded = self._degraded

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
            self.journal.degraded, [str(i) for i in self.issues])

    # -- the hot path -------------------------------------------------------------------------

    def feed(self, text: str) -> bool:
        """A text delta of the model's reply while this session is open. Returns True when it
        is the file's content: the journal keeps it, so the model system does not keep a copy,
        and :meth:`end_message` gives the message its content in the history (a reference to
        the saved lines, or the text itself when it was not content after all).

        Inside an event loop, content is taken in (end marker, journal, line checks) in
        batches: the chunks that arrive before the loop goes round, cut at
        ``FEED_BATCH_CHARS`` characters and at the journal's next automatic flush, so the
        journal saves at the same lines as chunk by chunk. A stream that arrives in bursts is
        taken in with a call per burst instead of a call per chunk; one that trickles, chunk
        by chunk in the pass of the loop it arrived in. Whatever reads or changes the
        session's state takes the batch in first (see :meth:`_take_batch`)."""
        if not self._in_message:
            self._start_message()
        kept = self._message_text
        kept.append(text)
        mode = self._mode
        if mode == "content":
            if len(kept) > TAIL_CHUNKS:
                del kept[:-TAIL_KEEP]
                self._message_cut = True
            if self._claimed_from < 0:
                self._claimed_from = self._content_end()
            batch = self._batch
            if not batch:
                if self._batch_error is not None:
                    self._raise_batch_error()
                loop = _running_loop()
                if loop is None:  # called outside a loop: nothing would take a batch in
                    self._take_in(text)
                    return True
                loop.call_soon(self._take_batch_soon)
            batch.append(text)
            self._batch_chars += len(text)
            self._batch_lines += text.count("\n")
            if self._batch_chars >= FEED_BATCH_CHARS \
                    or self._batch_lines >= self.journal.lines_to_flush:
                self._take_batch()
            return True
        if mode == "hold":
            self._held.append(text)
            self._held_size += len(text)
            if self._held_size >= OVERLAP_PROBE_CHARS:
                self._release()
        # mode "corrections" and "ignore": the text is kept in _message_text only
        return False

    def _content_end(self) -> int:
        """Where the next content fed would start in the journal: after the bytes journaled
        and the partial line the end marker still holds."""
        pending = self.marker.pending
        return self.journal.bytes + (len(pending.encode("utf-8", ENCODING_ERRORS))
                                     if pending else 0)

    def _take_in(self, text: str) -> None:
        """Content text through the end marker into the journal, with the checks that follow
        new lines."""
        content = self.marker.feed(text)
        if content:
            size = self.journal.append(content)
            if "\n" in content:
                if _monotonic() - self._last_live >= LIVE_LINE_INTERVAL_S:
                    self._live()
                streamed = self._streamed
                if streamed is not None and streamed.due(size):
                    streamed.check(self.journal.read(streamed.checked))

    def _take_batch(self) -> None:
        """Take in the content chunks fed since the last batch (see :meth:`feed`)."""
        batch = self._batch
        if not batch:
            return
        text = batch[0] if len(batch) == 1 else "".join(batch)
        self._batch, self._batch_chars, self._batch_lines = [], 0, 0
        self._take_in(text)

    def _take_batch_soon(self) -> None:
        # Run by the event loop, outside the turn: an error surfaces at the next feed or
        # message end, where it would have been raised without batching.
        try:
            self._take_batch()
        except Exception as exc:  # noqa: BLE001 - re-raised by _raise_batch_error
            self._batch_error = exc

    def _raise_batch_error(self) -> None:
        exc, self._batch_error = self._batch_error, None
        if exc is not None:
            raise exc

    def _start_message(self) -> None:
        self._take_batch()  # the previous message's, if it never ended (a failed request)
        self._in_message = True
        self._message_text, self._message_cut, self._claimed_from = [], False, -1
        self._bytes_at_start = self.journal.bytes
        self._circular = False
        self.marker.new_message()
        self._marker_at_start = self.marker.save()
        has_tag = self.lifecycle.has_tag
        self._reply = has_tag("continuing") or has_tag("paused")
        if self._reply:
            self._mode, self._held, self._held_size = "hold", [], 0
        elif has_tag("correcting"):
            self._mode = "corrections"
        elif has_tag("receiving"):
            self._mode = "content"
        else:
            self._mode = "ignore"

    def _release(self) -> None:
        """Decide what the held start of a message is, then pass it on as content."""
        held = "".join(self._held)
        self._held, self._held_size = [], 0
        # A reply to the idle prompt repeats the saved tail as often as a continuation does.
        stripped = self._strip_overlap(held)
        if stripped is None:
            if "circular" in self.lifecycle.allowed_triggers():
                self._mode = "ignore"
                self._circular = True
                self._trigger("circular", lines=self.journal.lines, bytes=self.journal.bytes)
                return
            stripped = held
        held = stripped
        self._trigger("content")
        self._mode = "content"
        content = self.marker.feed(held)
        if content:
            self.journal.append(content)

    def _strip_overlap(self, text: str) -> str | None:
        """The continuation without what repeats the saved content's tail; ``None`` when it
        starts the file over (a circular continuation)."""
        # Only the first OVERLAP_PROBE_CHARS characters decide, whatever else is held: the
        # same message gives the same answer however it was chunked.
        window = text[:OVERLAP_PROBE_CHARS]
        content = self.journal.content()
        saved = content[-OVERLAP_PROBE_CHARS * 4:].decode("utf-8", "replace")
        head = content[:RESTART_PROBE_CHARS].decode("utf-8", "replace")
        probe = window.lstrip()
        n = min(len(probe), len(head))
        if n >= MIN_RESTART_CHARS and probe[:n] == head[:n] and len(content) > 2 * n:
            return None
        for size in range(min(len(saved), len(window)), 0, -1):
            if not saved.endswith(window[:size]):
                continue
            whole_lines = window[size - 1] == "\n" and (size == len(saved) or
                                                        saved[-size - 1] == "\n")
            if size >= MIN_OVERLAP_CHARS or whole_lines and size >= 4:
                return text[size:]
            break
        return text

    def _degraded(self, reason: str) -> None:
        self.runtime.reporter.notice(
            f"write session {self.id[:8]}: cannot save {self.plan.relative}'s content to disk "
            f"({reason}); it is kept in memory and still written when complete, but a crash "
            "now would lose it")
        self._trace(Kind.ERROR, "journal in memory only", {
            "orion.where": "write session journal", "orion.error": reason})

    def _live(self) -> None:
        """Update the live line (the caller checked that LIVE_LINE_INTERVAL_S has passed)."""
        self._last_live = time.monotonic()
        self.runtime.reporter.progress(self.progress())

    def progress(self) -> Progress:
        self._take_batch()
        return Progress(self.plan.relative, self.journal.lines, self.journal.bytes, self.state,
                        self.lifecycle.context.get("continuations", 0),
                        self.lifecycle.settings["max_continuations"])

    # -- message boundaries -------------------------------------------------------------------

    def end_message(self, finish: Finish, message: Message | None, *,
                    tool_calls: bool = False) -> None:
        """The model's message ended: turn what it said into the session's next step.

        A message with only tool calls (no text) does not touch the session; an empty message
        without tool calls is a message boundary like any other (a pause, or truncation). The
        rules of what is content are in docs/write-sessions.md ("What is content")."""
        self._take_batch()
        self._raise_batch_error()
        if not self._in_message:
            if tool_calls:
                return
            self._start_message()
        self._in_message = False
        self.lifecycle.context["asked"] = False  # the reply to a prompt (if any) has ended
        # A content message can be megabytes: only replies to Orion's prompts and corrections
        # join their text (they are short, or rare).
        text = "".join(self._message_text) if self._mode in ("hold", "corrections") else ""
        if self._mode == "hold":
            if text.strip() == self.terminator:  # a reply that is only DONE
                self._mode = "content"
                self.marker.done = True
            elif text.strip():
                if tool_calls:  # narration: the session waits on as it was
                    self._not_content("narration", text)
                    self.checkpoint()
                    return
                if not (finish.truncated or self._reply_is_content(text)):
                    self._not_content("reply", text)
                    self.checkpoint()
                    self._pause(finish, grew=False)
                    return
                self._release()
            # an empty (or blank) reply adds nothing: the message only ends
        if self._mode == "corrections":
            self._corrections(text)
            return
        if self._mode == "content":
            rest = self.marker.end_message()
            if rest:
                self.journal.append(rest)
            if self._done_in_open_fence():
                self.marker.done = True
            elif self.marker.done:
                later = self.marker.reclaim()  # earlier DONE lines of the document
                if later:
                    self.journal.append(later)
        done = self.marker.done
        if tool_calls and not done and self._mode != "ignore":
            # Text beside a tool call is narration ("Let me check the notes first."): it stays
            # in the history, never in the file. The session goes on as it was.
            if self._claimed_from >= 0 and message is not None:
                # The text the model system did not keep, from the journal, before it is taken
                # back out: the history keeps what the model said.
                message.content = text = self._sent_text(
                    message.content, self._claimed_from, self.journal.bytes, done=False)
            self._not_content("narration", text or "".join(self._message_text))
            self.checkpoint()
            return
        probable_cut = False
        if not done and not finish.truncated and self._mode == "content" \
                and self.journal.bytes > self._bytes_at_start:
            # A reply to Orion's prompt that got here is longer than the held start, which an
            # answer ("Yes, I am done.") is not: it is content, like any other message.
            probable_cut = _ends_mid_line(self._message_text)
        grew = self.journal.bytes > self._bytes_at_start
        if message is not None and (grew or self._circular):
            self.messages.append(message)  # replaced by a reference once the file is written
        if message is None or self._claimed_from < 0:
            self._next_step(finish, message, done=done, grew=grew, probable_cut=probable_cut)
            return
        # The model system did not keep the content it handed over. When the file is written
        # now (DONE, valid), the history gets a reference to it and the content never needs
        # to be text again; otherwise the model sees its own words with the next request.
        claimed = (self._claimed_from, self.journal.bytes)
        try:
            self._next_step(finish, message, done=done, grew=grew, probable_cut=probable_cut)
        finally:
            if self.result is None:
                message.content = self._sent_text(message.content, *claimed, done=done)

    def _sent_text(self, before: str | None, start: int, end: int, *, done: bool) -> str:
        """The text of a content message as the model sent it: what came before its content
        (kept by the model system), the content from the journal, then the terminator line
        and what followed it."""
        text = (before or "") + self.journal.content()[start:end].decode("utf-8", "replace")
        if done and not self.marker.in_fence:
            if text and not text.endswith("\n"):
                text += "\n"
            text += self.terminator
            commentary = self.marker.commentary
            if commentary.strip():
                text += "\n" + commentary
        return text

    def _next_step(self, finish: Finish, message: Message | None, *, done: bool, grew: bool,
                   probable_cut: bool) -> None:
        """After a message: finalize (DONE), continue (cut off) or wait (paused)."""
        if self._mode == "ignore":
            if self._circular and self.lifecycle.has_tag("finalizing"):
                self._restarted()
            return
        self.checkpoint()
        if done:
            self._commentary_message = message
            self._note_commentary()
            self.runtime.reporter.progress_done()
            self._trigger("done")
            self.finalize()
        elif finish.truncated or probable_cut:
            if grew:
                self.lifecycle.context["idle_prompts"] = 0
            self._truncated(finish if finish.truncated else None)
        else:
            self._pause(finish, grew=grew)

    def _pause(self, finish: Finish, *, grew: bool) -> None:
        """The message ended without the terminator and was not cut off: wait (the idle
        prompt follows), unless ``max_idle_prompts`` prompts got nothing new."""
        context = self.lifecycle.context
        if grew:
            context["idle_prompts"] = 0
        self._trigger("message_end")
        limit = self.lifecycle.settings.get("max_idle_prompts")
        if not grew and limit is not None and context.get("idle_prompts", 0) >= limit \
                and "idle_exhausted" in self.lifecycle.allowed_triggers():
            self._idle_exhausted(limit)

    def _reply_is_content(self, text: str) -> bool:
        """Whether a short reply to Orion's prompt (shorter than the held start, 1024
        characters), ended with finish reason stop, is content: only when it has the
        terminator line. Anything else that short is an answer ("I have finished writing the
        file.", "Yes, I am done.")."""
        probe = EndMarker(self.terminator)
        probe.restore(self.marker.save())
        probe.feed(text)
        probe.end_message()
        return probe.done

    def _not_content(self, kind: str, text: str) -> None:
        """Take the current message back out of the content: ``kind`` is ``narration`` (text
        beside a tool call) or ``reply`` (a reply to Orion's prompt that was not content). It
        stays in the history; the trace and the user are told."""
        if self.journal.bytes > self._bytes_at_start:
            self.journal.truncate(self._bytes_at_start)
            streamed = self._streamed
            if streamed is not None and streamed.checked > self._bytes_at_start:
                self._streamed = self._new_streamed()  # its pieces covered the removed bytes
        if self._marker_at_start is not None:
            self.marker.restore(self._marker_at_start)
        said = text.strip()
        if not said:
            return
        lines = len(said.splitlines())
        count = f"{lines} line{'s' if lines != 1 else ''}"
        if kind == "narration":
            why = "text beside a tool call is not content"
            self.runtime.reporter.notice(
                f"write session {self.id[:8]}: the text beside the tool call ({count}) was not "
                f"written to {self.plan.relative}")
        else:
            why = f"a reply to Orion's prompt without a line {self.terminator}"
            self.lifecycle.context["unwritten_reply"] = True
            self.runtime.reporter.notice(
                f"write session {self.id[:8]}: the reply did not end with a line "
                f"{self.terminator}, so it was not written to {self.plan.relative} ({count}); "
                "it is kept in the trace")
        self._trace(Kind.WRITE_REPORT, f"{kind} not written", {
            "orion.target": self.plan.relative, "orion.why": why,
            "orion.commentary": said, "orion.commentary.chars": len(said)})

    def _idle_exhausted(self, limit: int) -> None:
        """``max_idle_prompts`` idle prompts got no new content and no terminator: write what
        was saved, marked incomplete (nothing saved: abandon)."""
        lines, size = self.journal.lines, self.journal.bytes
        reason = f"no {self.terminator} after {limit} idle prompts"
        self.lifecycle.context["incomplete_reason"] = reason
        self._trigger("idle_exhausted", bytes=size, lines=lines,
                      blank=not self.journal.content().strip())
        self.runtime.reporter.progress_done()
        if self.lifecycle.has_tag("finalizing"):
            self.runtime.reporter.notice(
                f"{reason}: writing {self.plan.relative} as incomplete ({lines} lines)")
            self._trace(Kind.ERROR, "write incomplete", {
                "orion.where": "write session", "orion.error": f"{reason}; the file is "
                f"written incomplete ({lines} lines)"})
            self.finalize()
        elif self.lifecycle.has_tag("abandoned"):
            self._abandon(f"no content arrived and {reason}")

    def _done_in_open_fence(self) -> bool:
        """A message whose last line is the terminator, but which ends inside a fenced block.

        Models wrap a file in a code fence and do not always close it, or nest blocks in a
        wrapper that is not marked as Markdown (where fences do not nest), so the terminator
        line falls inside a block. A message that ends with the terminator line inside an open
        fence meant the end: the line is taken off the content (it was journaled as content)
        and the session ends as with DONE. The content keeps the fences; ``unwrap_fence``
        reads them."""
        if self.marker.done or not self.marker.in_fence:
            return False
        if _last_line(self._message_text, self._message_cut).strip(" \t\r") \
                != self.terminator:
            return False
        content = self.content()
        body = content.rstrip(b" \t\r\n")
        if not body.endswith(self.terminator.encode()):
            return False
        self._fixed = body[:body.rfind(b"\n") + 1]
        return True

    def _restarted(self) -> None:
        """The continuation started the file over: stop continuing and write what was saved
        before it, once, as incomplete."""
        lines = self.journal.lines
        self.runtime.reporter.progress_done()
        self.runtime.reporter.notice(
            f"the continuation started {self.plan.relative} over; writing the {lines} lines "
            "saved before it, as incomplete")
        self._trace(Kind.ERROR, "circular continuation", {
            "orion.where": "write session", "orion.error": "the continuation repeated the "
            f"start of the content; the file is written incomplete ({lines} lines)"})
        self.finalize()

    def _truncated(self, finish: Finish | None = None) -> None:
        """The output was cut off: ``finish`` says how (``None``: the message ended in the
        middle of a line without the terminator, a probable cut-off whatever its reason)."""
        lines, size = self.journal.lines, self.journal.bytes
        if finish is None:
            self.runtime.reporter.notice(
                f"the reply ended in the middle of a line without {self.terminator}: taken as "
                "cut off")
        elif finish.raw == CONNECTION_LOST:
            self.runtime.reporter.notice("the connection broke in the middle of the reply: "
                                         "what arrived is kept, taken as cut off")
        before = self.lifecycle.context.get("continuations", 0)
        # The quoted lines go through the context, not the payload: transition payloads are
        # traced, and a trace never holds content.
        self.lifecycle.context["last_lines"] = self.journal.tail_lines(QUOTED_LINES)
        blank = not self.journal.content().strip()
        self._trigger("truncated", bytes=size, lines=lines, blank=blank)
        self.lifecycle.context.pop("last_lines", None)
        if self.lifecycle.has_tag("continuing"):
            n = self.lifecycle.context["continuations"]
            limit = self.lifecycle.settings["max_continuations"]
            saved = "received, in memory only" if self.journal.degraded else "saved"
            self.runtime.reporter.notice(f"part {before + 1} {saved} ({lines} lines), "
                                         f"continuing {n}/{limit}")
            self.runtime.reporter.progress(self.progress())
        elif self.lifecycle.has_tag("finalizing"):
            self.runtime.reporter.progress_done()
            self.runtime.reporter.notice(
                f"continuations used up ({before}/{self.lifecycle.settings['max_continuations']})"
                f": writing {self.plan.relative} "
                f"as incomplete ({lines} lines)")
            self._trace(Kind.ERROR, "write incomplete", {
                "orion.where": "write session", "orion.error": "output still cut off after "
                f"{before} continuations; the file is written incomplete"})
            self.finalize()
        elif self.lifecycle.has_tag("abandoned"):
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
        self._take_batch()
        return self._fixed if self._fixed is not None else self.journal.content()

    def finalize(self) -> None:
        """Validate (normalized) content; ask for corrections, or write it. This is the
        internal ``finalizeSession``: the model never calls it."""
        self.checkpoint()
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
        if not self.issues:
            self.fire("valid")
            return
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

    # -- for the states a team adds to the statechart -------------------------------------------

    def fire(self, trigger: str, **payload: Any) -> str:
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

        Returns the session's status: ``active``, ``written``, ``incomplete``, ``failed`` or
        ``abandoned``. A trigger the current state does not take raises
        :class:`~orion.errors.TriggerNotAllowed`, and the session stays as it was."""
        try:
            self._trigger(trigger, **payload)
        except ActionError as exc:
            cause = exc.cause if isinstance(exc.cause, OrionError | OSError) else exc
            self._failed(cause)
            return self.status
        if self.result is not None:
            self.after_write()
        elif self.lifecycle.finished and self.status == "active":
            self._abandon(str(payload.get("reason") or f"the statechart ended it ({trigger})"))
        return self.status

    def checkpoint(self) -> None:
        """Save the content received so far and the session's state (the lifecycle snapshot,
        the counters, the status) to the journal: what crash recovery restores."""
        self._take_batch()
        self.journal.flush(self._journal_state())

    def write(self) -> WriteResult:
        """Run by the ``finalize`` action: the plan, executed once, atomically."""
        content = self.content()
        mark(self.journal.directory, "finalizing")  # a crash from here on is repaired at start
        self.journal.flush(self._journal_state(finalizing=True))
        result = execute(self.plan, content, state_dir=self.runtime.state_dir,
                         session_id=self.id)
        self.result = result
        from orion.write_session.manager import manager_for
        manager_for(self.runtime).writes.append(result)
        if self.lifecycle.context.get("status") == "incomplete":
            self.status = "incomplete"
        else:
            self.status = "written"
        report = result.report
        if self.status == "incomplete":
            reason = self.lifecycle.context.get("incomplete_reason") or "the output was cut off"
            report += f" (incomplete: {reason})"
        if self.discarded_lines:
            report += f"; {_discarded(self.discarded_lines, self.terminator)}"
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
            self.lifecycle.context.get("corrections", 0), "orion.degraded": self.journal.degraded})
        self._shrink_history(f"[wrote {result.relative}: {result.lines} lines, sha256 "
                             f"{result.sha256[:12]}]", f"[continued: {result.relative}]")
        self.runtime.inject(self.report)
        self._deliver_held()
        self._record_undo(result)
        self.journal.remove()
        self._detach()

    def _shrink_history(self, reference: str, continued: str) -> None:
        """Replace the streamed content in the conversation by a one-line reference: the file
        holds it now, and sending it with every request would only cost tokens. Commentary
        after the terminator line stays, after the reference."""
        commentary = self.marker.commentary.strip()
        for i, message in enumerate(self.messages):
            message.content = reference if i == 0 else continued
            if commentary and message is self._commentary_message:
                message.content += "\n\n" + commentary

    def _failed(self, cause: BaseException) -> None:
        self.status = "failed"
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
        message = f"Could not write {self.plan.relative}: {reason}. {saved}.{retry}"
        self.runtime.reporter.notice(message)
        self._trace(Kind.ERROR, "write failed", {"orion.where": "write session",
                                                 "orion.error": str(cause)})
        self.runtime.inject(message)
        self._deliver_held()
        self.journal.close()
        self._detach()

    def _blocked(self, blocking: list[Issue], rounds: int) -> None:
        """Issues that block the write remain after the last correction round: the target is
        not written, the content stays in the journal (``orion sessions`` lists the session as
        ``blocked``, with the issues), and the model and the user are told why."""
        self.status = "blocked"
        shown = "; ".join(f"line {i.line}: {i.message} [{i.code}]" for i in blocking[:3])
        more = f" (and {len(blocking) - 3} more)" if len(blocking) > 3 else ""
        self.journal.flush({**self._journal_state(), "blocked": [str(i) for i in blocking]})
        kept = self._keep_content()
        where = (f"its content stays in write session {self.id[:8]} (`orion sessions list` "
                 f"shows it; fix {self.journal.directory / 'content.txt'} and `orion sessions "
                 f"recover {self.id[:8]} --finalize` writes it, or `orion sessions discard "
                 f"{self.id[:8]}`)") if kept is None else self._unsaved("was blocked", kept)
        message = (f"{self.plan.relative} was not written: {len(blocking)} issue(s) that block a "
                   f"write remain after {rounds} correction rounds: {shown}{more}. The file is "
                   f"as it was; {where}.")
        self.runtime.reporter.notice(message)
        self._trace(Kind.WRITE_REPORT, f"blocked {self.plan.relative}", {
            "orion.target": self.plan.relative, "orion.status": "blocked",
            "orion.issues": len(blocking), "orion.code": blocking[0].code})
        self.runtime.inject(message)
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

    def _abandon(self, why: str) -> None:
        self.status = "abandoned"
        message = f"The write session for {self.plan.relative} was abandoned: {why}."
        self.runtime.reporter.notice(message)
        self._trace(Kind.WRITE_REPORT, f"abandoned {self.plan.relative}", {
            "orion.target": self.plan.relative, "orion.status": "abandoned", "orion.why": why})
        self.runtime.inject(message)
        self._deliver_held()
        self.journal.remove()
        self._detach()

    def set_aside(self, why: str) -> None:
        """Stop listening without writing or deleting anything (``/reset``: the new
        conversation knows nothing of this session). The journal is flushed and closed with
        the content it holds, so ``orion sessions`` lists the session and ``orion sessions
        recover`` can finish or resume it."""
        self.status = "set_aside"
        self.runtime.reporter.progress_done()
        self.checkpoint()
        kept = self._keep_content()
        self.journal.close()  # its saved state keeps the snapshot of the open session
        self.lifecycle.trigger("discard", reason="set aside")  # ends it here: no timer fires
        self._trace(Kind.WRITE_REPORT, f"set aside {self.plan.relative}", {
            "orion.target": self.plan.relative, "orion.status": "set_aside", "orion.why": why,
            "orion.lines": self.journal.lines, "orion.bytes": self.journal.bytes})
        held = len(self.held_messages)
        self.held_messages = []  # they belong to the conversation that was reset
        dropped = (f"; {held} held message(s) of yours were dropped with the old conversation"
                   if held else "")
        if kept is None:
            self.runtime.reporter.notice(
                f"write session {self.id[:8]} for {self.plan.relative} was set aside ({why}); "
                f"its {self.journal.lines} lines are kept: `orion sessions recover "
                f"{self.id[:8]} --finalize` writes them, `--continue` lets the next run go on "
                "with the model" + dropped)
        else:
            self.runtime.reporter.notice(self._unsaved(f"was set aside ({why})", kept) + dropped)
        self._detach()

    def release(self) -> None:
        """The process ends with the session open: close the journal, so the next start sees
        an orphan; content the journal could not save goes to a rescue file, and the user is
        told where (or that it could not be saved anywhere)."""
        self._take_batch()
        if self.status == "active" and self.journal.degraded is not None:
            kept = self._keep_content()
            if kept is not None:
                self.runtime.reporter.notice(self._unsaved("is still open as Orion ends",
                                                            kept))
        self.journal.close()

    def _unsaved(self, what: str, kept: str) -> str:
        where = (f"its content ({self.journal.lines} lines) was written to {kept}"
                 if kept.startswith("/") else
                 f"its content ({self.journal.lines} lines) could not be saved anywhere "
                 f"({kept})")
        return (f"write session {self.id[:8]} for {self.plan.relative} {what}; its journal "
                f"could not be saved ({self.journal.degraded}), so {where}")

    # -- the user's messages while the session is open -----------------------------------------

    def hold(self, line: str) -> bool:
        """A message the user typed while this session is open. The model's answer to it
        would stream into the file, so it is held and sent once the session ends (written,
        abandoned or failed); meanwhile the model is asked at once whether it is finished.
        Returns whether the message was held."""
        if self.status != "active" or not self.active:
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
        return True

    def _deliver_held(self) -> None:
        held, self.held_messages = self.held_messages, []
        for line in held:
            self.runtime.conversation.add_user(line)

    def _detach(self) -> None:
        if self.feed in self.runtime.text_sinks:
            self.runtime.text_sinks.remove(self.feed)
        if self.hold in self.runtime.user_gates:
            self.runtime.user_gates.remove(self.hold)
        self.runtime.lifecycles.pop(lifecycle_key(self.id), None)

    def _record_undo(self, result: WriteResult) -> None:
        """What ``orion sessions undo`` needs once the journal is gone: the target, the hash
        it was written with, and the pre-image (none for a created file). The write is done
        when this runs: a disk that refuses the record costs only the undo, and says so."""
        try:
            write_undo_record(self.runtime.state_dir, session_id=self.id,
                              relative=result.relative, operation=self.plan.plan.operation.value,
                              sha256=result.sha256, backup=result.backup,
                              written_at_ms=self.runtime.clock.now_ms())
        except OSError as exc:
            self.runtime.reporter.notice(
                f"{result.relative} is written, but its undo record could not be saved "
                f"({exc.strerror or exc}); orion sessions undo cannot undo this write")

    # -- helpers ------------------------------------------------------------------------------

    def _trigger(self, trigger: str, **payload: Any) -> None:
        self.lifecycle.trigger(trigger, **payload)
        self.checkpoint()

    def _journal_state(self, *, finalizing: bool = False) -> dict[str, Any]:
        state: dict[str, Any] = {"snapshot": self.lifecycle.snapshot(),
                                 "continuations": self.lifecycle.context.get("continuations", 0),
                                 "corrections": self.lifecycle.context.get("corrections", 0),
                                 "status": self.status,
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

    def _note_commentary(self) -> None:
        commentary = self.marker.commentary.strip()
        if commentary:
            self._trace(Kind.WRITE_REPORT, "commentary after DONE", {
                "orion.commentary.chars": len(commentary), "orion.commentary": commentary})
            # Never silently: what was not written is counted, for the user and the model.
            self.discarded_lines = len(commentary.splitlines())
            self.runtime.reporter.notice(
                f"{self.plan.relative}: {_discarded(self.discarded_lines, self.terminator)}")

    def _trace(self, kind: str, name: str, attributes: dict[str, Any]) -> None:
        self.runtime.tracer.emit(TraceEvent(kind, name, self.runtime.clock.now_ms(),
                                            self.runtime.conversation.id, self.id, attributes))


def _discarded(lines: int, terminator: str) -> str:
    if lines == 1:
        return (f"1 line after {terminator} was not written; the trace records it as "
                "commentary, by size and hash")
    return (f"{lines} lines after {terminator} were not written; the trace records them as "
            "commentary, by size and hash")


def _ends_mid_line(chunks: list[str]) -> bool:
    """Whether the text ``chunks`` make ends in the middle of a line (trailing spaces and tabs
    aside): a message that stops there without the terminator was probably cut off."""
    for chunk in reversed(chunks):
        tail = chunk.rstrip(" \t")
        if tail:
            return tail[-1] not in "\r\n"
    return False


def _last_line(chunks: list[str], cut: bool = False) -> str:
    """The last non-blank line of the text ``chunks`` make, joining only the chunks it is in.
    ``cut``: earlier chunks were dropped, so a line that starts before the first chunk is
    longer than what is left of it (returned as ``""``: it is not the terminator)."""
    parts: list[str] = []
    filled = False  # a chunk after this one has text that is not blank
    for chunk in reversed(chunks):
        parts.append(chunk)
        if "\n" in (chunk if filled else chunk.rstrip(" \t\r\n")):
            break
        filled = filled or bool(chunk.strip(" \t\r\n"))
    text = "".join(reversed(parts)).rstrip(" \t\r\n")
    if cut and len(parts) == len(chunks) and "\n" not in text:
        return ""
    return text.rsplit("\n", 1)[-1]


# -- validation of a write ---------------------------------------------------------------------


def validate_write(pm: Any, checked: CheckedPlan, content: bytes,
                   settings: dict[str, Any] | None = None, *,
                   streamed: StreamedLines | None = None) -> list[Issue]:
    """The issues of ``content`` for ``checked``'s write, with lines and columns of the
    content (what the model wrote, and what its ``L<line>:`` corrections refer to).

    create and overwrite: the content is the file, and is validated as it is. The edits
    (append, insert, replace_block, replace_all): the content is a fragment, which on its own
    is rarely a valid Python, JSON or YAML file. The file as it will be after the edit is
    validated instead; an issue on a line of the content is moved to that line of the content,
    an issue elsewhere counts only if the file did not have it before the edit (a bracket the
    content leaves open is reported further down) and is shown on the content's nearest line,
    saying where it is in the file.

    ``streamed``: the line checks already run on ``content``'s first pieces as it streamed
    (for a create or an overwrite)."""
    settings = dict(settings or {})
    path = checked.relative
    if checked.plan.operation in (Operation.CREATE, Operation.OVERWRITE):
        return collect_issues(pm, ValidationRequest(path, content, settings), streamed=streamed)
    target = checked.target
    try:
        existing = target.read_bytes()
        after = apply_operation(checked, existing, content)
        start = _content_offset(checked, existing, content)
    except (OSError, OrionError):
        # The file changed under the plan: the write will say so. Judge the content alone.
        return collect_issues(pm, ValidationRequest(path, content, settings))
    found = collect_issues(pm, ValidationRequest(path, after, settings))
    if not found:
        return []
    first = len(LINE_BREAK.findall(after, 0, start)) + 1  # the content's first line in after
    count = max(1, len(line_spans(content)))
    line_begin = max(after.rfind(b"\n", 0, start), after.rfind(b"\r", 0, start)) + 1
    shift = len(after[line_begin:start].decode("utf-8", "replace"))  # replace_all: mid-line
    lines = text_lines(after)
    before: set[tuple[str, str, str]] | None = None
    issues: list[Issue] = []
    for issue in found:
        if first <= issue.line < first + count:
            line = issue.line - first + 1
            column = issue.column - shift if line == 1 else issue.column
            issues.append(Issue(line, max(1, column), issue.code, issue.message,
                                issue.context, issue.blocking))
            continue
        if before is None:
            old = collect_issues(pm, ValidationRequest(path, existing, settings))
            old_lines = text_lines(existing)
            before = {(i.code, i.message, old_lines[i.line - 1] if 0 < i.line <= len(old_lines)
                       else "") for i in old}
        text = lines[issue.line - 1] if 0 < issue.line <= len(lines) else ""
        if (issue.code, issue.message, text) in before:
            continue  # the file had it before this edit
        line = 1 if issue.line < first else count
        issues.append(Issue(line, 1, issue.code, f"{issue.message} (line {issue.line} of "
                            f"{path} after the edit)", issue.context, issue.blocking))
    return sorted(issues, key=lambda i: (i.line, i.column, i.code))


def _content_offset(checked: CheckedPlan, existing: bytes, content: bytes) -> int:
    """Where the (first copy of the) content starts in the file after the edit, in bytes; the
    same rules as :func:`~orion.write_session.operations.apply_operation`."""
    plan = checked.plan
    op = plan.operation
    bom, body = split_bom(existing)
    gap = len(line_ending(body)) if body and not body.endswith(b"\n") and content else 0
    if op is Operation.APPEND:
        return len(existing) + gap
    matches = match_plan(plan, body, checked.relative)
    if op is Operation.INSERT:
        marker = matches["location_marker"]
        at = marker.positions[0]
        if plan.position == "before":
            return len(bom) + body.rfind(b"\n", 0, at) + 1
        end = body.find(b"\n", at + len(marker.needle) - 1)
        return len(bom) + (end + 1 if end != -1 and end + 1 < len(body) else len(body) + gap)
    if op is Operation.REPLACE_BLOCK:
        start = matches["start_marker"]
        end = body.find(b"\n", start.positions[0] + len(start.needle) - 1)
        return len(bom) + (len(body) if end == -1 else end + 1)
    return len(bom) + matches["search"].positions[0]  # replace_all


def session_dir(state_dir: Path, session_id: str) -> Path:
    return state_dir / "write_sessions" / session_id


def lifecycle_key(session_id: str) -> str:
    """The key of a session's lifecycle in ``runtime.lifecycles``."""
    return f"write_session:{session_id[:8]}"
