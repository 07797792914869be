"""The workspace's ``orion.yaml``: extra statecharts, setting overrides and disabled plugins.

```yaml
statecharts: [lifecycles/review_write.yaml]   # relative to the workspace
settings:
  write_session:
    idle_ms: 3000
plugins:
  disable: [orion_plugins.write_session_protocol]
```
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orion.errors import ConfigError
from orion.yamlsource import SourceDocument, YamlSourceError, load_yaml

CONFIG_FILE = "orion.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PluginsConfig(_Strict):
    disable: list[str] = Field(default_factory=list,
                               description="plugin names (as `orion plugins` lists them) not to load")


class OrionConfig(_Strict):
    statecharts: list[str] = Field(default_factory=list)
    settings: dict[str, dict[str, Any]] = Field(default_factory=dict)
    plugins: PluginsConfig = Field(default_factory=PluginsConfig)


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
        if self.document is None:
            return str(self.path)
        line, col = self.document.position(("settings", statechart))
        return f"{self.path}:{line}:{col}"


def load_config(workspace: str | Path) -> WorkspaceConfig:
    """Read ``<workspace>/orion.yaml``; a missing file means the defaults. Errors name the
    file, line and column."""
    root = Path(workspace)
    path = root / CONFIG_FILE
    if not path.exists():
        return WorkspaceConfig(root)
    try:
        doc = load_yaml(path)
    except YamlSourceError as exc:
        raise ConfigError("\n".join(map(str, exc.diagnostics))) from exc
    try:
        model = OrionConfig.model_validate(doc.data if doc.data is not None else {})
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = tuple(error["loc"])
            where = ".".join(map(str, loc)) or "document"
            if error["type"] == "extra_forbidden":
                problems.append(str(doc.diagnostic(loc, f"unknown field {str(loc[-1])!r}", key=True)))
            else:
                problems.append(str(doc.diagnostic(loc, f"{where}: {error['msg']}")))
        raise ConfigError("\n".join(problems)) from exc
    return WorkspaceConfig(root, model, doc)
