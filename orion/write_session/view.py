"""What a plugin sees of a write session: a small, typed view, and its status as an enum.

``orion.api.write_sessions()`` and ``write_session_of()`` hand out a :class:`WriteSessionView`
rather than the session itself, whose methods are the controller's own and change with it. The
view reads the live session (its status and sizes are those of now) and offers the two
commands a team's statechart needs: :meth:`fire` (leave a state of its own, as a review) and
:meth:`set_aside` (stop without writing, as ``/reset`` does).
"""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from orion.hooks.renames import renamed

if TYPE_CHECKING:
    from orion.statechart.interpreter.lifecycle import Lifecycle
    from orion.write_session.session import WriteSession


class WriteStatus(StrEnum):
    """Where a write session stands: every status a session can reach is one of these (the
    session itself holds its status as one). Each value is the string teams compared before
    0.2.0 (``session.status == "written"`` still holds)."""

    #: Open: content may still arrive, or a state of the chart waits (a review).
    ACTIVE = "active"
    #: The file holds everything streamed as content.
    WRITTEN = "written"
    #: The file is written, and text beside the content was set aside (kept, recoverable).
    WRITTEN_WITH_SET_ASIDE = "written_with_set_aside"
    #: Written as far as the content went: it stopped without ``DONE`` and without a
    #: continuation.
    INCOMPLETE = "incomplete"
    #: The write failed; the content stays in the journal for ``orion sessions recover``.
    FAILED = "failed"
    #: A validator's blocking issue remained after the last correction round: the target is
    #: not written, the content stays in the journal (``orion sessions`` lists it, blocked).
    BLOCKED = "blocked"
    #: The lifecycle ended without a write (a final state such as ``abandoned``).
    ABANDONED = "abandoned"
    #: Stopped without writing or deleting anything (``/reset``); recoverable.
    SET_ASIDE = "set_aside"


class WriteSessionView:
    """One write session, read through: what it writes, where it stands, how much it holds."""

    __slots__ = ("_session",)

    def __init__(self, session: WriteSession) -> None:
        self._session = session

    @property
    def id(self) -> str:
        """The session id (also its directory's name under ``.orion/write_sessions``)."""
        return self._session.id

    @property
    def file(self) -> str:
        """The target file, relative to the workspace."""
        return self._session.plan.relative

    @property
    def operation(self) -> str:
        """The write plan's operation: ``create``, ``append``, ``overwrite``, ``insert``,
        ``replace_block`` or ``replace_all``."""
        return str(self._session.plan.plan.operation.value)

    @property
    def status(self) -> WriteStatus:
        return WriteStatus(self._session.status)

    @property
    def lines(self) -> int:
        """Content lines received so far."""
        return self._session.summary().lines

    @property
    def bytes(self) -> int:
        """Content bytes received so far."""
        return self._session.summary().bytes

    @property
    def report(self) -> str:
        """The one-line report once the session has ended (``""`` while it is open)."""
        return self._session.summary().report

    @property
    def written(self) -> bool:
        """Whether the target file was written."""
        return self._session.result is not None

    @property
    def lifecycle(self) -> Lifecycle:
        """The session's ``write_session`` lifecycle (its state, tags, context)."""
        return self._session.lifecycle

    #: The names of 0.1 (the session itself was handed out then): ``plan`` is the checked
    #: write plan (``plan.relative`` is :attr:`file`), ``result`` the write's result or
    #: ``None`` (:attr:`written`).
    plan = renamed("WriteSessionView", "plan", read=lambda view: view._session.plan)
    result = renamed("WriteSessionView", "result", read=lambda view: view._session.result)

    def fire(self, trigger: str, **payload: Any) -> WriteStatus:
        """Send ``trigger`` to the lifecycle and carry out what the statechart decided, as
        Orion does after ``DONE`` (the write, or dropping the session with
        ``payload["reason"]``). A trigger the current state does not take raises
        :class:`~orion.errors.TriggerNotAllowed`."""
        return WriteStatus(self._session.fire(trigger, **payload))

    def set_aside(self, why: str) -> None:
        """Stop without writing or deleting anything; ``orion sessions recover`` can finish
        it."""
        self._session.set_aside(why)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WriteSessionView) and other._session is self._session

    def __hash__(self) -> int:
        return id(self._session)

    def __repr__(self) -> str:
        return f"<WriteSessionView {self.id[:8]} {self.file} {self.status.value}>"
