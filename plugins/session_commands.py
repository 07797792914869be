"""``/sessions`` in a conversation: this conversation's write sessions, and the ones a crash
left in the workspace (which ``orion sessions`` recovers)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import click

from orion.api import OrionError, hookimpl
from orion.commands import (STATE_DIR, WORKSPACE, CommandGroup, escape, fail, load_config,
                            load_plugins, say, state_path)

if TYPE_CHECKING:
    from collections.abc import Callable

    from orion.api import Host
    from orion.write_session.orphan_commands import Shown

# The write-session machinery is imported where it is used: `orion --help` loads this plugin to
# list `orion sessions`, and should not pay for the statechart engine to do it.

USAGE = ("/sessions lists write sessions; /sessions recover ID writes one a crash left "
         "behind, /sessions discard ID deletes it, /sessions undo ID undoes a write, "
         "/sessions show ID prints the text a session set aside")


def sessions_command(runtime: Host, args: str) -> str:
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


def _recover(runtime: Host, session_id: str) -> str:
    from orion.write_session.recover import recover_finalize

    result = recover_finalize(runtime.workspace, runtime.state_dir, session_id,
                              runtime.plugins)
    lines = [f"{result.status} {result.report}", *(f"issue: {i}" for i in result.issues),
             f"undo it with: /sessions undo {result.session_id[:8]}"]
    return "\n".join(lines)


def _discard(runtime: Host, session_id: str) -> str:
    from orion.write_session.orphan_commands import discard

    orphan = discard(runtime.state_dir, session_id)
    return f"discarded write session {orphan.short} for {orphan.describe()}"


def _undo(runtime: Host, session_id: str) -> str:
    from orion.write_session.orphan_commands import undo

    return f"undone {undo(runtime.workspace, runtime.state_dir, session_id).report}"


def _show(runtime: Host, session_id: str) -> str:
    from orion.write_session.orphan_commands import show

    return render_shown(show(runtime.state_dir, session_id))


def render_shown(shown: Shown) -> str:
    """A session and its text set aside, as ``orion sessions show`` prints it: a header, then
    each part with its text as it arrived."""
    lines = shown.set_aside.lines
    aside = (f"{lines} line{'s' if lines != 1 else ''} set aside" if shown.set_aside.pending
             else "nothing set aside")
    out = [f"write session {shown.id[:8]} for {shown.target_file or '?'}: {shown.status}, "
           f"{aside}"]
    for issue in shown.blocked:
        out.append(f"blocked by: {issue}")
    for message in shown.held:
        out.append(f"held message: {message}")
    for problem in shown.set_aside.problems:
        out.append(problem)
    for part in shown.set_aside.parts:
        state = "put back" if part.kept else "set aside"
        out.append(f"--- {part.describe()}, {state}: {part.why} ---")
        try:
            text = shown.set_aside.read(part.number).decode("utf-8", "replace")
        except OSError as exc:
            text = f"(cannot be read: {exc.strerror or exc})"
        out.append(text.removesuffix("\n"))
    return "\n".join(out)


ACTIONS = {"recover": _recover, "discard": _discard, "undo": _undo, "show": _show}


def _listing(runtime: Host) -> str:
    from orion.write_session.manager import manager_for
    from orion.write_session.orphans import scan

    mine = manager_for(runtime).summaries()
    ours = {summary.id for summary in mine}
    lines = [f"{s.id[:8]}  {s.target_file}  {s.status}  {s.lines} lines, continuations "
             f"{s.continuations}, correction rounds {s.corrections}"
             + (f", {s.set_aside} lines set aside (/sessions show {s.id[:8]})"
                if s.set_aside else "") for s in mine]
    others = [o for o in scan(runtime.state_dir) if o.id not in ours]
    if others:
        lines.append("Left in the workspace (/sessions recover ID writes one, /sessions "
                     "discard ID deletes it):")
        lines += [f"{o.id[:8]}  {o.target_file or '?'}  {o.status}{' (live)' if o.live else ''}"
                  f"  {o.lines} lines" for o in others]
    return "\n".join(lines) if lines else "No write sessions."


@hookimpl
def register_slash_commands(register: Callable[..., None]) -> None:
    register("sessions", sessions_command, "this conversation's write sessions and any a crash "
                                           "left behind; /sessions recover|discard|undo|show ID")


# -- orion sessions: the same, from the command line ------------------------------------------


@click.group("sessions", cls=CommandGroup)
def sessions() -> None:
    """Write sessions a crash left behind: list, show, recover, discard, clean, undo.

    Session ids may be shortened to any unique prefix (the first 8 characters are shown).
    """


@sessions.command("list")
@WORKSPACE
@STATE_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON.")
def sessions_list(workspace: str, state_dir: str | None, as_json: bool) -> None:
    """List the write session directories, oldest save first."""
    from orion.write_session.durations import format_age
    from orion.write_session.orphans import scan

    found = scan(state_path(workspace, state_dir))
    if as_json:
        click.echo(json.dumps([orphan.to_json() for orphan in found], indent=2))
        return
    if not found:
        say(f"no write sessions in {state_path(workspace, state_dir)}")
        return
    from rich.table import Table

    table = Table("id", "target", "operation", "lines", "bytes", "saved", "status", "notes")
    for orphan in found:
        notes = ["live: a running process owns it"] if orphan.live else []
        notes += orphan.problems
        if orphan.degraded:
            notes.append(f"degraded: {orphan.degraded}")
        if orphan.received_bytes is not None:
            notes.append(f"only {orphan.bytes} of {orphan.received_bytes} bytes on disk")
        if orphan.rescued:
            notes.append(f"content rescued to {orphan.rescued}")
        if orphan.blocked:
            notes.append(f"blocked by: {'; '.join(orphan.blocked)}")
        if orphan.set_aside_lines:
            notes.append(f"{orphan.set_aside_lines} lines set aside (orion sessions show "
                         f"{orphan.short})")
        if orphan.held:
            notes.append(f"{len(orphan.held)} message(s) you typed, held with it")
        table.add_row(orphan.short, escape(orphan.target_file or "?"), orphan.operation or "?",
                      str(orphan.lines), str(orphan.bytes), format_age(orphan.age_ms),
                      orphan.status, escape("; ".join(notes)))
    say(table)


@sessions.command("show")
@click.argument("session_id", metavar="ID")
@click.option("--part", type=click.IntRange(min=1), metavar="N",
              help="Print only part N's text, exactly as it arrived (to save it to a file).")
@WORKSPACE
@STATE_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the session and its parts as JSON.")
def sessions_show(session_id: str, part: int | None, workspace: str, state_dir: str | None,
                  as_json: bool) -> None:
    """Show write session ID (open or finished) and the text it set aside: what the model sent
    that is not in the file (beside a tool call, after DONE, a cut line it did not resend)."""
    from orion.write_session.orphan_commands import show

    try:
        shown = show(state_path(workspace, state_dir), session_id)
        if part is not None:
            if shown.set_aside.get(part) is None:
                raise OrionError(f"write session {shown.id[:8]} has no part {part} (parts: "
                                 + (", ".join(str(p.number) for p in shown.set_aside.parts)
                                    or "none") + ")")
            sys.stdout.flush()
            sys.stdout.buffer.write(shown.set_aside.read(part))  # the bytes as they arrived
            sys.stdout.buffer.flush()
            return
    except (OrionError, OSError) as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps(shown.to_json(), indent=2))
        return
    click.echo(render_shown(shown))


@sessions.command("recover")
@click.argument("session_id", metavar="ID")
@click.option("--finalize", "mode", flag_value="finalize",
              help="Write the saved content to the target now (no model needed).")
@click.option("--continue", "mode", flag_value="continue",
              help="Let the next orion run or orion chat in the workspace continue it.")
@WORKSPACE
@STATE_DIR
def sessions_recover(session_id: str, mode: str | None, workspace: str,
                     state_dir: str | None) -> None:
    """Recover write session ID: --finalize writes it now, --continue resumes it with the
    model at the next start."""
    from orion.write_session.orphan_commands import mark_resume
    from orion.write_session.recover import recover_finalize

    if mode is None:
        raise click.UsageError("give --finalize (write the saved content now) or --continue "
                               "(let the model go on at the next orion run or orion chat)")
    state = state_path(workspace, state_dir)
    if mode == "continue":
        try:
            orphan = mark_resume(state, session_id)
        except OrionError as exc:
            fail(exc)
        say(f"write session {orphan.short} for {escape(orphan.describe())} continues at "
            "the next orion run or orion chat in this workspace")
        return
    config = load_config(workspace)
    pm = load_plugins(config)
    try:
        result = recover_finalize(workspace, state, session_id, pm)
    except (OrionError, OSError) as exc:
        fail(exc)
    say(f"[green]{result.status}[/green] {escape(result.report)}")
    for issue in result.issues:
        say(f"[yellow]issue:[/yellow] {escape(issue)}")
    say(f"undo it with: orion sessions undo {result.session_id[:8]}")


@sessions.command("discard")
@click.argument("session_id", metavar="ID")
@WORKSPACE
@STATE_DIR
def sessions_discard(session_id: str, workspace: str, state_dir: str | None) -> None:
    """Delete write session ID and its saved content."""
    from orion.write_session.orphan_commands import discard

    try:
        orphan = discard(state_path(workspace, state_dir), session_id)
    except (OrionError, OSError) as exc:
        fail(exc)
    say(f"discarded write session {orphan.short} for {escape(orphan.describe())}")


@sessions.command("clean")
@click.option("--older-than", default="1h", show_default=True, metavar="DURATION",
              help="Remove sessions whose last save is older: 30m, 1h, 2d, 1h30m, or 0 for "
                   "all.")
@WORKSPACE
@STATE_DIR
def sessions_clean(older_than: str, workspace: str, state_dir: str | None) -> None:
    """Remove old write sessions (never one a running process owns)."""
    from orion.write_session.durations import parse_duration
    from orion.write_session.orphan_commands import clean

    try:
        limit = parse_duration(older_than)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from exc
    removed = clean(state_path(workspace, state_dir), limit)
    for orphan in removed:
        say(f"removed write session {orphan.short} for {escape(orphan.describe())}")
    say(f"{len(removed)} write session(s) removed")


@sessions.command("history")
@WORKSPACE
@STATE_DIR
@click.option("--limit", type=click.IntRange(min=1, max=1_000_000), default=50,
              show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the writes as JSON.")
def sessions_history(workspace: str, state_dir: str | None, limit: int, as_json: bool) -> None:
    """List finished writes, newest first: what orion sessions undo can undo."""
    import time

    from orion.write_session.durations import format_age
    from orion.write_session.undo import records

    found = records(state_path(workspace, state_dir))[:limit]
    if as_json:
        click.echo(json.dumps([record.to_json() for record in found], indent=2))
        return
    if not found:
        say(f"no finished writes in {state_path(workspace, state_dir)}")
        return
    from rich.table import Table

    now = time.time() * 1000.0
    table = Table("id", "target", "operation", "written", "status", "backup")
    for record in found:
        row = record.to_json()
        status = str(row["status"])
        if row["set_aside"]:
            status += f", {row['set_aside']} lines set aside"
        table.add_row(record.id[:8], escape(str(row["target_file"])), str(row["operation"]),
                      format_age(now - record.written_at_ms if record.written_at_ms else None),
                      escape(status), "yes" if row["backup"] else "-")
    say(table)
    say("undo one with: orion sessions undo ID")


@sessions.command("undo")
@click.argument("session_id", metavar="ID")
@WORKSPACE
@STATE_DIR
def sessions_undo(session_id: str, workspace: str, state_dir: str | None) -> None:
    """Undo the write of session ID, unless the file changed since."""
    from orion.write_session.orphan_commands import undo

    try:
        result = undo(workspace, state_path(workspace, state_dir), session_id)
    except (OrionError, OSError) as exc:
        fail(exc)
    say(f"[green]undone[/green] {escape(result.report)}")


@sessions.command("diff")
@click.argument("session_id", metavar="ID")
@WORKSPACE
@STATE_DIR
def sessions_diff(session_id: str, workspace: str, state_dir: str | None) -> None:
    """Print what write ID changed: a unified diff from the file before it to the file now."""
    import sys
    from pathlib import Path

    from orion.write_session.diff import write_diff

    state = state_path(workspace, state_dir)
    try:
        found = write_diff(Path(workspace).resolve(), state.resolve(), session_id)
    except (OrionError, OSError) as exc:
        fail(exc)
    for note in found.notes:
        say(f"[yellow]note:[/yellow] {escape(note)}")
    short = found.id[:8]
    sys.stdout.buffer.writelines(found.changes.unified(
        f"a/{found.target}\t(before write {short})", f"b/{found.target}"))
    sys.stdout.flush()
    say(f"{escape(found.target)}: {found.changes.summary()}")


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(sessions)
