"""The messages the user types while a write session is open: held, not sent.

The model's answer to a message typed mid-write would stream into the file, so the message is
held: saved with the journal's state at once, and sent to the model once the session ends
(written, abandoned, failed or blocked). A session set aside or left open when the process ends
keeps them with its journal, and the session that continues it sends them.
:class:`HeldMessages` is the session's list of them and what the user is told about them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orion.runtime.conversation import Conversation

__all__ = ["HeldMessages"]


class HeldMessages(list[str]):
    """The messages held, oldest first (a list: what the journal saves, and what a plugin's
    notice reads as ``session.held_messages``)."""

    @classmethod
    def of_state(cls, state: Mapping[str, Any]) -> HeldMessages:
        """The messages a journal's saved state holds (an adopted session brings its own
        back)."""
        return cls(str(message) for message in state.get("held") or [])

    def send(self, conversation: Conversation) -> None:
        """The session ended: each message goes to the model, in the order it was typed."""
        held = list(self)
        self.clear()
        for line in held:
            conversation.add_user(line)

    def notice(self, session_id: str, relative: str, *, asks: bool) -> str:
        """What the user is told of the message just held (``asks``: the model is asked at
        once whether it is finished)."""
        return (f"write session {session_id[:8]} for {relative} is open: your message is "
                "held and sent to the model once the file is written"
                + ("; the model is asked now whether it is finished" if asks else "")
                + " (/reset sets the session aside)")

    def described(self) -> str:
        """``; 2 messages you typed are held with it (...)``, for the notice of an open
        session (``""`` when none is held)."""
        if not self:
            return ""
        first = self[0]
        first = first if len(first) <= 60 else first[:60] + "…"
        count = len(self)
        return (f"; {count} message{'s' if count != 1 else ''} you typed "
                f"{'are' if count != 1 else 'is'} held with it ({first!r}) and sent once "
                "the file is written")
