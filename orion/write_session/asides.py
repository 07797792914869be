"""What an open write session does with text it keeps out of the content.

The parts themselves (their files, their index) are :mod:`orion.write_session.set_aside`'s;
:class:`Asides` is what one open session does with them: it sets a part aside and tells the
user at once (and the model, when it must know), takes the text beside a tool call, after the
``DONE`` line or of a reply that started the file over out of the content, keeps the start of a
reply still unread when the process ends, puts a part back where it was
(``WritePlanTool_keep``), and moves the parts where ``orion sessions show`` finds them once the
journal goes. Which text is set aside is the decision's (:mod:`orion.write_session.decision`);
what it is called, :mod:`orion.write_session.message_end`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from orion.errors import OrionError
from orion.trace.events import Kind
from orion.write_session import message_end as said
from orion.write_session.decision import (AFTER_DONE, BESIDE_A_TOOL_CALL, CUT_LINE, RESTART,
                                          SET_ASIDE_KINDS)

if TYPE_CHECKING:
    from pathlib import Path

    from orion.runtime.conversation import Message
    from orion.write_session.context import WriteContext
    from orion.write_session.decision import End
    from orion.write_session.intake import Intake
    from orion.write_session.journal import Journal
    from orion.write_session.set_aside import Part, SetAside

__all__ = ["UNREAD_REPLY", "Asides", "KeepRefused"]

#: Why a part was set aside when the process ended before the reply's start was read.
UNREAD_REPLY = "the start of a reply Orion had not read when it ended"


class KeepRefused(OrionError):
    """``WritePlanTool_keep`` for a part that is not there to put back."""

    refusal = True  # the model is told the message, not the class name


class Asides:
    """One open session's text set aside (see the module docstring)."""

    def __init__(self, aside: SetAside, journal: Journal, intake: Intake,
                 context: WriteContext, *, session_id: str, relative: str, terminator: str,
                 notice: Callable[[str], None],
                 trace: Callable[[str, str, dict[str, Any]], None]) -> None:
        self.aside = aside
        self.journal = journal
        self.intake = intake
        self.context = context
        self.session_id = session_id
        self.relative = relative
        self.terminator = terminator
        self._notice = notice
        self._trace = trace

    def put(self, why: str, data: bytes, at: int, *, tools: list[str] | None = None) -> Part:
        """Keep ``data`` beside the content as a part, and tell the user at once."""
        part = self.aside.add(why, data, at, tail=why == CUT_LINE)
        short, target = self.session_id[:8], self.relative
        what, later = said.set_aside(why, part, tools=tools, terminator=self.terminator,
                                     target=target, line=self.journal.lines + 1)
        if later is not None:  # with the next prompt Orion sends (no request of its own)
            self.context.add_news(later)
        self._notice(
            f"write session {short}: {what} was set aside, not written to {target} (part "
            f"{part.number}); `orion sessions show {short}` prints it")
        self._trace(Kind.WRITE_REPORT, "text set aside", {
            "orion.target": target, "orion.set_aside.kind": SET_ASIDE_KINDS[why],
            "orion.part": part.number,
            "orion.lines": part.lines, "orion.bytes": part.bytes})
        return part

    def beside_a_tool_call(self, message: Message | None, end: End) -> str | None:
        """The message calls a tool: what it added is taken out of the content and set aside.
        Returns what the model is told at once (``None``: nothing was set aside). The history
        keeps what the model said."""
        intake = self.intake
        start = intake.bytes_at_start
        if intake.claimed_from >= 0 and message is not None:
            message.content = intake.sent_text(message.content, intake.claimed_from,
                                               self.journal.bytes, done=False)
        data = intake.take_back_message()
        if end.set_aside is None or not data.strip():
            return None
        names = sorted({call["function"]["name"] for call in
                        (message.tool_calls if message is not None else None) or []})
        part = self.put(BESIDE_A_TOOL_CALL, data, start, tools=names)
        return said.beside_a_tool_call(part, names, self.session_id, self.relative)

    def after_done(self) -> None:
        """Text after the terminator line is set aside (see :meth:`Intake.after_done
        <orion.write_session.intake.Intake.after_done>`)."""
        text = self.intake.after_done()
        if text:
            self.put(AFTER_DONE, text, self.journal.bytes)

    def restarted(self, text: str) -> None:
        """The reply started the file over (it repeats the content's first lines): it is set
        aside, announced and told with the next prompt; the model puts the part back with
        WritePlanTool_keep when the file repeats its start on purpose."""
        lines = self.journal.lines
        text = self.intake.without_terminator(text)
        if self.intake.quoted_at_start is not None:
            self.context.quoted = self.intake.quoted_at_start  # still to be answered
        if text.strip():
            part = self.put(RESTART, text.encode("utf-8", "surrogateescape"),
                            self.journal.bytes)
            self.context.add_news(said.restarted(part, self.relative, lines, self.terminator))

    def keep_unread_start(self) -> None:
        """The process ends while the start of a reply to Orion's prompt is held unread (it
        was not yet known whether it goes on from the saved content or starts the file
        over): it is set aside as a part, so every line that arrived is kept and counted."""
        text = self.intake.unread_start()
        if text.strip():
            self.aside.add(UNREAD_REPLY, text.encode("utf-8", "surrogateescape"),
                           self.journal.bytes)

    def put_back(self, number: int) -> str:
        """``WritePlanTool_keep``: put part ``number`` back where it was in the content.
        Returns what the model is told."""
        part = self.aside.get(number)
        if part is None or part.kept:
            pending = ", ".join(str(p.number) for p in self.aside.pending) or "none"
            raise KeepRefused(f"write session {self.session_id[:8]} has no part {number} set "
                              f"aside to put back (parts set aside: {pending})")
        at = min(part.at, self.journal.bytes)
        # The content first, then the index: a kill in between leaves the part both in the
        # content and in its file, never in neither.
        self.journal.insert(at, self.aside.read(number))
        self.aside.put_back(number)
        self.intake.restart_streamed_checks(at)
        line = self.journal.content()[:at].count(b"\n") + 1
        self._notice(
            f"write session {self.session_id[:8]}: part {number} ({part.lines} lines) is back "
            f"in {self.relative}, at line {line}")
        self._trace(Kind.WRITE_REPORT, "text put back", {
            "orion.target": self.relative, "orion.part": number,
            "orion.lines": part.lines, "orion.bytes": part.bytes})
        return (f"Part {number} ({part.lines} lines) is back in {self.relative} at line "
                f"{line}; {self.journal.lines} lines are saved. Go on with the content where "
                f"it stopped and end it with a line {self.terminator}.")

    def archive(self, state_dir: Path) -> None:
        """The journal goes: its text set aside stays where ``orion sessions show`` finds
        it."""
        if self.aside.parts and self.aside.archive(state_dir, self.session_id,
                                                   self.relative) is None:
            self._notice(
                f"write session {self.session_id[:8]}: the text set aside could not be kept in "
                f"{state_dir / 'set_aside'}; it is in this conversation's history")
