"""A trace per turn: the spans of a conversation nest under their user message, the turns share
the conversation's id, a write session that spans turns links them, times are the wall
clock's, and `orion traces --tree` shows the same tree (all read back from the real SQLite
store of a real run)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from orion.cli import cli
from orion.models.script import load_script
from orion.hooks.manager import make_plugin_manager
from orion.runtime.runner import play
from orion.trace.writer import settle_all

#: Three user messages (a slash command before the first), a plan round in the first, a write
#: session that begins in the second and is finished in the third.
THREE_TURNS = """\
files:
  notes.md: "ship it on Friday\\n"
conversation:
  - user: "/plan on Release"
  - user: "Plan the release."
  - model:
      tool_calls: [{name: read_file, arguments: {path: notes.md}}]
  - model:
      tool_calls:
        - name: plan_set_content
          arguments: {plan_markdown: "# Release\\n\\n1. Ship it.\\n"}
  - model: {text: "Stored."}
  - user: "Write docs/guide.md."
  - model:
      tool_calls:
        - name: WritePlanTool_begin
          arguments: {intent: a guide, target_file: docs/guide.md, operation: create}
  - model: {text: "# Guide\\n\\nline two\\n"}
  - user: "Are you done?"
  - model: {text: "DONE"}
  - model: {text: "Written."}
"""


def run(tmp_path: Path, script: str = THREE_TURNS) -> tuple[Path, float, float]:
    (tmp_path / "script.yaml").write_text(script)
    workspace = tmp_path / "ws"
    before = time.time() * 1000.0
    result = asyncio.run(play(load_script(tmp_path / "script.yaml"), workspace=workspace,
                              plugins=make_plugin_manager(entrypoints=False, env={})))
    after = time.time() * 1000.0
    assert result.ok, result.errors
    return workspace, before, after


def spans(workspace: Path) -> list[dict]:
    settle_all()  # this process's trace writer stores off the step
    db = sqlite3.connect(workspace / ".orion" / "orion.db")
    db.row_factory = sqlite3.Row
    return [dict(r) | {"attributes": json.loads(r["attributes"]), "links": r["links"].split()}
            for r in db.execute("SELECT * FROM trace_events ORDER BY id")]


def by_trace(rows: list[dict]) -> dict[str, list[dict]]:
    traces: dict[str, list[dict]] = {}
    for row in rows:
        traces.setdefault(row["trace_id"], []).append(row)
    return traces


def test_each_user_message_is_one_trace_whose_spans_nest_under_its_root(tmp_path):
    workspace, _, _ = run(tmp_path)
    rows = spans(workspace)
    traces = by_trace(rows)
    assert len(traces) == 3 and "" not in traces  # the /plan on joined the first message's
    assert len({r["conversation_id"] for r in rows}) == 1
    for number, (trace_id, members) in enumerate(traces.items(), start=1):
        [root] = [r for r in members if not r["parent_id"]]
        assert (root["kind"], root["name"]) == ("turn", "invoke_agent orion")
        assert root["attributes"]["orion.turn.number"] == number
        ids = {r["span_id"] for r in members}
        assert len(ids) == len(members)  # every span its own id
        assert all(r["parent_id"] in ids for r in members if r is not root)
    first, second, third = traces.values()
    kinds = Counter(r["kind"] for r in first)
    assert kinds["model_request"] == 3 and kinds["tool_call"] == 2
    names = [r["name"] for r in first]
    assert "plan_mode plan_on" in names and "plan_mode collecting" in names
    # the plan's transition happened inside the tool call that caused it
    [call] = [r for r in first if r["name"] == "execute_tool plan_set_content"]
    [set_content] = [r for r in first if r["name"] == "plan_mode set_content"]
    assert set_content["parent_id"] == call["span_id"]
    assert {"write_session begin", "write_session awaiting_content"} <= {r["name"] for r in second}
    assert {"write_session done", "write_session finalizing", "write_session finalize",
            "write_session valid"} <= {r["name"] for r in third}


def test_a_write_session_that_spans_turns_links_back_to_where_it_began(tmp_path):
    workspace, _, _ = run(tmp_path)
    traces = list(by_trace(spans(workspace)).values())
    [begin] = [r for r in traces[1] if r["name"] == "write_session begin"]
    session = begin["session_id"]
    later = [r for r in traces[2] if r["session_id"] == session]
    assert later and all(r["links"] == [f"{begin['trace_id']}-{begin['span_id']}"]
                         for r in later)
    # a phase still open when its turn ended goes on in the next turn's trace
    [cut] = [r for r in traces[1] if r["name"] == "write_session awaiting_done_or_more_content"]
    assert cut["attributes"]["orion.phase.continues"] is True
    assert any(r["name"] == cut["name"] for r in later)
    assert not any(r["links"] for r in traces[1] if r["session_id"] == session)


def test_spans_have_wall_clock_times_even_on_the_virtual_clock_of_orion_run(tmp_path):
    # orion run's clock is virtual (a wait_ms passes at once): spans still take real time.
    script = THREE_TURNS.replace('  - user: "Write docs/guide.md."\n',
                                 '  - wait_ms: 600000\n  - user: "Write docs/guide.md."\n')
    workspace, before, after = run(tmp_path, script)
    rows = spans(workspace)
    assert all(before - 1 <= r["at_ms"] <= r["at_ms"] + r["duration_ms"] <= after + 1
               for r in rows)  # ten virtual minutes passed; the wall clock did not move so
    roots = [r for r in rows if r["kind"] == "turn"]
    assert len({r["at_ms"] for r in rows}) > len(rows) // 2  # not one start time for all
    assert all(r["duration_ms"] > 0 for r in roots)
    assert roots == sorted(roots, key=lambda r: r["at_ms"])


def test_orion_traces_tree_shows_each_turn_as_a_tree(tmp_path):
    workspace, _, _ = run(tmp_path)
    runner = CliRunner()
    shown = runner.invoke(cli, ["traces", "--workspace", str(workspace), "--tree"],
                          env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert [line.split()[:2] for line in lines if line.startswith("turn ")] == [
        ["turn", "1"], ["turn", "2"], ["turn", "3"]]
    call = next(line for line in lines if "execute_tool plan_set_content" in line)
    nested = next(line for line in lines if "plan_mode set_content" in line)
    assert nested.index("plan_mode") > call.index("execute_tool")  # drawn under the call
    assert any("write_session valid" in line and "continues an earlier turn" in line
               for line in lines)
    one = runner.invoke(cli, ["traces", "--workspace", str(workspace), "--tree", "--limit",
                              "1", "--json"])
    [turn] = json.loads(one.output)
    assert turn[0]["kind"] == "turn" and turn[0]["attributes"]["orion.turn.number"] == 3
    bad = runner.invoke(cli, ["traces", "--workspace", str(workspace), "--tree", "--kind",
                              "tool_call"])
    assert bad.exit_code == 2 and "--kind" in bad.output


def test_a_plan_that_lives_through_many_writes_still_links_to_where_it_began(tmp_path):
    """The tracer remembers where each live session began for as long as it lives, and only a
    few ended ones: 20 writes later, the plan's span links back to its first turn, and what
    the tracer remembers did not grow with the writes."""
    from orion.api import hookimpl
    from orion.trace.recorder import MAX_ENDED

    writes = "".join(f"""\
  - user: "Write note {n}."
  - model:
      tool_calls:
        - name: WritePlanTool_begin
          arguments: {{intent: a note, target_file: notes/{n}.md, operation: create}}
  - model: {{text: "note {n}\\nDONE\\n"}}
  - model: {{text: "Written."}}
""" for n in range(MAX_ENDED + 4))
    script = THREE_TURNS.split('  - user: "Write docs/guide.md."')[0] + writes + """\
  - user: "Update the plan."
  - model:
      tool_calls:
        - name: plan_set_content
          arguments: {plan_markdown: "# Release\\n\\n1. Ship it.\\n2. Tell people.\\n"}
  - model: {text: "Updated."}
"""
    remembered = []

    class Watch:
        @hookimpl
        def runtime_closing(self, host):
            remembered.append(len(host.tracer._origins) + len(host.tracer._ended))

    (tmp_path / "script.yaml").write_text(script)
    plugins = make_plugin_manager(entrypoints=False, env={})
    plugins.register(Watch())
    result = asyncio.run(play(load_script(tmp_path / "script.yaml"),
                              workspace=tmp_path / "ws", plugins=plugins))
    assert result.ok, result.errors
    traces = list(by_trace(spans(tmp_path / "ws")).values())
    [on] = [r for r in traces[0] if r["name"] == "plan_mode plan_on"]
    [update] = [r for r in traces[-1] if r["name"] == "plan_mode set_content"]
    assert update["session_id"] == on["session_id"]
    assert update["links"] == [f"{on['trace_id']}-{on['span_id']}"]
    assert remembered and remembered[0] <= MAX_ENDED + 3  # the ended writes, the live plan
