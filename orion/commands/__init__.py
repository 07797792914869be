"""What a plugin that adds ``orion`` commands imports (through ``register_commands``): the
options every command spells the same way, and the errors every command reports the same way.
Orion's own command groups (``orion sessions``, ``orion plan``, ``orion traces``) are built from
these by their plugins, as a team's would be.

Importing this module costs little (click only): ``orion --help`` loads every plugin's
``register_commands`` before it can list their commands.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

if TYPE_CHECKING:
    from orion.config import WorkspaceConfig
    from orion.hooks.manager import PluginManager

__all__ = ["STATE_DIR", "WORKSPACE", "CommandGroup", "ConfigurationError", "escape", "fail",
           "load_config", "load_plugins", "say", "show", "state_path"]

WORKSPACE = click.option("--workspace", type=click.Path(file_okay=False), default=".",
                         show_default=True, help="The workspace whose orion.yaml applies.")

STATE_DIR = click.option("--state-dir", type=click.Path(file_okay=False), default=None,
                         help="Where Orion keeps its state (default: WORKSPACE/.orion).")


class ConfigurationError(click.ClickException):
    """The installation or the workspace is misconfigured: ``error: ...`` and exit 2, with no
    usage text (the command line itself was fine)."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        # Not through rich: a located message must stay on one line for editors and CI.
        click.echo(f"error: {self.message}", err=True)


class CommandGroup(click.Group):
    """A group of ``orion`` commands (``orion plan``, ``orion sessions``, ``orion traces``; a
    plugin's own with ``@click.group(cls=CommandGroup)``). An :class:`~orion.errors.OrionError`
    a command lets through is ``error: ...`` and exit 1, never a traceback; with ``--json``
    every failure (exit 1 or 2) is also ``{"error": "..."}`` on stdout, so a program reading
    the output always gets JSON."""

    def invoke(self, ctx: click.Context) -> Any:
        from orion.errors import OrionError

        # The subcommand's own tokens (click empties them as it invokes it).
        wants_json = bool(ctx.params.get("as_json")) or "--json" in ctx.args
        try:
            return super().invoke(ctx)
        except OrionError as exc:
            error: click.ClickException = click.ClickException(str(exc))  # exit code 1
        except click.ClickException as exc:
            error = exc
        if wants_json:
            import json

            click.echo(json.dumps({"error": error.format_message()}))
        if isinstance(error, ConfigurationError) or type(error) is click.ClickException:
            click.echo(f"error: {error.format_message()}", err=True)
            sys.exit(error.exit_code)
        raise error


def state_path(workspace: str, state_dir: str | None) -> Path:
    """The state directory a command reads: ``--state-dir``, else ``WORKSPACE/.orion`` once
    it is checked (:func:`orion.workspace.state_directory`: a ``.orion`` that leads out of the
    workspace is exit 2). Never created here: a command that only looks creates nothing."""
    from orion.workspace import StateDirOutside, state_directory

    try:
        return state_directory(workspace, state_dir)
    except StateDirOutside as exc:
        raise ConfigurationError(str(exc)) from exc


def escape(text: str) -> str:
    """``text`` shown as it is inside rich markup (a ``[`` in a file name stays a ``[``)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def say(markup: object) -> None:
    """A line (rich markup) or a table for people, on stderr: stdout carries only data."""
    from orion.terminal.console import console

    console(stderr=True).print(markup)


def show(renderable: object) -> None:
    """A table (or markup) that is the command's output, on stdout."""
    from orion.terminal.console import console

    console().print(renderable)


def fail(exc: BaseException) -> NoReturn:
    """A command could not do what was asked: ``error: ...`` on stderr, exit 1."""
    say(f"[red]error:[/red] {escape(str(exc))}")
    sys.exit(1)


def load_config(workspace: str) -> WorkspaceConfig:
    """The workspace's ``orion.yaml``; a bad one is exit 2 with its located message."""
    from orion.config import load_config as load
    from orion.errors import ConfigError

    try:
        return load(workspace)
    except ConfigError as exc:
        raise ConfigurationError(str(exc)) from exc


def load_plugins(config: WorkspaceConfig | None = None) -> PluginManager:
    """The plugins as the workspace configures them (``plugins.disable``); a conflict between
    two plugins is exit 2, naming both."""
    from orion.config import check_disabled
    from orion.errors import ConfigError, PluginError
    from orion.hooks.manager import default_plugin_manager, make_plugin_manager

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
