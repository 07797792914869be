"""Beta's documentation rules for Orion (written against Orion 0.1): security documents wait
for the security team's review, and every Markdown file starts with the licence header."""

from __future__ import annotations

from pathlib import Path

from orion.api import Issue, hookimpl, host_of, write_session_of, write_sessions

CHART = Path(__file__).with_name("write_session.yaml")
HEADER = "<!-- SPDX-License-Identifier: Apache-2.0 -->"
SECURITY = "security/"


@hookimpl
def register_statecharts(register):
    register(CHART)


# -- the guard and the action ---------------------------------------------------------------------

def needs_security_review(lifecycle, transition):
    session = write_session_of(lifecycle)
    return session.plan.relative.startswith(SECURITY)


def beta_ask_for_security_review(lifecycle, transition):
    runtime = host_of(lifecycle)
    if runtime is None:
        return
    session = write_session_of(lifecycle)
    runtime.reporter.notice(f"{session.plan.relative} waits for the security review: "
                            "/security-ok writes it.")


@hookimpl
def register_guards(register):
    register("needs_security_review", needs_security_review)


@hookimpl
def register_actions(register):
    register("beta_ask_for_security_review", beta_ask_for_security_review)


# -- the command ----------------------------------------------------------------------------------

def security_ok(runtime, args):
    for session in write_sessions(runtime):
        if session.status == "active" and session.lifecycle.has_tag("security_review"):
            session.fire("security_approved")
            return f"Security review passed: {session.report}."
    return "Nothing waits for the security review."


@hookimpl
def register_slash_commands(register):
    register("security-ok", security_ok, "write the security document that waits for review")


# -- the licence header ---------------------------------------------------------------------------

@hookimpl
def validate_content(request):
    if not request.path.endswith(".md"):
        return None
    first = request.content.split(b"\n", 1)[0].decode("utf-8", "replace")
    if first == HEADER:
        return None
    return [Issue(1, 1, "beta-licence", f"the first line must be the licence header {HEADER}")]
