"""The ``orion`` command line. Data goes to stdout; human messages go to stderr.

Exit codes: 0 ok, 1 failed (invalid statecharts, a failed run), 2 usage or configuration error.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from orion import __version__
from orion.config import WorkspaceConfig, check_disabled, load_config, unknown_settings
from orion.console import console
from orion.errors import ConfigError, PluginError
from orion.plugins import PluginManager, default_plugin_manager, make_plugin_manager
from orion.statechart.catalog import BUILTIN, Catalog, Resolved
from orion.statechart.diagram import mermaid
from orion.statechart.tree import flatten
from orion.statechart.schema import json_schema
from orion.statechart.settings import resolve as resolve_settings

err = console(stderr=True)


class ConfigurationError(click.ClickException):
    """The installation or the workspace is misconfigured: ``error: ...`` and exit 2, with no
    usage text (the command line itself was fine)."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        # Not through rich: a located message must stay on one line for editors and CI.
        click.echo(f"error: {self.message}", err=True)


def _plugins(config: WorkspaceConfig | None = None) -> PluginManager:
    try:
        if config is not None and config.model.plugins.disable:
            pm = make_plugin_manager(blocked=config.model.plugins.disable)
            check_disabled(pm, config)
        else:
            pm = default_plugin_manager()
        pm.registry  # noqa: B018 - collect the registrations now: a conflict is exit 2
        return pm
    except (PluginError, ConfigError) as exc:
        raise ConfigurationError(str(exc)) from exc


def _config(workspace: str) -> WorkspaceConfig:
    try:
        return load_config(workspace)
    except ConfigError as exc:
        raise ConfigurationError(str(exc)) from exc


def _catalog(pm: PluginManager, config: WorkspaceConfig | None) -> Catalog:
    try:
        return Catalog(pm, config)
    except PluginError as exc:
        raise ConfigurationError(str(exc)) from exc


def _check_lifecycles(catalog: Catalog, config: WorkspaceConfig | None = None) -> None:
    """Before anything runs: each lifecycle a plugin or the workspace changed resolves and keeps
    its contract, else its findings and exit 1 (as ``orion check``); and the settings of every
    lifecycle are valid where the workspace and the environment override them, else exit 2 (a
    bad ``flush_lines: 0`` would otherwise surface mid-write as a tool error)."""
    findings = []
    for name in catalog.names():
        source = catalog.winner(name)
        if source.layer != BUILTIN:
            findings += catalog.resolve(source).diagnostics
    if findings:
        for finding in findings:
            click.echo(str(finding))
        err.print("[red]the workspace's statecharts have errors; nothing was run[/red]")
        sys.exit(1)
    if config is None:
        return
    for name in catalog.names():
        spec = catalog.resolve(catalog.winner(name)).spec
        if spec is None:
            continue
        try:
            resolve_settings(spec, config.overrides(spec.statechart), os.environ,
                             origin=config.origin(spec.statechart))
        except ConfigError as exc:
            raise ConfigurationError(f"{exc}; nothing was run") from None


def _statechart_files(paths: tuple[str, ...]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
            if not found:
                raise click.BadParameter(f"no .yaml files in directory {raw}", param_hint="FILES")
            files.extend(found)
        else:
            files.append(path)
    return files


def _resolve_chart(catalog: Catalog, name_or_path: str) -> Resolved:
    """A file path, or the name of a lifecycle (``write_session``), resolved in the catalog."""
    path = Path(name_or_path)
    if path.is_file():
        return catalog.resolve_file(path)
    if name_or_path in catalog.sources:
        return catalog.resolve(catalog.winner(name_or_path))
    hint = difflib.get_close_matches(name_or_path, catalog.names(), n=1)
    raise click.BadParameter(f"{name_or_path!r} is neither a file nor a statechart name "
                             f"({', '.join(catalog.names())})"
                             + (f"; did you mean {hint[0]!r}?" if hint else ""),
                             param_hint="NAME")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="orion")
def cli() -> None:
    """Orion: reliable LLM tool runtimes with YAML statechart lifecycles and plugins."""


WORKSPACE = click.option("--workspace", type=click.Path(file_okay=False), default=".",
                         show_default=True, help="The workspace whose orion.yaml applies.")


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True))
@WORKSPACE
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def check(files: tuple[str, ...], workspace: str, as_json: bool) -> None:
    """Validate statecharts (default: the built-in ones and those in orion.yaml).

    Setting overrides from orion.yaml and the environment are checked too. Prints each finding
    as path:line:col: message. Exits 1 when any file has errors.
    """
    config = _config(workspace)
    pm = _plugins(config)
    catalog = _catalog(pm, config)
    if files:
        checked = [catalog.resolve_file(path) for path in _statechart_files(files)]
    else:
        checked = [catalog.resolve(source) for name in catalog.names()
                   for source in catalog.sources[name]]
    results: list[dict[str, Any]] = []
    failed = 0
    for resolved in checked:
        path, spec = resolved.source.path, resolved.spec
        errors = [{"line": d.line, "column": d.column, "message": d.message, "text": str(d),
                   "path": d.path} for d in resolved.diagnostics]
        winner = spec is not None and spec.statechart in catalog.sources and \
            catalog.winner(spec.statechart) == resolved.source
        if spec is not None and not errors and (winner or files):
            try:
                resolve_settings(spec, config.overrides(spec.statechart), os.environ,
                                 origin=config.origin(spec.statechart))
            except ConfigError as exc:  # the message names orion.yaml:line:col or the variable
                errors.append({"line": None, "column": None, "message": str(exc),
                               "path": str(config.path),
                               "text": f"{exc} (overriding a setting of {path})"})
        ok = spec is not None and not errors
        failed += not ok
        results.append({"path": str(path), "ok": ok,
                        "statechart": spec.statechart if spec else None,
                        "origin": catalog.describe(resolved.source),
                        "errors": [{k: v for k, v in e.items() if k != "text"} for e in errors]})
        if not as_json:
            for error in errors:
                click.echo(error["text"])
            if ok:  # one line, however long: CI logs and editors read it
                click.echo(f"ok {path} ({catalog.describe(resolved.source)})", err=True)
    for problem in unknown_settings(config, catalog):
        failed += 1
        results.append({"path": str(config.path), "ok": False, "statechart": None,
                        "origin": None, "errors": [{"message": problem}]})
        if not as_json:
            click.echo(problem)
    if as_json:
        click.echo(json.dumps(results, indent=2))
    elif failed:
        err.print(f"[red]{failed} of {len(results)} file(s) failed[/red]")
    sys.exit(1 if failed else 0)


@cli.command()
def schema() -> None:
    """Print the JSON Schema of the statechart format (for editors and CI)."""
    click.echo(json.dumps(json_schema(), indent=2))


@cli.command()
@click.argument("name", metavar="NAME")
@click.option("--highlight", metavar="STATE", help="A state path to mark as active.")
@WORKSPACE
def diagram(name: str, highlight: str | None, workspace: str) -> None:
    """Print a Mermaid stateDiagram-v2 of NAME (a lifecycle name or a file), as it runs in the
    workspace: overlays merged, the workspace's settings applied."""
    config = _config(workspace)
    pm = _plugins(config)
    resolved = _resolve_chart(_catalog(pm, config), name)
    spec = resolved.spec
    if spec is None or resolved.diagnostics:
        click.echo("\n".join(map(str, resolved.diagnostics)), err=True)
        sys.exit(1)
    nodes = flatten(spec)
    if highlight is not None and highlight not in nodes:
        raise click.BadParameter(f"{highlight!r} is not a state of {spec.statechart} "
                                 f"(states: {', '.join(nodes)})", param_hint="--highlight")
    try:
        settings = resolve_settings(spec, config.overrides(spec.statechart), os.environ,
                                    origin=config.origin(spec.statechart))
    except ConfigError as exc:
        click.echo(str(exc), err=True)  # stdout carries only the diagram
        sys.exit(1)
    click.echo(mermaid(spec, highlight=highlight, settings=dict(settings)), nl=False)


@cli.group()
def statechart() -> None:
    """The workspace's lifecycles: where each comes from, and each as it runs."""


@statechart.command("list")
@WORKSPACE
def statechart_list(workspace: str) -> None:
    """Each lifecycle and the file it comes from (built-in, a plugin, orion.yaml)."""
    config = _config(workspace)
    catalog = _catalog(_plugins(config), config)
    for name in catalog.names():
        source = catalog.winner(name)
        click.echo(f"{catalog.describe(source)}  {source.path}")


@statechart.command("show")
@click.argument("name", metavar="NAME")
@click.option("--resolved", is_flag=True,
              help="Print the chart as it runs: overlays merged into what they extend.")
@WORKSPACE
def statechart_show(name: str, resolved: bool, workspace: str) -> None:
    """Print lifecycle NAME (or a chart file): the file that provides it, or with --resolved
    the merged chart."""
    config = _config(workspace)
    found = _resolve_chart(_catalog(_plugins(config), config), name)
    if not resolved:
        err.print(f"# {escape(str(found.source.path))}")
        click.echo(found.source.path.read_text(encoding="utf-8"), nl=False)
        return
    if found.spec is None or found.diagnostics:
        click.echo("\n".join(map(str, found.diagnostics)))
        sys.exit(1)
    import yaml

    data = found.spec.model_dump(mode="json", exclude_defaults=True)
    order = ("id", "trigger", "source", "dest", "guards", "unless", "actions", "description")
    data["transitions"] = [{k: t[k] for k in sorted(t, key=order.index)}
                           for t in data.get("transitions", [])]
    click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100), nl=False)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@WORKSPACE
def plugins(as_json: bool, workspace: str) -> None:
    """List the loaded plugins and the hooks each implements."""
    config = _config(workspace)
    pm = _plugins(config)
    _catalog(pm, config)  # two plugins shipping one statechart is an error here too
    rows = []
    for name, plugin in sorted(pm.list_name_plugin()):
        origin = pm.origins.get(name)
        rows.append({
            "name": name,
            "kind": origin.kind if origin else "registered",
            "distribution": origin.distribution if origin else None,
            "version": origin.version if origin else None,
            "hooks": sorted(caller.name for caller in pm.get_hookcallers(plugin) or []),
            "statecharts": [str(path) for path, by in pm.registry.statecharts if by == name],
        })
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    from rich.table import Table

    table = Table("plugin", "kind", "version", "hooks")
    for row in rows:
        table.add_row(row["name"], row["kind"], row["version"] or "", ", ".join(row["hooks"]))
    console().print(table)


def _resolve_script(name_or_path: str) -> Path:
    """A script file, or the name of one Orion ships (``tools``, ``plan_mode``)."""
    from orion.examples import shipped_example, shipped_examples

    path = Path(name_or_path)
    if path.is_file():
        return path
    if "/" not in name_or_path and os.sep not in name_or_path:
        shipped = shipped_example(name_or_path)
        if shipped is not None:
            return shipped
    names = ", ".join(p.stem for p in shipped_examples())
    what = "is a directory" if path.is_dir() else "is neither a file nor a shipped example"
    raise click.BadParameter(f"{name_or_path!r} {what} ({names})", param_hint="SCRIPT")


@cli.command()
@click.argument("script")
@WORKSPACE
@click.option("--state-dir", type=click.Path(file_okay=False), default=None,
              help="Where Orion keeps its state (default: WORKSPACE/.orion).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def run(script: str, workspace: str, state_dir: str | None, as_json: bool) -> None:
    """Play a scripted conversation (see docs/scripts.md) through the real runtime. SCRIPT is
    a file, or the name of a shipped example: tools, plan_mode, write_guide, ..."""
    from orion.models.script import load_script
    from orion.runtime.report import ConsoleReporter, Reporter
    from orion.runtime.runner import play

    try:
        loaded = load_script(_resolve_script(script))
        config = load_config(workspace)
    except ConfigError as exc:
        raise ConfigurationError(str(exc)) from exc
    pm = _plugins(config)
    _check_lifecycles(_catalog(pm, config), config)
    reporter = Reporter() if as_json else ConsoleReporter()
    try:
        result = asyncio.run(play(loaded, workspace=Path(workspace), plugins=pm,
                                  state_dir=Path(state_dir) if state_dir else None,
                                  reporter=reporter))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        for report in result.files:
            err.print(f"[green]wrote[/green] {report.path} ({report.bytes} bytes)")
        for error in result.errors:
            err.print(f"[red]error:[/red] {escape(error)}")
        err.print("[green]ok[/green]" if result.ok else "[red]failed[/red]")
    sys.exit(0 if result.ok else 1)


@cli.command()
@click.option("--base-url", default=None, help="An OpenAI-compatible endpoint "
              "(default: orion.yaml's model.base_url, ORION_BASE_URL or OPENAI_BASE_URL).")
@click.option("--model", "model_name", default=None, help="The model name.")
@WORKSPACE
def chat(base_url: str | None, model_name: str | None, workspace: str) -> None:
    """Talk to a real model in the workspace. Slash commands: /help, /reset, /quit."""
    from orion.runtime.chat import run_chat

    config = _config(workspace)
    pm = _plugins(config)
    _check_lifecycles(_catalog(pm, config), config)
    try:
        code = asyncio.run(run_chat(config, pm, base_url=base_url, model_name=model_name))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    sys.exit(code)


STATE_DIR = click.option("--state-dir", type=click.Path(file_okay=False), default=None,
                         help="Where Orion keeps its state (default: WORKSPACE/.orion).")


def _trace_store(workspace: str, state_dir: str | None):
    from orion.trace.store import TraceStore

    path = (Path(state_dir) if state_dir else Path(workspace) / ".orion") / "orion.db"
    if not path.exists():
        err.print(f"no traces yet: {path} does not exist")
        sys.exit(0)
    return TraceStore(path)


@cli.group(invoke_without_command=True)
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
    console().print(table)


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
    console().print(table)
    console().print(f"total {stats['total']}, dropped {stats['dropped']}, "
                    f"database {stats['size_bytes'] / 1024:.1f} KiB ({stats['path']})")


# -- orion plan ----------------------------------------------------------------------------------


def _plan_store(workspace: str, state_dir: str | None):
    from orion.plan.store import PlanStore

    path = _state_path(workspace, state_dir)
    if not (path / "orion.db").exists():
        return None  # nothing recorded yet; don't create a database just to look
    return PlanStore.for_state_dir(path)


@cli.group()
def plan() -> None:
    """The workspace's plans: the active one and their history."""


def _echo_markdown(markdown: str) -> None:
    """A plan's Markdown as stored: ``orion plan show > plan.md`` saves exactly the draft."""
    click.echo(markdown, nl=not markdown.endswith("\n"))


@plan.command("show")
@click.argument("plan_id", metavar="[ID]", required=False)
@click.option("--revision", "number", type=click.IntRange(min=1, max=2**62), default=None, metavar="N",
              help="Revision N of the plan's line of revisions (default: its newest).")
@WORKSPACE
@STATE_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
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
            err.print("Plan work is not active.")
            return
        err.print(f"[bold]{escape(active.title or 'untitled')}[/bold]  {active.status.value}, "
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
    err.print(escape(history.label(rev)))
    _echo_markdown(rev.markdown)


@plan.command("diff")
@click.argument("old", metavar="A")
@click.argument("new", metavar="B")
@click.option("--plan", "plan_id", metavar="ID", default=None,
              help="Whose revisions A and B are (default: the active plan, else the newest).")
@WORKSPACE
@STATE_DIR
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
        err.print(f"{escape(history.label(a))} and {escape(history.label(b))} are the same")
    click.echo(text, nl=False)


@plan.command("revisions")
@click.argument("plan_id", metavar="[ID]", required=False)
@WORKSPACE
@STATE_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the revisions as JSON.")
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
    console().print(table)


@plan.command("history")
@WORKSPACE
@STATE_DIR
@click.option("--limit", type=click.IntRange(min=1, max=1_000_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the plans as JSON.")
def plan_history(workspace: str, state_dir: str | None, limit: int, as_json: bool) -> None:
    """Every plan, newest first: status, revision, and the plan each revision supersedes."""
    store = _plan_store(workspace, state_dir)
    plans = store.history(limit) if store is not None else []
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
    console().print(table)


# -- orion sessions ------------------------------------------------------------------------------


def _state_path(workspace: str, state_dir: str | None) -> Path:
    return Path(state_dir) if state_dir else Path(workspace) / ".orion"


def _session_failed(exc: Exception) -> None:
    err.print(f"[red]error:[/red] {escape(str(exc))}")
    sys.exit(1)


@cli.group()
def sessions() -> None:
    """Write sessions a crash left behind: list, recover, discard, clean, undo.

    Session ids may be shortened to any unique prefix (the first 8 characters are shown).
    """


@sessions.command("list")
@WORKSPACE
@STATE_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the sessions as JSON.")
def sessions_list(workspace: str, state_dir: str | None, as_json: bool) -> None:
    """List the write session directories, oldest save first."""
    import time

    from orion.write_session.recovery import format_age, scan

    now = time.time() * 1000.0
    found = scan(_state_path(workspace, state_dir), now_ms=now)
    if as_json:
        click.echo(json.dumps([orphan.to_json() for orphan in found], indent=2))
        return
    if not found:
        err.print(f"no write sessions in {_state_path(workspace, state_dir)}")
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
        table.add_row(orphan.short, escape(orphan.target_file or "?"), orphan.operation or "?",
                      str(orphan.lines), str(orphan.bytes), format_age(orphan.age_ms),
                      orphan.status, escape("; ".join(notes)))
    err.print(table)


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
    from orion.errors import OrionError
    from orion.write_session.recovery import mark_resume, recover_finalize

    if mode is None:
        raise click.UsageError("give --finalize (write the saved content now) or --continue "
                               "(let the model go on at the next orion run or orion chat)")
    state = _state_path(workspace, state_dir)
    if mode == "continue":
        try:
            orphan = mark_resume(state, session_id)
        except OrionError as exc:
            _session_failed(exc)
        err.print(f"write session {orphan.short} for {escape(orphan.describe())} continues at "
                  "the next orion run or orion chat in this workspace")
        return
    config = _config(workspace)
    pm = _plugins(config)
    try:
        result = recover_finalize(workspace, state, session_id, pm)
    except (OrionError, OSError) as exc:
        _session_failed(exc)
    err.print(f"[green]{result.status}[/green] {escape(result.report)}")
    for issue in result.issues:
        err.print(f"[yellow]issue:[/yellow] {escape(issue)}")
    err.print(f"undo it with: orion sessions undo {result.session_id[:8]}")


@sessions.command("discard")
@click.argument("session_id", metavar="ID")
@WORKSPACE
@STATE_DIR
def sessions_discard(session_id: str, workspace: str, state_dir: str | None) -> None:
    """Delete write session ID and its saved content."""
    from orion.errors import OrionError
    from orion.write_session.recovery import discard

    try:
        orphan = discard(_state_path(workspace, state_dir), session_id)
    except (OrionError, OSError) as exc:
        _session_failed(exc)
    err.print(f"discarded write session {orphan.short} for {escape(orphan.describe())}")


@sessions.command("clean")
@click.option("--older-than", default="1h", show_default=True, metavar="DURATION",
              help="Remove sessions whose last save is older: 30m, 1h, 2d, 1h30m, or 0 for "
                   "all.")
@WORKSPACE
@STATE_DIR
def sessions_clean(older_than: str, workspace: str, state_dir: str | None) -> None:
    """Remove old write sessions (never one a running process owns)."""
    import time

    from orion.write_session.recovery import clean, parse_duration

    try:
        limit = parse_duration(older_than)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from exc
    now = time.time() * 1000.0
    removed = clean(_state_path(workspace, state_dir), limit, now)
    for orphan in removed:
        err.print(f"removed write session {orphan.short} for {escape(orphan.describe(now))}")
    err.print(f"{len(removed)} write session(s) removed")


@sessions.command("history")
@WORKSPACE
@STATE_DIR
@click.option("--limit", type=click.IntRange(min=1, max=1_000_000), default=50,
              show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the writes as JSON.")
def sessions_history(workspace: str, state_dir: str | None, limit: int, as_json: bool) -> None:
    """List finished writes, newest first: what orion sessions undo can undo."""
    import time

    from orion.write_session.recovery import format_age
    from orion.write_session.undo import records

    found = records(_state_path(workspace, state_dir))[:limit]
    if as_json:
        click.echo(json.dumps([record.to_json() for record in found], indent=2))
        return
    if not found:
        err.print(f"no finished writes in {_state_path(workspace, state_dir)}")
        return
    from rich.table import Table

    now = time.time() * 1000.0
    table = Table("id", "target", "operation", "written", "status", "backup")
    for record in found:
        row = record.to_json()
        table.add_row(record.id[:8], escape(str(row["target_file"])), str(row["operation"]),
                      format_age(now - record.written_at_ms if record.written_at_ms else None),
                      str(row["status"]), "yes" if row["backup"] else "-")
    err.print(table)
    err.print("undo one with: orion sessions undo ID")


@sessions.command("undo")
@click.argument("session_id", metavar="ID")
@WORKSPACE
@STATE_DIR
def sessions_undo(session_id: str, workspace: str, state_dir: str | None) -> None:
    """Undo the write of session ID, unless the file changed since."""
    from orion.errors import OrionError
    from orion.write_session.recovery import undo

    try:
        result = undo(workspace, _state_path(workspace, state_dir), session_id)
    except (OrionError, OSError) as exc:
        _session_failed(exc)
    err.print(f"[green]undone[/green] {escape(result.report)}")


@cli.command()
@click.option("--workspace", type=click.Path(file_okay=False), default=None,
              help="Where the demo writes its files (default: a new temporary directory).")
def demo(workspace: str | None) -> None:
    """Play Orion's two lifecycles and show what happens."""
    from orion.demo import run_demo

    sys.exit(run_demo(workspace))


def _console_never_fails() -> None:
    """Model text can hold what no console encoding can (a lone surrogate a gateway sent as
    ``\ud800``): the console shows a replacement character instead of ending the program.
    The journal keeps what the model sent, and the validators report it."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")


def main() -> None:
    _console_never_fails()
    try:
        _plugins().hook.register_commands(cli=cli)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    try:
        cli(prog_name="orion")
    except sqlite3.Error as exc:
        # `orion traces` and `orion plan` read the state directory's database; a damaged,
        # locked or unwritable one is a one-line error, as any other bad input.
        click.echo(f"error: the state directory's orion.db cannot be used ({exc}); move it "
                   "aside to start afresh (write sessions and files do not depend on it)",
                   err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
