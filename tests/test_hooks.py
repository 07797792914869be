"""Every hook in ``orion.hookspecs``, exercised through the code that calls it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import click
import pytest
from click.testing import CliRunner
from pydantic import BaseModel, Field

from orion import hookimpl
from orion.clock import VirtualClock
from orion.context import ContextBlock, ContextRequest, build_context
from orion.errors import ActionError, TriggerNotAllowed
from orion.plugins import PluginManager, make_plugin_manager
from orion.statechart import load_definition
from orion.tools.gating import Decision, GateRequest, advertised, authorize
from orion.tools.spec import ToolCall, ToolSpec
from orion.trace.events import TraceEvent
from orion.validation import Issue, ValidationRequest, collect_issues
from orion_plugins.finalization import NothingFinalized

TICKET = """\
statechart: ticket
initial: open
context:
  notes: []
states:
  open:
    entry: greet
    after:
      - ms: 1000
        trigger: remind
  review: {}
  closed:
    final: true
transitions:
  - trigger: submit
    source: open
    dest: review
    guards: has_title
    actions: note_payload
  - trigger: close
    source: review
    dest: closed
"""

DRAFT = """\
statechart: draft
initial: editing
states:
  editing: {}
  done:
    final: true
transitions:
  - trigger: save
    source: editing
    dest: done
    actions: finalize
"""


@pytest.fixture
def pm() -> PluginManager:
    return make_plugin_manager(entrypoints=False, env={})


def chart(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


class Ticketing:
    """Guards, actions and observers for the ticket statechart."""

    def __init__(self):
        self.events: list[tuple] = []

    @hookimpl
    def register_guards(self, register):
        register("has_title", lambda lifecycle, transition: bool(transition.payload.get("title")))

    @hookimpl
    def register_actions(self, register):
        def greet(lifecycle, transition):
            lifecycle.context["notes"].append("greeted")
            self.events.append(("greet", transition.trigger))

        def note_payload(lifecycle, transition):
            lifecycle.context["notes"].append(transition.payload["title"])

        register("greet", greet)
        register("note_payload", note_payload)

    @hookimpl
    def lifecycle_started(self, lifecycle):
        self.events.append(("started", lifecycle.name, lifecycle.state,
                            list(lifecycle.context["notes"])))

    @hookimpl
    def lifecycle_transition(self, lifecycle, transition):
        self.events.append(("transition", transition))

    @hookimpl
    def lifecycle_finished(self, lifecycle):
        self.events.append(("finished", lifecycle.state, lifecycle.pending_timers(),
                            lifecycle.allowed_triggers()))


# -- lifecycle_started, lifecycle_transition, lifecycle_finished -------------------------------


def test_lifecycle_observers_see_a_whole_lifecycle(pm, tmp_path):
    plugin = Ticketing()
    pm.register(plugin, "ticketing")
    definition = load_definition(chart(tmp_path, TICKET, "ticket.yaml"), plugins=pm)
    clock = VirtualClock(start_ms=5000)
    lifecycle = definition.create(clock=clock, instance_id="t-1")

    # started: after the initial state's entry actions ran
    assert plugin.events == [("greet", "start"), ("started", "ticket", "open", ["greeted"])]

    clock.advance(10)
    assert lifecycle.trigger("submit", title="Broken login") is True
    kind, transition = plugin.events[-1]
    assert kind == "transition"
    assert (transition.lifecycle, transition.instance_id, transition.trigger, transition.source,
            transition.dest) == ("ticket", "t-1", "submit", "open", "review")
    assert transition.payload == {"title": "Broken login"}
    assert transition.at_ms == 5010
    assert transition.duration_ms >= 0
    assert lifecycle.context["notes"] == ["greeted", "Broken login"]

    assert lifecycle.trigger("close") is True
    assert plugin.events[-2][0] == "transition"
    assert plugin.events[-1] == ("finished", "closed", [], [])
    with pytest.raises(TriggerNotAllowed):
        lifecycle.trigger("close")


def test_lifecycle_transition_is_not_called_when_a_guard_says_no(pm, tmp_path):
    plugin = Ticketing()
    pm.register(plugin, "ticketing")
    lifecycle = load_definition(chart(tmp_path, TICKET, "ticket.yaml"), plugins=pm).create()
    before = list(plugin.events)
    assert lifecycle.trigger("submit") is False  # no title
    assert plugin.events == before
    assert lifecycle.state == "open"


def test_lifecycle_transition_for_a_timer(pm, tmp_path):
    plugin = Ticketing()
    pm.register(plugin, "ticketing")
    clock = VirtualClock()
    load_definition(chart(tmp_path, TICKET, "ticket.yaml"), plugins=pm).create(clock=clock)
    clock.advance(1000)
    kind, transition = plugin.events[-1]
    assert (kind, transition.trigger, transition.source, transition.dest) == (
        "transition", "remind", "open", "open")


def test_lifecycle_started_is_not_called_on_restore(pm, tmp_path):
    plugin = Ticketing()
    pm.register(plugin, "ticketing")
    definition = load_definition(chart(tmp_path, TICKET, "ticket.yaml"), plugins=pm)
    snapshot = definition.create().snapshot()
    plugin.events.clear()
    restored = definition.restore(snapshot)
    assert plugin.events == []
    restored.trigger("submit", title="x")
    assert [e[0] for e in plugin.events] == ["transition"]


# -- register_guards, register_actions ----------------------------------------------------------


def test_registered_guards_and_actions_drive_a_statechart(pm, tmp_path):
    pm.register(Ticketing(), "ticketing")
    assert pm.registry.guards["has_title"].plugin == "ticketing"
    assert set(pm.registry.actions) >= {"greet", "note_payload", "finalize"}
    lifecycle = load_definition(chart(tmp_path, TICKET, "ticket.yaml"), plugins=pm).create()
    assert lifecycle.trigger("submit", title="") is False
    assert lifecycle.trigger("submit", title="ok") is True
    assert lifecycle.context["notes"] == ["greeted", "ok"]


def test_a_statechart_naming_an_unregistered_guard_fails_its_check(pm, tmp_path):
    from orion.errors import StatechartError

    with pytest.raises(StatechartError, match="has_title"):
        load_definition(chart(tmp_path, TICKET, "ticket.yaml"), plugins=pm)


def test_a_failing_action_raises_action_error_and_keeps_the_state(pm, tmp_path):
    class Failing(Ticketing):
        @hookimpl
        def register_actions(self, register):
            register("greet", lambda lifecycle, transition: None)
            register("note_payload", lambda lifecycle, transition: 1 / 0)

    pm.register(Failing(), "failing")
    lifecycle = load_definition(chart(tmp_path, TICKET, "ticket.yaml"), plugins=pm).create()
    with pytest.raises(ActionError) as info:
        lifecycle.trigger("submit", title="x")
    assert isinstance(info.value.cause, ZeroDivisionError)
    assert lifecycle.state == "open"


# -- register_tools -----------------------------------------------------------------------------


class ReadArgs(BaseModel):
    """Read a file of the workspace."""

    path: str = Field(description="workspace-relative path")
    start_line: int = Field(1, ge=1)
    mode: Literal["text", "bytes"] = "text"


class Tools:
    @hookimpl
    def register_tools(self, register):
        register(ToolSpec("read_file", "Read a file.", ReadArgs,
                          handler=lambda args: f"read {args.path}"))


def test_register_tools_fills_the_registry_and_makes_an_openai_definition(pm):
    pm.register(Tools(), "tools")
    spec = pm.registry.tools["read_file"]
    assert pm.registry.tool_plugins["read_file"] == "tools"

    definition = spec.openai_definition()
    assert definition["type"] == "function"
    function = definition["function"]
    assert (function["name"], function["description"]) == ("read_file", "Read a file.")
    parameters = function["parameters"]
    assert parameters["type"] == "object"
    assert "title" not in parameters
    assert parameters["required"] == ["path"]
    assert parameters["properties"]["path"]["type"] == "string"
    assert parameters["properties"]["start_line"]["minimum"] == 1
    assert parameters["properties"]["mode"]["enum"] == ["text", "bytes"]
    json.dumps(definition)  # JSON-safe, ready for a request

    arguments = spec.args_model.model_validate({"path": "a.txt"})
    assert spec.handler(arguments) == "read a.txt"


def test_toolspec_rejects_names_and_models_that_model_apis_refuse():
    with pytest.raises(ValueError, match="tool name"):
        ToolSpec("read file", "x", ReadArgs)
    with pytest.raises(ValueError, match="tool name"):
        ToolSpec("x" * 65, "x", ReadArgs)
    with pytest.raises(TypeError, match="BaseModel"):
        ToolSpec("read", "x", dict)  # type: ignore[arg-type]


# -- register_commands --------------------------------------------------------------------------


def test_register_commands_adds_a_working_command(pm):
    class Commands:
        @hookimpl
        def register_commands(self, cli):
            @cli.command()
            @click.argument("name")
            @click.option("--shout", is_flag=True)
            def hello(name, shout):
                """Say hello."""
                message = f"hello {name}"
                click.echo(message.upper() if shout else message)

    pm.register(Commands(), "commands")
    group = click.Group("orion")
    pm.hook.register_commands(cli=group)
    assert "hello" in group.commands
    result = CliRunner().invoke(group, ["hello", "world", "--shout"])
    assert result.exit_code == 0, result.output
    assert result.output == "HELLO WORLD\n"


# -- build_context ------------------------------------------------------------------------------


def test_build_context_collects_and_orders_blocks(pm):
    class Plan:
        @hookimpl
        def build_context(self, request):
            if request.states.get("plan_mode") == "active":
                return ContextBlock("plan", f"plan for {request.conversation_id}", order=10)
            return None

    class Rules:
        @hookimpl
        def build_context(self, request):
            return [ContextBlock("rules-b", "B"), ContextBlock("rules-a", "A"),
                    ContextBlock("first", "!", order=0)]

    class Generated:
        @hookimpl
        def build_context(self, request):
            yield ContextBlock("late", "z", order=500)

    for plugin in (Plan(), Rules(), Generated()):
        pm.register(plugin)

    request = ContextRequest(conversation_id="c1", states={"plan_mode": "active"})
    blocks = build_context(pm, request)
    assert [(b.name, b.order) for b in blocks] == [
        ("first", 0), ("plan", 10), ("rules-a", 100), ("rules-b", 100), ("late", 500)]
    assert blocks[1].text == "plan for c1"

    blocks = build_context(pm, ContextRequest(states={"plan_mode": "inactive"}))
    assert "plan" not in [b.name for b in blocks]


def test_build_context_rejects_what_is_not_a_block(pm):
    class Text:
        @hookimpl
        def build_context(self, request):
            return "just a string"

    pm.register(Text(), "text")
    with pytest.raises(TypeError, match="build_context returned str"):
        build_context(pm, ContextRequest())


# -- finalize ----------------------------------------------------------------------------------


def test_finalize_result_is_set_on_the_transition(pm, tmp_path):
    seen = []

    class Drafts:
        @hookimpl
        def finalize(self, lifecycle, transition):
            if lifecycle.name != "draft":
                return None
            return {"saved": transition.payload["text"]}

    class Other:
        @hookimpl(tryfirst=True)
        def finalize(self, lifecycle):
            return None  # not mine: the next implementation decides

    class Observer:
        @hookimpl
        def lifecycle_transition(self, transition):
            seen.append(transition.result)

    for plugin in (Drafts(), Other(), Observer()):
        pm.register(plugin)
    lifecycle = load_definition(chart(tmp_path, DRAFT, "draft.yaml"), plugins=pm).create()
    assert lifecycle.trigger("save", text="hello") is True
    assert lifecycle.current.result == {"saved": "hello"}
    assert seen == [{"saved": "hello"}]


def test_finalize_first_result_wins(pm, tmp_path):
    class First:
        @hookimpl(tryfirst=True)
        def finalize(self):
            return "first"

    class Second:
        @hookimpl
        def finalize(self):
            return "second"

    pm.register(Second(), "second")
    pm.register(First(), "first")
    lifecycle = load_definition(chart(tmp_path, DRAFT, "draft.yaml"), plugins=pm).create()
    lifecycle.trigger("save")
    assert lifecycle.current.result == "first"


def test_nothing_finalized_is_an_action_error(pm, tmp_path):
    lifecycle = load_definition(chart(tmp_path, DRAFT, "draft.yaml"), plugins=pm).create()
    with pytest.raises(ActionError) as info:
        lifecycle.trigger("save")
    assert info.value.action == "finalize"
    assert isinstance(info.value.cause, NothingFinalized)
    assert "'draft'" in str(info.value.cause)
    assert lifecycle.state == "editing"


# -- validate_content ---------------------------------------------------------------------------


def test_validate_content_issues_are_collected_in_content_order(pm):
    class Tabs:
        @hookimpl
        def validate_content(self, request):
            for number, line in enumerate(request.content.splitlines(), 1):
                if b"\t" in line:
                    yield Issue(number, line.index(b"\t") + 1, "tab", "tab character")

    class TrailingSpace:
        @hookimpl
        def validate_content(self, request):
            if not request.path.endswith(".py"):
                return None
            return [Issue(n, len(line), "trailing", "trailing space")
                    for n, line in enumerate(request.content.splitlines(), 1)
                    if line.endswith(b" ")]

    pm.register(Tabs(), "tabs")
    pm.register(TrailingSpace(), "trailing")
    content = b"a = 1 \n\tb = 2\nc = 3 \n"
    issues = collect_issues(pm, ValidationRequest("x.py", content))
    assert [(i.line, i.column, i.code) for i in issues] == [
        (1, 6, "trailing"), (2, 1, "tab"), (3, 6, "trailing")]
    assert str(issues[1]) == "2:1: tab: tab character"
    assert [i.code for i in collect_issues(pm, ValidationRequest("x.md", content))] == ["tab"]
    assert collect_issues(pm, ValidationRequest("x.md", b"clean\n")) == []


def test_validate_content_rejects_what_is_not_an_issue(pm):
    class Dicts:
        @hookimpl
        def validate_content(self, request):
            return [{"line": 1}]

    pm.register(Dicts(), "dicts")
    with pytest.raises(TypeError, match="validate_content returned dict"):
        collect_issues(pm, ValidationRequest("x", b""))


# -- store_traces ------------------------------------------------------------------------------


def test_store_traces_gets_the_batch_and_a_failing_store_is_isolated(pm, tmp_path):
    target = tmp_path / "traces.jsonl"

    class JsonLines:
        @hookimpl
        def store_traces(self, events):
            with target.open("a") as f:
                for event in events:
                    f.write(json.dumps(event.as_dict()) + "\n")

    class Broken:
        @hookimpl
        def store_traces(self, events):
            raise ConnectionError("collector unreachable")

    pm.register(JsonLines(), "jsonl")
    pm.register(Broken(), "broken")
    events = [TraceEvent("lifecycle", "transition", 1.5, "conv", "sess", {"dest": "review"}),
              TraceEvent("tool", "read_file", 2.0)]
    assert pm.hook.store_traces(events=events) == []
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert lines == [e.as_dict() for e in events]
    assert lines[0] == {"kind": "lifecycle", "name": "transition", "at_ms": 1.5,
                        "conversation_id": "conv", "session_id": "sess",
                        "attributes": {"dest": "review"}}
    assert [(f.plugin, f.hook, f.error) for f in pm.failures] == [
        ("broken", "store_traces", "ConnectionError: collector unreachable")]


# -- gate_tools --------------------------------------------------------------------------------


def _tools(*names: str) -> list[ToolSpec]:
    return [ToolSpec(name, name, ReadArgs) for name in names]


def test_gate_tools_withholds_tools(pm):
    class PlanGate:
        @hookimpl
        def gate_tools(self, tools, request):
            if request.states.get("plan_mode") != "active":
                return [t.name for t in tools if t.name.startswith("plan_")]
            return None

    class NoShell:
        @hookimpl
        def gate_tools(self):
            return "shell"  # one name

    pm.register(PlanGate(), "plan")
    pm.register(NoShell(), "noshell")
    tools = _tools("read_file", "plan_get", "shell", "plan_set_content", "s", "h")
    inactive = advertised(pm, tools, GateRequest(states={"plan_mode": "inactive"}))
    assert [t.name for t in inactive] == ["read_file", "s", "h"]
    active = advertised(pm, tools, GateRequest(states={"plan_mode": "active"}))
    assert [t.name for t in active] == ["read_file", "plan_get", "plan_set_content", "s", "h"]


def test_gate_tools_without_plugins_advertises_everything(pm):
    tools = _tools("a", "b")
    assert advertised(pm, tools, GateRequest()) == tools


# -- authorize_tool_call -----------------------------------------------------------------------


CALL = ToolCall("shell", {"cmd": "rm -rf /"}, "call-1")


def test_authorize_without_decisions_allows(pm):
    class Abstains:
        @hookimpl
        def authorize_tool_call(self, call, request):
            return None

    pm.register(Abstains(), "abstains")
    assert authorize(pm, CALL, GateRequest()) == Decision(True)


def test_authorize_first_decision_wins_and_names_its_plugin(pm):
    calls = []

    class Denies:
        @hookimpl(tryfirst=True)
        def authorize_tool_call(self, call, request):
            calls.append("denies")
            if call.name == "shell":
                return Decision.deny("no shell in this workspace")
            return None

    class Allows:
        @hookimpl
        def authorize_tool_call(self, call):
            calls.append("allows")
            return Decision(True, "everything goes", plugin="custom")

    pm.register(Denies(), "denies")
    pm.register(Allows(), "allows")
    decision = authorize(pm, CALL, GateRequest())
    assert decision == Decision(False, "no shell in this workspace", "denies")
    assert calls == ["denies"]

    calls.clear()
    decision = authorize(pm, ToolCall("read_file"), GateRequest())
    assert decision == Decision(True, "everything goes", "custom")
    assert calls == ["denies", "allows"]


def test_authorize_fails_closed_when_a_plugin_raises(pm):
    class Raises:
        @hookimpl(tryfirst=True)
        def authorize_tool_call(self, call, request):
            raise RuntimeError("policy server down")

    class Allows:
        @hookimpl
        def authorize_tool_call(self):
            return Decision(True)

    pm.register(Raises(), "policy")
    pm.register(Allows(), "allows")
    decision = authorize(pm, CALL, GateRequest())
    assert decision.allowed is False
    assert decision.plugin == "policy"
    assert "'policy'" in decision.reason and "RuntimeError: policy server down" in decision.reason
    assert [(f.plugin, f.hook) for f in pm.failures] == [("policy", "authorize_tool_call")]


def test_authorize_denies_a_result_that_is_not_a_decision(pm):
    class Sloppy:
        @hookimpl
        def authorize_tool_call(self, call, request):
            return True  # not a Decision

    pm.register(Sloppy(), "sloppy")
    decision = authorize(pm, CALL, GateRequest())
    assert decision.allowed is False
    assert decision.plugin == "sloppy"
    assert "returned bool" in decision.reason and "not a Decision" in decision.reason


def test_authorize_fails_closed_when_a_wrapper_raises(pm):
    class Audit:
        @hookimpl(wrapper=True)
        def authorize_tool_call(self, call, request):
            decision = yield
            raise OSError(f"audit log full while recording {decision}")

    pm.register(Audit(), "audit")
    decision = authorize(pm, CALL, GateRequest())
    assert decision.allowed is False
    assert decision.plugin == "audit"
    assert "OSError: audit log full" in decision.reason
    assert [(f.plugin, f.hook) for f in pm.failures] == [("audit", "authorize_tool_call")]


def test_authorize_hook_called_directly_also_fails_closed(pm):
    class Raises:
        @hookimpl
        def authorize_tool_call(self, call, request):
            raise RuntimeError("boom")

    pm.register(Raises(), "raises")
    decision = pm.hook.authorize_tool_call(call=CALL, request=GateRequest())
    assert isinstance(decision, Decision) and decision.allowed is False
