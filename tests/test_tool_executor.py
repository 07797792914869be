"""Running raw tool calls end to end: unknown tools, argument errors, authorization through real
``authorize_tool_call`` plugins (fail closed), handlers (sync, async, failing) and their results.

Nothing of Orion is mocked: the plugin manager is the real one, the policies are plugins
registered with ``@orion.hookimpl``, and the tools are ``ToolSpec``s with pydantic models."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict

import orion
from orion.models.events import ToolCall as RawCall
from orion.hooks.manager import make_plugin_manager
from orion.tools.executor import ToolContext, ToolOutcome, execute_call
from orion.tools.gating import Decision, GateRequest
from orion.tools.spec import ToolSpec


class WriteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target_file: str
    operation: Literal["create", "append"] = "create"
    content: str = ""


class Empty(BaseModel):
    pass


class Workspace:
    """The state a write tool changes: files by name."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.calls: list[WriteArgs] = []

    def write(self, args: WriteArgs, context: ToolContext) -> str:
        self.calls.append(args)
        if args.operation == "append":
            self.files[args.target_file] = self.files.get(args.target_file, "") + args.content
        else:
            self.files[args.target_file] = args.content
        return f"wrote {args.target_file}"


class Policy:
    """An authorization plugin: denies writes to protected files, records what it saw."""

    def __init__(self, protected: set[str]) -> None:
        self.protected = protected
        self.seen: list[tuple[str, dict, str, dict]] = []

    @orion.hookimpl
    def authorize_tool_call(self, call, request):
        self.seen.append((call.name, dict(call.arguments), call.id, dict(request.states)))
        if call.arguments.get("target_file") in self.protected:
            return Decision.deny(f"{call.arguments['target_file']} is protected")
        return None


class Exploding:
    @orion.hookimpl
    def authorize_tool_call(self, call):
        raise RuntimeError("policy store unreachable")


class ToolPlugin:
    """Registers a tool through ``register_tools``, so failures are credited to the plugin."""

    def __init__(self, spec: ToolSpec) -> None:
        self.spec = spec

    @orion.hookimpl
    def register_tools(self, register):
        register(self.spec)


@pytest.fixture
def pm():
    return make_plugin_manager(entrypoints=False, env={})


@pytest.fixture
def workspace():
    return Workspace()


@pytest.fixture
def context(tmp_path: Path) -> ToolContext:
    return ToolContext(workspace=tmp_path, conversation_id="conv-1")


GATE = GateRequest(conversation_id="conv-1", states={"write_session": "idle"})


def run(call: RawCall, tools: list[ToolSpec], pm, context: ToolContext,
        gate: GateRequest = GATE) -> ToolOutcome:
    return asyncio.run(execute_call(call, tools={t.name: t for t in tools}, pm=pm, gate=gate,
                                    context=context))


def error(outcome: ToolOutcome) -> dict:
    assert not outcome.ok
    body = json.loads(outcome.content)
    assert body["kind"] == outcome.kind
    return body


def write_spec(workspace: Workspace) -> ToolSpec:
    return ToolSpec("WriteFile", "Write a file.", WriteArgs, workspace.write)


# -- success ----------------------------------------------------------------------------------


def test_a_valid_call_runs_the_handler(pm, workspace, context):
    outcome = run(RawCall("c1", "WriteFile", '{"target_file": "a.md", "content": "hi"}'),
                  [write_spec(workspace)], pm, context)
    assert outcome == ToolOutcome("c1", "WriteFile", True, "wrote a.md", None,
                                  {"target_file": "a.md", "operation": "create",
                                   "content": "hi"})
    assert workspace.files == {"a.md": "hi"}


def test_the_handler_gets_the_model_instance_and_the_context(pm, context):
    seen = []
    spec = ToolSpec("Probe", "", WriteArgs, lambda args, ctx: seen.append((args, ctx)))
    run(RawCall("c1", "Probe", '{"target_file": "a.md"}'), [spec], pm, context)
    [(args, ctx)] = seen
    assert isinstance(args, WriteArgs) and args.target_file == "a.md"
    assert ctx is context and ctx.workspace == context.workspace


def test_an_async_handler_is_awaited(pm, context):
    async def handler(args: WriteArgs, ctx: ToolContext) -> str:
        await asyncio.sleep(0)
        return f"async {args.target_file} in {ctx.conversation_id}"

    outcome = run(RawCall("c1", "AsyncTool", '{"target_file": "a.md"}'),
                  [ToolSpec("AsyncTool", "", WriteArgs, handler)], pm, context)
    assert (outcome.ok, outcome.content) == (True, "async a.md in conv-1")


class Result(BaseModel):
    path: str
    lines: int


@pytest.mark.parametrize("result, content", [
    ({"written": ["a.md"], "bytes": 2}, '{"written": ["a.md"], "bytes": 2}'),
    (["a", "ü"], '["a", "ü"]'),
    (Result(path="a.md", lines=3), '{"path":"a.md","lines":3}'),
    (None, "ok"),
    ("plain text", "plain text"),
    (3, "3"),
])
def test_results_become_tool_message_content(pm, context, result, content):
    outcome = run(RawCall("c1", "Status", "{}"),
                  [ToolSpec("Status", "", Empty, lambda args, ctx: result)], pm, context)
    assert (outcome.ok, outcome.kind, outcome.content) == (True, None, content)


def test_an_async_handler_returning_a_model(pm, context):
    async def handler(args, ctx):
        return Result(path="b.md", lines=1)

    outcome = run(RawCall("c1", "Status", ""), [ToolSpec("Status", "", Empty, handler)], pm,
                  context)
    assert outcome.content == '{"path":"b.md","lines":1}' and outcome.arguments == {}


# -- unknown tool -----------------------------------------------------------------------------


def test_an_unknown_tool_lists_the_available_tools(pm, workspace, context):
    tools = [write_spec(workspace), ToolSpec("ReadFile", "", WriteArgs, workspace.write)]
    outcome = run(RawCall("c9", "WriteFiles", '{"target_file": "a.md"}'), tools, pm, context)
    assert (outcome.call_id, outcome.name, outcome.kind, outcome.arguments) == (
        "c9", "WriteFiles", "unknown_tool", None)
    assert error(outcome) == {
        "error": "unknown tool 'WriteFiles'; the available tools are: ReadFile, WriteFile. "
                 "Did you mean 'WriteFile'?",
        "kind": "unknown_tool",
        "available": ["ReadFile", "WriteFile"]}
    assert workspace.calls == []


def test_a_tool_that_is_not_advertised_this_turn_is_unknown(pm, workspace, context):
    outcome = run(RawCall("c1", "WriteFile", '{"target_file": "a.md"}'), [], pm, context)
    assert error(outcome)["error"] == ("unknown tool 'WriteFile'; the available tools are: "
                                       "none.")
    assert workspace.files == {}


# -- arguments --------------------------------------------------------------------------------


def test_invalid_json_is_returned_with_its_position(pm, workspace, context):
    outcome = run(RawCall("c1", "WriteFile", '{"target_file": "a.md" "content": "x"}'),
                  [write_spec(workspace)], pm, context)
    body = error(outcome)
    assert outcome.kind == "invalid_json" and outcome.arguments is None
    assert body["error"].startswith(
        "The arguments of WriteFile are not valid JSON: Expecting ',' delimiter at line 1, "
        "column 24 (character offset 23).")
    assert workspace.calls == []


def test_a_truncated_large_write_points_to_the_write_session(pm, workspace, context):
    raw = '{"target_file": "a.md", "content": "# Title\\n' + "x" * 5000
    begin = ToolSpec("WritePlanTool_begin", "", WriteArgs, workspace.write)
    outcome = run(RawCall("c1", "WriteFile", raw), [write_spec(workspace), begin], pm, context)
    text = error(outcome)["error"]
    assert outcome.kind == "invalid_json"
    assert "The arguments look cut off" in text
    assert "call WritePlanTool_begin to start a write session" in text
    assert "end it with a line DONE" in text
    assert workspace.calls == []


def test_the_write_session_is_only_suggested_when_it_is_available(pm, workspace, context):
    raw = '{"target_file": "a.md", "content": "# Title\\n' + "x" * 5000
    text = error(run(RawCall("c1", "WriteFile", raw), [write_spec(workspace)], pm, context))
    assert "look cut off" in text["error"] and "WritePlanTool_begin" not in text["error"]


def test_empty_arguments_are_an_error(pm, workspace, context):
    outcome = run(RawCall("c1", "WriteFile", ""), [write_spec(workspace)], pm, context)
    assert error(outcome) == {
        "error": "The arguments of WriteFile are empty; expected a JSON object with the "
                 "required field 'target_file' and the optional fields 'operation', 'content'.",
        "kind": "invalid_json"}
    assert workspace.calls == []


def test_non_object_arguments_are_an_error(pm, workspace, context):
    outcome = run(RawCall("c1", "WriteFile", '["a.md"]'), [write_spec(workspace)], pm, context)
    assert outcome.kind == "invalid_arguments"
    assert error(outcome)["error"].endswith("got an array of 1 item.")


def test_schema_violations_reach_the_model_field_by_field(pm, workspace, context):
    policy = Policy(set())
    pm.register(policy, "policy")
    outcome = run(RawCall("c1", "WriteFile", '{"operation": "delete", "path": "a.md"}'),
                  [write_spec(workspace)], pm, context)
    assert error(outcome) == {
        "error": "The arguments of WriteFile do not match its schema (3 problems):\n"
                 "- field 'target_file': Field required\n"
                 "- field 'operation': Input should be 'create' or 'append' (got \"delete\")\n"
                 "- field 'path': Extra inputs are not permitted (allowed fields: "
                 "'target_file', 'operation', 'content')",
        "kind": "invalid_arguments"}
    assert policy.seen == [] and workspace.calls == []  # never authorized, never run


# -- authorization ----------------------------------------------------------------------------


def test_a_denied_call_does_not_run_and_the_reason_reaches_the_model(pm, workspace, context):
    policy = Policy({"secrets.env"})
    pm.register(policy, "policy")
    workspace.files["secrets.env"] = "KEY=1"
    outcome = run(RawCall("c2", "WriteFile",
                          '{"target_file": "secrets.env", "content": "KEY=2"}'),
                  [write_spec(workspace)], pm, context)
    assert outcome.kind == "denied"
    assert outcome.arguments == {"target_file": "secrets.env", "operation": "create",
                                 "content": "KEY=2"}
    assert error(outcome) == {"error": "denied by policy: secrets.env is protected",
                              "kind": "denied", "plugin": "policy"}
    assert workspace.calls == [] and workspace.files == {"secrets.env": "KEY=1"}
    assert policy.seen == [("WriteFile", outcome.arguments, "c2", {"write_session": "idle"})]


def test_an_allowed_call_goes_through_the_policy(pm, workspace, context):
    policy = Policy({"secrets.env"})
    pm.register(policy, "policy")
    outcome = run(RawCall("c3", "WriteFile", '{"target_file": "a.md", "content": "x"}'),
                  [write_spec(workspace)], pm, context)
    assert outcome.ok and workspace.files == {"a.md": "x"}
    assert [seen[0] for seen in policy.seen] == ["WriteFile"]


def test_a_raising_authorization_plugin_denies(pm, workspace, context):
    pm.register(Exploding(), "exploding")
    outcome = run(RawCall("c1", "WriteFile", '{"target_file": "a.md"}'),
                  [write_spec(workspace)], pm, context)
    body = error(outcome)
    assert outcome.kind == "denied"
    assert body["error"] == ("denied by policy: plugin 'exploding' failed in "
                             f"authorize_tool_call ({__file__}:70), so the call is denied: "
                             "RuntimeError: policy store unreachable")
    assert body["plugin"] == "exploding"
    assert workspace.calls == [] and workspace.files == {}
    assert [(f.plugin, f.hook) for f in pm.failures] == [("exploding", "authorize_tool_call")]


def test_a_plugin_returning_a_non_decision_denies(pm, workspace, context):
    class Sloppy:
        @orion.hookimpl
        def authorize_tool_call(self):
            return True

    pm.register(Sloppy(), "sloppy")
    outcome = run(RawCall("c1", "WriteFile", '{"target_file": "a.md"}'),
                  [write_spec(workspace)], pm, context)
    assert outcome.kind == "denied" and "not a Decision" in error(outcome)["error"]
    assert workspace.calls == []


# -- failures ---------------------------------------------------------------------------------


def test_a_failing_handler_is_reported_without_a_traceback(pm, workspace, context):
    def handler(args, ctx):
        workspace.calls.append(args)
        raise PermissionError(f"cannot write {args.target_file}")

    outcome = run(RawCall("c1", "WriteFile", '{"target_file": "a.md"}'),
                  [ToolSpec("WriteFile", "", WriteArgs, handler)], pm, context)
    assert outcome.kind == "failed" and outcome.arguments["target_file"] == "a.md"
    assert error(outcome) == {"error": "tool 'WriteFile' failed: PermissionError: cannot write "
                                       "a.md",
                              "kind": "failed"}
    assert "Traceback" not in outcome.content
    [failure] = pm.failures
    assert (failure.plugin, failure.hook, failure.error) == (
        "WriteFile", "tool WriteFile", "PermissionError: cannot write a.md")
    assert "Traceback" in failure.traceback


def test_a_failing_async_handler(pm, context):
    async def handler(args, ctx):
        await asyncio.sleep(0)
        raise ValueError

    outcome = run(RawCall("c1", "Status", "{}"), [ToolSpec("Status", "", Empty, handler)], pm,
                  context)
    assert error(outcome)["error"] == "tool 'Status' failed: ValueError"


def test_a_failure_is_credited_to_the_plugin_that_registered_the_tool(pm, context):
    def handler(args, ctx):
        raise OSError("disk full")

    spec = ToolSpec("Store", "", Empty, handler)
    pm.register(ToolPlugin(spec), "storage")
    outcome = run(RawCall("c1", "Store", "{}"), [spec], pm, context)
    assert outcome.kind == "failed"
    assert [(f.plugin, f.hook, f.error) for f in pm.failures] == [
        ("storage", "tool Store", "OSError: disk full")]


def test_a_result_that_cannot_be_sent_fails(pm, context):
    outcome = run(RawCall("c1", "Status", "{}"),
                  [ToolSpec("Status", "", Empty, lambda args, ctx: {"at": Path("/x")})], pm,
                  context)
    assert outcome.kind == "failed"
    assert "returned a dict that is not JSON-serializable" in error(outcome)["error"]
    outcome = run(RawCall("c1", "Status", "{}"),
                  [ToolSpec("Status", "", Empty, lambda args, ctx: b"bytes")], pm, context)
    assert "the handler returned bytes" in error(outcome)["error"]


def test_a_tool_without_handler_fails_clearly(pm, context):
    policy = Policy(set())
    pm.register(policy, "policy")
    outcome = run(RawCall("c1", "Described", '{"target_file": "a.md"}'),
                  [ToolSpec("Described", "", WriteArgs)], pm, context)
    assert outcome.kind == "failed" and outcome.arguments is not None
    assert error(outcome)["error"] == ("tool 'Described' cannot be run: it has no handler (a "
                                       "configuration error, not a mistake in the call)")
    assert policy.seen == []


def test_cancellation_is_not_swallowed(pm, context):
    async def handler(args, ctx):
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        run(RawCall("c1", "Status", "{}"), [ToolSpec("Status", "", Empty, handler)], pm, context)
    assert pm.failures == []
