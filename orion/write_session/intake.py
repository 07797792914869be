"""The intake: the model's streamed text into a write session, one message at a time.

Every text delta of the model's reply reaches :meth:`Intake.feed` (through the session, a
runtime text sink): plain code, no statechart trigger per chunk. Content goes through the end
marker into the journal as it arrives (the model system hands a burst of deltas on joined:
docs/runtime.md, "Text sinks"). A reply to a prompt of Orion's (the idle prompt, a continuation
request, the unfinished-line question) is held back at its start until
:func:`orion.write_session.decision.read_start` has decided how it starts (a declared repeat of
the quoted tail, the unfinished line sent again or not, a restart of the file); that decision
reads only the text, so it does not depend on how the stream was chunked.

The intake owns what one message is while it streams: how its text is taken (its
:class:`Mode`), the text held at its start, where its content started; at the message's end it
resolves the end marker and returns the
:class:`~orion.write_session.decision.Facts` that :func:`~orion.write_session.decision.decide_end`
reads. What the text means for the session (text set aside, a trigger, a failure) it hands to
its :class:`Outlet`, the session.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Protocol

from orion.write_session.context import WriteContext
from orion.write_session.decision import (CUT_LINE, HEAD_LINES, RESENT, RESTART_LINES, Cut,
                                          Facts, Quoted, Start, read_start)
from orion.write_session.flush_timer import FlushTimer
from orion.write_session.journal import ENCODING_ERRORS, Journal, JournalOutOfMemory
from orion.write_session.protocol import EndMarker

if TYPE_CHECKING:
    from orion.clock import Clock
    from orion.statechart.interpreter.lifecycle import Lifecycle
    from orion.validation import StreamedLines

#: A content message's chunks are not kept (the journal has them): only its last ones, at most
#: TAIL_CHUNKS, cut back to TAIL_KEEP, for the checks of how the message ends (its last line).
TAIL_CHUNKS = 64
TAIL_KEEP = 32
LIVE_LINE_INTERVAL_S = 0.1
_monotonic = time.monotonic  # looked up once: the live line's clock, read on the hot path


class Mode(Enum):
    """How the current message's text is taken, decided at its start from the chart's tags
    (:meth:`at_start`); a held start becomes content (or is ignored, a restart) once read."""

    #: The file's content: through the end marker into the journal.
    CONTENT = "content"
    #: The start of a reply to a prompt of Orion's, held until read_start decides.
    HOLD = "hold"
    #: A reply to the correction prompt: kept as text, read at the message's end.
    CORRECTIONS = "corrections"
    #: Not content (a restart being set aside, a state of a team's own): kept as text only.
    IGNORE = "ignore"

    @classmethod
    def at_start(cls, lifecycle: Lifecycle, quoted: Quoted | None) -> Mode:
        has_tag = lifecycle.has_tag
        if has_tag("continuing") or has_tag("paused") or quoted is not None:
            # A reply to a prompt of Orion's (or the next message after one that quoted a tail
            # and was set aside): its start is read before it is taken in.
            return cls.HOLD
        if has_tag("correcting"):
            return cls.CORRECTIONS
        return cls.CONTENT if has_tag("receiving") else cls.IGNORE


class Outlet(Protocol):
    """What the intake hands to its session."""

    def set_aside(self, why: str, data: bytes, at: int) -> object:
        """Keep ``data`` beside the content (announced and told)."""
        ...

    def trigger(self, trigger: str) -> None:
        """Send ``trigger`` to the lifecycle (``content``: a held reply goes on)."""
        ...

    def failed(self, cause: BaseException) -> None:
        """The content could not be kept: the session ends as a failed write does."""
        ...

    def live(self) -> None:
        """New lines arrived: update the live line."""
        ...


@dataclass(frozen=True)
class Ended:
    """A message's end as the intake saw it: the facts for ``decide_end``, and what the
    session needs besides to carry the decision out."""

    facts: Facts
    #: Where the content the model system handed over starts in the journal; -1 when none.
    claimed: int
    #: The content without a terminator line that fell inside an open fence (see
    #: :meth:`Intake._done_in_open_fence`), else ``None``.
    fixed: bytes | None = None


class Intake:
    """The message being streamed (see the module docstring)."""

    def __init__(self, journal: Journal, lifecycle: Lifecycle, clock: Clock, terminator: str,
                 outlet: Outlet, new_streamed: Callable[[], StreamedLines | None]) -> None:
        self.journal = journal
        self.lifecycle = lifecycle
        self.context = WriteContext.of(lifecycle)
        self.terminator = terminator
        self.outlet = outlet
        self._new_streamed = new_streamed
        self.marker = EndMarker(terminator)
        self.mode = Mode.CONTENT
        self.in_message = False
        # The current message's text: all of it, except in content mode, where the journal
        # keeps the content and only the last chunks are kept (cut says so).
        self.text: list[str] = []
        self.cut = False
        # Where the current message's content, taken over from the model system (see feed),
        # starts in the journal; -1 when the message gave none.
        self.claimed_from = -1
        self._held: list[str] = []  # the start of a reply, held until read_start decides
        self._held_size = 0
        self._read_at = 0  # the held size at which the start is read again
        self._last_live = 0.0
        # Saves pending content when the flush interval is up, whether or not text arrives.
        self.flush_timer = FlushTimer(clock, self._flush_due)
        self.bytes_at_start = 0  # the journal's size when the current message started
        self.circular = False  # the current message started the file over
        self.marker_at_start: tuple | None = None  # the end marker before this message
        #: The end marker just before the last message ended in content (in the middle of a
        #: line, when it was cut there): a reply that sends that line again goes on from it.
        self.marker_at_end: tuple | None = None
        self.quoted_at_start: Quoted | None = None  # the tail the prompt before it quoted
        # The line checks run on the content as it streams, so a large write is checked before
        # DONE arrives. Edits are checked as the file after the edit (see validate_write).
        self.streamed = new_streamed()

    # -- the hot path --------------------------------------------------------------------------

    def feed(self, text: str) -> bool:
        """A text delta of the model's reply. Returns True when it is the file's content: the
        journal keeps it, so the model system does not keep a copy."""
        if not self.in_message:
            self.start_message()
        kept = self.text
        kept.append(text)
        mode = self.mode
        if mode is Mode.CONTENT:
            if len(kept) > TAIL_CHUNKS:
                del kept[:-TAIL_KEEP]
                self.cut = True
            if self.claimed_from < 0:
                self.claimed_from = self._content_end()
            self.take_in(text)
            return True
        if mode is Mode.HOLD:
            self._hold(text)
        # Mode.CORRECTIONS and Mode.IGNORE: the text is kept in self.text only
        return False

    def lines_due(self) -> int:
        """How many more lines until the journal saves (``Runtime.text_lines_due``): text
        that arrives in a burst is handed on by then."""
        return self.journal.lines_to_flush

    def _hold(self, text: str) -> None:
        self._held.append(text)
        self._held_size += len(text)
        if self._held_size >= self._read_at:
            # Read again once the held text has doubled: an answer, once given, holds for any
            # longer text, so reading less often gives the same answer, and a long unfinished
            # line sent again (a minified file) costs linear time, not square.
            self._read_at = 2 * self._held_size
            self.read_start(ended=False)

    def _content_end(self) -> int:
        """Where the next content fed would start in the journal: after the bytes journaled
        and the partial line the end marker still holds."""
        pending = self.marker.pending
        return self.journal.bytes + (len(pending.encode("utf-8", ENCODING_ERRORS))
                                     if pending else 0)

    def take_in(self, text: str) -> None:
        """Content text through the end marker into the journal, with the checks that follow
        new lines."""
        content = self.marker.feed(text)
        if content:
            try:
                size = self.journal.append(content)
            except JournalOutOfMemory as exc:
                # What arrived is on disk (or in a rescue file): the session ends here, as a
                # failed write does, and the stream stops with the error.
                self.outlet.failed(exc)
                raise
            if not self.flush_timer.armed:
                self._arm_flush()
            if "\n" in content:
                if _monotonic() - self._last_live >= LIVE_LINE_INTERVAL_S:
                    self._last_live = time.monotonic()
                    self.outlet.live()
                streamed = self.streamed
                if streamed is not None and streamed.due(size):
                    streamed.check(self.journal.whole_lines(streamed.checked))

    def _arm_flush(self) -> None:
        """Save what is pending when the flush interval is up, even if the stream stalls."""
        wait = self.journal.flush_wait_ms()
        if wait is not None:
            self.flush_timer.arm(wait)

    def _flush_due(self) -> None:
        """The flush timer fired: save what is due, and arm again for what is still pending
        (an automatic flush may have moved the deadline)."""
        if not self.lifecycle.has_tag("open"):
            return
        self.journal.flush_if_due()
        self._arm_flush()

    # -- the start of a message ----------------------------------------------------------------

    def start_message(self) -> None:
        self.in_message = True
        self.text, self.cut, self.claimed_from = [], False, -1
        self.bytes_at_start = self.journal.bytes
        self.circular = False
        self.marker.new_message()
        self.marker_at_start = self.marker.save()
        self.quoted_at_start = self.context.quoted
        self.mode = Mode.at_start(self.lifecycle, self.quoted_at_start)
        if self.mode is Mode.HOLD:
            self._held, self._held_size, self._read_at = [], 0, 64

    def read_start(self, *, ended: bool) -> None:
        """Decide how the held start of a reply is taken in, once the text says (see
        :func:`~orion.write_session.decision.read_start`), and take it in."""
        held = "".join(self._held)
        probe = EndMarker(self.terminator)
        probe.restore(self.marker.save())
        text = probe.feed(held) + (probe.end_message() if ended else "")
        journal = self.journal
        head_complete = journal.lines > HEAD_LINES
        count = min(journal.lines, RESTART_LINES)
        start = read_start(text, ended=ended, quoted=self.context.quoted,
                           head=tuple(journal.head_lines(count)) if head_complete else (),
                           head_complete=head_complete,
                           tail=tuple(_complete_tail(journal, HEAD_LINES)) if head_complete
                           else ())
        if start is None:
            return  # not decided yet: hold on
        self._held = []
        if text.strip():
            self.context.quoted = None  # answered (an empty reply did not)
        if start.circular and "circular" in self.lifecycle.allowed_triggers():
            # A suspected restart: the whole reply is set aside when it ends, announced and
            # reversible (a multi-part file repeats its start legitimately).
            self.mode = Mode.IGNORE
            self.circular = True
            return
        self._take_start(start, held)

    def _take_start(self, start: Start, held: str) -> None:
        """Carry out how a reply starts: the declared repeat is not added; an unfinished line
        the reply did not send again is set aside (the reply takes its place); then the rest
        is content."""
        if start.cut_line == "set_aside":
            line, at = self._take_back_last_line()
            if line:
                self.outlet.set_aside(CUT_LINE, line, at)
        elif self._cut_terminator(start, held):
            # The cut took the line break of a terminator line, and the reply confirms it: the
            # unfinished line was never content.
            self._take_back_last_line()
        if start.resent:
            self._resent(held[:start.resent])
        rest = held[start.resent + start.repeat:]
        if start.repeat and self.marker_at_end is not None:
            # The line sent again is read whole: a fence line cut after its first backtick
            # is still a fence, so a DONE line in the block it opens stays content.
            self.marker.reopen(self.marker_at_end)
        if rest.strip(" \t\r\n") and not only_terminator(rest, self.terminator) \
                and "content" in self.lifecycle.allowed_triggers():
            self.outlet.trigger("content")
        # The model system kept the held text itself: the content it hands over from here on
        # starts where the next chunk starts (feed sets it).
        self.mode, self.claimed_from = Mode.CONTENT, -1
        self.take_in(rest)

    def _resent(self, text: str) -> None:
        """Quoted lines the reply sent again before going on: set aside where they would have
        gone (the model can put them back), never written twice in silence."""
        self.outlet.set_aside(RESENT, text.encode("utf-8", ENCODING_ERRORS), self.journal.bytes)

    def _take_back_last_line(self) -> tuple[bytes, int]:
        """Take the unfinished last line out of the content: the line and where it started."""
        line = self.journal.last_line()
        at = self.journal.bytes - len(line)
        if line:
            self.journal.truncate(at)
            self.bytes_at_start = min(self.bytes_at_start, at)
            self.restart_streamed_checks(at)
        return line, at

    def _cut_terminator(self, start: Start, held: str) -> bool:
        """Whether a message cut off after a terminator (``DONE`` with no line break yet) is
        answered with the terminator line alone: the quoted unfinished line is that
        terminator, and the reply says DONE rather than sending a longer line."""
        last = self.journal.last_line().rstrip(b" \t\r")
        return (not start.repeat and last == self.terminator.encode("utf-8")
                and only_terminator(held.split("\n", 1)[0], self.terminator))

    def restart_streamed_checks(self, at: int) -> None:
        """The content changed before byte ``at`` of what the streamed line checks covered:
        they start again (on the content as it is)."""
        streamed = self.streamed
        if streamed is not None and streamed.checked > at:
            self.streamed = self._new_streamed()

    # -- the end of a message ------------------------------------------------------------------

    def open_for_end(self, *, tool_calls: bool, thought: str) -> bool:
        """The message ended. False when there is nothing to end (a message with only tool
        calls that never streamed text)."""
        if not self.in_message:
            if tool_calls and not thought:
                return False
            self.start_message()
        if self.mode is Mode.HOLD:
            self.read_start(ended=True)
        self.in_message = False
        return True

    @property
    def takes_thought(self) -> bool:
        """Whether a ``<think>`` block the reply started with is set aside: while the session
        takes content (a file may start with such an element)."""
        return self.mode is Mode.CONTENT or self.circular

    def message(self) -> str:
        return "".join(self.text)

    def end(self, cut: Cut, *, tool_calls: bool, content: Callable[[], bytes]) -> Ended:
        """Resolve what the end marker still holds and return the facts of the message's end
        (``content``: the content as it stands, for a terminator inside an open fence)."""
        receiving = self.mode is Mode.CONTENT
        fixed = None
        if receiving:
            self.marker_at_end = self.marker.save()
            rest = self.marker.end_message(cut=cut is not Cut.CLEAN)
            if rest:
                self.journal.append(rest)
            fixed = self._done_in_open_fence(content, cut)
            if fixed is not None:
                self.marker.done = True
        grew = self.journal.bytes > self.bytes_at_start
        return Ended(Facts(
            cut=cut, tool_calls=tool_calls, done=receiving and self.marker.done,
            mid_line=grew and bool(self.journal.last_line().strip(b" \t\r")), grew=grew,
            text=any(chunk.strip() for chunk in self.text), receiving=receiving),
            self.claimed_from, fixed)

    def _done_in_open_fence(self, content: Callable[[], bytes], cut: Cut) -> bytes | None:
        """A message whose last line is the terminator, but which ends inside a fenced block:
        the content without that line, else ``None``.

        Models wrap a file in a code fence and do not always close it, or nest blocks in a
        wrapper that is not marked as Markdown (where fences do not nest), so the terminator
        line falls inside a block. A message that ends with the terminator line inside an open
        fence meant the end: the line is taken off the content (it was journaled as content)
        and the session ends as with DONE. The content keeps the fences; ``unwrap_fence``
        reads them. A message cut off (``max_tokens``, a lost connection) was not ended by the
        model: its last line is where it was stopped, maybe in the middle (``DONE not
        alone``), so it says nothing about the end; the continuation goes on from it."""
        if self.marker.done or not self.marker.in_fence:
            return None
        if cut is not Cut.CLEAN:
            return None
        if _last_line(self.text, self.cut).rstrip(" \t\r") != self.terminator:
            return None
        body = content().rstrip(b" \t\r\n")
        if not body.endswith(self.terminator.encode()):
            return None
        return body[:body.rfind(b"\n") + 1]

    def sent_text(self, before: str | None, start: int, end: int, *, done: bool) -> str:
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

    def take_back_message(self) -> bytes:
        """What this message added, taken out of the content (a message that called a tool):
        the end marker and the quoted tail as they were before it."""
        start = self.bytes_at_start
        data = self.journal.read(start)
        if data:
            self.journal.truncate(start)
            self.restart_streamed_checks(start)
        if self.marker_at_start is not None:
            self.marker.restore(self.marker_at_start)
        if self.quoted_at_start is not None and self.journal.last_line():
            # The line the prompt quoted is still unfinished: the next message answers it.
            self.context.quoted = self.quoted_at_start
        return data

    def after_done(self) -> bytes:
        """Text after the terminator line, exactly as it arrived, blank lines in it included;
        only blank and terminator lines at its end are nothing (a repeated DONE never lands
        anywhere), and so is a tail of nothing but those."""
        lines = self.marker.commentary.splitlines(keepends=True)
        while lines and not self.text_lines(lines[-1]):
            lines.pop()
        return "".join(lines).encode("utf-8", "surrogateescape")

    def text_lines(self, text: str) -> str:
        """``text`` without its blank lines and terminator lines."""
        return "".join(line for line in text.splitlines(keepends=True)
                       if line.strip() and line.strip(" \t\r\n") != self.terminator)

    def without_terminator(self, text: str) -> str:
        """A whole message set aside, as text: without its terminator line (and the blank and
        terminator lines after it)."""
        probe = EndMarker(self.terminator)
        body = probe.feed(text) + probe.end_message()
        return body + self.text_lines(probe.commentary)

    # -- when the session ends ---------------------------------------------------------------

    def unread_start(self) -> str:
        """The start of a reply held unread, taken (nothing more is read of it)."""
        if self.mode is not Mode.HOLD or not self._held:
            return ""
        text = "".join(self._held)
        self._held, self.mode = [], Mode.IGNORE
        return text

    def stop(self) -> None:
        """No more text: the flush timer is cancelled."""
        self.flush_timer.cancel()

    def let_go(self) -> None:
        """The session has ended: what only an open session needs (the streamed checks, the
        last chunks) goes, so a long conversation of writes does not keep each one's."""
        self.streamed = None
        self.text, self._held = [], []


def only_terminator(text: str, terminator: str) -> bool:
    """The text is the terminator line alone (blank lines around it allowed), from its line's
    first character."""
    lines = [line for line in text.split("\n") if line.strip(" \t\r")]
    return len(lines) == 1 and lines[0].rstrip(" \t\r") == terminator


def _complete_tail(journal: Journal, count: int) -> list[str]:
    """The last ``count`` complete lines of the content."""
    lines = journal.tail_lines(count + 1)
    return lines[:-1][-count:] if journal.last_line() else lines[-count:]


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
