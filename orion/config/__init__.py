"""The workspace's ``orion.yaml``: extra statecharts, setting overrides and disabled plugins.

```yaml
statecharts: [lifecycles/review_write.yaml]   # relative to the workspace
settings:                                     # statechart setting overrides
  write_session:
    idle_ms: 3000
plugins:
  disable: [orion_plugins.write_session_protocol]
pipeline:                                     # a full list, or edits by name
  insert: [{system: audit, after: model}]
runtime:
  max_requests_per_turn: 20
model:
  base_url: http://127.0.0.1:11434/v1
  model: qwen3-coder
  api_key_env: OPENAI_API_KEY
  max_tokens: 8192          # the output limit of one reply; a cut-off is about this
  temperature: 0.2
  context_window: 32768     # tokens; compaction keeps the requests inside it
trace:
  capture_content: false
  keep_days: 30             # 0 keeps every trace event
```

Environment variables override the file: ``ORION_MODEL``, ``ORION_BASE_URL``,
``ORION_API_KEY_ENV`` and ``ORION_RUNTIME_<SETTING>`` (statechart settings have their own, see
``orion.statechart.interpreter.settings``).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orion.errors import ConfigError
from orion.config.sourcefile import CONFIG_LIMIT, NotReadable, check_regular
from orion.config.yamlsource import SourceDocument, YamlSourceError, load_yaml

CONFIG_FILE = "orion.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PipelineEdit(BaseModel):
    """`pipeline:` as edits of the shipped pipeline by system name (orion.runtime.pipeline
    applies them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    class Insert(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        system: str
        before: str | None = None
        after: str | None = None

        @model_validator(mode="after")
        def _one_anchor(self) -> PipelineEdit.Insert:
            if (self.before is None) == (self.after is None):
                raise ValueError("give exactly one of 'before' and 'after'")
            return self

    insert: list[Insert] = Field(default_factory=list)
    replace: dict[str, str] = Field(default_factory=dict)
    remove: list[str] = Field(default_factory=list)


#: ``runtime.validator_deadline_ms`` unless ``orion.yaml`` says otherwise.
DEFAULT_VALIDATOR_DEADLINE_MS = 30_000


class PluginsConfig(_Strict):
    disable: list[str] = Field(default_factory=list,
                               description="plugin names (as `orion plugins` lists them) not to load")


DEFAULT_SYSTEM_PROMPT = """\
You are a coding agent working in the user's workspace through Orion's tools. Use a tool when it
helps; explain briefly what you did."""


class RuntimeSettings(_Strict):
    max_requests_per_turn: int = Field(default=20, ge=1)
    max_messages: int = Field(default=200, ge=0, description="compact past this; 0 = no limit")
    max_tokens: int = Field(default=100_000, ge=0,
                            description="compact past this many (approximate) tokens; 0 = no limit")
    validator_deadline_ms: int = Field(
        default=DEFAULT_VALIDATOR_DEADLINE_MS, ge=1,
        description="how long an installed plugin's validator or normalizer may take on one "
                    "content; past it the write is held, its content kept")
    system_prompt: str = DEFAULT_SYSTEM_PROMPT


class ModelSettings(_Strict):
    base_url: str | None = Field(default=None, description="an OpenAI-compatible endpoint")
    model: str = "gpt-4o-mini"
    api_key_env: str = Field(default="OPENAI_API_KEY", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                             description="the environment variable that holds the API key")
    max_tokens: int | None = Field(default=None, ge=1,
                                   description="the output limit of one reply (sent as "
                                               "max_tokens); unset: the endpoint's default")
    temperature: float | None = Field(default=None, ge=0, le=2,
                                      description="sampling temperature; unset: the endpoint's "
                                                  "default")
    context_window: int | None = Field(
        default=None, ge=1, description="the model's context window in tokens (prompt and reply);"
        " the conversation is compacted before a request would pass it. Unset: learned from the "
        "server's error when a request does not fit")


class TraceSettings(_Strict):
    capture_content: bool = Field(default=False, description="store long values once, in the "
                                  "blob table keyed by sha256 (they are never in the events)")
    max_text: int = Field(default=1024, ge=64,
                          description="strings longer than this are traced as length, sha256 "
                                      "and head")
    flush_interval_ms: float = Field(default=100, ge=0,
                                     description="flush a batch once it is this old")
    keep_days: float = Field(default=30, ge=0,
                             description="when a runtime starts, remove trace events more than "
                                         "this many days older than the newest one (or than "
                                         "now, if the clock is behind it); 0 keeps every event")


class OrionConfig(_Strict):
    statecharts: list[str] = Field(default_factory=list)
    settings: dict[str, dict[str, Any]] = Field(default_factory=dict)
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)
    pipeline: list[str] | PipelineEdit | None = None
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)
    model: ModelSettings = Field(default_factory=ModelSettings)
    trace: TraceSettings = Field(default_factory=TraceSettings)


@dataclass(frozen=True)
class WorkspaceConfig:
    workspace: Path
    model: OrionConfig = field(default_factory=OrionConfig)
    document: SourceDocument | None = None

    @property
    def path(self) -> Path:
        return self.workspace / CONFIG_FILE

    def statechart_paths(self) -> list[Path]:
        return [(self.workspace / p) for p in self.model.statecharts]

    def overrides(self, statechart: str) -> dict[str, Any]:
        return dict(self.model.settings.get(statechart, {}))

    def origin(self, statechart: str) -> str:
        """Where the overrides of ``statechart`` are written, as ``path:line:col``."""
        return self.where(("settings", statechart))

    def where(self, loc: tuple[str | int, ...], *, key: bool = False) -> str:
        """``path:line:col`` of a part of ``orion.yaml`` (the path alone without a file)."""
        if self.document is None:
            return str(self.path)
        line, col = self.document.position(loc, key=key)
        return f"{self.path}:{line}:{col}"


def check_disabled(pm: Any, config: WorkspaceConfig) -> None:
    """``plugins.disable`` may only name plugins that exist, as ``ORION_LOAD_PLUGINS`` may: a
    typo would otherwise leave the plugin running. Raises :class:`ConfigError` at the name."""
    from orion.hooks.manager import installed_plugin_names

    known = installed_plugin_names()
    for i, name in enumerate(config.model.plugins.disable):
        if name in known:
            continue
        hint = difflib.get_close_matches(name, sorted(known), n=1)
        raise ConfigError(f"{config.where(('plugins', 'disable', i))}: plugins.disable names "
                          f"{name!r}, which is no installed plugin"
                          + (f"; did you mean {hint[0]!r}?" if hint else "")
                          + " (`orion plugins` lists them)")


def unknown_settings(config: WorkspaceConfig, catalog: Any) -> list[str]:
    """``settings:`` sections that name no lifecycle (a typo would silently change nothing)."""
    problems = []
    for name in config.model.settings:
        if name in catalog.sources:
            continue
        hint = difflib.get_close_matches(name, catalog.names(), n=1)
        problems.append(f"{config.where(('settings', name), key=True)}: settings for "
                        f"{name!r}, which is no statechart ({', '.join(catalog.names())})"
                        + (f"; did you mean {hint[0]!r}?" if hint else ""))
    return problems


_ENV_FIELDS = {"ORION_MODEL": ("model", "model"), "ORION_BASE_URL": ("model", "base_url"),
               "ORION_API_KEY_ENV": ("model", "api_key_env")}


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    data = {**data}
    for var, (section, key) in _ENV_FIELDS.items():
        if var in env:
            data[section] = {**(data.get(section) or {}), key: env[var]}
    for name in RuntimeSettings.model_fields:
        var = f"ORION_RUNTIME_{name.upper()}"
        if var in env:
            data["runtime"] = {**(data.get("runtime") or {}), name: env[var]}
    return data


def _env_var(loc: tuple) -> str:
    for var, target in _ENV_FIELDS.items():
        if loc[:2] == target:
            return var
    return f"ORION_RUNTIME_{str(loc[1]).upper()}" if loc[:1] == ("runtime",) and len(loc) > 1 \
        else ".".join(map(str, loc))


def _field_hint(loc: tuple) -> str:
    """``; did you mean 'pipeline'? (fields: ...)`` for an unknown field at ``loc``."""
    model: Any = OrionConfig
    for part in loc[:-1]:
        field_info = getattr(model, "model_fields", {}).get(part)
        annotation = getattr(field_info, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return ""
        model = annotation
    fields = list(model.model_fields)
    hint = difflib.get_close_matches(str(loc[-1]), fields, n=1)
    return (f"; did you mean {hint[0]!r}?" if hint else "") + f" ({'.'.join(map(str, loc[:-1])) or 'orion.yaml'} has: {', '.join(fields)})"


def _file_errors(doc: SourceDocument, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        if error["type"] == "extra_forbidden":
            problems.append(str(doc.diagnostic(loc, f"unknown field {str(loc[-1])!r}"
                                                    + _field_hint(loc), key=True)))
        else:
            where = ".".join(map(str, loc)) or "document"
            problems.append(str(doc.diagnostic(loc, f"{where}: {error['msg']}")))
    return "\n".join(problems)


def load_config(workspace: str | Path, env: Mapping[str, str] | None = None) -> WorkspaceConfig:
    """Read ``<workspace>/orion.yaml`` (a missing file means the defaults), then apply the
    ``ORION_*`` environment overrides. Errors name the file, line and column, or the variable."""
    root = Path(workspace)
    path = root / CONFIG_FILE
    env = os.environ if env is None else env
    doc: SourceDocument | None = None
    data: dict[str, Any] = {}
    if os.path.lexists(path):  # a link that leads nowhere is not "no file": it is said
        try:
            doc = load_yaml(path)
        except YamlSourceError as exc:
            raise ConfigError("\n".join(map(str, exc.diagnostics))) from exc
        if doc.data is not None and not isinstance(doc.data, dict):
            raise ConfigError(str(doc.diagnostic((), "orion.yaml must be a mapping")))
        data = doc.data or {}
        try:
            OrionConfig.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(_file_errors(doc, exc)) from exc
    try:
        model = OrionConfig.model_validate(_apply_env(data, env))
    except ValidationError as exc:  # the file was valid, so an environment variable is not
        raise ConfigError("; ".join(f"environment variable {_env_var(tuple(e['loc']))}: "
                                    f"{e['msg']}" for e in exc.errors())) from exc
    config = WorkspaceConfig(root, model, doc)
    _check_chart_files(config)
    return config


def _check_chart_files(config: WorkspaceConfig) -> None:
    """Each file ``statecharts:`` lists that exists is a regular file within the size cap
    (:mod:`orion.config.sourcefile`), else a :class:`ConfigError` at its entry: ``/dev/zero`` or a
    FIFO there would otherwise be read without end, or wait for a writer forever. A missing
    file is left to the chart's own check, which says so."""
    for i, (name, path) in enumerate(zip(config.model.statecharts, config.statechart_paths())):
        try:
            check_regular(path, CONFIG_LIMIT)
        except NotReadable as exc:
            raise ConfigError(f"{config.where(('statecharts', i))}: statecharts[{i}]: {name} "
                              f"{exc}") from exc
        except OSError:
            continue
