"""ACME's review step for Orion's write sessions (written against Orion 0.1).

The plugin ships a copy of Orion's ``write_session`` chart (``write_session.yaml`` next to this
file) in which a complete, valid write waits in ``review``: nothing is written until the user
types ``/approve``; ``/reject`` drops it. A validator asks the model to finish every ``TODO``
before the review.
"""

from __future__ import annotations

from pathlib import Path

from orion.api import ContextBlock, Issue, hookimpl, write_session_of, write_sessions

CHART = Path(__file__).with_name("write_session.yaml")
#: The tag of the state where a write waits: the code asks for the tag, never the state.
REVIEW = "review"


@hookimpl
def register_statecharts(register):
    register(CHART)


def waiting(runtime):
    """The write session of ``runtime`` that waits for the user's review, or ``None``."""
    for session in reversed(write_sessions(runtime)):
        if session.status == "active" and session.lifecycle.has_tag(REVIEW):
            return session
    return None


# -- the chart's action --------------------------------------------------------------------------

def acme_ask_for_review(lifecycle, transition):
    """Entering ``review``: tell the user what to do."""
    runtime = lifecycle.owner
    if runtime is None:  # the chart run on its own, as in the chart's tests
        return
    session = write_session_of(lifecycle)
    runtime.reporter.notice(f"{session.plan.relative} waits for your review: /approve writes "
                            "it, /reject drops it.")


@hookimpl
def register_actions(register):
    register("acme_ask_for_review", acme_ask_for_review)


# -- the slash commands --------------------------------------------------------------------------

def approve(runtime, args):
    session = waiting(runtime)
    if session is None:
        return "Nothing waits for review."
    if session.fire("approve") not in ("written", "incomplete"):
        return f"{session.plan.relative} was not written; see the notice above."
    return f"Approved: {session.report}."


def reject(runtime, args):
    session = waiting(runtime)
    if session is None:
        return "Nothing waits for review."
    session.fire("reject", reason="the user rejected it")
    return f"Rejected: {session.plan.relative} was not written."


@hookimpl
def register_slash_commands(register):
    register("approve", approve, "write the file that waits for review")
    register("reject", reject, "drop the file that waits for review")


# -- the TODO validator --------------------------------------------------------------------------

@hookimpl
def validate_content(request):
    """ACME's rule: no ``TODO`` is left in what is written."""
    issues = []
    for number, line in enumerate(request.content.decode("utf-8", "replace").splitlines(), 1):
        column = line.find("TODO")
        if column >= 0:
            issues.append(Issue(number, column + 1, "acme-todo",
                                "a TODO is left; write the text it stands for"))
    return issues


# -- the model's view, and /reset ----------------------------------------------------------------

@hookimpl
def build_context(request):
    runtime = request.runtime
    session = waiting(runtime) if runtime is not None else None
    if session is None:
        return None
    return ContextBlock("acme_review", f"{session.plan.relative} is complete and waits for the "
                                       "user's review; do not send it again.", order=21)


@hookimpl
def conversation_reset(runtime):
    session = waiting(runtime)
    if session is not None:
        session.set_aside("the conversation was reset before the review")
