"""Plan-mode steps of Orion's step library (ADR "work by plan"; features/plan_mode.feature).

Loaded with the common steps (:mod:`orion.testing.steps`) by Orion's pytest plugin. The steps
drive the real runtime of the scenario's :class:`~orion.testing.world.World` and read the real
plan store (``plans.db``), conversation, model requests and traces (``orion.db``). They use the
conventions of the common steps (quoted fields with ``\\n``-style escapes; "since the last When
step"), and their wording names the plan ("the plan ...", "plan work ...", "the model stores the
plan draft ..."), so it does not collide with the common steps. Plan-mode scenarios also use
common steps: ``Given plan work is active`` (``/plan on``), ``When the user types "/plan approve"``,
``Then the command answers "..."``, ``Then the tool "plan_get" is advertised``, ``Then the tool
call is denied with a message containing "..."``, ``When Orion exits and starts again``.

Before every When step the plan table, the active plan and the conversation are remembered, so
that ``the plan table is unchanged row by row``, ``the previous plan ...`` and ``the conversation
is empty and new`` compare with what was there just before the last When step; ``the plan tools
changed no file of the workspace`` compares with the workspace at the first When step.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Awaitable, Callable
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from pytest_bdd import given, parsers, then, when

from orion.api import hookimpl
from orion.config import load_config
from orion.plan.service import LIFECYCLE, plan_service_for
from orion.plan.store import DB_NAME, Plan
from orion.runtime.runtime import Runtime
from orion.runtime.context import STATE_NOTE
from orion.workspace.statedb import TRACES_DB
from orion.testing.steps import unescape
from orion.testing.world import World

PLAN_TOOLS = ("plan_set_content", "plan_get")
#: A quoted field, with the common steps' escapes (``\\n``, ``\\"``, ...).
QUOTED = r'"(?P<{}>(?:[^"\\]|\\.)*)"'
STATUS = r'"(?P<status>COLLECTING|READY|EXECUTING|COMPLETED|CANCELLED|SUPERSEDED)"'
#: How the plan block of a system message starts, and the most a "compact" block may take.
BLOCK_START = "Plan work is active: "
COMPACT_BLOCK_CHARS = 800


def quoted(name: str) -> str:
    return QUOTED.format(name)


# -- what the plan steps remember ----------------------------------------------------------------

@dataclass
class PlanMemory:
    """The plan side of a scenario, in ``world.data["plan"]``."""

    rows_before: list[dict[str, Any]] = field(default_factory=list)
    plan_before: dict[str, Any] | None = None
    conversation_before: str | None = None
    workspace_before: dict[str, str] | None = None  # at the scenario's first When step
    drafts: dict[str, str] = field(default_factory=dict)  # a named draft: its Markdown


def memory(world: World) -> PlanMemory:
    return world.data.setdefault("plan", PlanMemory())


def plan_rows(world: World) -> list[dict[str, Any]]:
    """The plan table as stored, read without creating anything (no database: no rows)."""
    database = world.state_dir / DB_NAME
    if not database.exists():
        return []
    db = sqlite3.connect(database)
    try:
        db.row_factory = sqlite3.Row
        rows = db.execute("SELECT * FROM plans ORDER BY rowid").fetchall()
    except sqlite3.OperationalError:  # no plans table (yet)
        return []
    finally:
        db.close()
    return [dict(row) for row in rows]


def workspace_files(world: World) -> dict[str, str]:
    """The workspace's files (not the state directory) and their hashes. A file that is gone
    by the time it is read (another process of the scenario renames directories meanwhile) is
    not one of them."""
    state = world.state_dir
    found: dict[str, str] = {}
    for path in sorted(world.workspace.rglob("*")):
        if path.is_relative_to(state):
            continue
        try:
            if path.is_file():
                found[str(path.relative_to(world.workspace))] = hashlib.sha256(
                    path.read_bytes()).hexdigest()
        except (FileNotFoundError, NotADirectoryError):
            continue
    return found


def remember(world: World) -> None:
    book = memory(world)
    if book.workspace_before is None:
        book.workspace_before = workspace_files(world)
    book.rows_before = plan_rows(world)
    book.plan_before = next((row for row in book.rows_before if row["active"] == 1), None)
    book.conversation_before = world.runtime.conversation.id if world.started else None


@pytest.hookimpl(optionalhook=True)
def pytest_bdd_before_step(request, step) -> None:
    """Before every When step (and its And steps): remember the plan side of the world."""
    if step.type != "when":
        return
    from orion.testing.plugin import WORLD

    world = request.node.stash.get(WORLD, None)
    if world is not None:
        remember(world)


# -- helpers --------------------------------------------------------------------------------------

def store(world: World):
    return plan_service_for(world.runtime).store


def model_turn(world: World, replies: list[dict[str, Any]], user_line: str) -> None:
    """The model's next replies: they answer the request that waits, or the user asks."""
    world.mark()
    if world.paused:
        for reply in replies:
            world.reply(**reply)
        return
    for reply in replies:
        world.model.queue(**reply)
    world.say(user_line)


def call_then_say(tool: str, arguments: dict[str, Any], after: str) -> list[dict[str, Any]]:
    """A reply that calls ``tool``, and the model's reply to the tool result."""
    return [{"tool_calls": [{"name": tool, "arguments": arguments}]}, {"text": after}]


def draft_text(world: World, text: str) -> str:
    """A named draft's Markdown, or the quoted Markdown itself."""
    return memory(world).drafts.get(text, unescape(text))


def long_draft(title: str, steps: int) -> str:
    lines = [f"# {title}", ""]
    lines += [f"{i}. {title}, step {i} of {steps}: do it, check it, and note in the log what "
              "changed." for i in range(1, steps + 1)]
    return "\n".join(lines) + "\n"


def tool_result(world: World, tool: str) -> Any:
    """What the last call of ``tool`` returned (JSON decoded), across restarts."""
    outcomes = [o for o in world.reporter.tools if o.name == tool]
    assert outcomes, f"the model did not call {tool}"
    try:
        return json.loads(outcomes[-1].content)
    except ValueError:
        return outcomes[-1].content


def last_request(world: World):
    assert world.model.requests, "the model was never asked anything"
    return world.model.requests[-1]


def plan_block(request) -> str:
    """The plan block of a request ("" when there is none): in the state after the
    conversation, since it changes with the plan (the system message stays the same)."""
    system = request.messages[0]
    assert system["role"] == "system", system
    assert BLOCK_START not in system["content"], system
    last = request.messages[-1].get("content") or ""
    start = last.find(BLOCK_START, max(0, last.find(STATE_NOTE)))
    return "" if start < 0 or STATE_NOTE not in last else last[start:].split("\n\n")[0]


def check_block(block: str, status: str | None = None) -> None:
    assert block, "the system message has no plan block"
    assert "use `plan_get` to load it" in block, block
    assert "`plan_set_content(plan_markdown=...)`" in block, block
    assert len(block) <= COMPACT_BLOCK_CHARS, f"the plan block has {len(block)} characters"
    if status is not None:
        assert f", {status}, revision " in block.split(". ")[0], block


def database_texts(world: World) -> list[tuple[str, str, str, str]]:
    """Every text value in the workspace's ``plans.db`` and ``orion.db`` (traces flushed
    first), as (database, table, column, value)."""
    world.runtime.tracer.flush(wait=True)
    found = []
    for name in (DB_NAME, TRACES_DB):
        with closing(sqlite3.connect(world.state_dir / name)) as db:
            tables = [table for (table,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                for column in [c[1] for c in db.execute(f"PRAGMA table_info({table})")]:
                    for (value,) in db.execute(f"SELECT CAST({column} AS TEXT) FROM {table}"):
                        if value:
                            found.append((name, table, column, value))
    return found


# -- Given ----------------------------------------------------------------------------------------

@given("plan work has not been started")
def plan_work_not_started(orion_world: World) -> None:
    assert plan_rows(orion_world) == []


@given(parsers.re(r"the plan conversation is compacted beyond (?P<limit>\d+) messages"),
       converters={"limit": int})
def plan_conversation_budget(orion_world: World, limit: int) -> None:
    assert not orion_world.started, "the budget is read when Orion starts: give it first"
    config = orion_world.workspace / "orion.yaml"
    data = (yaml.safe_load(config.read_text(encoding="utf-8")) if config.exists() else None) or {}
    data.setdefault("runtime", {})["max_messages"] = limit
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


# -- When: the model and the plan tools (and their Given forms) --------------------------------

@given(parsers.re(r"the model has stored the plan draft " + quoted("markdown")
                  + r"(?: titled " + quoted("title") + r")?"))
@when(parsers.re(r"the model stores the plan draft " + quoted("markdown")
                 + r"(?: titled " + quoted("title") + r")?"
                 + r"(?: based on revision (?P<revision>\d+))?"),
      converters={"revision": lambda value: None if value is None else int(value)})
def model_stores_draft(orion_world: World, markdown: str, title: str | None = None,
                       revision: int | None = None) -> None:
    arguments: dict[str, Any] = {"plan_markdown": draft_text(orion_world, markdown)}
    if title is not None:
        arguments["title"] = unescape(title)
    if revision is not None:
        arguments["expected_revision"] = revision
    model_turn(orion_world, call_then_say("plan_set_content", arguments, "The plan is stored."),
               "Write the plan down.")


@given(parsers.re(r"the model has stored a long plan draft " + quoted("name")
                  + r" of (?P<steps>\d+) steps"), converters={"steps": int})
@when(parsers.re(r"the model stores a long plan draft " + quoted("name")
                 + r" of (?P<steps>\d+) steps"), converters={"steps": int})
def model_stores_long_draft(orion_world: World, name: str, steps: int) -> None:
    """A draft longer than the traces keep (``trace.max_text``), named for later steps."""
    name = unescape(name)
    memory(orion_world).drafts[name] = long_draft(name, steps)
    model_stores_draft(orion_world, name)


@when(parsers.re(r"the model stores a plan draft of (?P<count>\d+) " + quoted("char")
                 + r" characters"), converters={"count": int})
def model_stores_sized_draft(orion_world: World, count: int, char: str) -> None:
    char = unescape(char)
    assert len(char) == 1, f"{char!r} is not one character"
    model_stores_draft(orion_world, (char * count).replace("\\", "\\\\"))


@when(parsers.re(r"the model calls the plan tool " + quoted("tool")
                 + r"(?: with the draft " + quoted("markdown") + r")?"))
def model_calls_plan_tool(orion_world: World, tool: str, markdown: str | None = None) -> None:
    arguments = {} if markdown is None else {"plan_markdown": draft_text(orion_world, markdown)}
    model_turn(orion_world, call_then_say(tool, arguments, "Understood."), f"Use {tool}.")


@when(parsers.re(r"the model calls the tool " + quoted("tool") + r" during plan work"))
def model_calls_other_tool(orion_world: World, tool: str) -> None:
    model_turn(orion_world, call_then_say(tool, {}, "Done."), f"Use {tool}.")


def _another_session(world: World) -> Runtime:
    """A second runtime in the scenario's workspace (another ``orion chat``), with its own
    connection to ``plans.db``; the caller closes it."""
    return Runtime(model=world.runtime.model, plugins=world.runtime.plugins,
                   workspace=world.workspace, config=load_config(world.workspace, env=world.env),
                   env=world.env)


class _OtherSession:
    """The scenario's model, but while it answers the next request another Orion session in
    the same workspace (a second ``orion chat``, with its own connection to ``plans.db``) does
    ``act`` first: after the request was built, before the model's reply runs."""

    def __init__(self, world: World, act: Callable[[Runtime], Awaitable[None]]):
        self.world, self.act = world, act
        self.model = world.runtime.model
        self.name = self.model.name

    async def stream(self, request):
        world = self.world
        world.runtime.model = self.model  # once
        other = _another_session(world)
        try:
            await self.act(other)
        finally:
            other.close()  # its plan store too
        remember(world)  # the plan table the call must leave as it is
        async for event in self.model.stream(request):
            yield event


async def _ends_plan_work(other: Runtime) -> None:
    reply = await other.handle("/plan done")
    assert reply and reply.startswith("Plan work ended"), reply


@when(parsers.re(r"another session in the workspace ends plan work while the model calls the "
                 r"plan tool " + quoted("tool")
                 + r"(?: with the draft " + quoted("markdown") + r")?"))
def plan_work_ended_elsewhere(orion_world: World, tool: str, markdown: str | None = None) -> None:
    assert not orion_world.paused, "the model is answering another request"
    orion_world.runtime.model = _OtherSession(orion_world, _ends_plan_work)
    model_calls_plan_tool(orion_world, tool, markdown)


@when(parsers.re(r"another session in the workspace stores the plan draft " + quoted("other")
                 + r" while the model stores the plan draft " + quoted("markdown")))
def plan_draft_stored_elsewhere(orion_world: World, other: str, markdown: str) -> None:
    """The race of two chats on one plan: the other one's draft comes first."""
    assert not orion_world.paused, "the model is answering another request"
    text = draft_text(orion_world, other)

    async def stores_draft(runtime: Runtime) -> None:
        plan_service_for(runtime).set_content(text, None)
    orion_world.runtime.model = _OtherSession(orion_world, stores_draft)
    model_stores_draft(orion_world, markdown)


class _StoresFirst:
    """A plugin of the scenario: when the model's draft reaches the plan store (the
    ``finalize`` of ``plan_mode``, after the draft was checked against the plan this
    conversation saw), another session in the workspace stores ``text`` first, through its own
    connection to ``plans.db``."""

    def __init__(self, world: World, text: str):
        self.world, self.text, self.done = world, text, False

    @hookimpl(wrapper=True)
    def finalize(self, lifecycle: Any, transition: Any) -> Any:
        if lifecycle.name == LIFECYCLE and not self.done:
            self.done = True
            other = _another_session(self.world)
            try:
                plan_service_for(other).set_content(self.text, None)
            finally:
                other.close()
        return (yield)


@when(parsers.re(r"another session in the workspace stores the plan draft " + quoted("other")
                 + r" just as the model's draft " + quoted("markdown") + r" is stored"))
def plan_draft_stored_in_between(orion_world: World, other: str, markdown: str) -> None:
    """The narrowest race of two chats on one plan: the other one's draft is stored between
    the check of this one's and its transaction."""
    plugin = _StoresFirst(orion_world, draft_text(orion_world, other))
    plugins = orion_world.runtime.plugins
    plugins.register(plugin)
    try:
        model_stores_draft(orion_world, markdown)
    finally:
        plugins.unregister(plugin)
    assert plugin.done, "the model's draft never reached the plan store"


@given("the Markdown of the active plan is damaged in plans.db")
@given("the Markdown of the active plan is damaged in orion.db")  # its wording before plans.db
def active_plan_damaged(orion_world: World) -> None:
    """Bytes that are not UTF-8 written into the active plan's row, as an editor of the
    database (or a failing disk) could leave them; Orion never stores such text."""
    plan = store(orion_world).active()
    assert plan is not None, "no plan is active"
    with closing(sqlite3.connect(orion_world.state_dir / DB_NAME)) as db:
        db.execute("UPDATE plans SET markdown = CAST(X'2320ff0a' AS TEXT) WHERE id = ?",
                   (plan.id,))
        db.commit()
    orion_world.data["damaged_plan"] = plan.id


# -- Then: the plan tools -------------------------------------------------------------------------

#: What a reader calls the built-in plugins the plan steps name.
PLUGIN_WORDS = {"plan mode": "orion_plugins.plan_mode"}


@then(parsers.re(r"the plan tool call was denied by plan mode"))
def plan_call_denied_by_plan_mode(orion_world: World) -> None:
    plan_call_denied_by(orion_world, PLUGIN_WORDS["plan mode"])


@then(parsers.re(r"the denial of " + quoted("tool") + r" was traced as a policy denial by "
                 r"plan mode"))
def plan_denial_traced_by_plan_mode(orion_world: World, tool: str) -> None:
    plan_denial_traced(orion_world, tool, PLUGIN_WORDS["plan mode"])


@then(parsers.re(r"the plan tool call was denied by " + quoted("plugin")))
def plan_call_denied_by(orion_world: World, plugin: str) -> None:
    outcomes = orion_world.tools_since_mark
    assert outcomes, "the model made no tool call"
    outcome = outcomes[-1]
    assert outcome.name in PLAN_TOOLS and outcome.kind == "denied", outcome.content
    assert json.loads(outcome.content).get("plugin") == unescape(plugin), outcome.content


@then("the model request that called the plan tool advertised it")
def calling_request_advertised(orion_world: World) -> None:
    outcomes = orion_world.tools_since_mark
    assert outcomes, "the model made no tool call"
    requests = orion_world.requests_since_mark
    assert requests, "the model was not asked anything"
    names = {tool["function"]["name"] for tool in requests[0].tools}
    assert outcomes[-1].name in names, sorted(names)


@then(parsers.re(r"the refusal of " + quoted("tool") + r" was traced as " + quoted("outcome")))
def plan_refusal_traced(orion_world: World, tool: str, outcome: str) -> None:
    rows = [event["attributes"] for event in orion_world.trace_events("tool_call")]
    calls = [a for a in rows if a["gen_ai.tool.name"] == tool]
    assert calls, f"no tool_call event for {tool}"
    assert calls[-1]["orion.tool.outcome"] == outcome, calls[-1]


@then(parsers.re(r"the denial of " + quoted("tool") + r" was traced as a policy denial by "
                 + quoted("plugin")))
def plan_denial_traced(orion_world: World, tool: str, plugin: str) -> None:
    rows = [event["attributes"] for event in orion_world.trace_events("policy_denial")]
    denials = [a for a in rows if a["gen_ai.tool.name"] == tool]
    assert denials, f"no policy_denial event for {tool}"
    assert denials[-1]["orion.policy.plugin"] == plugin, denials[-1]


@then(parsers.re(quoted("tool") + r" returned the plan draft " + quoted("markdown")))
def plan_tool_returned(orion_world: World, tool: str, markdown: str) -> None:
    result = tool_result(orion_world, tool)
    assert isinstance(result, dict) and "markdown" in result, result
    assert result["markdown"] == draft_text(orion_world, markdown)
    assert result["markdown"] == store(orion_world).active().markdown


@then(parsers.re(r"the plan tool " + quoted("tool") + r" requires " + quoted("param")
                 + r" as a string"))
def plan_tool_requires(orion_world: World, tool: str, param: str) -> None:
    tools = {t["function"]["name"]: t["function"] for t in last_request(orion_world).tools}
    assert tool in tools, f"{tool} was not advertised: {sorted(tools)}"
    schema = tools[tool]["parameters"]
    assert param in schema.get("required", []), schema
    assert schema["properties"][param]["type"] == "string", schema["properties"][param]


@then("the plan tools changed no file of the workspace")
def plan_tools_changed_no_file(orion_world: World) -> None:
    """Since the scenario's first When step."""
    before = memory(orion_world).workspace_before
    assert before is not None, "no When step ran"
    assert workspace_files(orion_world) == before


@then("plan work withheld no other tool from any model request")
def plan_restricts_nothing(orion_world: World) -> None:
    requests = orion_world.model.requests
    assert len(requests) >= 2, "compare requests before and during plan work"
    others = [{t["function"]["name"] for t in r.tools} - set(PLAN_TOOLS) for r in requests]
    assert all(names == others[0] for names in others), others
    assert {"read_file", "list_files"} <= others[0], others[0]


# -- Then: the plan table -------------------------------------------------------------------------

@then("the plan table is unchanged row by row")
def plan_table_unchanged(orion_world: World) -> None:
    assert plan_rows(orion_world) == memory(orion_world).rows_before


@then(parsers.re(r"the plan table has (?P<rows>\d+) rows? and (?P<active>\d+) active plans?"),
      converters={"rows": int, "active": int})
def plan_table_counts(orion_world: World, rows: int, active: int) -> None:
    table = plan_rows(orion_world)
    assert len(table) == rows, table
    assert sum(1 for row in table if row["active"] == 1) == active, table


@then("no plan is active")
def no_plan_active(orion_world: World) -> None:
    service = plan_service_for(orion_world.runtime)
    assert service.active_plan is None and service.active_plan_id is None
    assert not service.plan_work_active
    assert service.lifecycle.has_tag("plan_off"), service.lifecycle.state


@then("the plan database refuses a second active plan")
def database_refuses_second_plan(orion_world: World) -> None:
    plans = store(orion_world)
    rows = plans.rows()
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        plans.db.conn.execute(
            "INSERT INTO plans (id, title, status, revision, active, created_ms, updated_ms) "
            "VALUES ('second', '', 'COLLECTING', 0, 1, 0, 0)")
    plans.db.conn.rollback()
    assert plans.rows() == rows


@then(parsers.re(r"the active plan is " + STATUS + r" at revision (?P<revision>\d+)"
                 r"(?P<no_draft> without a draft)?(?: with the Markdown " + quoted("markdown")
                 + r")?"), converters={"revision": int})
def active_plan_is(orion_world: World, status: str, revision: int, no_draft: str | None = None,
                   markdown: str | None = None) -> None:
    service = plan_service_for(orion_world.runtime)
    plan: Plan | None = service.active_plan
    assert plan is not None, "no plan is active"
    assert (plan.status.value, plan.revision) == (status, revision), plan.summary()
    assert service.lifecycle.has_tag(status.lower()), service.lifecycle.state
    if no_draft:
        assert plan.markdown is None, plan.markdown
    if markdown is not None:
        assert plan.markdown == draft_text(orion_world, markdown), plan.markdown


@then(parsers.re(r"the active plan is titled " + quoted("title")))
def active_plan_titled(orion_world: World, title: str) -> None:
    assert store(orion_world).active().title == unescape(title)


@then("the active plan is the same plan as before")
def same_plan(orion_world: World) -> None:
    before = memory(orion_world).plan_before
    plan = store(orion_world).active()
    assert before is not None and plan is not None
    assert plan.id == before["id"]


@then("the active plan is a new plan that supersedes the previous one")
def new_plan_supersedes(orion_world: World) -> None:
    before = memory(orion_world).plan_before
    plan = store(orion_world).active()
    assert before is not None and plan is not None
    assert plan.id != before["id"] and plan.supersedes == before["id"], plan.summary()
    assert plan_service_for(orion_world.runtime).active_plan_id == plan.id


@then(parsers.re(r"the previous plan is " + STATUS + r" and no longer active"))
def previous_plan(orion_world: World, status: str) -> None:
    before = memory(orion_world).plan_before
    assert before is not None, "no plan was active before the last When step"
    plan = store(orion_world).get(before["id"])
    assert (plan.status.value, plan.active) == (status, False), plan.summary()


# -- Then: Plan.markdown is the only canonical content --------------------------------------------

@then(parsers.re(r"the plan draft " + quoted("name") + r" is stored only as the "
                 r"(?P<which>active|superseded) plan's Markdown"))
def draft_stored_only_in_plan(orion_world: World, name: str, which: str) -> None:
    markdown = draft_text(orion_world, name)
    limit = orion_world.runtime.config.model.trace.max_text
    assert len(markdown) > limit, f"use a long draft: traces keep strings up to {limit} chars"
    where = [(database, table, column)
             for database, table, column, value in database_texts(orion_world)
             if markdown in value]
    # Its plan's row, and the history of drafts (plan_revisions); no other table, and nothing
    # in orion.db (the traces).
    assert sorted(where) == [(DB_NAME, "plan_revisions", "markdown"),
                             (DB_NAME, "plans", "markdown")], where
    [row] = [row for row in plan_rows(orion_world) if row["markdown"] == markdown]
    if which == "active":
        assert row["active"] == 1, row
    else:
        assert (row["active"], row["status"]) == (None, "SUPERSEDED"), row


@then("the conversation still holds every plan draft as a tool call argument")
def drafts_in_conversation(orion_world: World) -> None:
    arguments = [json.loads(call["function"]["arguments"]).get("plan_markdown")
                 for message in orion_world.runtime.conversation.messages
                 for call in (message.tool_calls or [])
                 if call["function"]["name"] == "plan_set_content"]
    assert arguments == list(memory(orion_world).drafts.values())


@then("no lifecycle snapshot holds a plan draft")
def no_snapshot_holds_draft(orion_world: World) -> None:
    snapshots = json.dumps([lc.snapshot() for lc in orion_world.runtime.lifecycles.values()])
    for markdown in memory(orion_world).drafts.values():
        assert markdown.splitlines()[0] not in snapshots


# -- Then: the plan block of the system context ---------------------------------------------------

@then(parsers.re(r"the last model request carried the compact plan block(?: of the "
                 r"(?P<status>[A-Z]+) plan)?"))
def last_request_has_block(orion_world: World, status: str | None = None) -> None:
    check_block(plan_block(last_request(orion_world)), status)


@then("every model request carried the compact plan block")
def every_request_has_block(orion_world: World) -> None:
    requests = orion_world.model.requests
    assert requests, "the model was never asked anything"
    for number, request in enumerate(requests, start=1):
        try:
            check_block(plan_block(request))
        except AssertionError as exc:
            raise AssertionError(f"model request {number}: {exc}") from None


@then("the last model request carried no plan block")
def last_request_has_no_block(orion_world: World) -> None:
    assert plan_block(last_request(orion_world)) == ""


@then("the plan conversation was compacted")
def conversation_compacted(orion_world: World) -> None:
    assert orion_world.runtime.conversation.compacted > 0


@then(parsers.re(r"the plan draft " + quoted("markdown")
                 + r" is not in the messages of the last model request"))
def draft_not_in_messages(orion_world: World, markdown: str) -> None:
    messages = json.dumps(last_request(orion_world).messages[1:], ensure_ascii=False)
    encoded = json.dumps(draft_text(orion_world, markdown), ensure_ascii=False)[1:-1]
    assert encoded not in messages


# -- Then: /reset ---------------------------------------------------------------------------------

@then("the conversation is empty and new")
def conversation_new(orion_world: World) -> None:
    conversation = orion_world.runtime.conversation
    assert conversation.messages == []
    assert conversation.id != memory(orion_world).conversation_before
