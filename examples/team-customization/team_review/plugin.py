"""The team's review step for Orion's write sessions.

The plugin ships an overlay of Orion's ``write_session`` statechart
(``statecharts/write_session.yaml`` next to this file): a write session that received its
content (DONE, validated) waits in ``review``: nothing is written until the user types
``/approve-write``. ``/reject-write``
abandons the write. Orion's own write-session plugin still does the rest: it collects the
content, validates it and, when the statechart runs ``finalize``, writes the target.
"""

from __future__ import annotations

from orion.api import ContextBlock, hookimpl, host_of, write_session_of, write_sessions

from team_review import WRITE_SESSION

#: The tag of the state where a write waits (the overlay's contract): the code asks for the
#: tag, never the state's name.
REVIEW = "review"


@hookimpl
def register_statecharts(register):
    register(WRITE_SESSION)


def waiting(runtime):
    """The write session of ``runtime`` that waits for the user's review, or ``None``."""
    for session in reversed(write_sessions(runtime)):
        if session.status == "active" and session.lifecycle.has_tag(REVIEW):
            return session
    return None


# -- the statechart's action ---------------------------------------------------------------------

def ask_for_review(lifecycle, transition) -> None:
    """Entering ``review``: tell the user what to do. (Without a runtime, as when the statechart
    runs on its own, there is nobody to tell.)"""
    runtime = host_of(lifecycle)
    if runtime is None:
        return
    session = write_session_of(lifecycle)
    target = session.file if session is not None else "the file"
    runtime.reporter.notice(f"{target} is ready and waits for your review: /approve-write "
                            "writes it, /reject-write drops it.")


@hookimpl
def register_actions(register):
    register("ask_for_review", ask_for_review)


# -- the slash commands ---------------------------------------------------------------------------

def approve_write(runtime, args: str) -> str:
    session = waiting(runtime)
    if session is None:
        return "No write waits for review."
    # `fire` runs the statechart's `finalize` (the write), then reports to the model as Orion
    # does after DONE; a failed write keeps the content for `orion sessions recover`.
    if session.fire("approve_write") not in ("written", "incomplete"):
        return f"{session.file} was not written; see the notice above."
    return f"Approved: {session.report}."


def reject_write(runtime, args: str) -> str:
    session = waiting(runtime)
    if session is None:
        return "No write waits for review."
    # The statechart ends in `abandoned`: `fire` drops the session and gives the reason.
    session.fire("reject_write", reason="the user rejected the write")
    return f"Rejected: {session.file} was not written."


@hookimpl
def register_slash_commands(register):
    register("approve-write", approve_write, "write the file that waits for review")
    register("reject-write", reject_write, "drop the file that waits for review")


# -- the model's view, and /reset -----------------------------------------------------------------

@hookimpl
def build_context(request):
    host = request.host
    session = waiting(host) if host is not None else None
    if session is None:
        return None
    return ContextBlock("review", f"The content of {session.file} is complete and waits "
                                  "for the user's review; do not send it again.", order=21)


@hookimpl
def conversation_reset(host):
    """A write that waits for review belongs to the old conversation: it is set aside, its
    content kept for ``orion sessions recover``, nothing written."""
    session = waiting(host)
    if session is not None:
        session.set_aside("the conversation was reset before the review")
