"""The turn pipeline: the ordered systems that handle one model request.

The order is data (``statecharts/pipeline.yaml``); each system is registered by a plugin with
``register_systems``. A workspace's ``orion.yaml`` replaces the whole list, or edits it by name::

    pipeline:
      insert: [{system: audit, after: model}]
      replace: {tools: strict_tools}
      remove: [trace]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError

from orion.config import PipelineEdit, WorkspaceConfig
from orion.errors import ConfigError
from orion.hooks.host import runtime_alias
from orion.config.yamlsource import YamlSourceError, load_yaml

if TYPE_CHECKING:
    from orion.hooks.types import ContextBlock, ToolOutcome, ToolSpec
    from orion.models.base import ModelRequest
    from orion.models.events import Finish, ToolCall, Usage
    from orion.runtime.runtime import Runtime


class System(Protocol):
    name: str

    async def run(self, turn: Turn) -> None: ...


#: The attribute of a system that replies to the user (the built-in ``model`` asks the model;
#: a team's may answer from elsewhere): a pipeline without one would leave every message
#: unanswered, so it is refused.
REPLIES = "replies"


@dataclass
class Turn:
    """One pass through the pipeline: one model request and what follows from it.

    Systems read and fill it in order. ``follow_up`` asks for another model request in the same
    user turn (after tool results or an injected prompt); ``stop`` ends this pass early."""

    #: The runtime the turn runs in: the core turn systems use more of it than ``Host`` names.
    host: Runtime
    number: int
    blocks: list[ContextBlock] = field(default_factory=list)
    tools: list[ToolSpec] = field(default_factory=list)
    request: ModelRequest | None = None
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish: Finish | None = None
    usage: Usage | None = None
    outcomes: list[ToolOutcome] = field(default_factory=list)
    follow_up: bool = False
    stop: bool = False
    #: A ``<think>`` block at the start of the reply's content, as it arrived (the reasoning
    #: read from it is in ``reasoning``): a write session sets it aside, never drops it. Last,
    #: so the fields of 0.2.0 keep their positions.
    thought: list[str] = field(default_factory=list)

    runtime = runtime_alias("Turn")

    @property
    def response_text(self) -> str:
        return "".join(self.text)


class PipelineFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    pipeline: list[str]
    description: str = ""


def load_order(path: Path) -> list[str]:
    """The system names of a pipeline file; errors name the file, line and column."""
    try:
        doc = load_yaml(path)
    except YamlSourceError as exc:
        raise ConfigError("\n".join(map(str, exc.diagnostics))) from exc
    try:
        return list(PipelineFile.model_validate(doc.data).pipeline)
    except ValidationError as exc:
        raise ConfigError("\n".join(
            str(doc.diagnostic(tuple(e["loc"]), f"{'.'.join(map(str, e['loc'])) or 'document'}: "
                                                f"{e['msg']}")) for e in exc.errors())) from exc


def default_order() -> list[str]:
    """The system names in the shipped ``statecharts/pipeline.yaml``."""
    from orion.statechart import builtin_pipeline

    return load_order(builtin_pipeline())


def apply_edit(order: Sequence[str], edit: PipelineEdit | Sequence[str] | None,
               origin: str = "orion.yaml") -> list[str]:
    """``order`` after the workspace's edit (a full list replaces it)."""
    if edit is None:
        return list(order)
    if not isinstance(edit, PipelineEdit):
        return list(edit)
    result = list(order)
    for name in edit.remove:
        if name not in result:
            raise ConfigError(f"{origin}: pipeline.remove names {name!r}, which is not in the "
                              f"pipeline ({', '.join(result)})")
        result.remove(name)
    for old, new in edit.replace.items():
        if old not in result:
            raise ConfigError(f"{origin}: pipeline.replace names {old!r}, which is not in the "
                              f"pipeline ({', '.join(result)})")
        result[result.index(old)] = new
    for item in edit.insert:
        anchor = item.before or item.after
        if anchor not in result:
            raise ConfigError(f"{origin}: pipeline.insert of {item.system!r} is anchored at "
                              f"{anchor!r}, which is not in the pipeline ({', '.join(result)})")
        at = result.index(anchor) + (1 if item.after else 0)
        result.insert(at, item.system)
    return result


def resolve(order: Sequence[str], systems: Mapping[str, Any],
            origin: str = "orion.yaml") -> list[Any]:
    """The system objects, in order; every name must be registered by a plugin."""
    missing = [name for name in order if name not in systems]
    if missing:
        raise ConfigError(f"{origin}: the pipeline names {', '.join(map(repr, missing))}, which no "
                          f"loaded plugin registers (registered systems: "
                          f"{', '.join(sorted(systems)) or 'none'})")
    duplicated = sorted({name for name in order if list(order).count(name) > 1})
    if duplicated:
        raise ConfigError(f"{origin}: the pipeline lists {', '.join(map(repr, duplicated))} "
                          "more than once")
    chosen = [systems[name] for name in order]
    check_replies(order, chosen, origin)
    return chosen


def check_replies(order: Sequence[str], chosen: Sequence[Any], origin: str) -> None:
    """A :class:`ConfigError` unless a system of the pipeline replies to the user (sets
    :data:`REPLIES`): without one every message would go unanswered, in silence."""
    if any(getattr(system, REPLIES, False) is True for system in chosen):
        return
    shipped = ", ".join(default_order())
    if not order:
        raise ConfigError(f"{origin}: the pipeline is empty, so no message would ever be "
                          "answered (the model is never asked); list its systems (the shipped "
                          f"pipeline: {shipped}) or remove 'pipeline:'")
    raise ConfigError(f"{origin}: the pipeline ({', '.join(order)}) has no system that replies, "
                      f"so no message would ever be answered: keep 'model' (the shipped "
                      f"pipeline: {shipped}), or use a plugin's system that replies in its "
                      f"place (it sets {REPLIES} = True)")


def check_workspace_pipeline(config: WorkspaceConfig, systems: Mapping[str, Any]) -> list[Any]:
    """The workspace's pipeline as the runtime builds it, for ``orion check``, ``orion run``
    and ``orion chat`` before anything runs; a :class:`ConfigError` names ``orion.yaml``'s line
    and column of ``pipeline:``."""
    edit = config.model.pipeline
    where = config.where(("pipeline",)) if edit is not None else str(config.path)
    return resolve(apply_edit(default_order(), edit, where), systems, where)
