"""What the parts of a write session use of each other, declared for the type checker.

:class:`~orion.write_session.session.WriteSession` is put together from mixins (``Ingest``,
``MessageEnds``, ``Finalizer``) that read and change the session's state and call
each other's methods. :class:`SessionMembers` declares that state and those methods; each mixin
has it as its base when type-checked (``object`` at run time, so nothing is looked up through
it); its methods are abstract, so mypy checks that WriteSession implements each of them with
the declared signature.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orion.runtime.conversation import Message
    from orion.runtime.runtime import Runtime
    from orion.statechart.interpreter.lifecycle import Lifecycle
    from orion.validation import Issue, StreamedLines
    from orion.write_session.flush_timer import FlushTimer
    from orion.write_session.journal import Journal
    from orion.write_session.operations import WriteResult
    from orion.write_session.plan import CheckedPlan
    from orion.write_session.progress import Progress
    from orion.write_session.protocol import EndMarker
    from orion.write_session.set_aside import Part, SetAside
    from orion.write_session.view import WriteStatus


class SessionMembers:
    """The write session's state and methods its mixins share (see the module docstring)."""

    # -- the session (set by WriteSession.__init__) ----------------------------------------------
    runtime: Runtime
    plan: CheckedPlan
    lifecycle: Lifecycle
    journal: Journal
    id: str
    marker: EndMarker
    aside: SetAside
    status: WriteStatus
    result: WriteResult | None
    issues: list[Issue]
    replaced: int
    remaining: list[Issue]
    messages: list[Message]
    held_messages: list[str]
    report: str

    # -- the message being streamed ----------------------------------------------------------------
    _in_message: bool
    _message_text: list[str]
    _message_cut: bool
    _claimed_from: int
    _held: list[str]
    _held_size: int
    _read_at: int
    _mode: str
    _batch: list[str]
    _batch_chars: int
    _batch_lines: int
    _batch_error: BaseException | None
    _last_live: float
    _flush_timer: FlushTimer
    _fixed: bytes | None
    _normalized: bool
    _bytes_at_start: int
    _circular: bool
    _commentary_message: Message | None
    _marker_at_start: tuple[Any, ...] | None  # EndMarker.save()
    _marker_at_end: tuple[Any, ...] | None
    _quoted_at_start: Any
    _streamed: StreamedLines | None

    # -- WriteSession's methods ----------------------------------------------------------------------
    @property
    @abstractmethod
    def terminator(self) -> str: ...
    @property
    @abstractmethod
    def state(self) -> str: ...
    @abstractmethod
    def fire(self, trigger: str, **payload: Any) -> str: ...
    @abstractmethod
    def checkpoint(self) -> None: ...
    @abstractmethod
    def _new_streamed(self) -> StreamedLines | None: ...
    @abstractmethod
    def _trigger(self, trigger: str, **payload: Any) -> None: ...
    @abstractmethod
    def _tell_now(self, text: str) -> None: ...
    @abstractmethod
    def _tell_later(self, text: str) -> None: ...
    @abstractmethod
    def _with_news(self, text: str) -> str: ...
    @abstractmethod
    def _journal_state(self, *, finalizing: bool = False) -> dict[str, Any]: ...
    @abstractmethod
    def _trace(self, kind: str, name: str, attributes: dict[str, Any]) -> None: ...
    @abstractmethod
    def _deliver_held(self) -> None: ...
    @abstractmethod
    def _detach(self) -> None: ...
    @abstractmethod
    def _stop_listening(self) -> None: ...
    @abstractmethod
    def _keep_unread_start(self) -> None: ...

    # -- Ingest's ------------------------------------------------------------------------------------
    @abstractmethod
    def progress(self) -> Progress: ...
    @abstractmethod
    def _take_batch(self) -> None: ...
    @abstractmethod
    def _raise_batch_error(self) -> None: ...
    @abstractmethod
    def _start_message(self) -> None: ...
    @abstractmethod
    def _read_start(self, *, ended: bool) -> None: ...
    @abstractmethod
    def _restart_streamed_checks(self, at: int) -> None: ...

    # -- MessageEnds' --------------------------------------------------------------------------------
    @abstractmethod
    def _set_aside(self, why: str, data: bytes, at: int, *,
                   tools: list[str] | None = None) -> Part: ...

    # -- Finalizer's ---------------------------------------------------------------------------------
    @abstractmethod
    def content(self) -> bytes: ...
    @abstractmethod
    def finalize(self) -> None: ...
    @abstractmethod
    def _corrections(self, reply: str) -> None: ...
    @abstractmethod
    def _failed(self, cause: BaseException) -> None: ...
    @abstractmethod
    def _abandon(self, why: str) -> None: ...
    def _abandon_unless_held(self, why: str) -> None: ...
