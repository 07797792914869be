"""``/sessions`` in a conversation: this conversation's write sessions, and the ones a crash
left in the workspace (which ``orion sessions`` recovers)."""

from __future__ import annotations

from orion.api import hookimpl
from orion.write_session.manager import manager_for
from orion.write_session.recovery import scan


def sessions_command(runtime, args: str) -> str:
    mine = manager_for(runtime).summaries()
    ours = {summary.id for summary in mine}
    lines = [f"{s.id[:8]}  {s.target_file}  {s.status}  {s.lines} lines, continuations "
             f"{s.continuations}, correction rounds {s.corrections}" for s in mine]
    others = [o for o in scan(runtime.state_dir) if o.id not in ours]
    if others:
        lines.append("Left in the workspace (orion sessions recover ID --finalize | --continue):")
        lines += [f"{o.id[:8]}  {o.target_file or '?'}  {o.status}{' (live)' if o.live else ''}"
                  f"  {o.lines} lines" for o in others]
    return "\n".join(lines) if lines else "No write sessions."


@hookimpl
def register_slash_commands(register):
    register("sessions", sessions_command, "this conversation's write sessions, and any a "
                                           "crash left behind")
