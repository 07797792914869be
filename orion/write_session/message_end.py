"""A message's end, in words and figures: what the session says when it carries out the
decision of :mod:`orion.write_session.decision`.

Whatever is set aside is announced to the user at once (how much, its first line) and told to
the model with the same figures and the way to put it back (``WritePlanTool_keep``); the trace
gets the counts only. The functions here read their facts and return text (or a figure); the
session decides when to say it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orion.models.events import CONNECTION_LOST, CONTENT_FILTER, STREAM_ERROR, Finish
from orion.write_session.decision import (AFTER_DONE, BESIDE_A_TOOL_CALL, CUT_LINE, REASONING,
                                          RESENT, Cut, Quoted)

if TYPE_CHECKING:
    from orion.write_session.context import WriteContext
    from orion.write_session.journal import Journal
    from orion.write_session.set_aside import Part

#: How many complete lines before the end a continuation request (or the unfinished-line
#: question) quotes.
QUOTED_LINES = 3


def cut_of(finish: Finish) -> Cut:
    """How a message ended, as the decision reads it."""
    if not finish.truncated:
        return Cut.CLEAN
    return {CONNECTION_LOST: Cut.CONNECTION, STREAM_ERROR: Cut.ERROR,
            CONTENT_FILTER: Cut.FILTER}.get(finish.raw or "", Cut.LENGTH)


def progressed(context: WriteContext, journal: Journal, grew: bool) -> bool:
    """Whether the message brought new content, which sets the count of prompts back.
    After the unfinished-line question only a complete line is new: a reply that stops
    in the middle of a line again takes the place of the line asked about, and a model
    that does so forever would be asked forever."""
    asked_at = context.asked_at_lines
    return grew and (asked_at is None or journal.lines > asked_at)


def quote(journal: Journal) -> Quoted:
    """The tail the next prompt quotes: the last complete lines, and the unfinished last
    line if the content stops in the middle of one."""
    last = journal.last_line()
    unfinished = last.decode("utf-8", "replace").removesuffix("\r") if last else None
    lines = journal.tail_lines(QUOTED_LINES + (1 if unfinished is not None else 0))
    if unfinished is not None:
        lines = lines[:-1]
    return Quoted(tuple(lines), unfinished)


def how_it_was_cut(finish: Finish, session_id: str, target: str, lines: int) -> str | None:
    """A cut the user would not see otherwise (the network, an error event, the content
    filter), named with the file and the session; ``None`` for the others."""
    where = (f"while write session {session_id[:8]} was writing {target}: what arrived is "
             f"kept ({lines} lines), taken as cut off")
    if finish.raw == CONNECTION_LOST:
        return f"the connection broke in the middle of the reply {where}"
    if finish.raw == STREAM_ERROR:
        return ("the endpoint reported an error in the middle of the reply ("
                f"{finish.error or 'no message'}) {where}")
    if finish.raw == CONTENT_FILTER:
        return (f"the endpoint's content filter stopped the reply (finish reason "
                f"content_filter) {where}")
    return None


def set_aside(why: str, part: Part, *, tools: list[str] | None, terminator: str, target: str,
              line: int) -> tuple[str, str | None]:
    """What the user is told was set aside (the part, in words), and what the model is told
    with its next prompt (``None``: told otherwise, or nothing). ``line``: the number of the
    line after the content."""
    figures = _figures(part)
    if why == BESIDE_A_TOOL_CALL:
        calls = " and ".join(tools or []) or "tool"
        return f"the text beside the {calls} call ({figures})", None
    if why == AFTER_DONE:
        return f"the text after {terminator} ({figures})", None
    if why == CUT_LINE:
        return (f"line {line} as it was cut off ({figures}), which the reply did not send "
                "again,",
                f"Line {line} as it was cut off ({figures}) was set aside as part "
                f"{part.number}: your reply did not start with it again, so your reply's first "
                "line took its place. If the cut line belongs in front of that line, call "
                f"WritePlanTool_keep with part {part.number}.")
    if why == RESENT:
        return (f"the quoted lines the reply sent again ({figures})",
                f"Your reply started with lines the request quoted as saved ({figures}): they "
                f"were set aside as part {part.number}, not written twice. If they belong in "
                "the file once more (rows that repeat), call WritePlanTool_keep with part "
                f"{part.number}: they go back in front of what you sent after them.")
    if why == REASONING:
        return (f"the reasoning at the start of the reply ({figures})",
                f"The <think> block at the start of your reply ({figures}) was taken for "
                f"reasoning and set aside as part {part.number}, not added to {target}. If it "
                f"belongs in the file, call WritePlanTool_keep with part {part.number}.")
    return f"the reply that started {target} over ({figures})", None


def beside_a_tool_call(part: Part, names: list[str], session_id: str, target: str) -> str:
    """What the model is told of the text it wrote beside a tool call."""
    calls = " and ".join(names) or "tool"
    return (f"Write session {session_id[:8]}: the text you wrote beside your {calls} call "
            f"({_figures(part)}) was set aside as part {part.number}, not added to {target}: "
            "text in a message that calls a tool is not content. If it belongs in the file, "
            f"call WritePlanTool_keep with part {part.number}: it goes back where it was, in "
            "front of what you send next. Otherwise go on.")


def restarted(part: Part, target: str, lines: int, terminator: str) -> str:
    """What the model is told of a reply that started the file over."""
    return (f"Your reply started {target} over: it begins with the file's first lines again "
            f"({_figures(part)}). It was set aside as part {part.number}, not added; {lines} "
            "lines are saved. If it belongs in the file (a file whose parts start alike), call "
            f"WritePlanTool_keep with part {part.number}; otherwise continue after line "
            f"{lines}, and end with {terminator} on its own line.")


def _figures(part: Part) -> str:
    """``3 lines, first line 'Task B'``: the same figures for the user and the model."""
    count = f"{part.lines} line{'s' if part.lines != 1 else ''}"
    return f"{count}, first line {part.first_line!r}" if part.first_line else count
