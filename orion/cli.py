"""The ``orion`` command line. Data goes to stdout; human messages go to stderr.

Exit codes: 0 ok, 1 failed (invalid statecharts, a failed run), 2 usage or configuration error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from orion import __version__
from orion.commands import (STATE_DIR, WORKSPACE, ConfigurationError, escape, load_config,
                            load_plugins, say, show)

if TYPE_CHECKING:
    from orion.config import WorkspaceConfig
    from orion.hooks.manager import PluginManager
    from orion.statechart.io.catalog import Catalog, Resolved

# Each command imports what it uses: `orion --help` and `orion --version` import little.



def _catalog(pm: PluginManager, config: WorkspaceConfig | None) -> Catalog:
    from orion.errors import PluginError
    from orion.statechart.io.catalog import Catalog

    try:
        return Catalog(pm, config)
    except PluginError as exc:
        raise ConfigurationError(str(exc)) from exc


class WorkspaceChartsInvalid(ConfigurationError):
    """A chart of the workspace or of a plugin has errors, found before anything runs: its
    findings, a line each (``path:line:col: message``), then ``error: ...``; exit 2, as every
    misconfigured workspace."""

    def __init__(self, findings: list[str]):
        super().__init__("the workspace's statecharts have errors; nothing was run")
        self.findings = findings

    def show(self, file: Any = None) -> None:
        for finding in self.findings:
            click.echo(finding, err=True)
        super().show(file)


def _check_lifecycles(catalog: Catalog, config: WorkspaceConfig | None = None) -> None:
    """Before anything runs: each lifecycle a plugin or the workspace changed resolves and keeps
    its contract (one that runs migrated is a warning on stderr), and the settings of every
    lifecycle are valid where the workspace and the environment override them (a bad
    ``flush_lines: 0`` would otherwise surface mid-write as a tool error); else exit 2 with the
    findings."""
    from orion.errors import ConfigError
    from orion.statechart.io.catalog import BUILTIN
    from orion.statechart.interpreter.settings import resolve as resolve_settings

    findings, warnings = [], []
    for name in catalog.names():
        source = catalog.winner(name)
        if source.layer != BUILTIN:
            findings += catalog.resolve(source).diagnostics
            warnings += catalog.resolve(source).warnings
    if findings:
        raise WorkspaceChartsInvalid([str(finding) for finding in findings])
    for warning in warnings:  # a chart that runs migrated, for this release
        click.echo(f"{warning} [{warning.code}]", err=True)
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


def _loaded_for_check(workspace: str,
                      as_json: bool) -> tuple[WorkspaceConfig, PluginManager, Catalog]:
    """The workspace's configuration, plugins and catalog for ``orion check``; one that cannot
    be loaded is exit 2, and with ``--json`` a list with one finding for ``orion.yaml`` (a
    program reading the output always gets JSON)."""
    from orion.commands.check import located

    try:
        config = load_config(workspace)
        pm = load_plugins(config)
        return config, pm, _catalog(pm, config)
    except ConfigurationError as exc:
        if not as_json:
            raise
        path = str(Path(workspace) / "orion.yaml")
        click.echo(json.dumps([{"path": path, "ok": False, "statechart": None, "origin": None,
                                "errors": [located(line, path).to_json()
                                           for line in exc.format_message().splitlines()]}],
                              indent=2))
        sys.exit(exc.exit_code)


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
    import difflib

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


class CommandLine(click.Group):
    """The root group. The commands plugins add (``register_commands``: ``orion sessions``,
    ``orion plan``, ``orion traces`` among them) join it the first time a command is looked up
    that it does not define itself, or the list is asked for (``orion --help``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._plugins_added = False

    def _add_plugin_commands(self) -> None:
        if not self._plugins_added:
            self._plugins_added = True
            from orion.errors import PluginError
            from orion.hooks.manager import command_plugin_manager

            try:
                plugins = command_plugin_manager()
            except PluginError as exc:
                raise ConfigurationError(str(exc)) from exc
            plugins.hook.register_commands(cli=self)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and not self._plugins_added:
            self._add_plugin_commands()
            command = super().get_command(ctx, cmd_name)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._add_plugin_commands()
        return super().list_commands(ctx)


@click.group(cls=CommandLine, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="orion")
def cli() -> None:
    """Orion: reliable LLM tool runtimes with YAML statechart lifecycles and plugins."""


@cli.command()
@click.argument("files", nargs=-1, type=click.Path(exists=True))
@WORKSPACE
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("--fix", is_flag=True,
              help="Migrate each chart written for an older contract first (orion migrate).")
def check(files: tuple[str, ...], workspace: str, as_json: bool, fix: bool) -> None:
    """Validate statecharts (default: the built-in ones and those in orion.yaml).

    Setting overrides from orion.yaml and the environment are checked too. Prints each finding
    as path:line:col: message [code] (docs/statecharts.md lists the codes); a warning (a chart
    that runs migrated, for now) as path:line:col: warning: message [code]. Exits 1 when any
    file has errors.
    """
    from orion.commands.check import check_workspace

    config, pm, catalog = _loaded_for_check(workspace, as_json)
    paths = _statechart_files(files) if files else []
    report = check_workspace(config, pm, catalog, files=paths)
    if fix:
        migrated = [_migrate(catalog, f.resolved, quiet=as_json) for f in report.files
                    if f.resolved is not None and f.resolved.migration is not None
                    and _editable(f.resolved.source.path, config.workspace, paths)]
        if any(migrated):
            catalog = _catalog(pm, config)
            report = check_workspace(config, pm, catalog, files=paths)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        sys.exit(1 if report.failed else 0)
    for checked in report.files:
        for finding in [*checked.errors, *checked.warnings]:
            click.echo(finding.text)
        if checked.ok and checked.resolved is not None:  # one line, however long: CI logs
            click.echo(f"ok {checked.path} ({checked.origin})", err=True)
    if report.failed:
        say(f"[red]{len(report.failed)} of {len(report.files)} file(s) failed[/red]")
    sys.exit(1 if report.failed else 0)


def _editable(path: Path, workspace: Path, named: list[Path]) -> bool:
    """Whether ``orion check --fix`` may rewrite a chart (FS-17): one inside the workspace,
    or one the user named on the command line; never one a plugin ships from elsewhere (a
    package on PYTHONPATH, an installed one: its source is the one to migrate)."""
    installed = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    where = path.resolve()
    chosen = {Path(p).resolve() for p in named}
    if not where.is_relative_to(Path(workspace).resolve()) and where not in chosen:
        click.echo(f"{path} is not in the workspace (a plugin ships it): not rewritten; "
                   "migrate its source with `orion migrate FILE`", err=True)
        return False
    if any(where.is_relative_to(prefix) for prefix in installed):
        click.echo(f"{path} comes with an installed package: migrate its source with "
                   "`orion migrate FILE`", err=True)
        return False
    return True


def _migrate(catalog: Catalog, resolved: Resolved, *, quiet: bool = False,
             dry_run: bool = False, backup: bool = True) -> bool:
    """Write the migration of ``resolved``'s file (or, with ``dry_run``, print it as a
    diff), saying each change; False when it cannot be made (the reason on stderr)."""
    import difflib

    from orion.errors import Diagnostic

    migration = catalog.migration(resolved)
    if isinstance(migration, Diagnostic):
        click.echo(f"error: {migration}", err=True)
        return False
    path = migration.path
    if dry_run:
        click.echo("".join(difflib.unified_diff(
            migration.text.splitlines(keepends=True), migration.migrated.splitlines(
                keepends=True), str(path), f"{path} (migrated)")), nl=False)
    else:
        from orion.statechart.io.migrate import write_text

        try:
            if backup:
                write_text(path.with_name(path.name + ".bak"), migration.text,
                           mode=path.stat().st_mode)
            migration.write()
        except OSError as exc:
            click.echo(f"error: cannot write {path}: {exc.strerror or exc}; it is as it was",
                       err=True)
            return False
    if not quiet:
        verb = "would migrate" if dry_run else "migrated"
        click.echo(f"{verb} {path} to contract version {migration.version}: "
                   f"{len(migration.changes)} change(s)", err=True)
        for change in migration.changes:
            click.echo(f"  {path}:{change.line}: {change.what}", err=True)
        if backup and not dry_run:
            click.echo(f"  the previous text is in {path.name}.bak", err=True)
    return True


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@WORKSPACE
@click.option("--dry-run", is_flag=True, help="Print the changes as a diff; write nothing.")
@click.option("--no-backup", is_flag=True, help="Do not keep the previous text in FILE.bak.")
def migrate(file: Path, workspace: str, dry_run: bool, no_backup: bool) -> None:
    """Bring chart FILE, written for an older version of the contract of the chart it
    replaces, to the current one, in place: the tags and transitions that versions since
    added, where that chart has them, and `contract: version:`. Comments and layout stay;
    each change is listed. Then FILE is checked again."""
    config = load_config(workspace)
    pm = load_plugins(config)
    catalog = _catalog(pm, config)
    resolved = catalog.resolve_file(file)
    if resolved.migration is None:
        for finding in resolved.diagnostics:
            click.echo(f"{finding} [{finding.code}]")
        state = "has errors no migration adds; `orion check` lists them" \
            if resolved.diagnostics or resolved.spec is None else "needs no migration"
        click.echo(f"{file}: {state}", err=True)
        sys.exit(1 if resolved.diagnostics or resolved.spec is None else 0)
    if not _migrate(catalog, resolved, dry_run=dry_run, backup=not no_backup):
        sys.exit(1)
    if dry_run:
        return
    again = _catalog(pm, config).resolve_file(file)
    for finding in [*again.diagnostics, *again.warnings]:
        click.echo(f"{finding} [{finding.code}]")
    if again.diagnostics or again.spec is None:
        say(f"[red]{file} still has errors a migration does not fix[/red]")
        sys.exit(1)
    click.echo(f"ok {file}", err=True)


@cli.command()
def schema() -> None:
    """Print the JSON Schema of the statechart format (for editors and CI)."""
    from orion.statechart.io.jsonschema import json_schema

    click.echo(json.dumps(json_schema(), indent=2))


@cli.command()
@click.argument("name", metavar="NAME")
@click.option("--highlight", metavar="STATE", help="A state path to mark as active.")
@click.option("--format", "fmt", metavar="FORMAT", default=None,
              help="mermaid (the default: text), or a Graphviz format such as svg or png "
                   "(needs the diagrams extra and Graphviz).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the diagram to this file (its suffix gives the format) instead of "
                   "standard output.")
@WORKSPACE
def diagram(name: str, highlight: str | None, fmt: str | None, output: Path | None,
            workspace: str) -> None:
    """Draw NAME (a lifecycle name or a file) as it runs in the workspace: overlays merged,
    the workspace's settings applied. Mermaid stateDiagram-v2 text by default; a picture
    (svg, png, ...) with the diagrams extra (pip install 'orion-statecharts[diagrams]')."""
    from orion.errors import ConfigError
    from orion.statechart.io.diagrams import DiagramUnavailable, mermaid, picture
    from orion.statechart.interpreter.settings import resolve as resolve_settings
    from orion.statechart.model.tree import flatten

    fmt = (fmt or (output.suffix[1:] if output is not None and output.suffix else "")
           or "mermaid").lower()
    if fmt == "mmd":
        fmt = "mermaid"
    config = load_config(workspace)
    pm = load_plugins(config)
    resolved = _resolve_chart(_catalog(pm, config), name)
    spec = resolved.spec
    findings = [*resolved.diagnostics, *resolved.warnings]
    if spec is None or any(d.code in _UNDRAWABLE for d in resolved.diagnostics):
        click.echo("\n".join(f"{d} [{d.code}]" for d in findings), err=True)
        sys.exit(1)
    for finding in findings:  # drawn all the same, with the findings beside the chart
        click.echo(f"{finding} [{finding.code}]", err=True)
    notes = _notes(resolved, findings)
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
    try:
        drawn = mermaid(spec, highlight=highlight, settings=dict(settings),
                        notes=notes).encode() \
            if fmt == "mermaid" else picture(spec, format=fmt, highlight=highlight,
                                             settings=dict(settings), notes=notes)
    except DiagramUnavailable as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if output is None:
        click.echo(drawn, nl=False)  # bytes go to the binary stream
        return
    partial = output.with_name(f".{output.name}.partial")
    try:  # written whole or not at all
        partial.write_bytes(drawn)
        os.replace(partial, output)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        click.echo(f"error: cannot write {output}: {exc.strerror or exc}", err=True)
        sys.exit(1)
    click.echo(f"wrote {output} ({fmt}, {len(drawn):,} bytes)", err=True)


#: Findings that leave no chart to draw: states a transition, a timer or an initial names are
#: not there. Any other (a contract the chart breaks, an unreachable state) is drawn beside it.
_UNDRAWABLE = frozenset({"SC101", "SC102", "SC104", "SC201"})


def _notes(resolved: Resolved, findings: list[Any]) -> list[tuple[str | None, str]]:
    """Each finding, with the state it is about when it is at one (its name, tags, ...) in
    the file (the chart that runs may be a merge or a migration of it)."""
    from orion.config.yamlsource import YamlSourceError, load_yaml

    states: dict[tuple[str, int, int], str] = {}
    try:
        doc = load_yaml(resolved.source.path)
    except YamlSourceError:
        doc = None
    if doc is not None:
        for table in (doc.key_positions, doc.positions):
            for loc, (line, col) in table.items():
                names = [str(loc[i + 1]) for i in range(0, len(loc) - 1, 2)
                         if all(p == "states" for p in loc[0:i + 1:2])]
                if names and loc[0] == "states":
                    states.setdefault((doc.path, line, col), ".".join(names))
    return [(states.get((d.path, d.line, d.column)), f"{d.message} [{d.code}]")
            for d in findings]


@cli.group()
def statechart() -> None:
    """The workspace's lifecycles: where each comes from, and each as it runs."""


@statechart.command("list")
@WORKSPACE
def statechart_list(workspace: str) -> None:
    """Each lifecycle and the file it comes from (built-in, a plugin, orion.yaml)."""
    config = load_config(workspace)
    catalog = _catalog(load_plugins(config), config)
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
    config = load_config(workspace)
    found = _resolve_chart(_catalog(load_plugins(config), config), name)
    if not resolved:
        from orion.config.sourcefile import CONFIG_LIMIT, NotReadable, read_regular

        say(f"# {escape(str(found.source.path))}")
        try:
            text = read_regular(found.source.path, CONFIG_LIMIT).decode("utf-8", "replace")
        except (NotReadable, OSError) as exc:
            raise ConfigurationError(f"{found.source.path}: cannot read it: {exc}") from exc
        click.echo(text, nl=False)
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
    config = load_config(workspace)
    pm = load_plugins(config)
    _catalog(pm, config)  # two plugins shipping one statechart is an error here too
    rows: list[dict[str, Any]] = []
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
    show(table)


def _resolve_script(name_or_path: str) -> Path:
    """A script file, or the name of one Orion ships (``tools``, ``plan_mode``)."""
    from orion.models.examples import shipped_example, shipped_examples

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
@STATE_DIR
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def run(script: str, workspace: str, state_dir: str | None, as_json: bool) -> None:
    """Play a scripted conversation (see docs/scripts.md) through the real runtime. SCRIPT is
    a file, or the name of a shipped example: tools, plan_mode, write_guide, ..."""

    from orion.runtime.report import ConsoleReporter, Reporter
    from orion.runtime.runner import RunResult, play
    from orion.runtime.stop_signals import release_lost_outputs

    try:
        loaded, pm = _prepare_run(script, workspace, state_dir)
    except click.ClickException as exc:
        if not as_json:
            raise
        # --json is for programs: a run that cannot start is a result too.
        lines = getattr(exc, "findings", []) + [exc.format_message()]
        click.echo(json.dumps(RunResult(ok=False, errors=lines).to_json(), indent=2))
        sys.exit(exc.exit_code)
    reporter = Reporter() if as_json else ConsoleReporter()
    result = _played(play(loaded, workspace=Path(workspace), plugins=pm,
                          state_dir=Path(state_dir) if state_dir else None, reporter=reporter))
    try:
        if as_json:
            click.echo(json.dumps(result.to_json(), indent=2))
        else:
            _say_result(result, say)
    except OSError:
        if result.stopped is None:
            raise  # a signal (SIGHUP: the terminal closed) may take the output with it
    if result.stopped is not None:
        release_lost_outputs()
        sys.exit(128 + result.stopped)  # as a shell reports a process the signal ended
    sys.exit(0 if result.ok else 1)


def _played(playing: Any) -> Any:
    """The result of ``orion run``'s play; a bad setting is a usage error, and a plugin that
    failed where the run could not say so in its result (``report_run``) one line, exit 1."""
    import asyncio

    from orion.errors import ConfigError, OrionError

    try:
        return asyncio.run(playing)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    except OrionError as exc:
        say(f"[red]error:[/red] {escape(str(exc))}")
        sys.exit(1)


def _say_result(result: Any, say: Callable[[str], None]) -> None:
    """``orion run``'s closing lines: the files written, the lines set aside (not in any
    file), the errors, and ok or failed with the count set aside."""
    for report in result.files:
        say(f"[green]wrote[/green] {report.path} ({report.bytes} bytes)")
    aside = 0
    for session in result.sessions:
        lines = int(session.get("set_aside_lines") or 0)
        if lines:
            aside += lines
            say(f"[yellow]set aside[/yellow] {_lines(lines)} of "
                f"{escape(str(session.get('target_file')))}, not written: orion sessions "
                f"show {str(session.get('id'))[:8]} prints them")
    for error in result.errors:
        say(f"[red]error:[/red] {escape(error)}")
    closing = "[green]ok[/green]" if result.ok else "[red]failed[/red]"
    say(closing + (f" ({_lines(aside)} set aside)" if aside else ""))


def _lines(count: int) -> str:
    return f"{count} line{'' if count == 1 else 's'}"


def _prepare_run(script: str, workspace: str, state_dir: str | None) -> tuple[Any, PluginManager]:
    """What ``orion run`` checks before anything runs or is written: the script, ``orion.yaml``,
    the plugins, the workspace's charts, the pipeline and the state directory. Exit 2 (a
    :class:`ConfigurationError`) for each problem."""
    from orion.errors import ConfigError
    from orion.models.script import load_script

    try:
        loaded = load_script(_resolve_script(script))
    except ConfigError as exc:
        raise ConfigurationError(str(exc)) from exc
    config = load_config(workspace)
    pm = _startable(config, state_dir)
    return loaded, pm


def _startable(config: WorkspaceConfig, state_dir: str | None) -> PluginManager:
    """The plugins of a workspace that ``orion run`` or ``orion chat`` can start in: its
    charts valid, its pipeline one that asks a model, its state directory confined."""
    from orion.commands.check import pipeline_problem
    from orion.commands import state_path

    pm = load_plugins(config)
    _check_lifecycles(_catalog(pm, config), config)
    problem = pipeline_problem(pm, config)
    if problem:
        raise ConfigurationError(f"{problem}; nothing was run")
    state_path(str(config.workspace), state_dir)
    return pm


@cli.command()
@click.option("--base-url", default=None, help="An OpenAI-compatible endpoint "
              "(default: orion.yaml's model.base_url, ORION_BASE_URL or OPENAI_BASE_URL).")
@click.option("--model", "model_name", default=None, help="The model name.")
@WORKSPACE
def chat(base_url: str | None, model_name: str | None, workspace: str) -> None:
    """Talk to a real model in the workspace. Slash commands: /help, /reset, /compact, /quit."""
    import asyncio

    from orion.errors import ConfigError
    from orion.terminal.chat import run_chat
    from orion.runtime.stop_signals import Stopped, release_lost_outputs

    config = load_config(workspace)
    pm = _startable(config, None)
    try:
        code = asyncio.run(run_chat(config, pm, base_url=base_url, model_name=model_name))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    except Stopped as exc:
        # The chat closed first: the open write session is saved and its recover line shown.
        try:
            say(f"[red]orion chat {exc}[/red]")
        except OSError:
            pass  # SIGHUP: the terminal is gone
        release_lost_outputs()
        code = exc.exit_code
    sys.exit(code)



@cli.command()
@click.option("--workspace", type=click.Path(file_okay=False), default=None,
              help="Where the demo writes its files (default: a new temporary directory).")
def demo(workspace: str | None) -> None:
    """Play Orion's two lifecycles and show what happens."""
    from orion.commands.demo import run_demo

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
        cli(prog_name="orion")
    except Exception as exc:
        import sqlite3

        if not isinstance(exc, sqlite3.Error):
            raise
        # `orion traces` reads the state directory's orion.db (`orion plan` names plans.db
        # itself); a damaged, locked or unwritable one is a one-line error, as any other bad
        # input.
        click.echo(f"error: the state directory's orion.db cannot be used ({exc}); move it "
                   "aside to start afresh (plans, write sessions and files do not depend on "
                   "it)", err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
