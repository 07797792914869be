"""Plan mode ("work by plan", docs/plan-mode.md): the ADR's Phase 5 tests and its five
invariants, through the real runtime, real plugins and a real ``orion.db`` in ``tmp_path``.

Conversations are scripted: the scripted model plays the model's side, and its log
(``model.log[i].sent``) is what the runtime sent with each request: the messages, with the
system message first, and the advertised tools. Nothing of Orion is mocked.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import textwrap
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from orion.runtime.context import STATE_NOTE
import yaml

from orion.clock import VirtualClock
from orion.models.events import ToolCall as RawToolCall
from orion.models.script import load_script
from orion.models.scripted import ScriptedModel
from orion.plan.service import PlanCommandError, plan_service_for
from orion.plan.store import DB_NAME, PlanStore, PlanStoreError, RevisionConflict, Status
from orion.hooks.manager import make_plugin_manager
from orion.runtime.runner import play
from orion.workspace.statedb import TRACES_DB
from orion.runtime.runtime import Runtime
from orion.tools.executor import ToolContext, execute_call
from orion_plugins.turn_systems import gate_request
from orion.trace.writer import settle_all

PLAN_TOOLS = {"plan_set_content", "plan_get"}
DRAFT = "# Release\n\n1. Tag v1.2\n2. Announce it\n"
DRAFT_2 = "# Release\n\n1. Tag v1.2\n2. Write the notes\n3. Announce it\n"
DRAFT_3 = "# Release\n\n1. Tag v1.2.1 (hotfix first)\n2. Announce it\n"


# -- script entries ------------------------------------------------------------------------------

def call(name: str, **arguments: Any) -> dict:
    """A model reply with one tool call."""
    return {"model": {"tool_calls": [{"name": name, "arguments": arguments}]}}


def say(text: str) -> dict:
    return {"model": {"text": text}}


def expect(text: str) -> dict:
    return {"expect": text}


def draft(markdown: str = DRAFT, **more: Any) -> list[dict]:
    """One user turn's model side: store ``markdown``, then say so."""
    return [call("plan_set_content", plan_markdown=markdown, **more), say("Stored.")]


# -- a session: one real runtime in a workspace ---------------------------------------------------

class Session:
    """A runtime in ``workspace`` answered by a scripted model; ``session(line)`` is what the
    user types (its reply is returned)."""

    def __init__(self, workspace: Path, entries: list[dict], *, model_wrapper=None):
        text = yaml.safe_dump({"conversation": entries or [{"user": "(no model requests)"}]},
                              allow_unicode=True, sort_keys=False)
        self.model = ScriptedModel(load_script("script.yaml", text=text).cursor())
        self.pm = make_plugin_manager(entrypoints=False, env={})
        model = model_wrapper(self.model) if model_wrapper else self.model
        self.runtime = Runtime(model=model, plugins=self.pm, workspace=workspace,
                               clock=VirtualClock(), env={})
        self.loop = asyncio.new_event_loop()

    def __call__(self, line: str) -> str | None:
        return self.loop.run_until_complete(self.runtime.handle(line))

    @property
    def service(self):
        return plan_service_for(self.runtime)

    @property
    def store(self) -> PlanStore:
        return self.service.store

    @property
    def requests(self):
        return [served.sent for served in self.model.log]

    def tools(self, i: int = -1) -> list[str]:
        return [tool["function"]["name"] for tool in self.requests[i].tools]

    def system(self, i: int = -1) -> str:
        """The system context of request ``i``: the system message, then the state after the
        conversation (where the plan block is: it changes with the plan)."""
        message = self.requests[i].messages[0]
        assert message["role"] == "system"
        last = self.requests[i].messages[-1].get("content") or ""
        at = last.find(STATE_NOTE)
        return message["content"] + ("" if at < 0 else "\n\n" + last[at:])

    def tool_results(self) -> list[dict]:
        return [json.loads(m.content) if m.content.startswith("{") else m.content
                for m in self.runtime.conversation.messages if m.role == "tool"]

    def close(self) -> None:
        self.runtime.close()
        self.service.close()
        self.loop.close()

    @property
    def done(self) -> bool:
        return self.model.cursor.done


@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def session(workspace):
    """``session(*entries)`` opens a session in the workspace; all are closed at the end."""
    opened: list[Session] = []

    def open_session(*entries: dict | list[dict], model_wrapper=None) -> Session:
        flat: list[dict] = []
        for entry in entries:
            flat.extend(entry if isinstance(entry, list) else [entry])
        s = Session(workspace, flat, model_wrapper=model_wrapper)
        opened.append(s)
        return s

    yield open_session
    for s in opened:
        s.close()
    for s in opened:  # refusals are answers to the model, never plugin failures
        assert s.pm.failures == []


def orion_yaml(workspace: Path, text: str) -> None:
    (workspace / "orion.yaml").write_text(textwrap.dedent(text))


def trace_events(workspace: Path, kind: str) -> list[dict]:
    settle_all()  # this process's trace writer stores off the step
    with sqlite3.connect(workspace / ".orion" / TRACES_DB) as db:
        rows = db.execute("SELECT name, attributes FROM trace_events WHERE kind = ? ORDER BY id",
                          (kind,)).fetchall()
    return [{"name": name, **json.loads(attributes)} for name, attributes in rows]


def block_of(system: str) -> str:
    """The plan block of a system message ("" when there is none)."""
    start = system.find("Plan work is active")
    return "" if start < 0 else system[start:]


# == ADR Phase 5 ===================================================================================

def test_plan_set_content_is_denied_when_plan_work_is_inactive(session, workspace):
    """PlanSetContentToolTest: denied when plan work is inactive. The real executor, given
    every registered tool (as if gating had let it through), asks the real authorization."""
    s = session()
    tools = s.pm.registry.tools
    context = ToolContext(workspace=s.runtime.workspace, host=s.runtime)
    raw = RawToolCall("call_1", "plan_set_content", json.dumps({"plan_markdown": DRAFT}))
    outcome = asyncio.run(execute_call(raw, tools=tools, pm=s.pm, gate=gate_request(s.runtime),
                                       context=context))
    assert (outcome.ok, outcome.kind) == (False, "denied")
    error = json.loads(outcome.content)
    assert error["plugin"] == "orion_plugins.plan_mode"
    assert "plan_set_content needs plan work, which is not active" in error["error"]
    assert "/plan on" in error["error"]
    assert s.store.rows() == []


def test_plan_set_content_schema_requires_plan_markdown(session):
    """PlanSetContentToolTest: the schema has the required string ``plan_markdown`` (and the
    optional title and expected_revision); it is what the model is sent."""
    s = session(say("ok"))
    s("/plan on")
    s("hello")
    [definition] = [t for t in s.requests[0].tools if t["function"]["name"] == "plan_set_content"]
    schema = definition["function"]["parameters"]
    assert schema["required"] == ["plan_markdown"]
    assert schema["properties"]["plan_markdown"]["type"] == "string"
    assert schema["properties"]["plan_markdown"]["minLength"] == 1
    assert set(schema["properties"]) == {"plan_markdown", "title", "expected_revision"}
    assert schema["additionalProperties"] is False
    assert definition == s.pm.registry.tools["plan_set_content"].openai_definition()


def test_plan_get_is_denied_when_inactive_and_returns_the_markdown_when_active(session,
                                                                                 workspace):
    """PlanGetToolTest."""
    s = session(draft(), call("plan_get"), say("Loaded."))
    context = ToolContext(workspace=s.runtime.workspace, host=s.runtime)
    raw = RawToolCall("call_1", "plan_get", "{}")
    denied = asyncio.run(execute_call(raw, tools=s.pm.registry.tools, pm=s.pm,
                                      gate=gate_request(s.runtime), context=context))
    assert denied.kind == "denied" and "plan_get needs plan work" in denied.content
    s("/plan on")
    s("Plan the release.")
    s("Show me the plan.")
    got = s.tool_results()[-1]
    assert got["markdown"] == DRAFT
    assert (got["status"], got["revision"]) == ("READY", 1)
    assert got["plan_id"] == s.store.active().id


def test_collecting_to_ready_persists_the_markdown(session):
    """PlanFinalizationSystemTest: COLLECTING -> READY with the markdown persisted."""
    s = session(draft(title="Release"))
    s("/plan on")
    plan = s.store.active()
    assert (plan.status, plan.markdown, plan.revision) == (Status.COLLECTING, None, 0)
    s("Plan the release.")
    stored = s.store.get(plan.id)
    assert (stored.status, stored.markdown, stored.title, stored.revision, stored.active) == (
        Status.READY, DRAFT, "Release", 1, True)
    assert s.service.lifecycle.state == "active.ready"
    assert s.tool_results()[0] == {"plan_id": plan.id, "title": "Release", "status": "READY",
                                   "revision": 1, "bytes": len(DRAFT.encode())}


def test_ready_to_ready_overwrites_the_draft(session):
    """PlanFinalizationSystemTest: READY -> READY overwrites (Variant B): the same plan row,
    the new Markdown, one revision up; no other row."""
    s = session(draft(DRAFT, title="Release"), draft(DRAFT_2))
    s("/plan on")
    s("Plan the release.")
    first = s.store.active()
    s("Add the release notes.")
    second = s.store.active()
    assert second.id == first.id
    assert (second.status, second.markdown, second.revision) == (Status.READY, DRAFT_2, 2)
    assert second.title == "Release"  # no title given: kept
    assert len(s.store.rows()) == 1
    assert s.service.lifecycle.state == "active.ready"


def test_executing_creates_a_new_revision_that_supersedes_the_old_plan(session):
    """PlanFinalizationSystemTest: EXECUTING -> a new plan row, READY, supersedes the old,
    which becomes SUPERSEDED (and inactive); the new one is the active plan."""
    s = session(draft(DRAFT, title="Release"), draft(DRAFT_3))
    s("/plan on")
    s("Plan the release.")
    s("/plan approve")
    old = s.store.active()
    assert old.status is Status.EXECUTING
    s("A hotfix comes first; revise the plan.")
    new = s.store.active()
    assert new.id != old.id
    assert (new.status, new.markdown, new.revision, new.supersedes, new.title) == (
        Status.READY, DRAFT_3, old.revision + 1, old.id, "Release")
    before = s.store.get(old.id)
    assert (before.status, before.active, before.markdown) == (Status.SUPERSEDED, False, DRAFT)
    assert [p.id for p in s.store.history()] == [new.id, old.id]
    assert s.service.lifecycle.state == "active.ready"
    assert s.service.active_plan_id == new.id
    approved = s("/plan approve")
    assert approved == f"Plan approved: plan 'Release', EXECUTING, revision {new.revision}."


def test_plan_tools_are_advertised_only_while_plan_work_is_active(session):
    """Context builder test: every request's tools, before, during and after plan work."""
    s = session(say("1"), say("2"), say("3"), say("4"), say("5"), say("6"))
    s("before")                      # 1: inactive
    s("/plan on")
    s("planning")                    # 2: active
    s("/plan done")
    s("after done")                  # 3: inactive
    s("/plan on")
    s("planning again")              # 4: active
    s("/reset")
    s("after reset")                 # 5: inactive
    s("/plan on")
    s("/plan on")
    s("on twice")                    # 6: active
    advertised = [PLAN_TOOLS <= set(s.tools(i)) for i in range(6)]
    assert advertised == [False, True, False, True, False, True]
    assert all(not PLAN_TOOLS & set(s.tools(i)) for i in (0, 2, 4))


# == Invariant 2: a plan tool called while plan work is inactive changes nothing ================

def test_a_plan_tool_never_advertised_is_denied_by_policy_and_changes_nothing(session,
                                                                              workspace):
    """Plan work inactive: the tool is not advertised, and a call to it anyway is put to the
    authorization plugins, which deny it as a policy failure; no handler runs, no row appears."""
    s = session(call("plan_set_content", plan_markdown=DRAFT), expect("denied by policy"),
                say("I cannot store plans now."))
    s("/plan on")
    s("/plan done")
    rows = s.store.rows()
    s("Store this plan.")
    assert s.done
    result = s.tool_results()[0]
    assert result["kind"] == "denied" and result["plugin"] == "orion_plugins.plan_mode"
    assert s.store.rows() == rows


def test_a_plan_tool_called_after_plan_work_ended_is_denied_traced_and_changes_nothing(
        session, workspace):
    """The request advertised the plan tools, but another session in the workspace (a second
    ``orion chat``) ended plan work before the call ran: authorization reads the store at call
    time and denies it as a policy failure; the plan table is unchanged row by row, and the
    denial is a policy_denial event in <ws>/.orion/orion.db."""
    other = session()
    seen: dict[str, Any] = {}

    class OtherSessionEndsPlanWork:
        """The model of the first session; while its reply is being generated, the user types
        /plan done in the other session."""

        name = "scripted"

        def __init__(self, model):
            self.model = model

        async def stream(self, request):
            if "rows" not in seen:
                seen["done"] = await other.runtime.handle("/plan done")
                seen["rows"] = other.store.rows()
            async for event in self.model.stream(request):
                yield event

    s = session(call("plan_set_content", plan_markdown=DRAFT_2), expect("denied by policy"),
                say("Plan work has ended."), model_wrapper=OtherSessionEndsPlanWork)
    s("/plan on")
    s("Plan the release.")
    assert s.done
    assert PLAN_TOOLS <= set(s.tools(0))
    assert seen["done"] == "Plan work ended: plan untitled, CANCELLED, revision 0."
    assert s.store.rows() == seen["rows"]
    [row] = seen["rows"]
    assert (row["status"], row["active"], row["markdown"]) == ("CANCELLED", None, None)
    [result] = s.tool_results()
    assert result["kind"] == "denied" and result["plugin"] == "orion_plugins.plan_mode"
    assert "plan_set_content needs plan work, which is not active" in result["error"]
    # The next request (the denial's follow-up) saw the store: no block, no plan tools, and
    # the lifecycle other plugins see is inactive again.
    assert not PLAN_TOOLS & set(s.tools(1)) and block_of(s.system(1)) == ""
    assert s.runtime.states()["plan_mode"] == "inactive"
    [denial] = trace_events(workspace, "policy_denial")
    assert denial["gen_ai.tool.name"] == "plan_set_content"
    assert denial["orion.policy.plugin"] == "orion_plugins.plan_mode"
    # the reason a plugin gives may quote anything: traced by length and sha256
    assert set(denial["orion.policy.reason"]) == {"$text", "sha256"}


# == Invariant 3: Plan.markdown is the only canonical content ===================================

def test_plan_get_returns_exactly_what_was_stored(session):
    markdown = "# Plän 📋\r\n\n- [ ] step with trailing spaces   \n\n```sh\necho 'hi'\n```\n\n\n"
    s = session(draft(markdown), call("plan_get"), say("ok"))
    s("/plan on")
    s("Plan.")
    s("Load it.")
    assert s.store.active().markdown == markdown
    assert s.tool_results()[-1]["markdown"] == markdown


def test_after_a_revision_the_plan_is_the_store_not_the_conversation(session, workspace):
    """The conversation still holds both drafts as tool call arguments; the plan is the
    active row's Markdown, and plan_get returns it. No other table than the plans and their
    revisions (traces included, which summarize long strings) and no lifecycle snapshot holds
    the Markdown."""
    long_v1 = DRAFT + "".join(f"- detail {i}: " + "x" * 60 + "\n" for i in range(30))
    long_v2 = DRAFT_3 + "".join(f"- detail {i}: " + "y" * 60 + "\n" for i in range(30))
    s = session(draft(long_v1), draft(long_v2), call("plan_get"), say("ok"))
    s("/plan on")
    s("Plan.")
    s("/plan approve")
    s("Revise it.")
    s("Load the plan.")
    arguments = [json.loads(call["function"]["arguments"])["plan_markdown"]
                 for m in s.runtime.conversation.messages for call in (m.tool_calls or [])
                 if call["function"]["name"] == "plan_set_content"]
    assert arguments == [long_v1, long_v2]
    assert s.tool_results()[-1]["markdown"] == long_v2 == s.store.active().markdown
    assert json.dumps(s.service.lifecycle.snapshot()).find("detail") < 0
    s.runtime.close()  # flush the traces
    where = []
    for name in (DB_NAME, TRACES_DB):
        with closing(sqlite3.connect(workspace / ".orion" / name)) as db:
            tables = [t for (t,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                columns = [c[1] for c in db.execute(f"PRAGMA table_info({table})")]
                for column in columns:
                    for text in (long_v1, long_v2):
                        found = db.execute(f"SELECT count(*) FROM {table} WHERE "
                                           f"CAST({column} AS TEXT) LIKE '%' || ? || '%'",
                                           (text,)).fetchone()[0]
                        if found:
                            where.append((name, table, column, text is long_v2, found))
    # Each draft is in its plan's row (the old one in the superseded row, the canonical one in
    # the active row) and once in the revisions, the history, in plans.db; nowhere else (the
    # traces in orion.db included).
    assert sorted(where) == [("plans.db", "plan_revisions", "markdown", False, 1),
                             ("plans.db", "plan_revisions", "markdown", True, 1),
                             ("plans.db", "plans", "markdown", False, 1),
                             ("plans.db", "plans", "markdown", True, 1)]


# == Invariant 4: the plan block in every request, through compaction and restarts ===============

def test_every_request_carries_the_compact_plan_block(session):
    s = session(say("1"), draft(title="Release"), call("list_files"),
                say("3"), say("4"))
    s("before plan work")
    s("/plan on")
    s("Plan the release.")          # requests 2 and 3 (the tool result goes back)
    s("/plan approve")
    s("Go on.")                    # requests 4 and 5
    assert len(s.requests) == 5
    assert block_of(s.system(0)) == ""
    blocks = [block_of(s.system(i)) for i in range(1, 5)]
    assert blocks[0].startswith("Plan work is active: plan untitled, COLLECTING, revision 0.")
    assert blocks[1].startswith("Plan work is active: plan 'Release', READY, revision 1.")
    assert blocks[2].startswith("Plan work is active: plan 'Release', EXECUTING, revision 1.")
    for block in blocks:
        assert "use `plan_get` to load it" in block
        assert "`plan_set_content(plan_markdown=...)`" in block
        assert "Tag v1.2" not in block  # the markdown is not in the block
        assert len(block) < 600


def test_context_includes_markdown_puts_the_whole_plan_in_the_block(session, workspace):
    orion_yaml(workspace, """\
        settings:
          plan_mode: {context_includes_markdown: true}
        """)
    s = session(draft(), say("ok"))
    s("/plan on")
    s("Plan.")
    s("Next.")
    assert "The plan (revision" not in block_of(s.system(0))  # no draft yet
    assert block_of(s.system(-1)).endswith(f"The plan (revision 1):\n\n{DRAFT.strip()}")


def test_the_block_survives_compaction(session, workspace):
    orion_yaml(workspace, """\
        runtime: {max_messages: 3}
        """)
    chatter = [say(f"reply {i}") for i in range(6)]
    s = session(draft(DRAFT, title="Release"), *chatter, call("plan_get"), say("Here it is."))
    s("/plan on")
    s("Plan the release.")
    for i in range(6):
        s(f"message {i}")
    s("What was the plan?")
    assert s.runtime.conversation.compacted > 0
    last = s.requests[-2]  # the request that called plan_get
    history = json.dumps(last.messages[1:])
    assert "Tag v1.2" not in history  # the draft's tool call was compacted away
    assert block_of(s.system(0)).startswith("Plan work is active: plan untitled, COLLECTING")
    for i in range(1, len(s.requests)):
        assert block_of(s.system(i)).startswith(
            "Plan work is active: plan 'Release', READY, revision 1."), i
        assert PLAN_TOOLS <= set(s.tools(i))
    assert s.tool_results()[-1]["markdown"] == DRAFT


def test_a_new_runtime_in_the_workspace_resumes_plan_mode(session, workspace):
    first = session(draft(DRAFT, title="Release"))
    first("/plan on")
    first("Plan the release.")
    first("/plan approve")
    first.close()

    second = session(say("Continuing."), call("plan_get"), say("ok"))
    assert "plan_mode" not in second.runtime.states()
    second("Where were we?")
    assert block_of(second.system(0)).startswith(
        "Plan work is active: plan 'Release', EXECUTING, revision 1.")
    assert PLAN_TOOLS <= set(second.tools(0))
    # From the first request on, other plugins see the lifecycle in the plan's state.
    assert second.runtime.states()["plan_mode"] == "active.executing"
    assert second("/plan") == ("Plan work is active: plan 'Release', EXECUTING, revision 1. "
                               "End plan work with /plan done when the work is finished.")
    assert second.service.lifecycle.state == "active.executing"
    second("Load the plan.")
    assert second.tool_results()[-1]["markdown"] == DRAFT
    assert second("/plan done") == "Plan work ended: plan 'Release', COMPLETED, revision 1."


def test_a_second_orion_run_in_the_workspace_resumes_plan_mode(tmp_path):
    """Two ``orion run`` plays (the runner) in one workspace: the second one's model loads
    the plan the first one stored."""
    workspace = tmp_path / "ws"

    def run(conversation: list[dict]):
        text = yaml.safe_dump({"conversation": conversation}, sort_keys=False)
        script = load_script("run.yaml", text=text)
        pm = make_plugin_manager(entrypoints=False, env={})
        return asyncio.run(play(script, workspace=workspace, plugins=pm))

    first = run([{"user": "/plan on"}, {"user": "Plan the release."}, *draft()])
    assert first.ok, first.errors
    second = run([{"user": "Go on with the plan."}, call("plan_get"),
                  expect('"markdown": "# Release'), say("Resuming at step 1."),
                  {"user": "/plan approve"}, {"user": "/plan done"}])
    assert second.ok, second.errors
    [plan] = PlanStore.for_state_dir(workspace / ".orion").history()
    assert (plan.status, plan.active) == (Status.COMPLETED, False)


# == Invariant 5: at most one active plan =========================================================

def test_the_database_rejects_a_second_active_plan(session):
    s = session()
    s("/plan on")
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        s.store.db.conn.execute(
            "INSERT INTO plans (id, title, status, revision, active, created_ms, updated_ms) "
            "VALUES ('second', '', 'COLLECTING', 0, 1, 0, 0)")
    s.store.db.conn.rollback()
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):  # active and terminal: never
        s.store.db.conn.execute(
            "INSERT INTO plans (id, title, status, revision, active, created_ms, updated_ms) "
            "VALUES ('ended', '', 'COMPLETED', 0, 1, 0, 0)")
    s.store.db.conn.rollback()
    with pytest.raises(PlanStoreError, match="already active"):
        s.store.create()
    assert len(s.store.rows()) == 1


def test_concurrent_sessions_cannot_open_two_plans(workspace):
    """Eight connections (as eight ``orion chat`` would) open a plan at once: each write takes
    the write lock before it reads, so exactly one wins and the others are told a plan is
    active; none fails on a lock."""
    path = workspace / ".orion" / DB_NAME
    PlanStore(path).close()  # the schema exists before the race
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def open_plan(n: int) -> None:
        store = PlanStore(path)
        try:
            barrier.wait()
            store.create(title=f"plan {n}")
            outcomes.append("created")
        except PlanStoreError as exc:
            outcomes.append(str(exc))
        finally:
            store.close()

    threads = [threading.Thread(target=open_plan, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["a plan is already active"] * 7 + ["created"]
    store = PlanStore(path)
    assert len(store.rows()) == 1 and store.active() is not None
    store.close()


def test_plan_on_twice_creates_one_plan_and_changes_nothing(session):
    s = session()
    assert s("/plan on") == "Plan work is on: plan untitled, COLLECTING, revision 0."
    rows = s.store.rows()
    assert s("/plan on") == ("Plan work is already active: plan untitled, COLLECTING, "
                             "revision 0. Nothing changed.")
    assert s.store.rows() == rows and len(rows) == 1
    assert s.service.lifecycle.state == "active.collecting"


def test_plan_on_takes_an_optional_title(session):
    s = session()
    assert s("/plan on Release 1.2") == ("Plan work is on: plan 'Release 1.2', COLLECTING, "
                                         "revision 0.")


# == Commands ===================================================================================

def test_approve_moves_ready_to_executing_and_is_refused_otherwise_with_the_reason(session):
    s = session(draft())
    assert s("/plan approve") == "Plan work is not active. Start it with /plan on."
    s("/plan on")
    rows = s.store.rows()
    assert s("/plan approve") == ("The plan cannot be approved: it is COLLECTING, and approval "
                                  "needs READY: a draft stored with plan_set_content.")
    assert s.store.rows() == rows
    s("Plan.")
    assert s("/plan approve") == "Plan approved: plan untitled, EXECUTING, revision 1."
    assert s.store.active().status is Status.EXECUTING
    assert s.service.lifecycle.state == "active.executing"
    rows = s.store.rows()
    assert s("/plan approve") == ("The plan cannot be approved: it is already approved and "
                                  "EXECUTING.")
    assert s.store.rows() == rows


@pytest.mark.parametrize(("steps", "ended"), [
    ((), Status.CANCELLED),                             # COLLECTING
    (("Plan.",), Status.CANCELLED),                     # READY
    (("Plan.", "/plan approve"), Status.COMPLETED),     # EXECUTING
])
def test_plan_done_ends_plan_work(session, steps, ended):
    s = session(draft(), say("after"))
    s("/plan on")
    for step in steps:
        s(step)
    plan = s.store.active()
    reply = s("/plan done")
    assert reply == f"Plan work ended: plan untitled, {ended.value}, revision {plan.revision}."
    assert s.store.active() is None and s.service.active_plan_id is None
    assert not s.service.plan_work_active
    ended_plan = s.store.get(plan.id)
    assert (ended_plan.status, ended_plan.active) == (ended, False)
    assert s.service.lifecycle.state == "inactive"
    assert s("/plan done") == "Plan work is not active."
    s("hello")
    assert not PLAN_TOOLS & set(s.tools()) and block_of(s.system()) == ""


def test_reset_ends_plan_work_and_resets_the_conversation(session):
    s = session(draft(), say("fresh"))
    s("/plan on")
    s("Plan.")
    s("/plan approve")
    plan = s.store.active()
    old_conversation = s.runtime.conversation.id
    assert s("/reset") == "The conversation was reset."
    assert s.runtime.conversation.messages == []
    assert s.runtime.conversation.id != old_conversation
    assert s.store.active() is None
    # /reset abandons the work: the executing plan is CANCELLED, not COMPLETED as by /plan done
    assert s.store.get(plan.id).status is Status.CANCELLED
    assert s.service.lifecycle.state == "inactive"
    s("hello")
    assert not PLAN_TOOLS & set(s.tools()) and block_of(s.system()) == ""
    assert s("/reset") == "The conversation was reset."  # without plan work: nothing to end


def test_plan_alone_shows_the_status_and_show_the_plan(session):
    s = session(draft(title="Release"))
    assert s("/plan") == "Plan work is not active. Start it with /plan on."
    s("/plan on")
    assert s("/plan") == ("Plan work is active: plan untitled, COLLECTING, revision 0. The "
                          "model stores the first draft with plan_set_content.")
    assert s("/plan show") == "plan untitled, COLLECTING, revision 0: no draft yet."
    s("Plan.")
    assert s("/plan") == ("Plan work is active: plan 'Release', READY, revision 1. Approve it "
                          "with /plan approve, or ask for changes.")
    assert s("/plan show") == f"plan 'Release', READY, revision 1:\n\n{DRAFT}"


def test_an_unknown_plan_action_says_what_exists_and_changes_nothing(session):
    s = session()
    s("/plan on")
    rows = s.store.rows()
    assert s("/plan start") == ("Unknown /plan action 'start': use /plan on [TITLE], /plan "
                                "approve, /plan done, /plan show [REVISION], /plan diff A B, or "
                                "/plan alone for the status.")
    assert s("/plan done now").startswith("/plan done takes no arguments")
    assert s.store.rows() == rows


# == plan_set_content's contract ==================================================================

@pytest.mark.parametrize("markdown", ["", "   \n\t"])
def test_an_empty_plan_is_a_schema_error(session, markdown):
    s = session(call("plan_set_content", plan_markdown=markdown), expect("invalid_arguments"),
                say("Sorry."))
    s("/plan on")
    rows = s.store.rows()
    s("Plan.")
    assert s.done
    result = s.tool_results()[0]
    assert result["kind"] == "invalid_arguments" and "plan_markdown" in result["error"]
    assert s.store.rows() == rows


def test_the_default_size_limit_is_256_kib_in_utf8_bytes(session):
    at_limit = "# P\n" + "x" * (262144 - 4)
    over = "é" * 131073  # 131,073 characters, 262,146 bytes
    s = session(call("plan_set_content", plan_markdown=over), expect("denied by policy"),
                say("Too long."), *draft(at_limit))
    s("/plan on")
    rows = s.store.rows()
    s("Plan.")
    result = s.tool_results()[0]
    assert result["kind"] == "denied"
    assert ("plan_markdown is 262146 bytes; the limit is 262144 bytes (setting "
            "plan_mode.max_plan_bytes)") in result["error"]
    assert s.store.rows() == rows
    s("Shorter, please.")
    assert s.store.active().markdown == at_limit
    assert s.tool_results()[-1]["bytes"] == 262144


def test_max_plan_bytes_sets_the_limit(session, workspace):
    orion_yaml(workspace, """\
        settings:
          plan_mode: {max_plan_bytes: 40}
        """)
    s = session(call("plan_set_content", plan_markdown=DRAFT_2), expect("the limit is 40 bytes"),
                *draft("# Short\n"))
    s("/plan on")
    s("Plan.")
    assert s.store.active().markdown == "# Short\n"
    with pytest.raises(PlanCommandError, match="the limit is 40 bytes"):
        s.service.set_content(DRAFT_2, None)  # the service holds the limit for every caller
    assert s.store.active().markdown == "# Short\n"


def test_an_expected_revision_mismatch_is_denied_with_the_current_revision(session):
    s = session(draft(DRAFT), call("plan_set_content", plan_markdown=DRAFT_2,
                                   expected_revision=0),
                expect("expected_revision 0 does not match the plan's current revision 1"),
                *draft(DRAFT_2, expected_revision=1))
    s("/plan on")
    s("Plan.")
    rows = s.store.rows()
    s("Revise it.")
    assert s.tool_results()[1]["kind"] == "denied"
    assert s.store.rows() != rows  # the retry, with the right revision, was stored
    plan = s.store.active()
    assert (plan.markdown, plan.revision) == (DRAFT_2, 2)
    with pytest.raises(RevisionConflict, match="current revision 2") as conflict:
        s.store.set_content(plan.id, DRAFT, None, expected_revision=1)  # checked atomically too
    assert conflict.value.current == 2
    assert s.store.active().markdown == DRAFT_2


def test_terminal_and_superseded_plans_take_no_drafts(session):
    s = session(draft(DRAFT), draft(DRAFT_2))
    s("/plan on")
    s("Plan.")
    s("/plan approve")
    s("Revise it.")
    superseded = s.store.history()[1]
    assert superseded.status is Status.SUPERSEDED
    with pytest.raises(PlanStoreError, match="SUPERSEDED and not active; it takes no new drafts"):
        s.store.set_content(superseded.id, DRAFT_3, None)
    s("/plan done")
    cancelled = s.store.history()[0]
    rows = s.store.rows()
    with pytest.raises(PlanStoreError, match="CANCELLED and not active"):
        s.store.set_content(cancelled.id, DRAFT_3, None)
    with pytest.raises(PlanCommandError, match="plan work is not active"):
        s.service.set_content(DRAFT_3, None)
    assert s.store.rows() == rows


# == Plan tools restrict nothing ==================================================================

def test_plan_work_restricts_no_other_tool(session, workspace):
    (workspace / "notes.md").write_text("Ship on Friday.\n")
    s = session(say("0"), call("read_file", path="notes.md"), expect("Ship on Friday"),
                *draft(), say("2"), call("list_files"), say("3"))
    s("before")
    s("/plan on")
    s("Read the notes, then plan.")
    s("/plan approve")
    s("Next.")
    s("List the files.")
    assert s.done
    others = set(s.tools(0))
    assert {"read_file", "list_files"} <= others
    for i in range(1, len(s.requests)):
        assert set(s.tools(i)) == others | PLAN_TOOLS, i
    assert "Ship on Friday." in json.dumps(s.tool_results()[0])


# == The documentation and the example stay in step ================================================

ROOT = Path(__file__).resolve().parents[1]


def test_the_state_diagram_in_the_docs_is_the_statechart():
    from orion.statechart import builtin_statecharts, load_definition
    from orion.statechart.io.diagrams import mermaid

    [path] = [p for p in builtin_statecharts() if p.stem == "plan_mode"]
    definition = load_definition(path, plugins=make_plugin_manager(entrypoints=False, env={}))
    drawn = mermaid(definition.spec, settings=dict(definition.settings)).strip()
    docs = (ROOT / "docs" / "plan-mode.md").read_text()
    assert f"```mermaid\n{drawn}\n```" in docs


def test_the_example_plays_a_whole_plan_round(tmp_path):
    workspace = tmp_path / "ws"
    script = load_script(ROOT / "examples" / "plan_mode.yaml")
    result = asyncio.run(play(script, workspace=workspace,
                              plugins=make_plugin_manager(entrypoints=False, env={})))
    assert result.ok, result.errors
    store = PlanStore.for_state_dir(workspace / ".orion")
    [revised, approved] = store.history()
    assert (approved.status, approved.revision, approved.active) == (Status.SUPERSEDED, 2, False)
    assert (revised.status, revised.revision, revised.supersedes) == (Status.COMPLETED, 3,
                                                                       approved.id)
    assert revised.title == approved.title == "Release 1.2"
    assert revised.markdown.startswith("# Release 1.2\n\n1. Merge the fix for issue 123.")
    store.close()


def test_the_transcript_in_the_docs_is_what_orion_run_prints(tmp_path):
    from click.testing import CliRunner

    from orion.cli import cli

    result = CliRunner().invoke(cli, ["run", str(ROOT / "examples" / "plan_mode.yaml"),
                                      "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 0, result.output
    docs = (ROOT / "docs" / "plan-mode.md").read_text()
    shown = docs.split("```text\n", 1)[1].split("```", 1)[0]
    assert result.output.strip() == shown.strip()
