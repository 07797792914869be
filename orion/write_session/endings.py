"""How a write session ends without writing its target, and what each ending tells.

A session that does not write ends one of five ways: the write *failed* (a plugin or the disk
refused it), it was *blocked* (a validator's blocking issue outlived the correction rounds),
the statechart *abandoned* it (nothing to keep), it was abandoned but *kept* (its journal holds
content, so it stays for ``orion sessions recover``), or it was *set aside* (``/reset``). A
session still open when the process ends is left for the next one to finish
(:meth:`Endings.left_open`).

:class:`Endings` makes each one an :class:`Ending`: the status the session reaches, what the
user and the model are told, the trace event with the figures the user was told, and what
becomes of the journal and of the messages the user typed meanwhile. It only reads; the session
carries an ending out in one place, as it carries out a
:class:`~orion.write_session.finalize.Written`. Making sure the content outlives a session that
did not write it (:func:`keep_content`, :func:`holds_content`) is here too.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orion.errors import GuardError
from orion.trace.events import Kind
from orion.write_session.finalize import set_aside_report
from orion.write_session.journal import CONTENT, Journal, read_private
from orion.write_session.operations import TargetChanged
from orion.write_session.view import WriteStatus

if TYPE_CHECKING:
    from orion.validation import Issue
    from orion.write_session.held import HeldMessages
    from orion.write_session.set_aside import SetAside

__all__ = ["Ending", "Endings", "Held", "Remains", "blocked_message", "failure_message",
           "holds_content", "keep_content", "unsaved"]


class Remains(Enum):
    """What becomes of the session's journal."""

    #: Closed with the content, for ``orion sessions recover``.
    KEPT = "kept"
    #: Removed; the text set aside moves where ``orion sessions show`` finds it.
    REMOVED = "removed"


class Held(Enum):
    """What becomes of the messages the user typed while the session was open."""

    #: Sent to the model now.
    SENT = "sent"
    #: Kept with the journal (and counted), sent once the session is continued.
    KEPT = "kept"
    #: Kept with the journal only: the conversation they were typed in was reset.
    LEFT = "left"


@dataclass(frozen=True)
class Ending:
    """A session's ending without a write, as the session carries it out."""

    status: WriteStatus
    #: What the user is told.
    notice: str
    #: What the model is told with the next prompt; ``None``: nothing (its conversation was
    #: reset).
    told: str | None
    #: The trace event: its kind, its name, and its attributes (the figures the user is told).
    kind: str
    name: str
    figures: dict[str, Any] = field(default_factory=dict)
    remains: Remains = Remains.KEPT
    held: Held = Held.SENT


class Endings:
    """The endings of one session, made from what they report: its id, its target, its
    journal (the figures) and its text set aside."""

    def __init__(self, session_id: str, relative: str, journal: Journal,
                 aside: SetAside) -> None:
        self.session_id = session_id
        self.relative = relative
        self.journal = journal
        self.aside = aside

    def _aside_report(self) -> str:
        return set_aside_report(self.aside, self.session_id, self.relative)

    def failed(self, cause: BaseException, kept: str | None) -> Ending:
        """The write failed (``kept``: see :func:`keep_content`): the content stays in the
        journal, and the user and the model are told why."""
        message = failure_message(cause, kept, session_id=self.session_id,
                                  relative=self.relative, journal=self.journal)
        return Ending(WriteStatus.FAILED, message, message, Kind.ERROR, "write failed",
                      {"orion.where": "write session", "orion.error": str(cause)})

    def blocked(self, blocking: list[Issue], rounds: int, kept: str | None) -> Ending:
        """Issues that block the write remain after the last correction round: the target is
        not written, the content stays in the journal (``orion sessions`` lists the session
        as ``blocked``, with the issues), and the model and the user are told why."""
        message = blocked_message(blocking, rounds, kept, session_id=self.session_id,
                                  relative=self.relative, journal=self.journal)
        if self.aside.pending:
            message += self._aside_report()
        return Ending(WriteStatus.BLOCKED, message, message, Kind.WRITE_REPORT,
                      f"blocked {self.relative}", {
                          "orion.target": self.relative, "orion.status": "blocked",
                          "orion.issues": len(blocking), "orion.code": blocking[0].code})

    def abandoned(self, why: str) -> Ending:
        """The chart ended the session without a write because a plugin or the user asked (a
        team's ``/reject``): their decision stands, and the journal goes."""
        message = f"The write session for {self.relative} was abandoned: {why}."
        if self.aside.pending:
            message += self._aside_report()
        return Ending(WriteStatus.ABANDONED, message, message, Kind.WRITE_REPORT,
                      f"abandoned {self.relative}", {
                          "orion.target": self.relative, "orion.status": "abandoned",
                          "orion.why": why}, remains=Remains.REMOVED)

    def kept(self, why: str) -> Ending:
        """The chart ended the session without a write, but its journal holds content: it is
        kept as an orphan with its recover line, never removed. The chart's decision stands
        (a user's /reject, a plugin's abandon): the model is told and the session reads as
        abandoned; only its journal outlives it, for recovery."""
        short, lines = self.session_id[:8], self.journal.lines
        aside = f", {self.aside.lines} lines set aside" if self.aside.pending else ""
        notice = (f"write session {short} for {self.relative} ended without a write ({why}), "
                  f"but its journal holds {lines} lines{aside}: it is kept, "
                  f"`orion sessions recover {short} --continue` lets the next orion run or "
                  "orion chat finish it, `--finalize` writes what was saved")
        told = (f"The write session for {self.relative} was abandoned: {why}. Nothing was "
                f"written; its {lines} saved lines are kept for the user to recover.")
        return Ending(WriteStatus.ABANDONED, notice, told, Kind.WRITE_REPORT,
                      f"kept {self.relative}", self._sizes("set_aside", why), held=Held.KEPT)

    def set_aside(self, why: str, kept: str | None, held: int) -> Ending:
        """Stopped without writing or deleting anything (``/reset``): the journal keeps the
        content and the ``held`` messages the user typed, for ``orion sessions recover``."""
        short = self.session_id[:8]
        kept_too = (f"; {held} message(s) you typed meanwhile are kept with it and sent once "
                    "it is continued with --continue" if held else "")
        if kept is None:
            notice = (f"write session {short} for {self.relative} was set aside ({why}); "
                      f"its {self.journal.lines} lines are kept: `orion sessions recover "
                      f"{short} --finalize` writes them, `--continue` lets the next run go on "
                      "with the model")
        else:
            notice = unsaved(f"was set aside ({why})", kept, session_id=self.session_id,
                             relative=self.relative, journal=self.journal)
        return Ending(WriteStatus.SET_ASIDE, notice + kept_too, None, Kind.WRITE_REPORT,
                      f"set aside {self.relative}", self._sizes("set_aside", why),
                      held=Held.LEFT)

    def left_open(self, held: HeldMessages) -> str:
        """What an open session means for a user who leaves now (``/quit``, the end of a
        script): where its content is, the ``held`` messages the user typed meanwhile, how to
        go on."""
        short = self.session_id[:8]
        aside = f", {self.aside.lines} lines set aside" if self.aside.pending else ""
        text = (f"write session {short} for {self.relative} is still open "
                f"({self.journal.lines} lines saved{aside})")
        text += held.described()
        return (text + f": `orion sessions recover {short} --continue` lets the next orion "
                f"run or orion chat finish it, `--finalize` writes what was saved")

    def unsaved_at_exit(self, kept: str) -> str:
        """The process ends with the session open and its journal could not be saved (``kept``:
        see :func:`unsaved`)."""
        return unsaved("is still open as Orion ends", kept, session_id=self.session_id,
                       relative=self.relative, journal=self.journal)

    def _sizes(self, status: str, why: str) -> dict[str, Any]:
        return {"orion.target": self.relative, "orion.status": status, "orion.why": why,
                "orion.lines": self.journal.lines, "orion.bytes": self.journal.bytes}


def keep_content(journal: Journal, state_dir: Path, name: str) -> str | None:
    """Make sure the content survives a session that did not write it: None when the journal
    holds all of it on disk; else the path of a rescue file (``orion-rescued-<name>``) it was
    written to, or (no path) why nothing could hold it."""
    if journal.secure():
        return None
    places = [state_dir / "rescued", Path(tempfile.gettempdir()), Path.home()]
    try:
        rescued = journal.rescue(places, name)
    except OSError as exc:
        return f"{exc.strerror or exc}"
    return str(rescued)


def holds_content(journal: Journal) -> bool:
    """Whether the session's content holds anything but blanks (FS-13), counted from the
    journal (its file once it is closed), never from the last message alone. (Text set aside
    goes to the archive and held messages to the conversation when a session is abandoned:
    neither is lost.)"""
    if not journal.closed:
        return bool(journal.content().strip())
    try:
        return bool(read_private(journal.content_path).strip())
    except OSError:
        return journal.bytes > 0


def unsaved(what: str, kept: str, *, session_id: str, relative: str, journal: Journal) -> str:
    """A session's journal could not be saved: where its content went instead (``kept``: a
    rescue file's path, or why nothing could hold it)."""
    where = (f"its content ({journal.lines} lines) was written to {kept}"
             if kept.startswith("/") else
             f"its content ({journal.lines} lines) could not be saved anywhere ({kept})")
    return (f"write session {session_id[:8]} for {relative} {what}; its journal could not be "
            f"saved ({journal.degraded}), so {where}")


def failure_message(cause: BaseException, kept: str | None, *, session_id: str,
                    relative: str, journal: Journal) -> str:
    """What the user and the model are told of a write that failed (``kept``: see
    :func:`unsaved`; ``None`` when the journal holds the content)."""
    reason = str(cause).rstrip().rstrip(".")
    short = session_id[:8]
    if kept is None:
        saved = (f"The content is saved in write session {short}; "
                 f"`orion sessions recover {short} --finalize` writes it")
        saved += (" onto the file as it is now" if isinstance(cause, TargetChanged)
                  else " once the problem is fixed")
    elif kept.startswith("/"):
        saved = (f"The write session's journal could not be saved ({journal.degraded}), so "
                 f"the content ({journal.lines} lines) was written to {kept} instead; copy it "
                 "from there")
    else:
        saved = (f"The content ({journal.lines} lines) could not be saved anywhere ({kept}); "
                 "it is lost when this process ends")
    retry = (" To retry, read the file again and call WritePlanTool_begin with a new plan."
             if isinstance(cause, TargetChanged) else "")
    if isinstance(cause, GuardError):
        return f"{relative} is held, not written: {reason}. {saved}."
    return f"Could not write {relative}: {reason}. {saved}.{retry}"


def blocked_message(blocking: list[Issue], rounds: int, kept: str | None, *, session_id: str,
                    relative: str, journal: Journal) -> str:
    """What the user and the model are told of a write blocked by issues that remain after
    the last correction round."""
    short = session_id[:8]
    shown = "; ".join(f"line {i.line}: {i.message} [{i.code}]" for i in blocking[:3])
    more = f" (and {len(blocking) - 3} more)" if len(blocking) > 3 else ""
    where = (f"its content stays in write session {short} (`orion sessions list` shows it; "
             f"fix {journal.directory / CONTENT} and `orion sessions recover {short} "
             f"--finalize` writes it, or `orion sessions discard {short}`)") if kept is None \
        else unsaved("was blocked", kept, session_id=session_id, relative=relative,
                     journal=journal)
    return (f"{relative} was not written: {len(blocking)} issue(s) that block a write remain "
            f"after {rounds} correction rounds: {shown}{more}. The file is as it was; {where}.")
