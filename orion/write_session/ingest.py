"""Ingest: the model's streamed text into a write session, on the runtime's hot path.

Every text delta of the model's reply reaches :meth:`Ingest.feed` (a runtime text sink): plain
code, no statechart trigger per chunk. Content goes through the end marker into the journal,
in batches inside an event loop. A reply to a prompt of Orion's (the idle prompt, a
continuation request, the unfinished-line question) is held back at its start until
:func:`orion.write_session.decision.read_start` has decided how it starts (a declared repeat
of the quoted tail, the unfinished line sent again or not, a restart of the file); that
decision reads only the text, so it does not depend on how the stream was chunked.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from orion.write_session.decision import (CUT_LINE, HEAD_LINES, RESENT, RESTART_LINES, Quoted,
                                          Start, read_start)
from orion.write_session.journal import ENCODING_ERRORS, JournalOutOfMemory
from orion.write_session.progress import Progress
from orion.write_session.protocol import EndMarker

if TYPE_CHECKING:
    from orion.write_session.members import SessionMembers
else:
    SessionMembers = object  # the declarations are for the type checker only

#: Content that arrives faster than it is taken in is taken in batches of about this many
#: characters: the end marker and the journal cost mostly per call (see Ingest.feed).
FEED_BATCH_CHARS = 4096
#: A content message's chunks are not kept (the journal has them): only its last ones, at most
#: TAIL_CHUNKS, cut back to TAIL_KEEP, for the checks of how the message ends (its last line).
TAIL_CHUNKS = 64
TAIL_KEEP = 32
LIVE_LINE_INTERVAL_S = 0.1
_monotonic = time.monotonic  # looked up once: the live line's clock, read on the hot path
# In asyncio.__all__ despite its underscore: the running loop or None, without the exception
# get_running_loop() raises outside a loop (a microsecond a chunk when feed runs outside one).
_running_loop = asyncio._get_running_loop


class Ingest(SessionMembers):
    """The hot path of :class:`~orion.write_session.session.WriteSession` (a mixin: the
    session's state is its own)."""

    def feed(self, text: str) -> bool:
        """A text delta of the model's reply while this session is open. Returns True when it
        is the file's content: the journal keeps it, so the model system does not keep a copy,
        and ``end_message`` gives the message its content in the history (a reference to the
        saved lines, or the text itself when it was not content after all).

        Inside an event loop, content is taken in (end marker, journal, line checks) in
        batches: the chunks that arrive before the loop goes round, cut at
        ``FEED_BATCH_CHARS`` characters and at the journal's next automatic flush, so the
        journal saves at the same lines as chunk by chunk. Whatever reads or changes the
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
            if self._held_size >= self._read_at:
                # Read again once the held text has doubled: an answer, once given, holds for
                # any longer text, so reading less often gives the same answer, and a long
                # unfinished line sent again (a minified file) costs linear time, not square.
                self._read_at = 2 * self._held_size
                self._read_start(ended=False)
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
            try:
                size = self.journal.append(content)
            except JournalOutOfMemory as exc:
                # What arrived is on disk (or in a rescue file): the session ends here, as a
                # failed write does, and the stream stops with the error.
                self._failed(exc)
                raise
            if not self._flush_timer.armed:
                self._arm_flush()
            if "\n" in content:
                if _monotonic() - self._last_live >= LIVE_LINE_INTERVAL_S:
                    self._live()
                streamed = self._streamed
                if streamed is not None and streamed.due(size):
                    streamed.check(self.journal.whole_lines(streamed.checked))

    def _arm_flush(self) -> None:
        """Save what is pending when the flush interval is up, even if the stream stalls."""
        wait = self.journal.flush_wait_ms()
        if wait is not None:
            self._flush_timer.arm(wait)

    def _flush_due(self) -> None:
        """The flush timer fired: take the batch in, save what is due, and arm again for what
        is still pending (an automatic flush may have moved the deadline)."""
        if not self.lifecycle.has_tag("open"):
            return
        try:
            self._take_batch()
        except Exception as exc:  # noqa: BLE001 - re-raised by _raise_batch_error
            self._batch_error = exc
            return
        self.journal.flush_if_due()
        self._arm_flush()

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

    # -- the start of a message ----------------------------------------------------------------

    def _start_message(self) -> None:
        self._take_batch()  # the previous message's, if it never ended (a failed request)
        self._in_message = True
        self._message_text, self._message_cut, self._claimed_from = [], False, -1
        self._bytes_at_start = self.journal.bytes
        self._circular = False
        self.marker.new_message()
        self._marker_at_start = self.marker.save()
        has_tag = self.lifecycle.has_tag
        self._quoted_at_start = self.lifecycle.context.get("quoted")
        if has_tag("continuing") or has_tag("paused") or self._quoted_at_start is not None:
            # A reply to a prompt of Orion's (or the next message after one that quoted a tail
            # and was set aside): its start is read before it is taken in.
            self._mode, self._held, self._held_size, self._read_at = "hold", [], 0, 64
        elif has_tag("correcting"):
            self._mode = "corrections"
        elif has_tag("receiving"):
            self._mode = "content"
        else:
            self._mode = "ignore"

    def _read_start(self, *, ended: bool) -> None:
        """Decide how the held start of a reply is taken in, once the text says (see
        :func:`~orion.write_session.decision.read_start`), and take it in."""
        held = "".join(self._held)
        probe = EndMarker(self.terminator)
        probe.restore(self.marker.save())
        text = probe.feed(held) + (probe.end_message() if ended else "")
        journal = self.journal
        head_complete = journal.lines > HEAD_LINES
        count = min(journal.lines, RESTART_LINES)
        start = read_start(text, ended=ended,
                           quoted=Quoted.from_json(self.lifecycle.context.get("quoted")),
                           head=tuple(journal.head_lines(count)) if head_complete else (),
                           head_complete=head_complete,
                           tail=tuple(_complete_tail(journal, HEAD_LINES)) if head_complete
                           else ())
        if start is None:
            return  # not decided yet: hold on
        self._held = []
        if text.strip():
            self.lifecycle.context.pop("quoted", None)  # answered (an empty reply did not)
        if start.circular and "circular" in self.lifecycle.allowed_triggers():
            # A suspected restart: the whole reply is set aside when it ends, announced and
            # reversible (a multi-part file repeats its start legitimately).
            self._mode = "ignore"
            self._circular = True
            return
        self._take_start(start, held)

    def _take_start(self, start: Start, held: str) -> None:
        """Carry out how a reply starts: the declared repeat is not added; an unfinished line
        the reply did not send again is set aside (the reply takes its place); then the rest
        is content."""
        if start.cut_line == "set_aside":
            line, at = self._take_back_last_line()
            if line:
                self._set_aside(CUT_LINE, line, at)
        elif self._cut_terminator(start, held):
            # The cut took the line break of a terminator line, and the reply confirms it: the
            # unfinished line was never content.
            self._take_back_last_line()
        if start.resent:
            self._resent(held[:start.resent])
        rest = held[start.resent + start.repeat:]
        if start.repeat and self._marker_at_end is not None:
            # The line sent again is read whole: a fence line cut after its first backtick
            # is still a fence, so a DONE line in the block it opens stays content.
            self.marker.reopen(self._marker_at_end)
        if rest.strip(" \t\r\n") and not _only_terminator(rest, self.terminator) \
                and "content" in self.lifecycle.allowed_triggers():
            self._trigger("content")
        # The model system kept the held text itself: the content it hands over from here on
        # starts where the next chunk starts (feed sets it).
        self._mode, self._claimed_from = "content", -1
        self._take_in(rest)

    def _resent(self, text: str) -> None:
        """Quoted lines the reply sent again before going on: set aside where they would have
        gone (the model can put them back), never written twice in silence."""
        self._set_aside(RESENT, text.encode("utf-8", ENCODING_ERRORS), self.journal.bytes)

    def _take_back_last_line(self) -> tuple[bytes, int]:
        """Take the unfinished last line out of the content: the line and where it started."""
        line = self.journal.last_line()
        at = self.journal.bytes - len(line)
        if line:
            self.journal.truncate(at)
            self._bytes_at_start = min(self._bytes_at_start, at)
            self._restart_streamed_checks(at)
        return line, at

    def _cut_terminator(self, start: Start, held: str) -> bool:
        """Whether a message cut off after a terminator (``DONE`` with no line break yet) is
        answered with the terminator line alone: the quoted unfinished line is that
        terminator, and the reply says DONE rather than sending a longer line."""
        last = self.journal.last_line().rstrip(b" \t\r")
        return (not start.repeat and last == self.terminator.encode("utf-8")
                and _only_terminator(held.split("\n", 1)[0], self.terminator))

    def _restart_streamed_checks(self, at: int) -> None:
        """The content changed before byte ``at`` of what the streamed line checks covered:
        they start again (on the content as it is)."""
        streamed = self._streamed
        if streamed is not None and streamed.checked > at:
            self._streamed = self._new_streamed()

    # -- the live line -------------------------------------------------------------------------

    def _live(self) -> None:
        """Update the live line (the caller checked that LIVE_LINE_INTERVAL_S has passed)."""
        self._last_live = time.monotonic()
        self.runtime.reporter.progress(self.progress())

    def progress(self) -> Progress:
        self._take_batch()
        return Progress(self.plan.relative, self.journal.lines, self.journal.bytes, self.state,
                        self.lifecycle.context.get("continuations", 0),
                        self.lifecycle.settings["max_continuations"])


def _only_terminator(text: str, terminator: str) -> bool:
    """The text is the terminator line alone (blank lines around it allowed), from its line's
    first character."""
    lines = [line for line in text.split("\n") if line.strip(" \t\r")]
    return len(lines) == 1 and lines[0].rstrip(" \t\r") == terminator


def _complete_tail(journal, count: int) -> list[str]:
    """The last ``count`` complete lines of the content."""
    lines = journal.tail_lines(count + 1)
    return lines[:-1][-count:] if journal.last_line() else lines[-count:]
