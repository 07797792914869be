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

__all__ = ["Cut", "End", "Facts", "Next", "Quoted", "Start", "decide_end", "read_start",
           "HEAD_LINES", "RESTART_LINES"]

#: The content must have more complete lines than this for a reply to be taken for a restart
#: (a circular continuation): three lines repeated are not enough to tell (a multi-document
#: YAML file, a grid whose next part starts as the file did).
HEAD_LINES = 3
#: How many of the content's first lines a reply must repeat, in order, to be a restart: all
#: of its complete lines when it has fewer.
RESTART_LINES = 10


class Cut(str, Enum):
    """How a message ended."""

    CLEAN = "clean"  # stop (or tool_calls)
    LENGTH = "length"  # the output limit, or any reason that is not a clean end
    FILTER = "content_filter"  # the provider's content filter stopped it
    ERROR = "error"  # an error event in the stream, after content arrived
    CONNECTION = "connection_lost"  # the network cut the stream


class Next(str, Enum):
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

    ``resent``: characters at its start that are complete lines the prompt quoted, sent
    again (the last of them, or the last few, in order): a resend, set aside rather than
    written twice (the model can put them back: rows that repeat are real). ``repeat``:
    characters after those that repeat the unfinished line, a declared repeat (not added: the
    content already holds them). ``cut_line``: what becomes of the unfinished line
    the prompt quoted: ``kept`` (the reply resent it and goes on from there, or the reply has
    no content and the file ends with that line), ``set_aside`` (the reply did not resend it:
    the reply takes the line's place, and the old text is set aside), or ``None`` (no line was
    unfinished). ``circular``: the reply starts the file over."""

    repeat: int = 0
    cut_line: str | None = None
    circular: bool = False
    resent: int = 0


def read_start(text: str, *, ended: bool, quoted: Quoted | None,
               head: tuple[str, ...] = (), head_complete: bool = False,
               tail: tuple[str, ...] = ()) -> Start | None:
    """Decide how a reply starts, from ``text``, the reply's content so far (before any
    terminator line). ``None`` while the text is too short to tell (it still matches what it
    is compared with) and the message has not ended: the caller holds the text back and asks
    again with more. The answer depends only on the text, never on how it was chunked.

    ``head``: the content's first lines (at most :data:`RESTART_LINES`); ``head_complete``:
    the content has more than :data:`HEAD_LINES` complete lines; ``tail``: its last
    :data:`HEAD_LINES` complete lines. A reply can start the file over only when the content
    is longer than three lines, and its first lines are not also its last (rows that are all
    alike cannot tell a restart from more rows)."""
    read = _read_quoted(text, quoted, ended)
    if read is None:
        return None
    resent, repeat, cut_line = read
    at_line_start = not repeat  # a reply that goes on from the cut line cannot restart
    circular = False
    if at_line_start and head_complete and head and tuple(head[:len(tail)]) != tuple(tail):
        wanted = "".join(line + "\n" for line in head)
        probe = text[resent:]
        probe = probe.replace("\r\n", "\n") if "\r" in probe else probe
        if len(probe) < len(wanted) and wanted.startswith(probe) and not ended:
            return None
        circular = probe.startswith(wanted)
    return Start(repeat, cut_line, circular, resent)


def _read_quoted(text: str, quoted: Quoted | None, ended: bool) \
        -> tuple[int, int, str | None] | None:
    """How the reply starts against the tail the prompt quoted: the characters of quoted
    lines it sent again, of the unfinished line it sent again, and what becomes of that line
    (see :class:`Start`); None while the text cannot tell yet."""
    if quoted is None:
        return 0, 0, None
    if quoted.unfinished is None:
        again = _resent(text, quoted.lines, ended)
        return None if again is None else (again, 0, None)
    # The reply must start with the unfinished line, whole, or with quoted lines sent again
    # and then the unfinished line.
    found = _repeat_before(text, quoted, ended)
    if found is None:
        return None
    if found >= 0:
        return 0, found, "kept"
    again = _resent(text, quoted.lines, ended, then=quoted.unfinished)
    if again is None:
        return None
    if again:
        return again, len(quoted.unfinished), "kept"
    # Only DONE, or nothing: the file ends with that line; anything else takes its place.
    return 0, 0, "set_aside" if text.strip() or not ended else "kept"


def _resent(text: str, lines: tuple[str, ...], ended: bool, then: str | None = None) \
        -> int | None:
    """How many characters at the start of ``text`` are the last quoted ``lines`` (the
    longest run of them that ends with the last) sent again, each whole with its line break;
    0 when none. With ``then``, only a run the text goes on after with ``then`` counts (the
    unfinished line, sent again after the quoted lines). None while a longer run is still
    possible and the message goes on."""
    for k in range(len(lines), 0, -1):
        matched = _starts_with_lines(text, lines[-k:], ended)
        if matched is None:
            return None
        if matched < 0:
            continue
        if then is None:
            return matched
        rest = text[matched:]
        if rest.startswith(then):
            return matched
        if not ended and len(rest) < len(then) and then.startswith(rest):
            return None
    return 0


def _starts_with_lines(text: str, lines: tuple[str, ...], ended: bool) -> int | None:
    """The characters of ``text`` that are ``lines``, each with its line break (``\\r\\n``
    too), or -1 when it does not start with them; None while it may still."""
    at = 0
    for line in lines:
        nl = text.find("\n", at)
        if nl < 0:
            rest = text[at:]
            if not ended and ((line + "\r").startswith(rest)):
                return None
            return -1
        if text[at:nl].removesuffix("\r") != line:
            return -1
        at = nl + 1
    return at


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

    next: Next
    set_aside: str | None = None
    after_done: bool = False


#: Why a message's text was set aside, as the user and the model are told.
BESIDE_A_TOOL_CALL = "beside a tool call"
AFTER_DONE = "after DONE"
CUT_LINE = "the unfinished line, not sent again"
RESTART = "a reply that started the file over"
RESENT = "quoted lines sent again"
REASONING = "reasoning"
#: Each reason as an enum value, for the trace (which keeps no phrases).
SET_ASIDE_KINDS = {BESIDE_A_TOOL_CALL: "beside_tool_call", AFTER_DONE: "after_done",
                   CUT_LINE: "unfinished_line", RESTART: "restart", RESENT: "resent",
                   REASONING: "reasoning"}


def decide_end(facts: Facts) -> End:
    """The step after a message, by the rules above (the table in docs/write-sessions.md)."""
    if not facts.receiving:
        return End(Next.STAY)
    if facts.done:
        return End(Next.FINALIZE, after_done=True)
    if facts.tool_calls:
        # The begin result says so: text in a message that calls a tool is set aside, and the
        # session goes on as it was.
        return End(Next.STAY, set_aside=BESIDE_A_TOOL_CALL if facts.text else None)
    if facts.cut is not Cut.CLEAN:
        return End(Next.CONTINUE)
    if facts.mid_line:
        return End(Next.ASK_UNFINISHED)
    return End(Next.PAUSE)
