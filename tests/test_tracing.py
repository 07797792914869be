"""Traces end to end: what a run records, that no content reaches .orion/, the CLI, and that a
failing store never fails the run."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import sqlite3
import textwrap
from pathlib import Path

from click.testing import CliRunner

from orion import hookimpl
from orion.cli import cli
from orion.models.script import load_script
from orion.hooks.manager import make_plugin_manager
from orion.runtime.runner import play
from orion.tools.gating import Decision
from orion.trace.writer import settle_all

DOCUMENT = [f"Line {n:03d} of the operator guide: unique-token-{n * 7919:06d} stays private."
            for n in range(1, 201)]


def run(tmp_path: Path, script: str, pm=None, workspace: Path | None = None):
    path = tmp_path / "script.yaml"
    path.write_text(textwrap.dedent(script))
    workspace = workspace or tmp_path / "ws"
    pm = pm or make_plugin_manager(entrypoints=False, env={})
    return asyncio.run(play(load_script(path), workspace=workspace, plugins=pm)), workspace


def rows(workspace: Path, kind: str | None = None) -> list[dict]:
    settle_all()  # this process's trace writer stores off the step
    with contextlib.closing(sqlite3.connect(workspace / ".orion" / "orion.db")) as db:
        db.row_factory = sqlite3.Row
        query = "select * from trace_events" + (" where kind = ?" if kind else "") + " order by id"
        return [dict(r) | {"attributes": json.loads(r["attributes"])}
                for r in db.execute(query, (kind,) if kind else ())]


class Policy:
    @hookimpl
    def authorize_tool_call(self, call, request):
        if call.arguments.get("path") == "secret.txt":
            return Decision.deny("secrets are off limits")
        return None


class StartWrite:
    @hookimpl
    def register_slash_commands(self, register):
        def begin(runtime, args):
            session = runtime.start_lifecycle("write_session")
            session.trigger("begin")
        register("begin-write", begin, "")


def test_a_run_records_model_requests_tool_calls_denials_and_transitions(tmp_path):
    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(Policy(), "policy")
    pm.register(StartWrite(), "start-write")
    result, workspace = run(tmp_path, """\
        files: {notes.md: "hello\\n", secret.txt: "hunter2\\n"}
        conversation:
          - user: /begin-write
          - user: read both
          - model:
              tool_calls:
                - {name: read_file, arguments: {path: notes.md}, id: call_ok}
                - {name: read_file, arguments: {path: secret.txt}, id: call_no}
              usage: {prompt_tokens: 120, completion_tokens: 30}
          - model: {text: done}
        """, pm)
    assert result.ok, result.errors
    requests = rows(workspace, "model_request")
    assert [r["name"] for r in requests] == ["chat scripted", "chat scripted"]
    first = requests[0]["attributes"]
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.request.model"] == "scripted"
    assert first["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert first["gen_ai.usage.input_tokens"] == 120 and first["gen_ai.usage.output_tokens"] == 30
    calls = rows(workspace, "tool_call")
    assert [(c["name"], c["attributes"]["gen_ai.tool.call.id"],
             c["attributes"]["orion.tool.outcome"]) for c in calls] == [
        ("execute_tool read_file", "call_ok", "ok"), ("execute_tool read_file", "call_no", "denied")]
    # a path is content: its length and sha256 (sha256sum tells which file it was)
    assert calls[0]["attributes"]["orion.tool.arguments"]["path"] == {
        "$text": 8, "sha256": hashlib.sha256(b"notes.md").hexdigest()}
    (denial,) = rows(workspace, "policy_denial")
    reason = denial["attributes"]["orion.policy.reason"]  # a plugin's words may quote anything
    assert set(reason) == {"$text", "sha256"} and "secrets" not in json.dumps(denial)
    assert denial["attributes"]["orion.policy.plugin"] == "policy"
    assert denial["parent_id"] == calls[1]["span_id"]  # under the call it denied
    (transition,) = rows(workspace, "transition")
    assert transition["name"] == "write_session begin" and transition["session_id"]
    assert (transition["attributes"]["orion.source"], transition["attributes"]["orion.dest"]) == (
        "idle", "session_active.awaiting_content")
    conversation_ids = {r["conversation_id"] for r in rows(workspace)}
    assert len(conversation_ids) == 1 and "" not in conversation_ids


def test_no_line_of_a_streamed_document_reaches_any_file_under_orion(tmp_path):
    text = "\n".join(DOCUMENT) + "\n"
    script = {"conversation": [
        {"user": "Write the operator guide."},
        {"model": {"text": text, "chunk_size": 64}},
        {"user": "Now put it in a tool call too."},
        {"model": {"tool_calls": [{"name": "list_files", "arguments": {"path": text}}]}},
        {"model": {"text": "ok"}}]}
    (tmp_path / "script.yaml").write_text(json.dumps(script))
    workspace = tmp_path / "ws"
    result = asyncio.run(play(load_script(tmp_path / "script.yaml"), workspace=workspace,
                              plugins=make_plugin_manager(entrypoints=False, env={})))
    assert result.ok, result.errors
    state = workspace / ".orion"
    files = [p for p in state.rglob("*") if p.is_file()]
    assert any(p.name == "orion.db" for p in files)
    for path in files:
        data = path.read_bytes()
        leaked = [line for line in DOCUMENT if line.encode() in data]
        assert not leaked, f"{path} holds {len(leaked)} lines of the document"
    (call,) = rows(workspace, "tool_call")
    summary = call["attributes"]["orion.tool.arguments"]["path"]
    assert summary["$text"] == len(text) and len(summary["sha256"]) == 64


def test_capture_content_stores_long_values_once_in_the_blob_table(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "orion.yaml").write_text("trace: {capture_content: true}\n")
    long_path = "x/" * 700
    result, _ = run(tmp_path, f"""\
        conversation:
          - user: go
          - model:
              tool_calls:
                - {{name: list_files, arguments: {{path: "{long_path}"}}}}
                - {{name: list_files, arguments: {{path: "{long_path}"}}}}
          - model: {{text: ok}}
        """, workspace=workspace)
    assert result.ok, result.errors
    settle_all()  # this process's trace writer stores off the step
    db = sqlite3.connect(workspace / ".orion" / "orion.db")
    assert db.execute("select count(*) from trace_blobs where text = ?",
                      (long_path,)).fetchone() == (1,)
    stored = "\n".join(r[0] for r in db.execute("select attributes from trace_events"))
    assert long_path not in stored  # the events themselves are the same with capture on


def test_a_read_only_trace_database_never_fails_the_run(tmp_path):
    workspace = tmp_path / "ws"
    result, _ = run(tmp_path, """\
        conversation:
          - user: hi
          - model: {text: hello}
        """, workspace=workspace)
    assert result.ok
    db = workspace / ".orion" / "orion.db"
    blocker = sqlite3.connect(db, timeout=0)
    blocker.execute("BEGIN EXCLUSIVE")  # another process holds the database
    try:
        result, _ = run(tmp_path, """\
            conversation:
              - user: hi again
              - model: {text: hello again}
            """, workspace=workspace)
    finally:
        blocker.rollback()
        blocker.close()
    assert result.ok, result.errors
    stats = CliRunner().invoke(cli, ["traces", "--workspace", str(workspace), "stats", "--json"])
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.stdout)["dropped"] >= 1


def test_orion_traces_lists_filters_and_counts(tmp_path):
    result, workspace = run(tmp_path, """\
        conversation:
          - user: list
          - model:
              tool_calls: [{name: list_files, arguments: {}}]
          - model: {text: done}
        """)
    assert result.ok
    runner = CliRunner()
    listed = runner.invoke(cli, ["traces", "--workspace", str(workspace), "--json",
                                 "--kind", "tool_call", "--since", "1h"])
    assert listed.exit_code == 0, listed.output
    (event,) = json.loads(listed.stdout)
    assert event["name"] == "execute_tool list_files"
    table = runner.invoke(cli, ["traces", "--workspace", str(workspace), "--limit", "2"])
    assert table.exit_code == 0 and "model_request" in table.output
    stats = runner.invoke(cli, ["traces", "--workspace", str(workspace), "stats", "--json"])
    counts = json.loads(stats.stdout)["counts"]
    assert counts == {"model_request": 2, "tool_call": 1, "turn": 1}
    bad = runner.invoke(cli, ["traces", "--workspace", str(workspace), "--since", "soon"])
    assert bad.exit_code == 2 and "--since" in bad.output


def test_orion_traces_without_a_database_says_so(tmp_path):
    result = CliRunner().invoke(cli, ["traces", "--workspace", str(tmp_path)])
    assert result.exit_code == 0
    assert "no traces yet" in result.output
    assert not (tmp_path / ".orion").exists()


def _open_databases(workspace: Path) -> list[str]:
    """The files of ``workspace``'s state directory this process holds open."""
    held = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = (Path("/proc/self/fd") / fd.name).readlink()
        except OSError:
            continue
        if str(target).startswith(str(workspace.resolve())):
            held.append(target.name)
    return held


def test_a_closed_runtime_leaves_its_trace_database_closed(tmp_path):
    """A process that runs many runtimes (a test suite, a service) keeps no workspace's
    orion.db open once its runtime closed; traces that come later open it again."""
    if not Path("/proc/self/fd").is_dir():
        import pytest
        pytest.skip("needs /proc to list this process's open files")
    script = """\
        conversation:
          - user: Hello.
          - model: {text: Hi.}
        """
    workspaces = []
    for n in range(3):
        (tmp_path / f"run{n}").mkdir()
        played, workspace = run(tmp_path / f"run{n}", script)
        assert played.ok, played.errors
        assert rows(workspace, "model_request"), "the run's traces were stored"
        assert _open_databases(workspace) == [], _open_databases(workspace)
        workspaces.append(workspace)
    # The same workspace again: its store opens again and takes the new traces.
    played, workspace = run(tmp_path / "run0", script, workspace=workspaces[0])
    assert played.ok and len(rows(workspace, "model_request")) == 2
    assert _open_databases(workspace) == []
