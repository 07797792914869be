"""Gates see paths, not argument names: the call ``authorize_tool_call`` receives carries the
workspace paths it touches, resolved (``..`` and links followed), for every built-in tool and
for a team's tool that declares its path arguments, so "nothing under secrets/" holds whatever
the tool calls its argument."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from pydantic import BaseModel

from orion.api import (Decision, GateRequest, ParsedCall, ToolCall, ToolContext, ToolSpec,
                       execute_call, hookimpl)
from orion.hooks.manager import make_plugin_manager
from orion.models.script import load_script
from orion.models.scripted import ScriptedModel
from orion.runtime.runtime import Runtime


class NoSecrets:
    def __init__(self) -> None:
        self.calls: list[ParsedCall] = []

    @hookimpl
    def authorize_tool_call(self, call: ParsedCall, request: GateRequest) -> Decision | None:
        self.calls.append(call)
        return Decision.deny("secrets/ is not for the model") if call.touches("secrets") else None


class ManifestArgs(BaseModel):
    manifest: str
    extra: list[str] = []
    note: str = ""


def deploy(args: ManifestArgs, context: ToolContext) -> str:
    return "deployed"


class TeamTools:
    @hookimpl
    def register_tools(self, register: Any) -> None:
        register(ToolSpec("deploy", "Deploy from a manifest.", ManifestArgs, deploy,
                          paths=("manifest", "extra")))


@pytest.fixture
def gate() -> NoSecrets:
    return NoSecrets()


@pytest.fixture
def runtime(tmp_path: Path, gate: NoSecrets) -> Iterator[Runtime]:
    pm = make_plugin_manager(entrypoints=False)
    pm.register(gate, "no_secrets")
    pm.register(TeamTools(), "team_tools")
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "key").write_text("k\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("g\n")
    (tmp_path / "docs" / "vault").symlink_to(tmp_path / "secrets")
    runtime = Runtime(model=ScriptedModel(load_script(
        "s.yaml", text="conversation:\n  - model: {text: hi}\n").cursor()), plugins=pm,
        workspace=tmp_path)
    yield runtime
    runtime.close()


def call(runtime: Runtime, tool: str, **arguments: Any) -> Any:
    return asyncio.run(execute_call(
        ToolCall("c1", tool, json.dumps(arguments)), tools=runtime.plugins.registry.tools,
        pm=runtime.plugins, gate=GateRequest(host=runtime),
        context=ToolContext(runtime.workspace, host=runtime)))


BEGIN = {"intent": "x", "operation": "create"}

#: Every built-in tool that touches workspace files, a call under secrets/ by another route
#: than the plain path, and the path the gate must see.
CALLS = {
    "WritePlanTool_begin": ({**BEGIN, "target_file": "docs/../secrets/new.txt"},
                            "secrets/new.txt"),
    "WritePlanTool_execute": ({**BEGIN, "target_file": "docs/vault/new.txt", "content": "x\n"},
                              "secrets/new.txt"),
    "read_file": ({"path": "docs/vault/key"}, "secrets/key"),
    "list_files": ({"path": "./secrets/"}, "secrets"),
}


@pytest.mark.parametrize("tool", sorted(CALLS))
def test_a_gate_stops_every_built_in_tool_under_secrets_whatever_the_route(
        runtime: Runtime, gate: NoSecrets, tool: str) -> None:
    arguments, seen = CALLS[tool]
    outcome = call(runtime, tool, **arguments)
    assert gate.calls[-1].paths == (PurePosixPath(seen),)
    assert (outcome.ok, outcome.kind) == (False, "denied"), outcome.content
    assert sorted(p.name for p in (runtime.workspace / "secrets").iterdir()) == ["key"]


def test_a_call_elsewhere_is_allowed_and_its_path_is_seen(runtime: Runtime,
                                                          gate: NoSecrets) -> None:
    outcome = call(runtime, "read_file", path="docs/guide.md")
    assert outcome.ok and gate.calls[-1].paths == (PurePosixPath("docs/guide.md"),)


def test_every_built_in_tool_declares_its_workspace_paths(runtime: Runtime) -> None:
    """A new built-in tool decides: it names its path arguments, or it touches no file of the
    workspace by an argument (the plan is in the state directory; a part set aside goes back
    into the open session, whose target was gated at its begin)."""
    without = {"plan_set_content", "plan_get", "WritePlanTool_keep"}
    tools = {name: spec for name, spec in runtime.plugins.registry.tools.items()
             if name != "deploy"}
    assert {name for name, spec in tools.items() if spec.paths} == set(CALLS)
    assert {name for name, spec in tools.items() if not spec.paths} == without


def test_a_teams_tool_that_declares_its_paths_is_gated_by_them(runtime: Runtime,
                                                                gate: NoSecrets) -> None:
    outcome = call(runtime, "deploy", manifest="deploy.yaml",
                   extra=["docs/guide.md", "docs/vault"], note="secrets/ in a note is no path")
    assert gate.calls[-1].paths == (PurePosixPath("deploy.yaml"), PurePosixPath("docs/guide.md"),
                                    PurePosixPath("secrets"))
    assert not outcome.ok and outcome.kind == "denied"
    allowed = call(runtime, "deploy", manifest="deploy.yaml", note="secrets/")
    assert allowed.ok, allowed.content


def test_a_path_outside_the_workspace_is_not_offered(runtime: Runtime, gate: NoSecrets) -> None:
    outcome = call(runtime, "read_file", path="../../etc/passwd")
    assert gate.calls[-1].paths == () and not outcome.ok


def test_a_spec_naming_a_path_argument_its_model_lacks_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"tool 'deploy': paths .* unknown: \['manifets'\]"):
        ToolSpec("deploy", "Deploy.", ManifestArgs, deploy, paths=("manifets",))
