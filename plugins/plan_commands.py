"""``orion plan``: the workspace's plans as plan mode stored them: the active one, revisions,
diffs and history."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from orion.api import hookimpl
from orion.commands import (STATE_DIR, WORKSPACE, CommandGroup, escape, say, show,
                            state_path)

if TYPE_CHECKING:
    from orion.plan.store import PlanStore


def _plan_store(workspace: str, state_dir: str | None) -> PlanStore | None:
    from orion.plan.store import PlanStore

    # None when nothing was recorded yet: don't create a database just to look.
    store = PlanStore.existing(state_path(workspace, state_dir))
    if store is not None and store.notice:  # plans moved from orion.db
        say(escape(store.notice))
    return store


def _plans_db(command: Callable[..., Any]) -> Callable[..., Any]:
    """A damaged, locked or unwritable ``plans.db`` is one ``error:`` line naming it."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except Exception as exc:
            import sqlite3

            if not isinstance(exc, sqlite3.Error):
                raise
            from orion.plan.store import DB_NAME, PlanStoreError

            raise PlanStoreError(f"the state directory's {DB_NAME} cannot be used ({exc}); "
                                 "move it aside to start afresh (the plans stay in the file "
                                 "moved; traces, write sessions and files do not depend on "
                                 "it)") from exc
    return run


@click.group("plan", cls=CommandGroup)
def plan() -> None:
    """The workspace's plans: the active one and their history."""


def _echo_markdown(markdown: str) -> None:
    """A plan's Markdown as stored: ``orion plan show > plan.md`` saves exactly the draft."""
    click.echo(markdown, nl=not markdown.endswith("\n"))


@plan.command("show")
@click.argument("plan_id", metavar="[ID]", required=False)
@click.option("--revision", "number", type=click.IntRange(min=1, max=2**62), default=None,
              metavar="N",
              help="Revision N of the plan's line of revisions (default: its newest).")
@WORKSPACE
@STATE_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@_plans_db
def plan_show(plan_id: str | None, number: int | None, workspace: str, state_dir: str | None,
              as_json: bool) -> None:
    """Show the active plan, the plan ID (an id or its start), or a revision of either."""
    store = _plan_store(workspace, state_dir)
    if plan_id is None and number is None:
        active = store.active() if store is not None else None
        if as_json:
            click.echo(json.dumps(None if active is None else
                                  {**active.summary(), "markdown": active.markdown}, indent=2))
            return
        if active is None:
            say("Plan work is not active.")
            return
        say(f"[bold]{escape(active.title or 'untitled')}[/bold]  {active.status.value}, "
            f"revision {active.revision}")
        _echo_markdown(active.markdown or "(no draft yet)\n")
        return
    from orion.plan import history

    try:
        if store is None:
            raise history.PlanHistoryError("no plans yet")
        shown = history.line_plan(store, plan_id)
        rev = (history.newest(store, shown) if number is None
               else history.revision(store, shown, number))
    except history.PlanHistoryError as exc:
        raise click.BadParameter(str(exc), param_hint="ID" if number is None
                                 else "--revision") from None
    if as_json:
        click.echo(json.dumps({**rev.summary(), "markdown": rev.markdown}, indent=2))
        return
    say(escape(history.label(rev)))
    _echo_markdown(rev.markdown)


@plan.command("diff")
@click.argument("old", metavar="A")
@click.argument("new", metavar="B")
@click.option("--plan", "plan_id", metavar="ID", default=None,
              help="Whose revisions A and B are (default: the active plan, else the newest).")
@WORKSPACE
@STATE_DIR
@_plans_db
def plan_diff(old: str, new: str, plan_id: str | None, workspace: str,
              state_dir: str | None) -> None:
    """A unified diff from revision A to revision B. A number is a revision of the plan's
    line; a plan id (8 characters or more, as `orion plan history` shows it) means that
    plan's newest draft."""
    from orion.plan import history

    store = _plan_store(workspace, state_dir)
    try:
        if store is None:
            raise history.PlanHistoryError("no plans yet")
        line = history.line_plan(store, plan_id)
        a, b = (history.revision(store, line, ref) for ref in (old, new))
    except history.PlanHistoryError as exc:
        raise click.BadParameter(str(exc), param_hint="A B") from None
    text = history.diff(a, b)
    if not text:
        say(f"{escape(history.label(a))} and {escape(history.label(b))} are the same")
    click.echo(text, nl=False)


@plan.command("revisions")
@click.argument("plan_id", metavar="[ID]", required=False)
@WORKSPACE
@STATE_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the revisions as JSON.")
@_plans_db
def plan_revisions(plan_id: str | None, workspace: str, state_dir: str | None,
                   as_json: bool) -> None:
    """Every stored draft of the plan ID (default: the active plan, else the newest), oldest
    first, across the revisions made while executing."""
    from orion.plan import history

    store = _plan_store(workspace, state_dir)
    try:
        if store is None:
            raise history.PlanHistoryError("no plans yet")
        revisions = store.revisions(history.line_plan(store, plan_id).id)
    except history.PlanHistoryError as exc:
        raise click.BadParameter(str(exc), param_hint="ID") from None
    if as_json:
        click.echo(json.dumps([r.summary() for r in revisions], indent=2))
        return
    from datetime import datetime

    from rich.table import Table

    table = Table("revision", "plan", "title", "stored", "bytes")
    for r in revisions:
        summary = r.summary()
        table.add_row(str(r.revision), r.plan_id[:8], escape(r.title),
                      datetime.fromtimestamp(r.created_ms / 1000).strftime("%Y-%m-%d %H:%M:%S"),
                      str(summary["bytes"]))
    show(table)


@plan.command("history")
@WORKSPACE
@STATE_DIR
@click.option("--limit", type=click.IntRange(min=1, max=1_000_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the plans as JSON.")
@_plans_db
def plan_history(workspace: str, state_dir: str | None, limit: int, as_json: bool) -> None:
    """Every plan, newest first: status, revision, and the plan each revision supersedes."""
    store = _plan_store(workspace, state_dir)
    plans = store.history(limit) if store is not None else []
    for problem in store.damaged() if store is not None else []:  # left out, never silently
        say(f"[red]{escape(str(problem))}[/red]")
    if as_json:
        click.echo(json.dumps([p.summary() for p in plans], indent=2))
        return
    from datetime import datetime

    from rich.table import Table

    table = Table("created", "id", "title", "status", "revision", "supersedes")
    for p in plans:
        table.add_row(datetime.fromtimestamp(p.created_ms / 1000).strftime("%Y-%m-%d %H:%M"),
                      p.id[:8], escape(p.title), p.status.value, str(p.revision),
                      (p.supersedes or "")[:8])
    show(table)


@plan.command("drop")
@click.argument("plan_id", metavar="ID")
@WORKSPACE
@STATE_DIR
@_plans_db
def plan_drop(plan_id: str, workspace: str, state_dir: str | None) -> None:
    """Remove plan ID (an id or its start) and its stored drafts from plans.db: the way out
    for a plan `orion plan history` reports as damaged. An active plan that is not damaged is
    refused (end it with /plan done)."""
    store = _plan_store(workspace, state_dir)
    if store is None:
        raise click.BadParameter("no plans yet", param_hint="ID")
    dropped, drafts = store.drop(plan_id)
    say(f"dropped plan {dropped[:8]} and its {drafts} stored draft(s)")


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(plan)
