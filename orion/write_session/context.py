"""What a write session and its statechart's actions tell each other: the lifecycle's context,
typed.

A ``write_session`` lifecycle's context is a :class:`WriteContext`: still the dict a team's
guard or action reads (``lifecycle.context["continuations"]``) and the snapshot saves, with a
typed property for each key Orion's code and the chart's actions pass each other, and the
session the lifecycle belongs to (:attr:`WriteContext.session`, never saved: a restored
lifecycle gets its session again when the session is made). The keys are the contract; the
properties only read and write them.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from orion.write_session.decision import Quoted

if TYPE_CHECKING:
    from orion.statechart.interpreter.lifecycle import Lifecycle
    from orion.write_session.session import WriteSession

__all__ = ["WriteContext", "session_of"]

#: ``status`` once an action marked the write incomplete (cut off, no DONE after the prompts).
INCOMPLETE = "incomplete"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class WriteContext(dict[str, Any]):
    """A write session's lifecycle context (see the module docstring)."""

    __slots__ = ("_session",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._session: weakref.ref[WriteSession] | None = None

    @property
    def session(self) -> WriteSession | None:
        """The session this lifecycle belongs to; ``None`` for a lifecycle run on its own, or
        once the runtime has let go of its session. Held weakly: the session holds its
        lifecycle, and a cycle would wait for the cyclic collector to free an ended write."""
        return self._session() if self._session is not None else None

    @session.setter
    def session(self, session: WriteSession | None) -> None:
        self._session = weakref.ref(session) if session is not None else None

    @classmethod
    def of(cls, lifecycle: Lifecycle) -> WriteContext:
        """The typed context of ``lifecycle``: its own context, made a :class:`WriteContext`
        in place the first time (same keys, same values)."""
        context = lifecycle.context
        if not isinstance(context, WriteContext):
            context = lifecycle.context = cls(context)
        return context

    # -- the counters the chart's actions keep ------------------------------------------------

    @property
    def continuations(self) -> int:
        """Continuations requested after a cut-off output (``count_continuation``)."""
        return _int(self.get("continuations"))

    @continuations.setter
    def continuations(self, value: int) -> None:
        self["continuations"] = value

    @property
    def corrections(self) -> int:
        """Correction rounds asked for (``count_correction``)."""
        return _int(self.get("corrections"))

    @corrections.setter
    def corrections(self, value: int) -> None:
        self["corrections"] = value

    @property
    def idle_prompts(self) -> int:
        """Idle prompts and unfinished-line questions in a row that brought nothing new."""
        return _int(self.get("idle_prompts"))

    @idle_prompts.setter
    def idle_prompts(self, value: int) -> None:
        self["idle_prompts"] = value

    @property
    def asked(self) -> bool:
        """The model was asked and its reply has not ended yet (``model_asked``)."""
        return bool(self.get("asked"))

    @asked.setter
    def asked(self, value: bool) -> None:
        self["asked"] = value

    @property
    def incomplete(self) -> bool:
        """An action marked the write incomplete (``mark_incomplete``)."""
        return self.get("status") == INCOMPLETE

    def mark_incomplete(self) -> None:
        self["status"] = INCOMPLETE

    @property
    def incomplete_reason(self) -> str | None:
        """Why an incomplete write is incomplete, when it was not only cut off."""
        reason = self.get("incomplete_reason")
        return reason if isinstance(reason, str) else None

    @incomplete_reason.setter
    def incomplete_reason(self, value: str) -> None:
        self["incomplete_reason"] = value

    # -- what the session hands the chart's prompts ---------------------------------------------

    @property
    def quoted(self) -> Quoted | None:
        """The tail the next prompt quotes (set by the session; content, so never a payload,
        which is traced)."""
        return Quoted.from_json(self.get("quoted"))

    @quoted.setter
    def quoted(self, value: Quoted | None) -> None:
        if value is None:
            self.pop("quoted", None)
        else:
            self["quoted"] = value.to_json()

    @property
    def target(self) -> str | None:
        """The target file, named by the continuation request."""
        target = self.get("target")
        return target if isinstance(target, str) else None

    @target.setter
    def target(self, value: str) -> None:
        self["target"] = value

    @property
    def asked_at_lines(self) -> int | None:
        """The content's lines when the unfinished-line question was asked."""
        value = self.get("asked_at_lines")
        return value if isinstance(value, int) else None

    @asked_at_lines.setter
    def asked_at_lines(self, value: int | None) -> None:
        if value is None:
            self.pop("asked_at_lines", None)
        else:
            self["asked_at_lines"] = value

    @property
    def unfinished_line(self) -> int | None:
        """The number of the unfinished line the last prompt asked about."""
        value = self.get("unfinished_line")
        return value if isinstance(value, int) and value else None

    @unfinished_line.setter
    def unfinished_line(self, value: int | None) -> None:
        if value is None:
            self.pop("unfinished_line", None)
        else:
            self["unfinished_line"] = value

    def take_correction_prompt(self) -> str | None:
        """The batched correction prompt the session wrote, taken (it quotes content)."""
        prompt = self.pop("correction_prompt", None)
        return prompt if isinstance(prompt, str) and prompt else None

    def give_correction_prompt(self, prompt: str) -> None:
        self["correction_prompt"] = prompt

    def mark_replaced(self) -> None:
        """The safe replacement applies (``mark_replaced``)."""
        self["safe_replacement"] = True

    # -- what the session has to tell the model with the next prompt ----------------------------

    def add_news(self, text: str) -> None:
        self.setdefault("news", []).append(text)

    def with_news(self, text: str) -> str:
        """``text`` after the news waiting for the next prompt, which it takes."""
        news = self.pop("news", None) or []
        return "\n\n".join([*news, text])


def session_of(lifecycle: Lifecycle) -> WriteSession | None:
    """The write session ``lifecycle`` belongs to, or ``None`` (a lifecycle run on its own)."""
    context = lifecycle.context
    return context.session if isinstance(context, WriteContext) else None
