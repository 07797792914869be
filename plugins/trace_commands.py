"""``orion traces``: the trace events the SQLite store recorded, and their counts."""

from __future__ import annotations

import json
import sys

import click

from orion.api import hookimpl
from orion.commands import (STATE_DIR, WORKSPACE, CommandGroup, escape, say, show,
                            state_path)


def _trace_store(workspace: str, state_dir: str | None):
    from orion.trace.store import TraceStore

    path = state_path(workspace, state_dir) / "orion.db"
    if not path.exists():
        say(f"no traces yet: {path} does not exist")
        sys.exit(0)
    return TraceStore(path)


@click.group("traces", cls=CommandGroup, invoke_without_command=True)
@WORKSPACE
@STATE_DIR
@click.option("--conversation", help="Only this conversation id.")
@click.option("--session", help="Only this session (lifecycle instance) id.")
@click.option("--kind", help="Only this kind: transition, model_request, tool_call, "
              "policy_denial, validation_issue, write_report, recovery, error.")
@click.option("--since", help="Only newer events: 10m, 2h, 1d, or an ISO 8601 date or time.")
@click.option("--limit", type=click.IntRange(min=1, max=1_000_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON.")
@click.pass_context
def traces(ctx: click.Context, workspace: str, state_dir: str | None,
           conversation: str | None, session: str | None, kind: str | None,
           since: str | None, limit: int, as_json: bool) -> None:
    """Show recorded trace events, newest first."""
    ctx.obj = {"workspace": workspace, "state_dir": state_dir}
    if ctx.invoked_subcommand is not None:
        return
    import time

    from orion.trace.store import parse_since

    since_ms = None
    if since is not None:
        try:
            since_ms = parse_since(since, time.time() * 1000.0)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--since") from exc
    rows = _trace_store(workspace, state_dir).query(
        conversation=conversation, session=session, kind=kind, since_ms=since_ms, limit=limit)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from datetime import datetime

    from rich.table import Table

    table = Table("time", "kind", "name", "ms", "session", "details")
    for row in rows:
        when = datetime.fromtimestamp(row["at_ms"] / 1000.0).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        details = ", ".join(f"{k}={v}" for k, v in row["attributes"].items()
                            if not k.startswith("gen_ai.operation"))
        table.add_row(when, row["kind"], escape(row["name"]), f"{row['duration_ms']:.1f}",
                      (row["session_id"] or "")[:8], escape(details[:120]))
    show(table)


@traces.command("stats")
# Accepted here too (``orion traces stats --workspace DIR``), where they override the group's.
@click.option("--workspace", type=click.Path(file_okay=False), default=None,
              help="The workspace (default: the one given to `orion traces`, else .).")
@STATE_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.pass_context
def traces_stats(ctx: click.Context, workspace: str | None, state_dir: str | None,
                 as_json: bool) -> None:
    """Counts per kind, dropped events and the database size."""
    stats = _trace_store(workspace or ctx.obj["workspace"],
                         state_dir or ctx.obj["state_dir"]).stats()
    if as_json:
        click.echo(json.dumps(stats, indent=2))
        return
    from rich.table import Table

    table = Table("kind", "events")
    for kind, count in sorted(stats["counts"].items()):
        table.add_row(kind, str(count))
    show(table)
    show(f"total {stats['total']}, dropped {stats['dropped']}, "
         f"database {stats['size_bytes'] / 1024:.1f} KiB ({stats['path']})")


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(traces)
