"""``orion traces``: the trace events the SQLite store recorded, and their counts."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from orion.api import hookimpl
from orion.commands import (STATE_DIR, WORKSPACE, CommandGroup, escape, say, show,
                            state_path)

if TYPE_CHECKING:
    from rich.tree import Tree

    from orion.trace.store import TraceStore


def _trace_store(workspace: str, state_dir: str | None) -> TraceStore:
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
@click.option("--limit", type=click.IntRange(min=1, max=1_000_000), default=None,
              help="At most this many events (default 50), or turns with --tree (default 5).")
@click.option("--json", "as_json", is_flag=True, help="Print the events as JSON.")
@click.option("--tree", is_flag=True,
              help="Show the newest turns as trees of spans (--limit counts turns, default 5).")
@click.pass_context
def traces(ctx: click.Context, workspace: str, state_dir: str | None,
           conversation: str | None, session: str | None, kind: str | None,
           since: str | None, limit: int | None, as_json: bool, tree: bool) -> None:
    """Show recorded trace events, newest first (--tree: turn by turn, as trees)."""
    ctx.obj = {"workspace": workspace, "state_dir": state_dir}
    if ctx.invoked_subcommand is not None:
        return
    since_ms = _since_ms(since)
    store = _trace_store(workspace, state_dir)
    if tree:
        if kind is not None:
            raise click.BadParameter("a tree shows every kind of its turn", param_hint="--kind")
        found = store.traces(conversation=conversation, session=session, since_ms=since_ms,
                             limit=limit or 5)
        if as_json:
            click.echo(json.dumps(found, indent=2))
        elif not found:
            say("no turns recorded (traces of earlier Orion versions have no turns)")
        for spans in [] if as_json else found:
            show(_tree(spans))
        return
    rows = store.query(conversation=conversation, session=session, kind=kind,
                       since_ms=since_ms, limit=limit or 50)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.table import Table

    table = Table("time", "kind", "name", "ms", "session", "details")
    for row in rows:
        table.add_row(_when(row["at_ms"]), row["kind"], escape(row["name"]),
                      f"{row['duration_ms']:.1f}", (row["session_id"] or "")[:8],
                      escape(_details(row)[:120]))
    show(table)


def _since_ms(since: str | None, option: str = "--since") -> float | None:
    """``--since`` (a duration before now, ``10m``, or an ISO 8601 date) in epoch ms."""
    if since is None:
        return None
    import time

    from orion.trace.store import parse_since

    try:
        return parse_since(since, time.time() * 1000.0)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=option) from exc


def _when(at_ms: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(at_ms / 1000.0).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _details(row: dict[str, Any]) -> str:
    def value(v: Any) -> Any:
        if isinstance(v, dict) and "$text" in v and "sha256" in v:
            return f"<{v['$text']} chars sha256:{str(v['sha256'])[:12]}>"
        return v
    return ", ".join(f"{k}={value(v)}" for k, v in row["attributes"].items()
                     if not k.startswith("gen_ai.operation"))


#: What a tree shows of each kind of span besides its name and times.
_SUMMARY = {"model_request": ("orion.finish", "gen_ai.usage.input_tokens",
                              "gen_ai.usage.output_tokens"),
            "tool_call": ("orion.tool.outcome",), "transition": ("orion.source", "orion.dest"),
            "turn": ()}


def _summary(span: dict[str, Any]) -> str:
    attributes = span["attributes"]
    if span["kind"] == "transition":
        return f", {attributes.get('orion.source')} -> {attributes.get('orion.dest')}"
    message = attributes.get("orion.turn.input")
    if isinstance(message, dict) and "$text" in message:
        return f", message of {message['$text']} characters"
    shown = [f"{key.rsplit('.', 1)[-1]}={attributes[key]}"
             for key in _SUMMARY.get(span["kind"], ()) if key in attributes]
    return f", {', '.join(shown)}" if shown else ""


def _tree(spans: list[dict[str, Any]]) -> Tree:
    """One turn as a tree: each span under its parent, in start order; a span whose parent is
    not stored (an older row, a dropped batch) under the root."""
    from rich.tree import Tree

    def label(span: dict[str, Any], start: float) -> str:
        error = span["attributes"].get("error.type")
        status = f" [red]{escape(str(error))}[/red]" if error else ""
        link = " [dim](continues an earlier turn)[/dim]" if span["links"] else ""
        return (f"[bold]{escape(span['name'])}[/bold] [dim]{span['kind']}[/dim] "
                f"+{span['at_ms'] - start:.0f} ms, {span['duration_ms']:.1f} ms"
                f"{escape(_summary(span))}{status}{link}")

    ids = {span["span_id"] for span in spans}
    roots = [s for s in spans if not s["parent_id"] or s["parent_id"] not in ids]
    root = next((s for s in roots if s["kind"] == "turn"), roots[0])
    start = min(s["at_ms"] for s in spans)
    title = (f"turn {root['attributes'].get('orion.turn.number', '?')} "
             f"{_when(start)}  trace {root['trace_id']}  session {root['conversation_id']}")
    tree = Tree(escape(title))
    children: dict[str, list[dict[str, Any]]] = {}
    for span in spans:
        if span is root:
            continue
        parent = span["parent_id"] if span["parent_id"] in ids else root["span_id"]
        children.setdefault(parent, []).append(span)

    def add(node: Tree, span_id: str) -> None:
        for child in sorted(children.get(span_id, []), key=lambda s: (s["at_ms"], s["id"])):
            add(node.add(label(child, start)), child["span_id"])

    add(tree.add(label(root, start)), root["span_id"])
    return tree


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


@traces.command("prune")
@click.option("--workspace", type=click.Path(file_okay=False), default=None,
              help="The workspace (default: the one given to `orion traces`, else .).")
@STATE_DIR
@click.option("--older-than", "older_than", required=True,
              help="Remove events older than this: 30d, 12h, or an ISO 8601 date or time.")
@click.option("--vacuum", is_flag=True,
              help="Then give the freed space back to the file system (the file shrinks).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.pass_context
def traces_prune(ctx: click.Context, workspace: str | None, state_dir: str | None,
                 older_than: str, vacuum: bool, as_json: bool) -> None:
    """Remove old trace events now (runtimes do it as they start, by trace.keep_days)."""
    before_ms = _since_ms(older_than, "--older-than")
    assert before_ms is not None
    store = _trace_store(workspace or ctx.obj["workspace"], state_dir or ctx.obj["state_dir"])
    size = store.size_bytes()
    removed = store.prune(before_ms)
    if vacuum:
        store.vacuum()
    stats = store.stats()
    figures = {"removed": removed, "before": _when(before_ms), "left": stats["total"],
               "size_bytes_before": size, "size_bytes": stats["size_bytes"]}
    if as_json:
        click.echo(json.dumps(figures, indent=2))
        return
    show(f"removed {removed:,} events from before {figures['before']}; {stats['total']:,} "
        f"left, database {size / 1024:.1f} KiB -> {stats['size_bytes'] / 1024:.1f} KiB"
        + ("" if vacuum or not removed else " (its free pages hold the next events; "
           "--vacuum shrinks the file)"))


@hookimpl
def register_commands(cli: click.Group) -> None:
    cli.add_command(traces)
