"""``/sessions`` in a conversation: this conversation's write sessions, and the ones a crash
left in the workspace (which ``orion sessions`` recovers)."""

from __future__ import annotations

from orion.api import OrionError, hookimpl
from orion.write_session.manager import manager_for
from orion.write_session.recovery import discard, recover_finalize, scan, undo


USAGE = ("/sessions lists write sessions; /sessions recover ID writes one a crash left "
         "behind, /sessions discard ID deletes it, /sessions undo ID undoes a write")


def sessions_command(runtime, args: str) -> str:
    action, _, rest = args.strip().partition(" ")
    if not action:
        return _listing(runtime)
    words = rest.split()
    if action not in ACTIONS or len(words) != 1:
        return f"Unknown or incomplete /sessions command; {USAGE}."
    try:
        return ACTIONS[action](runtime, words[0])
    except (OrionError, OSError) as exc:  # the same refusals as `orion sessions`, as one line
        return f"/sessions {action}: {exc}"


def _recover(runtime, session_id: str) -> str:
    result = recover_finalize(runtime.workspace, runtime.state_dir, session_id,
                              runtime.plugins)
    lines = [f"{result.status} {result.report}", *(f"issue: {i}" for i in result.issues),
             f"undo it with: /sessions undo {result.session_id[:8]}"]
    return "\n".join(lines)


def _discard(runtime, session_id: str) -> str:
    orphan = discard(runtime.state_dir, session_id)
    return f"discarded write session {orphan.short} for {orphan.describe()}"


def _undo(runtime, session_id: str) -> str:
    return f"undone {undo(runtime.workspace, runtime.state_dir, session_id).report}"


ACTIONS = {"recover": _recover, "discard": _discard, "undo": _undo}


def _listing(runtime) -> str:
    mine = manager_for(runtime).summaries()
    ours = {summary.id for summary in mine}
    lines = [f"{s.id[:8]}  {s.target_file}  {s.status}  {s.lines} lines, continuations "
             f"{s.continuations}, correction rounds {s.corrections}" for s in mine]
    others = [o for o in scan(runtime.state_dir) if o.id not in ours]
    if others:
        lines.append("Left in the workspace (/sessions recover ID writes one, /sessions "
                     "discard ID deletes it):")
        lines += [f"{o.id[:8]}  {o.target_file or '?'}  {o.status}{' (live)' if o.live else ''}"
                  f"  {o.lines} lines" for o in others]
    return "\n".join(lines) if lines else "No write sessions."


@hookimpl
def register_slash_commands(register):
    register("sessions", sessions_command, "this conversation's write sessions and any a crash "
                                           "left behind; /sessions recover|discard|undo ID")
