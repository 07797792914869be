"""What ``orion check`` checks, as a function: ``orion check`` prints it, and Orion's pytest
plugin runs it once before the first scenario (a broken chart or plugin fails the run with
these findings, once).

Every chart of the workspace's catalog (Orion's, the plugins', ``orion.yaml``'s) is resolved
and checked, each against the contracts of the charts it replaces; the settings
``orion.yaml`` and the environment give are checked against the chart that runs; and
``orion.yaml`` itself (settings for no chart, a pipeline that never answers).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orion.config import WorkspaceConfig
    from orion.errors import Diagnostic
    from orion.hooks.manager import PluginManager
    from orion.statechart.io.catalog import Catalog, Resolved


@dataclass(frozen=True)
class Finding:
    """One finding, as ``orion check`` prints it (``text``) and as ``--json`` gives it."""

    path: str
    line: int | None
    column: int | None
    message: str
    text: str
    code: str | None = None
    severity: str = "error"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"line": self.line, "column": self.column,
                                "message": self.message, "path": self.path}
        if self.code is not None:
            data["code"] = self.code
        if self.severity != "error":
            data["severity"] = self.severity
        return data


@dataclass
class FileReport:
    """One file ``orion check`` checked: a chart (``statechart``, ``origin``) or
    ``orion.yaml``."""

    path: str
    statechart: str | None = None
    origin: str | None = None
    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    resolved: Resolved | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return not self.errors and (self.resolved is None or self.resolved.spec is not None)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "statechart": self.statechart,
                "origin": self.origin, "errors": [e.to_json() for e in self.errors],
                "warnings": [w.to_json() for w in self.warnings]}


@dataclass
class CheckReport:
    files: list[FileReport]

    @property
    def failed(self) -> list[FileReport]:
        return [f for f in self.files if not f.ok]

    @property
    def findings(self) -> list[Finding]:
        """Every error, then every warning, as ``orion check`` prints them."""
        return [e for f in self.files for e in f.errors] + \
            [w for f in self.files for w in f.warnings]

    def to_json(self) -> list[dict[str, Any]]:
        return [f.to_json() for f in self.files]


def check_workspace(config: WorkspaceConfig, plugins: PluginManager, catalog: Catalog, *,
                    files: Iterable[Path] = (),
                    env: Mapping[str, str] | None = None) -> CheckReport:
    """Check ``files`` (charts given on the command line, each on its own or as the catalog
    has it) or, without them, every chart of ``catalog``; then ``orion.yaml``."""
    env = os.environ if env is None else env
    files = list(files)
    if files:
        checked = [catalog.resolve_file(path) for path in files]
    else:
        checked = [catalog.resolve(source) for name in catalog.names()
                   for source in catalog.sources[name]]
    report = CheckReport([_chart(catalog, config, resolved, bool(files), env)
                          for resolved in checked])
    for problem in workspace_problems(config, catalog, plugins):
        report.files.append(FileReport(str(config.path), errors=[located(problem,
                                                                         str(config.path))]))
    return report


def _chart(catalog: Catalog, config: WorkspaceConfig, resolved: Resolved, given: bool,
           env: Mapping[str, str]) -> FileReport:
    from orion.errors import ConfigError
    from orion.statechart.interpreter.settings import resolve as resolve_settings

    path, spec = resolved.source.path, resolved.spec
    report = FileReport(str(path), spec.statechart if spec else None,
                        catalog.describe(resolved.source),
                        [_finding(d) for d in resolved.diagnostics],
                        [_finding(d) for d in resolved.warnings], resolved)
    winner = spec is not None and spec.statechart in catalog.sources and \
        catalog.winner(spec.statechart) == resolved.source
    if spec is not None and not report.errors and (winner or given):
        try:
            resolve_settings(spec, config.overrides(spec.statechart), env,
                             origin=config.origin(spec.statechart))
        except ConfigError as exc:  # the message names orion.yaml:line:col or the variable
            report.errors.append(Finding(str(config.path), None, None, str(exc),
                                         f"{exc} (overriding a setting of {path})"))
    return report


def _finding(diagnostic: Diagnostic) -> Finding:
    return Finding(diagnostic.path, diagnostic.line, diagnostic.column, diagnostic.message,
                   f"{diagnostic} [{diagnostic.code}]", diagnostic.code, diagnostic.severity)


def workspace_problems(config: WorkspaceConfig, catalog: Catalog,
                       plugins: PluginManager) -> list[str]:
    """What ``orion check`` finds in ``orion.yaml`` itself: settings for no statechart, a
    pipeline in which no system replies."""
    from orion.config import unknown_settings

    pipeline = pipeline_problem(plugins, config)
    return unknown_settings(config, catalog) + ([pipeline] if pipeline else [])


def pipeline_problem(plugins: PluginManager, config: WorkspaceConfig) -> str | None:
    from orion.errors import ConfigError
    from orion.runtime.pipeline import check_workspace_pipeline

    try:
        check_workspace_pipeline(config, plugins.registry.systems)
    except ConfigError as exc:
        return str(exc)
    return None


def located(text: str, path: str) -> Finding:
    """A ``path:line:col: message`` line as a finding (a line without a position keeps
    ``path`` and no line)."""
    match = re.match(r"^(?P<path>.+?):(?P<line>\d+):(?P<column>\d+): (?P<message>.*)$", text)
    if match is None:
        return Finding(path, None, None, text, text)
    return Finding(match["path"], int(match["line"]), int(match["column"]), match["message"],
                   text)
