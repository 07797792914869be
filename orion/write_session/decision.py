"""What the model's text is: the one decision step of a write session, as data.

Every character the model streams while a session is open is kept: in the content (the
journal), or set aside beside it (see :mod:`orion.write_session.set_aside`), or it is a
terminator line, or a repeat the prompt declared. Which of these a piece of text is follows
from a rule the model was told in the prompt that asked for the text, never from the text's
size or shape:

- the **begin result** (and the context block of every request): plain text is the content,
  until a line ``DONE``; text in a message that also calls a tool is set aside; text after the
  ``DONE`` line is set aside (blank lines and more ``DONE`` lines aside);
- the **idle prompt**: reply ``DONE`` alone when the file is complete; anything else is added
  to the file;
- the **continuation prompt** (the output was cut off) and the **unfinished-line prompt** (a
  message stopped in the middle of a line): both quote the tail; when the last line was not
  finished, the reply starts with that line again, whole, and its first line replaces it (the
  resent part is a declared repeat; a reply that does not send it again sets the old text
  aside). Nothing else is a repeat.

Two pure functions make the decisions; the session carries them out. :func:`read_start` reads
the start of a reply to a prompt that quoted a tail, :func:`decide_end` the end of every
message. The table in docs/write-sessions.md ("The decision table") lists their outcomes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["Cut", "End", "Facts", "Quoted", "Start", "Step", "decide_end", "read_start",
           "HEAD_LINES"]

#: How many of the content's first lines a reply must repeat, in order, to be a restart (a
#: circular continuation). The content must have more complete lines than that.
HEAD_LINES = 3


class Cut(str, Enum):
    """How a message ended."""

    CLEAN = "clean"  # stop (or tool_calls)
    LENGTH = "length"  # the output limit, or any reason that is not a clean end
    FILTER = "content_filter"  # the provider's content filter stopped it
    ERROR = "error"  # an error event in the stream, after content arrived
    CONNECTION = "connection_lost"  # the network cut the stream


class Step(str, Enum):
    """What the session does after a message."""

    FINALIZE = "finalize"  # DONE: validate and write
    CONTINUE = "continue"  # cut off: ask at once to go on (the statechart decides the limits)
    ASK_UNFINISHED = "ask_unfinished"  # stopped mid-line, cleanly: ask at once, DONE or more
    PAUSE = "pause"  # the idle timer asks later
    STAY = "stay"  # nothing changes (a message beside a tool call, or no content mode)


@dataclass(frozen=True)
class Quoted:
    """The tail a prompt quoted: the last complete lines (without their line breaks) and the
    unfinished last line, if the content stopped in the middle of one."""

    lines: tuple[str, ...] = ()
    unfinished: str | None = None

    def to_json(self) -> dict:
        return {"lines": list(self.lines), "unfinished": self.unfinished}

    @classmethod
    def from_json(cls, data: object) -> Quoted | None:
        if not isinstance(data, dict):
            return None
        lines = data.get("lines")
        unfinished = data.get("unfinished")
        return cls(tuple(str(x) for x in lines) if isinstance(lines, list) else (),
                   unfinished if isinstance(unfinished, str) else None)


@dataclass(frozen=True)
class Start:
    """How a reply to a prompt starts.

    ``repeat``: characters at its start that repeat the quoted tail, a declared repeat (not
    added: the content already holds them). ``cut_line``: what becomes of the unfinished line
    the prompt quoted: ``kept`` (the reply resent it and goes on from there, or the reply has
    no content and the file ends with that line), ``set_aside`` (the reply did not resend it:
    the reply takes the line's place, and the old text is set aside), or ``None`` (no line was
    unfinished). ``circular``: the reply starts the file over."""

    repeat: int = 0
    cut_line: str | None = None
    circular: bool = False


def read_start(text: str, *, ended: bool, quoted: Quoted | None,
               head: tuple[str, ...] = (), head_complete: bool = False,
               tail: tuple[str, ...] = ()) -> Start | None:
    """Decide how a reply starts, from ``text``, the reply's content so far (before any
    terminator line). ``None`` while the text is too short to tell (it still matches what it
    is compared with) and the message has not ended: the caller holds the text back and asks
    again with more. The answer depends only on the text, never on how it was chunked.

    ``head``: the content's first :data:`HEAD_LINES` lines; ``head_complete``: the content has
    more complete lines than that; ``tail``: its last :data:`HEAD_LINES` complete lines. A
    reply can start the file over only when the content is longer than its head, and its head
    is not also its tail (rows that are all alike cannot tell a restart from more rows)."""
    repeat, cut_line = 0, None
    at_line_start = True
    if quoted is not None and quoted.unfinished is not None:
        # The reply must start with the unfinished line, whole.
        found = _repeat_before(text, quoted, ended)
        if found is None:
            return None
        if found >= 0:
            repeat, cut_line, at_line_start = found, "kept", False
        elif text.strip() or not ended:
            cut_line = "set_aside"
        else:
            cut_line = "kept"  # only DONE, or nothing: the file ends with that line
    circular = False
    if at_line_start and head_complete and head and tuple(head) != tuple(tail):
        wanted = "".join(line + "\n" for line in head)
        probe = text.replace("\r\n", "\n") if "\r" in text else text
        if len(probe) < len(wanted) and wanted.startswith(probe) and not ended:
            return None
        circular = probe.startswith(wanted)
    return Start(repeat, cut_line, circular)


def _repeat_before(text: str, quoted: Quoted, ended: bool) -> int | None:
    """How many characters of ``text`` are the unfinished line sent again (its old text, which
    the content holds), or -1 when the reply does not start with it; None while the text is a
    start of it and the message goes on. Nothing else is taken for a repeat: with rows that
    are all alike, a quoted line in front of it could as well be a new row."""
    unfinished = quoted.unfinished or ""
    if text.startswith(unfinished):
        return len(unfinished)
    if not ended and len(text) < len(unfinished) and unfinished.startswith(text):
        return None
    return -1


@dataclass(frozen=True)
class Facts:
    """What the session knows when a message ends. (What the model was asked matters at the
    start of its reply, through the quoted tail: see :func:`read_start`.)"""

    cut: Cut
    tool_calls: bool = False
    done: bool = False  # the terminator line arrived (outside a fence)
    mid_line: bool = False  # the content this message added stops in the middle of a line
    grew: bool = False  # this message added content
    text: bool = False  # the message had any text at all (not only white space)
    receiving: bool = True  # the session takes content now (not correcting, not ended)


@dataclass(frozen=True)
class End:
    """What to do when a message ends. ``set_aside``: the message's content (everything it
    added) is set aside, with this reason; ``after_done``: the text after the terminator line
    is set aside (blank lines and terminator lines aside)."""

    step: Step
    set_aside: str | None = None
    after_done: bool = False


#: Why a message's text was set aside, as the user and the model are told.
BESIDE_A_TOOL_CALL = "beside a tool call"
AFTER_DONE = "after DONE"
CUT_LINE = "the unfinished line, not sent again"
RESTART = "a continuation that started the file over"
#: Each reason as an enum value, for the trace (which keeps no phrases).
SET_ASIDE_KINDS = {BESIDE_A_TOOL_CALL: "beside_tool_call", AFTER_DONE: "after_done",
                   CUT_LINE: "unfinished_line", RESTART: "restart"}


def decide_end(facts: Facts) -> End:
    """The step after a message, by the rules above (the table in docs/write-sessions.md)."""
    if not facts.receiving:
        return End(Step.STAY)
    if facts.done:
        return End(Step.FINALIZE, after_done=True)
    if facts.tool_calls:
        # The begin result says so: text in a message that calls a tool is set aside, and the
        # session goes on as it was.
        return End(Step.STAY, set_aside=BESIDE_A_TOOL_CALL if facts.text else None)
    if facts.cut is not Cut.CLEAN:
        return End(Step.CONTINUE)
    if facts.mid_line:
        return End(Step.ASK_UNFINISHED)
    return End(Step.PAUSE)
