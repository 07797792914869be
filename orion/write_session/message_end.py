"""A message's end: the decision of :mod:`orion.write_session.decision`, carried out.

When the model's message ends, the session resolves what the end marker still holds, asks
:func:`~orion.write_session.decision.decide_end` what the message was, and does it: finalize
after ``DONE`` (text after it set aside), set aside text beside a tool call, continue a cut-off
output, ask about an unfinished last line, or wait for the idle timer. Whatever is set aside is
announced to the user at once (how much, its first line) and told to the model with the same
figures and the way to put it back (``WritePlanTool_keep``); the trace gets the counts only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orion.models.events import CONNECTION_LOST, CONTENT_FILTER, STREAM_ERROR, Finish
from orion.trace.events import Kind
from orion.write_session.decision import (AFTER_DONE, BESIDE_A_TOOL_CALL, CUT_LINE, REASONING,
                                          RESENT, RESTART, SET_ASIDE_KINDS, Cut, End, Facts,
                                          Next, Quoted, decide_end)
from orion.write_session.protocol import EndMarker
from orion.write_session.set_aside import Part

if TYPE_CHECKING:
    from orion.runtime.conversation import Message
    from orion.write_session.members import SessionMembers
else:
    SessionMembers = object  # the declarations are for the type checker only

#: How many complete lines before the end a continuation request (or the unfinished-line
#: question) quotes.
QUOTED_LINES = 3


class MessageEnds(SessionMembers):
    """The message ends of :class:`~orion.write_session.session.WriteSession` (a mixin)."""

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
        self._take_batch()
        self._raise_batch_error()
        if not self._in_message:
            if tool_calls and not thought:
                return
            self._start_message()
        self._read_rest(thought)
        self._in_message = False
        self.lifecycle.context["asked"] = False  # the reply to a prompt (if any) has ended
        if self._mode == "corrections":
            self._corrections("".join(self._message_text))
            return
        if self._mode == "content":
            self._marker_at_end = self.marker.save()
            rest = self.marker.end_message(cut=_cut(finish) is not Cut.CLEAN)
            if rest:
                self.journal.append(rest)
            if self._done_in_open_fence():
                self.marker.done = True
        grew = self.journal.bytes > self._bytes_at_start
        end = decide_end(Facts(
            cut=_cut(finish), tool_calls=tool_calls,
            done=self._mode == "content" and self.marker.done,
            mid_line=grew and bool(self.journal.last_line().strip(b" \t\r")), grew=grew,
            text=any(chunk.strip() for chunk in self._message_text),
            receiving=self._mode == "content"))
        claimed = self._claimed_from
        if tool_calls and end.next is Next.STAY and self._mode == "content":
            self._beside_a_tool_call(message, end)
            return
        if message is not None and (grew or self._circular):
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
                message.content = self._sent_text(message.content, *span,
                                                  done=end.next is Next.FINALIZE)

    def _read_rest(self, thought: str) -> None:
        """At the message's end: read the start of a reply still held, and set aside the
        ``<think>`` block it started with."""
        if self._mode == "hold":
            self._read_start(ended=True)
        self._set_aside_thought(thought)

    def _set_aside_thought(self, thought: str) -> None:
        """A ``<think>`` block the reply started with, while the session takes content: set
        aside where the reply's content starts (a file may start with such an element)."""
        if thought and (self._mode == "content" or self._circular):
            self._set_aside(REASONING, thought.encode("utf-8", "surrogateescape"),
                            self._bytes_at_start)

    def _sent_text(self, before: str | None, start: int, end: int, *,
                   done: bool) -> str:
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

    def _next_step(self, end: End, finish: Finish, message: Message | None, *,
                   grew: bool) -> None:
        """After a message: finalize (DONE), continue (cut off), ask about the unfinished
        line, or wait (paused)."""
        if self._circular:
            self._restarted("".join(self._message_text))
            return
        if end.next is Next.STAY:
            return
        self.checkpoint()
        context = self.lifecycle.context
        if self._progressed(grew):
            context["idle_prompts"] = 0
            context.pop("asked_at_lines", None)
        if end.next is Next.FINALIZE:
            self._commentary_message = message
            self._after_done()
            self.runtime.reporter.progress_done()
            self._trigger("done")
            self.finalize()
        elif end.next is Next.CONTINUE:
            self._truncated(finish)
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
        and the session goes on as it was. The history keeps what the model said."""
        start = self._bytes_at_start
        if self._claimed_from >= 0 and message is not None:
            message.content = self._sent_text(message.content, self._claimed_from,
                                              self.journal.bytes, done=False)
        data = self.journal.read(start)
        if data:
            self.journal.truncate(start)
            self._restart_streamed_checks(start)
        if self._marker_at_start is not None:
            self.marker.restore(self._marker_at_start)
        if self._quoted_at_start is not None and self.journal.last_line():
            # The line the prompt quoted is still unfinished: the next message answers it.
            self.lifecycle.context["quoted"] = self._quoted_at_start
        if end.set_aside is not None and data.strip():
            names = sorted({call["function"]["name"] for call in
                            (message.tool_calls if message is not None else None) or []})
            part = self._set_aside(BESIDE_A_TOOL_CALL, data, start, tools=names)
            calls = " and ".join(names) or "tool"
            self._tell_now(
                f"Write session {self.id[:8]}: the text you wrote beside your {calls} call "
                f"({_figures(part)}) was set aside as part {part.number}, not added to "
                f"{self.plan.relative}: text in a message that calls a tool is not content. If "
                f"it belongs in the file, call WritePlanTool_keep with part {part.number}: it "
                "goes back where it was, in front of what you send next. Otherwise go on.")
        self.checkpoint()

    def _after_done(self) -> None:
        """Text after the terminator line is set aside exactly as it arrived, blank lines in
        it included; only blank and terminator lines at its end are nothing (a repeated DONE
        never lands anywhere), and so is a tail of nothing but those."""
        lines = self.marker.commentary.splitlines(keepends=True)
        while lines and not self._text_lines(lines[-1]):
            lines.pop()
        if lines:
            self._set_aside(AFTER_DONE, "".join(lines).encode("utf-8", "surrogateescape"),
                            self.journal.bytes)

    def _text_lines(self, text: str) -> str:
        """``text`` without its blank lines and terminator lines."""
        return "".join(line for line in text.splitlines(keepends=True)
                       if line.strip() and line.strip(" \t\r\n") != self.terminator)

    def _without_terminator(self, text: str) -> str:
        """A whole message set aside, as text: without its terminator line (and the blank and
        terminator lines after it)."""
        probe = EndMarker(self.terminator)
        body = probe.feed(text) + probe.end_message()
        return body + self._text_lines(probe.commentary)

    def _set_aside(self, why: str, data: bytes, at: int, *,
                   tools: list[str] | None = None) -> Part:
        """Keep ``data`` beside the content as a part, and tell the user at once."""
        part = self.aside.add(why, data, at, tail=why == CUT_LINE)
        short, target = self.id[:8], self.plan.relative
        if why == BESIDE_A_TOOL_CALL:
            calls = " and ".join(tools or []) or "tool"
            said = f"the text beside the {calls} call ({_figures(part)})"
        elif why == AFTER_DONE:
            said = f"the text after {self.terminator} ({_figures(part)})"
        elif why == CUT_LINE:
            said = (f"line {self.journal.lines + 1} as it was cut off ({_figures(part)}), "
                    "which the reply did not send again,")
            self._tell_later(
                f"Line {self.journal.lines + 1} as it was cut off ({_figures(part)}) was set "
                f"aside as part {part.number}: your reply did not start with it again, so "
                "your reply's first line took its place. If the cut line belongs in front of "
                f"that line, call WritePlanTool_keep with part {part.number}.")
        elif why == RESENT:
            said = f"the quoted lines the reply sent again ({_figures(part)})"
            self._tell_later(
                f"Your reply started with lines the request quoted as saved ({_figures(part)})"
                f": they were set aside as part {part.number}, not written twice. If they "
                "belong in the file once more (rows that repeat), call WritePlanTool_keep with "
                f"part {part.number}: they go back in front of what you sent after them.")
        elif why == REASONING:
            said = f"the reasoning at the start of the reply ({_figures(part)})"
            self._tell_later(
                f"The <think> block at the start of your reply ({_figures(part)}) was taken "
                f"for reasoning and set aside as part {part.number}, not added to {target}. "
                f"If it belongs in the file, call WritePlanTool_keep with part {part.number}.")
        else:
            said = f"the reply that started {target} over ({_figures(part)})"
        self.runtime.reporter.notice(
            f"write session {short}: {said} was set aside, not written to {target} (part "
            f"{part.number}); `orion sessions show {short}` prints it")
        self._trace(Kind.WRITE_REPORT, "text set aside", {
            "orion.target": target, "orion.set_aside.kind": SET_ASIDE_KINDS[why],
            "orion.part": part.number,
            "orion.lines": part.lines, "orion.bytes": part.bytes})
        return part

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
        return limit is None or self.lifecycle.context.get("idle_prompts", 0) < limit

    def _progressed(self, grew: bool) -> bool:
        """Whether the message brought new content, which sets the count of prompts back.
        After the unfinished-line question only a complete line is new: a reply that stops
        in the middle of a line again takes the place of the line asked about, and a model
        that does so forever would be asked forever."""
        asked_at = self.lifecycle.context.get("asked_at_lines")
        return grew and (not isinstance(asked_at, int) or self.journal.lines > asked_at)

    def _quote(self) -> Quoted:
        """The tail the next prompt quotes: the last complete lines, and the unfinished last
        line if the content stops in the middle of one."""
        last = self.journal.last_line()
        unfinished = last.decode("utf-8", "replace").removesuffix("\r") if last else None
        lines = self.journal.tail_lines(QUOTED_LINES + (1 if unfinished is not None else 0))
        if unfinished is not None:
            lines = lines[:-1]
        return Quoted(tuple(lines), unfinished)

    def _truncated(self, finish: Finish | None = None) -> None:
        """The output was cut off (``finish`` says how; ``None``: a session taken over after
        a crash goes on): the model is asked at once to continue."""
        lines, size = self.journal.lines, self.journal.bytes
        self._say_how_it_was_cut(finish)
        before = self.lifecycle.context.get("continuations", 0)
        # The quoted lines go through the context, not the payload: transition payloads are
        # traced, and a trace never holds content.
        self.lifecycle.context["quoted"] = self._quote().to_json()
        self.lifecycle.context["target"] = self.plan.relative  # the request names the file
        blank = not self.journal.content().strip()
        self._trigger("truncated", bytes=size, lines=lines, blank=blank)
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
                f": writing {self.plan.relative} as incomplete ({lines} lines)")
            self._trace(Kind.ERROR, "write incomplete", {
                "orion.where": "write session", "orion.error": "output still cut off after "
                f"{before} continuations; the file is written incomplete"})
            self.finalize()
        elif self.lifecycle.has_tag("abandoned"):
            self.runtime.reporter.progress_done()
            self._abandon_unless_held("no content arrived before the output was cut off")

    def _say_how_it_was_cut(self, finish: Finish | None) -> None:
        """A cut the user would not see otherwise (the network, an error event, the content
        filter) is named, with the file and the session."""
        if finish is None:
            return
        where = (f"while write session {self.id[:8]} was writing {self.plan.relative}: what "
                 f"arrived is kept ({self.journal.lines} lines), taken as cut off")
        if finish.raw == CONNECTION_LOST:
            self.runtime.reporter.notice(
                f"the connection broke in the middle of the reply {where}")
        elif finish.raw == STREAM_ERROR:
            self.runtime.reporter.notice(
                "the endpoint reported an error in the middle of the reply ("
                f"{finish.error or 'no message'}) {where}")
        elif finish.raw == CONTENT_FILTER:
            self.runtime.reporter.notice(
                f"the endpoint's content filter stopped the reply (finish reason "
                f"content_filter) {where}")

    def _ask_unfinished(self) -> None:
        """The message stopped cleanly in the middle of a line: a file may end that way (a
        VERSION file), or a gateway reported a cut-off as ``stop``. The model is asked at once
        which it is."""
        self.lifecycle.context["quoted"] = self._quote().to_json()
        self.lifecycle.context["asked_at_lines"] = self.journal.lines
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
            self._abandon_unless_held(f"no content arrived and {reason}")

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
        if _last_line(self._message_text, self._message_cut).rstrip(" \t\r") \
                != self.terminator:
            return False
        content = self.content()
        body = content.rstrip(b" \t\r\n")
        if not body.endswith(self.terminator.encode()):
            return False
        self._fixed = body[:body.rfind(b"\n") + 1]
        return True

    def _restarted(self, text: str) -> None:
        """The reply started the file over (it repeats the content's first lines): it is set
        aside, announced and told, and the session goes on; the model puts the part back with
        WritePlanTool_keep when the file repeats its start on purpose."""
        lines = self.journal.lines
        text = self._without_terminator(text)
        if self._quoted_at_start is not None:
            self.lifecycle.context["quoted"] = self._quoted_at_start  # still to be answered
        if text.strip():
            part = self._set_aside(RESTART, text.encode("utf-8", "surrogateescape"),
                                   self.journal.bytes)
            self._tell_later(
                f"Your reply started {self.plan.relative} over: it begins with the file's first "
                f"lines again ({_figures(part)}). It was set aside as part {part.number}, not "
                f"added; {lines} lines are saved. If it belongs in the file (a file whose parts "
                f"start alike), call WritePlanTool_keep with part {part.number}; otherwise "
                f"continue after line {lines}, and end with {self.terminator} on its own line.")
        self.checkpoint()
        self._pause(grew=False)


def _cut(finish: Finish) -> Cut:
    if not finish.truncated:
        return Cut.CLEAN
    return {CONNECTION_LOST: Cut.CONNECTION, STREAM_ERROR: Cut.ERROR,
            CONTENT_FILTER: Cut.FILTER}.get(finish.raw or "", Cut.LENGTH)


def _figures(part: Part) -> str:
    """``3 lines, first line 'Task B'``: the same figures for the user and the model."""
    count = f"{part.lines} line{'s' if part.lines != 1 else ''}"
    return f"{count}, first line {part.first_line!r}" if part.first_line else count


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

