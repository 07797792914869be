"""Every hook in ``orion.hookspecs``, exercised through the code that calls it. The runtime
hooks (systems, slash commands, compaction, reset) run through the real runtime, driven by a
scripted conversation."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from typing import Literal

import click
import pytest
from click.testing import CliRunner
from pydantic import BaseModel, Field

from orion import hookimpl
from orion.clock import VirtualClock
from orion.runtime.context import ContextBlock, ContextRequest, build_context
from orion.errors import ActionError, ConfigError, PluginError, TriggerNotAllowed
from orion.models.script import ScriptCursor, load_script
from orion.models.scripted import ScriptedModel
from orion.hooks.manager import PluginManager, make_plugin_manager
from orion.runtime.report import Reporter
from orion.runtime.runtime import CommandError, Runtime
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
    assert lifecycle.trigger("submit", title="Broken login")
    kind, transition = plugin.events[-1]
    assert kind == "transition"
    assert (transition.lifecycle, transition.instance_id, transition.trigger, transition.source,
            transition.dest) == ("ticket", "t-1", "submit", "open", "review")
    assert transition.payload == {"title": "Broken login"}
    assert transition.at_ms == 5010
    assert transition.duration_ms >= 0
    assert lifecycle.context["notes"] == ["greeted", "Broken login"]

    assert lifecycle.trigger("close")
    assert plugin.events[-2][0] == "transition"
    assert plugin.events[-1] == ("finished", "closed", [], [])
    with pytest.raises(TriggerNotAllowed):
        lifecycle.trigger("close")


def test_lifecycle_transition_is_not_called_when_a_guard_says_no(pm, tmp_path):
    plugin = Ticketing()
    pm.register(plugin, "ticketing")
    lifecycle = load_definition(chart(tmp_path, TICKET, "ticket.yaml"), plugins=pm).create()
    before = list(plugin.events)
    assert not lifecycle.trigger("submit")  # no title
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
    assert not lifecycle.trigger("submit", title="")
    assert lifecycle.trigger("submit", title="ok")
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
        register(ToolSpec("read_doc", "Read a file.", ReadArgs,
                          handler=lambda args: f"read {args.path}"))


def test_register_tools_fills_the_registry_and_makes_an_openai_definition(pm):
    pm.register(Tools(), "tools")
    spec = pm.registry.tools["read_doc"]
    assert pm.registry.tool_plugins["read_doc"] == "tools"

    definition = spec.openai_definition()
    assert definition["type"] == "function"
    function = definition["function"]
    assert (function["name"], function["description"]) == ("read_doc", "Read a file.")
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


def test_orions_own_command_groups_come_from_their_plugins(tmp_path):
    # `orion sessions`, `orion plan` and `orion traces` are registered through the hook, as a
    # team's commands are: blocking a plugin takes its group away, and nothing else.
    from orion.cli import CommandLine

    everything = click.Group("orion")
    make_plugin_manager(entrypoints=False).hook.register_commands(cli=everything)
    assert {"sessions", "plan", "traces"} <= set(everything.commands)
    without = click.Group("orion")
    make_plugin_manager(entrypoints=False, blocked=["orion_plugins.trace_commands"]) \
        .hook.register_commands(cli=without)
    assert {"sessions", "plan"} <= set(without.commands) and "traces" not in without.commands
    # `orion --help` loads only the built-in plugins that add commands: the list is complete.
    from orion.hooks.manager import COMMAND_PLUGINS

    adding = {name.rsplit(".", 1)[-1] for name, plugin in
              make_plugin_manager(entrypoints=False).list_name_plugin()
              if hasattr(plugin, "register_commands")}
    assert adding == set(COMMAND_PLUGINS)
    # The real command line adds them when a command it does not define itself is asked for.
    result = CliRunner().invoke(CommandLine("orion"), ["sessions", "list", "--workspace",
                                                       str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert result.output == "[]\n"


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
    assert lifecycle.trigger("save", text="hello")
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
    # the built-in syntax validator sees the indented line too
    assert [(i.line, i.column, i.code) for i in issues] == [
        (1, 6, "trailing"), (2, 1, "syntax"), (2, 1, "tab"), (3, 6, "trailing")]
    assert str(issues[2]) == "2:1: tab: tab character"
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


def sqlite_rows(path):
    """The rows of orion.db as another program reads them, once this process's trace writer
    stored what it was given (it stores off the step, on a thread of its own)."""
    import sqlite3

    from orion.trace.writer import settle_all

    settle_all()
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    return [dict(row) for row in db.execute("select * from trace_events order by id")]


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
    assert pm.hook.store_traces(events=events, blobs={}, state_dir=tmp_path) == []
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert lines == [e.as_dict() for e in events]
    assert lines[0] == {"kind": "lifecycle", "name": "transition", "at_ms": 1.5,
                        "duration_ms": 0.0, "conversation_id": "conv", "session_id": "sess",
                        "attributes": {"dest": "review"}, "trace_id": "", "span_id": "",
                        "parent_id": "", "links": []}
    # the built-in SQLite store got the same batch
    assert [row["name"] for row in sqlite_rows(tmp_path / "orion.db")] == [
        "transition", "read_file"]
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
    active = advertised(pm, tools, GateRequest(states={"plan_mode": "active"},
                                               tags={"plan_mode": frozenset({"plan_on"})}))
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


# -- the runtime: register_systems, register_slash_commands, compact_conversation and
# -- conversation_reset, through a real Runtime playing a scripted conversation --------------

NOTES = "The release is on Friday.\n"

HELLO = """\
conversation:
  - user: Hello
  - model: {text: Hello!}
"""

READ_NOTES = """\
conversation:
  - user: When is the release? It is in notes.md.
  - model:
      tool_calls: [{name: read_file, arguments: {path: notes.md}}]
  - expect: The release is on Friday
  - model: {text: On Friday.}
"""


class RecordingModel(ScriptedModel):
    """The scripted model, keeping every request it answered."""

    def __init__(self, cursor: ScriptCursor):
        super().__init__(cursor)
        self.requests = []

    async def stream(self, request):
        self.requests.append(request)
        async for event in super().stream(request):
            yield event


class Notices(Reporter):
    def __init__(self):
        self.notices: list[str] = []

    def notice(self, text):
        self.notices.append(text)


class Session:
    """A real runtime with ``tmp_path`` as its workspace (``orion.yaml`` from ``config``) and a
    scripted model. ``play()`` sends the script's user lines through ``runtime.handle``, as
    ``orion run`` does, while the model takes the ``expect`` and ``model`` entries."""

    def __init__(self, tmp_path: Path, pm: PluginManager, script: str, *,
                 config: str | None = None):
        if config is not None:
            (tmp_path / "orion.yaml").write_text(textwrap.dedent(config))
        (tmp_path / "notes.md").write_text(NOTES)
        path = tmp_path / "script.yaml"
        path.write_text(textwrap.dedent(script))
        self.cursor = load_script(path).cursor()
        self.model = RecordingModel(self.cursor)
        self.reporter = Notices()
        self.runtime = Runtime(model=self.model, plugins=pm, workspace=tmp_path,
                               clock=VirtualClock(), reporter=self.reporter)
        self.replies: list[str | None] = []

    def play(self) -> Session:
        while (entry := self.cursor.peek()) is not None and entry.kind == "user":
            self.cursor.next()
            self.replies.append(asyncio.run(self.runtime.handle(entry.user)))
        assert self.cursor.done, f"entries left over: {self.cursor.remaining}"
        return self

    @property
    def order(self) -> list[str]:
        return [system.name for system in self.runtime.pipeline]

    def messages(self, number: int) -> list[dict]:
        """The messages of model request ``number`` (1-based), after the system message."""
        [request] = [r for r in self.model.requests if r.number == number]
        return request.messages[1:]

    def system(self, number: int) -> str:
        """The system message of model request ``number``."""
        [request] = [r for r in self.model.requests if r.number == number]
        assert request.messages[0]["role"] == "system"
        return request.messages[0]["content"]


def roles(session: Session) -> list[str]:
    return [message.role for message in session.runtime.conversation.messages]


# -- register_systems ---------------------------------------------------------------------------


class Audit:
    """A system that records what the turn holds when it runs."""

    name = "audit"

    def __init__(self):
        self.seen: list[dict] = []

    async def run(self, turn):
        self.seen.append({
            "number": turn.number,
            "request": turn.request is not None,
            "finish": turn.finish.reason if turn.finish else None,
            "text": turn.response_text,
            "tool_calls": [call.name for call in turn.tool_calls],
            "outcomes": len(turn.outcomes),
            "last_message": turn.host.conversation.messages[-1].role,
        })


class StrictTools:
    """A replacement for the ``tools`` system: every call is refused, none runs."""

    name = "strict_tools"

    async def run(self, turn):
        for call in turn.tool_calls:
            turn.host.conversation.add_tool_result(
                call.id, f"refused: {call.name} is not allowed in this workspace")
        turn.follow_up = bool(turn.tool_calls)


class Offline:
    """Answers without a model, from the context blocks the ``context`` system built."""

    name = "offline"
    replies = True  # in the model's place: the pipeline still answers every message

    async def run(self, turn):
        turn.text.append("offline; context: " + ", ".join(block.name for block in turn.blocks))
        turn.host.conversation.add_assistant(turn.response_text)


class Canned:
    """Answers ``ping`` itself and stops the pass before the model is asked."""

    name = "canned"

    async def run(self, turn):
        last = turn.host.conversation.messages[-1]
        if last.role == "user" and last.content == "ping":
            turn.host.conversation.add_assistant("pong")
            turn.stop = True


class Systems:
    def __init__(self, *systems):
        self.systems = systems

    @hookimpl
    def register_systems(self, register):
        for system in self.systems:
            register(system)


class HouseRules:
    """Context blocks that must reach every model request, compacted or not."""

    BLOCKS = (ContextBlock("plan", "Plan: ship the release on Friday.", order=10),
              ContextBlock("rules", "Answer in English."))

    @hookimpl
    def build_context(self, request):
        return list(self.BLOCKS)


def test_the_default_pipeline_is_context_model_tools_trace(pm, tmp_path):
    session = Session(tmp_path, pm, READ_NOTES).play()
    assert session.order == ["context", "model", "write_session", "tools", "trace"]
    assert {name: pm.registry.system_plugins[name] for name in session.order} == {
        "context": "orion_plugins.turn_systems", "model": "orion_plugins.turn_systems",
        "write_session": "orion_plugins.write_sessions",
        "tools": "orion_plugins.turn_systems", "trace": "orion_plugins.tracing"}
    assert roles(session) == ["user", "assistant", "tool", "assistant"]


def test_register_systems_a_system_inserted_after_the_model_runs_on_every_request(pm, tmp_path):
    audit = Audit()
    pm.register(Systems(audit), "auditing")
    session = Session(tmp_path, pm, READ_NOTES, config="""\
        pipeline:
          insert: [{system: audit, after: model}]
        """).play()
    assert session.order == ["context", "model", "audit", "write_session", "tools", "trace"]
    assert pm.registry.system_plugins["audit"] == "auditing"
    # after the model (the reply is in the turn and the conversation), before the tool results
    assert audit.seen == [
        {"number": 1, "request": True, "finish": "tool_calls", "text": "",
         "tool_calls": ["read_file"], "outcomes": 0, "last_message": "assistant"},
        {"number": 2, "request": True, "finish": "stop", "text": "On Friday.",
         "tool_calls": [], "outcomes": 0, "last_message": "assistant"},
    ]
    assert roles(session) == ["user", "assistant", "tool", "assistant"]


def test_register_systems_a_replaced_system_runs_in_its_place(pm, tmp_path):
    pm.register(Systems(StrictTools()), "strict")
    session = Session(tmp_path, pm, """\
        conversation:
          - user: When is the release? It is in notes.md.
          - model:
              tool_calls: [{name: read_file, arguments: {path: notes.md}}]
          - expect: "refused: read_file is not allowed"
          - model: {text: I may not read it.}
        """, config="""\
        pipeline:
          replace: {tools: strict_tools}
        """).play()
    assert session.order == ["context", "model", "write_session", "strict_tools", "trace"]
    [tool_result] = [m for m in session.runtime.conversation.messages if m.role == "tool"]
    assert tool_result.content == "refused: read_file is not allowed in this workspace"
    assert "Friday" not in json.dumps(session.messages(2))  # read_file never ran


def test_register_systems_a_full_list_replaces_the_default_pipeline(pm, tmp_path):
    pm.register(Systems(Offline()), "offline")
    pm.register(HouseRules(), "rules")
    session = Session(tmp_path, pm, """\
        conversation:
          - user: Hello
          - user: Still there?
        """, config="pipeline: [context, offline]\n").play()
    assert session.order == ["context", "offline"]
    assert session.model.requests == []  # no model system, no model request
    replies = [m.content for m in session.runtime.conversation.messages if m.role == "assistant"]
    assert replies == ["offline; context: plan, rules"] * 2


def test_register_systems_a_system_can_stop_the_pass_before_the_model(pm, tmp_path):
    pm.register(Systems(Canned()), "canned")
    session = Session(tmp_path, pm, """\
        conversation:
          - user: ping
          - user: What did I say?
          - model: {text: You said ping.}
        """, config="""\
        pipeline:
          insert: [{system: canned, before: model}]
        """).play()
    assert session.order == ["context", "canned", "model", "write_session", "tools", "trace"]
    assert [r.number for r in session.model.requests] == [2]  # pass 1 stopped before the model
    assert session.messages(2) == [{"role": "user", "content": "ping"},
                                   {"role": "assistant", "content": "pong"},
                                   {"role": "user", "content": "What did I say?"}]


@pytest.mark.parametrize("config,order", [
    ("pipeline: {insert: [{system: audit, before: context}]}",
     ["audit", "context", "model", "write_session", "tools", "trace"]),
    ("pipeline: {replace: {tools: strict_tools}, insert: [{system: audit, after: model}]}",
     ["context", "model", "audit", "write_session", "strict_tools", "trace"]),
    ("pipeline: {remove: [write_session, tools, trace]}", ["context", "model"]),
    ("pipeline: [audit, context, model, strict_tools]",
     ["audit", "context", "model", "strict_tools"]),
])
def test_register_systems_orion_yaml_orders_the_pipeline(pm, tmp_path, config, order):
    pm.register(Systems(Audit(), StrictTools()), "systems")
    assert Session(tmp_path, pm, HELLO, config=config).order == order


@pytest.mark.parametrize("config,named", [
    ("pipeline: {insert: [{system: audti, after: model}]}", "'audti'"),
    ("pipeline: {replace: {tools: strict_toolz}}", "'strict_toolz'"),
    ("pipeline: [context, modle, tools]", "'modle'"),
    ("pipeline: {insert: [{system: audit, after: modle}]}", "'modle'"),
    ("pipeline: {remove: [tracing]}", "'tracing'"),
])
def test_register_systems_an_unknown_system_is_a_config_error_naming_it(pm, tmp_path, config,
                                                                        named):
    pm.register(Systems(Audit(), StrictTools()), "systems")
    with pytest.raises(ConfigError) as info:
        Session(tmp_path, pm, HELLO, config=config)
    message = str(info.value)
    assert named in message
    assert "orion.yaml" in message


@pytest.mark.parametrize("config,said", [
    ("pipeline: []\n", "orion.yaml: the pipeline is empty, so no message would ever be answered"),
    ("pipeline: [context, tools]\n", "the pipeline (context, tools) has no system that replies"),
    ("pipeline: {remove: [model]}\n", "has no system that replies"),
    ("pipeline: {replace: {model: canned}}\n", "has no system that replies"),
])
def test_register_systems_a_pipeline_that_never_answers_is_refused(pm, tmp_path, config, said):
    # Canned answers one message and stops the pass; it does not set `replies`, so it cannot
    # stand in for the model.
    pm.register(Systems(Canned()), "canned")
    with pytest.raises(ConfigError) as info:
        Session(tmp_path, pm, HELLO, config=config)
    assert said in str(info.value)
    assert "replies = True" in str(info.value) or "list its systems" in str(info.value)


def test_register_systems_a_name_registered_twice_names_both_plugins(pm, tmp_path):
    class Model:
        name = "model"

        async def run(self, turn):
            pass

    pm.register(Systems(Model()), "my_model")
    with pytest.raises(PluginError) as info:
        Session(tmp_path, pm, HELLO)
    message = str(info.value)
    assert "system 'model' is registered twice" in message
    assert "'orion_plugins.turn_systems'" in message and "'my_model'" in message


def test_register_systems_rejects_a_system_without_a_name_or_run(pm, tmp_path):
    class Nameless:
        async def run(self, turn):
            pass

    pm.register(Systems(Nameless()), "nameless")
    with pytest.raises(PluginError, match="plugin 'nameless' registered a system without"):
        Session(tmp_path, pm, HELLO)


# -- register_slash_commands --------------------------------------------------------------------


class Greetings:
    def __init__(self):
        self.runtimes: list[Runtime] = []

    @hookimpl
    def register_slash_commands(self, register):
        def hello(runtime, args):
            self.runtimes.append(runtime)
            return f"Hello, {args or 'world'}!"

        async def later(runtime, args):
            await asyncio.sleep(0)
            return f"later: {args}"

        def ask(runtime, args):
            runtime.inject(f"Explain {args} in one line.")

        register("hello", hello, "say hello")
        register("later", later, "an async command")
        register("ask", ask, "ask the model about something")


def test_register_slash_commands_plugin_commands_answer_the_user(pm, tmp_path):
    greetings = Greetings()
    pm.register(greetings, "greetings")
    session = Session(tmp_path, pm, """\
        conversation:
          - user: /hello Ada
          - user: /hello
          - user: /later tea
          - user: /help
          - user: /ask statecharts
          - expect: Explain statecharts in one line
          - model: {text: States and the transitions between them.}
        """).play()
    assert pm.registry.commands["hello"].plugin == "greetings"
    hello_ada, hello, later, help_text, ask = session.replies
    assert (hello_ada, hello, later, ask) == ("Hello, Ada!", "Hello, world!", "later: tea", None)
    assert greetings.runtimes == [session.runtime, session.runtime]
    assert "/hello" in help_text and "say hello" in help_text and "/reset" in help_text
    assert session.reporter.notices[:3] == ["Hello, Ada!", "Hello, world!", "later: tea"]
    # commands are not messages: only the prompt /ask queued reached the model, and was answered
    assert [r.number for r in session.model.requests] == [1]
    assert session.messages(1) == [{"role": "user", "content": "Explain statecharts in one line."}]
    assert roles(session) == ["user", "assistant"]


def test_an_unknown_slash_command_lists_the_available_ones(pm, tmp_path):
    pm.register(Greetings(), "greetings")
    session = Session(tmp_path, pm, "conversation:\n  - user: /nope please\n")
    with pytest.raises(CommandError) as info:
        session.play()
    assert str(info.value) == ("unknown command /nope (available: /ask, /compact, /hello, /help, /later, "
                               "/plan, /quit, /reset, /sessions)")
    assert session.runtime.conversation.messages == []
    assert session.model.requests == []


@pytest.mark.parametrize("name", ["hello", "reset"])
def test_register_slash_commands_a_name_registered_twice_is_a_plugin_error(pm, tmp_path, name):
    class Again:
        @hookimpl
        def register_slash_commands(self, register):
            register(name, lambda runtime, args: "again")

    pm.register(Greetings(), "greetings")
    pm.register(Again(), "again")
    with pytest.raises(PluginError) as info:
        Session(tmp_path, pm, HELLO)
    message = str(info.value)
    first = "greetings" if name == "hello" else "orion_plugins.conversation_commands"
    assert f"slash command /{name} is registered twice" in message
    assert f"'{first}'" in message and "'again'" in message


@pytest.mark.parametrize("name,handler,match", [
    ("Hello", lambda runtime, args: None, "lower-case"),
    ("/hello", lambda runtime, args: None, "lower-case"),
    ("hello", "not a function", "not callable"),
])
def test_register_slash_commands_rejects_bad_names_and_handlers(pm, tmp_path, name, handler,
                                                                match):
    class Bad:
        @hookimpl
        def register_slash_commands(self, register):
            register(name, handler)

    pm.register(Bad(), "bad")
    with pytest.raises(PluginError, match=f"plugin 'bad' registered slash command.*{match}"):
        Session(tmp_path, pm, HELLO)


# -- compact_conversation -----------------------------------------------------------------------

#: Three user turns; with max_messages 4 each of the last two requests needs compaction.
LONG = """\
conversation:
  - user: Hi
  - model: {text: Hello.}                 # request 1: [Hi]
  - user: When is the release? It is in notes.md.
  - model:                                # request 2: [Hi, Hello., When...]
      tool_calls: [{name: read_file, arguments: {path: notes.md}}]
  - expect: The release is on Friday      # request 3: 5 messages, the first turn goes
  - model: {text: On Friday.}
  - user: Thanks!
  - model: {text: You are welcome.}       # request 4: 5 messages, the second turn goes
"""

BUDGET = "runtime: {max_messages: 4}\n"


def test_compact_conversation_builtin_drops_the_oldest_whole_turns(pm, tmp_path):
    pm.register(HouseRules(), "rules")
    session = Session(tmp_path, pm, LONG, config=BUDGET).play()
    assert [r.number for r in session.model.requests] == [1, 2, 3, 4]
    asked = "When is the release? It is in notes.md."
    assert [m["content"] for m in session.messages(2)] == ["Hi", "Hello.", asked]
    # request 3: the first turn is gone, the newest kept whole (the call with its result)
    third = session.messages(3)
    assert [m["role"] for m in third] == ["user", "assistant", "tool"]
    assert third[0]["content"] == asked
    assert third[2]["tool_call_id"] == third[1]["tool_calls"][0]["id"]
    assert session.messages(4) == [{"role": "user", "content": "Thanks!"}]
    assert session.runtime.conversation.compacted == 6
    assert roles(session) == ["user", "assistant"]
    assert session.reporter.notices == ["compacted the conversation to 3 messages",
                                        "compacted the conversation to 1 messages"]
    # compaction safety: every plugin block is in every request's system message; the notice
    # block only once messages were removed, with the count so far
    for number in (1, 2, 3, 4):
        system = session.system(number)
        assert all(block.text in system for block in HouseRules.BLOCKS), number
        assert system.index("Plan: ship") < system.index("Answer in English.")
    assert "earlier messages" not in session.system(1) + session.system(2)
    assert "2 earlier messages of this conversation were removed" in session.system(3)
    assert "6 earlier messages of this conversation were removed" in session.system(4)


def test_compact_conversation_keeps_the_newest_turn_even_over_budget(pm, tmp_path):
    session = Session(tmp_path, pm, READ_NOTES, config="runtime: {max_messages: 2}\n").play()
    assert [m["role"] for m in session.messages(2)] == ["user", "assistant", "tool"]
    assert session.runtime.conversation.compacted == 0
    assert session.reporter.notices == []
    assert "earlier messages" not in session.system(2)


def test_compact_conversation_is_not_called_within_the_budget(pm, tmp_path):
    class Never:
        @hookimpl
        def compact_conversation(self, messages):
            raise AssertionError("called within the budget")

    pm.register(Never(), "never")
    session = Session(tmp_path, pm, LONG).play()  # the default budget: 200 messages
    assert session.runtime.conversation.compacted == 0


def test_compact_conversation_a_plugin_result_wins_over_the_builtin(pm, tmp_path):
    from orion.runtime.conversation import Budget, Message

    class Summarize:
        """Replaces everything before the newest user turn with one summary message."""

        def __init__(self):
            self.calls: list[tuple[int, Budget]] = []

        @hookimpl
        def compact_conversation(self, messages, budget):
            self.calls.append((len(messages), budget))
            start = max(i for i, m in enumerate(messages) if m.role == "user" and not m.injected)
            summary = Message("user", f"Summary of {start} earlier messages.", injected=True)
            return [summary, *messages[start:]]

    [builtin] = [impl for impl in pm.hook.compact_conversation.get_hookimpls()
                 if impl.plugin_name == "orion_plugins.compaction"]
    assert builtin.trylast
    summarize = Summarize()
    pm.register(summarize, "summarize")
    pm.register(HouseRules(), "rules")
    session = Session(tmp_path, pm, LONG, config=BUDGET).play()
    assert [(n, b.max_messages) for n, b in summarize.calls] == [(5, 4), (6, 4)]
    third = session.messages(3)
    assert third[0] == {"role": "user", "content": "Summary of 2 earlier messages."}
    assert [m["role"] for m in third] == ["user", "user", "assistant", "tool"]
    assert session.messages(4) == [{"role": "user", "content": "Summary of 5 earlier messages."},
                                   {"role": "user", "content": "Thanks!"}]
    assert session.runtime.conversation.compacted == 1 + 4  # removed minus added, each time
    assert all(block.text in session.system(4) for block in HouseRules.BLOCKS)


def test_compact_conversation_a_plugin_returning_none_leaves_it_to_the_builtin(pm, tmp_path):
    class Abstain:
        def __init__(self):
            self.calls = 0

        @hookimpl
        def compact_conversation(self):
            self.calls += 1
            return None

    abstain = Abstain()
    pm.register(abstain, "abstain")
    session = Session(tmp_path, pm, LONG, config=BUDGET).play()
    assert abstain.calls == 2
    assert session.messages(4) == [{"role": "user", "content": "Thanks!"}]
    assert session.runtime.conversation.compacted == 6


# -- conversation_reset -------------------------------------------------------------------------


class ResetWatcher:
    def __init__(self, prompt: str | None = None):
        self.prompt = prompt
        self.seen: list[tuple] = []

    @hookimpl
    def conversation_reset(self, runtime):
        conversation = runtime.conversation
        self.seen.append((runtime, list(conversation.messages), conversation.compacted))
        if self.prompt:
            runtime.inject(self.prompt)


def test_conversation_reset_clears_the_conversation_and_calls_the_hook(pm, tmp_path):
    watcher = ResetWatcher()
    pm.register(watcher, "watcher")
    session = Session(tmp_path, pm, """\
        conversation:
          - user: Remember the word kiwi.
          - model: {text: Noted.}
          - user: /reset
          - user: What was the word?
          - model: {text: I do not know.}
        """).play()
    assert session.replies == [None, "The conversation was reset.", None]
    assert watcher.seen == [(session.runtime, [], 0)]  # called once the history was cleared
    assert session.messages(2) == [{"role": "user", "content": "What was the word?"}]
    assert roles(session) == ["user", "assistant"]


def test_conversation_reset_a_prompt_the_hook_queues_is_answered(pm, tmp_path):
    pm.register(ResetWatcher("Plan work ended with the old conversation."), "watcher")
    session = Session(tmp_path, pm, """\
        conversation:
          - user: Hi
          - model: {text: Hello.}
          - user: /reset
          - expect: Plan work ended
          - model: {text: Starting afresh.}
        """).play()
    assert session.messages(2) == [{"role": "user",
                                    "content": "Plan work ended with the old conversation."}]
    assert session.runtime.prompts == ["Plan work ended with the old conversation."]
