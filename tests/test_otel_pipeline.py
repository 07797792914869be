"""Orion's own OpenTelemetry pipeline, end to end: real `orion run` processes export to a real
loopback OTLP receiver (HTTP and gRPC, decoded with opentelemetry-proto), a backend that is
down (a closed port) costs about a second at exit and is counted in one notice, and no text
planted in any input reaches the trace store or the exported spans."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

for exporter in ("http", "grpc"):
    pytest.importorskip(f"opentelemetry.exporter.otlp.proto.{exporter}",
                        reason="the otel extra is not installed")

from otlp_receiver import OTLPReceiver  # noqa: E402
from orion.trace.writer import settle_all

ROOT = Path(__file__).resolve().parent.parent

#: A marker planted in each input; none may reach a trace.
MARKERS = {name: f"zqx{name}Q" for name in (
    "TITLE", "USERONE", "USERTWO", "USERTHREE", "PLAN", "FILETEXT", "PATH", "INTENT", "CONTENT",
    "REPLY", "NARRATION", "COMMENTARY", "JSONTEXT", "REASON", "TOOLNAME", "PLUGINERROR",
    "EXPECTED", "ORPHAN")}
M = MARKERS

#: Three user messages with a plan round and a write session (the /plan on joins the first).
THREE_TURNS = f"""\
files:
  notes.md: "{M['FILETEXT']} ship it on Friday\\n"
conversation:
  - user: "/plan on {M['TITLE']}"
  - user: "Plan the release {M['USERONE']}."
  - model:
      tool_calls: [{{name: read_file, arguments: {{path: notes.md}}}}]
  - model:
      tool_calls:
        - name: plan_set_content
          arguments: {{plan_markdown: "# {M['PLAN']}\\n\\n1. Ship it.\\n"}}
  - model: {{text: "Stored {M['REPLY']}.", usage: {{prompt_tokens: 12, completion_tokens: 3}}}}
  - user: "Write the guide {M['USERTWO']}."
  - model:
      text: "Writing it {M['NARRATION']}."
      tool_calls:
        - name: WritePlanTool_begin
          arguments: {{intent: "{M['INTENT']}", target_file: "docs/{M['PATH']}.md",
                      operation: create}}
  - model: {{text: "# Guide {M['CONTENT']}\\n\\nline two\\n"}}
  - user: "Are you done {M['USERTHREE']}?"
  - model: {{text: "DONE\\n{M['COMMENTARY']} one more thing"}}
  - model: {{text: "Written."}}
"""


def env(**more: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("OTEL_", "ORION_", "OPENAI_"))}
    return {**clean, **more}


def orion_run(script: str, workspace: Path, **variables: str) -> subprocess.CompletedProcess:
    path = workspace.parent / f"{workspace.name}.yaml"
    path.write_text(script)
    return subprocess.run([sys.executable, "-m", "orion", "run", str(path), "--workspace",
                           str(workspace)], capture_output=True, text=True, timeout=120,
                          env=env(**variables), cwd=workspace.parent)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def trace_tables(workspace: Path) -> str:
    """Every row of the trace tables of orion.db, as text."""
    settle_all()  # this process's trace writer stores off the step
    db = sqlite3.connect(workspace / ".orion" / "orion.db")
    return "\n".join(repr(row) for table in ("trace_events", "trace_blobs", "trace_counters")
                     for row in db.execute(f"SELECT * FROM {table}"))


def leaked(text: str | bytes) -> list[str]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return sorted(name for name, marker in MARKERS.items() if marker in text)


# -- nesting and the fleet's attributes, over HTTP and gRPC ---------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_three_turn_chat_arrives_as_three_nested_traces_of_one_session(tmp_path, protocol):
    with OTLPReceiver("grpc" if protocol == "grpc" else "http") as receiver:
        before = time.time_ns()
        proc = orion_run(THREE_TURNS, tmp_path / "ws",
                         OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
                         OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
                         OTEL_RESOURCE_ATTRIBUTES="deployment.environment.name=ci,host.name=")
        after = time.time_ns()
        spans = list(receiver.spans)
    assert proc.returncode == 0, proc.stderr
    assert "did not reach" not in proc.stderr
    traces: dict[str, list[dict]] = {}
    for span in spans:
        traces.setdefault(span["trace_id"], []).append(span)
    assert len(traces) == 3
    sessions = {s["attributes"]["session.id"] for s in spans}
    assert len(sessions) == 1 and sessions == {s["attributes"]["gen_ai.conversation.id"]
                                               for s in spans}
    for members in traces.values():
        [root] = [s for s in members if not s["parent_id"]]
        assert root["name"] == "invoke_agent orion"
        assert root["attributes"]["openinference.span.kind"] == "AGENT"
        ids = {s["span_id"] for s in members}
        assert all(s["parent_id"] in ids for s in members if s is not root)
    # every span typed, with real, distinct wall-clock times
    assert all(s["attributes"]["openinference.span.kind"] in
               {"AGENT", "LLM", "TOOL", "CHAIN", "GUARDRAIL", "EVALUATOR"} for s in spans)
    assert all(before <= s["start_ns"] <= s["end_ns"] <= after for s in spans)
    assert len({s["start_ns"] for s in spans}) > len(spans) // 2
    llm = [s for s in spans if s["attributes"]["openinference.span.kind"] == "LLM"]
    assert len(llm) == 7 and all(s["kind"] == 3 for s in llm)  # SPAN_KIND_CLIENT
    first = llm[0]["attributes"]
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "orion.scripted"
    tokens = [s["attributes"] for s in llm if "gen_ai.usage.input_tokens" in s["attributes"]]
    assert tokens and (tokens[0]["gen_ai.usage.input_tokens"],
                       tokens[0]["gen_ai.usage.output_tokens"]) == (12, 3)
    tools = [s for s in spans if s["attributes"]["openinference.span.kind"] == "TOOL"]
    assert {s["attributes"]["gen_ai.tool.name"] for s in tools} == {
        "read_file", "plan_set_content", "WritePlanTool_begin"}
    # the write session's spans of the third turn link back to its begin in the second
    [begin] = [s for s in spans if s["name"] == "write_session begin"]
    finished = [s for s in spans if s["name"] == "write_session valid"]
    assert finished and finished[0]["links"] == [f"{begin['trace_id']}-{begin['span_id']}"]
    # the machine is named; OTEL_RESOURCE_ATTRIBUTES adds to Orion's resource and overrides it
    resource = spans[0]["resource"]
    assert resource["service.name"] == "orion" and resource["service.version"]
    assert resource["deployment.environment.name"] == "ci"
    assert len(resource["service.instance.id"]) == 36
    assert resource["host.name"] == ""  # overridden (here: emptied) by the variable
    assert leaked(b"".join(receiver.raw)) == []


@pytest.mark.slow
def test_host_name_and_service_name_by_default_and_per_process_instance_ids(tmp_path):
    script = "conversation:\n  - user: hi\n  - model: {text: hello}\n"
    resources = []
    for n in range(2):
        with OTLPReceiver("http") as receiver:
            proc = orion_run(script, tmp_path / f"ws{n}",
                             OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
            assert proc.returncode == 0, proc.stderr
            resources.append(receiver.spans[0]["resource"])
    assert [r["host.name"] for r in resources] == [socket.gethostname()] * 2
    assert {r["service.name"] for r in resources} == {"orion"}
    assert resources[0]["service.instance.id"] != resources[1]["service.instance.id"]


@pytest.mark.slow
def test_a_protocol_sent_to_the_other_protocols_port_is_pointed_out(tmp_path):
    script = "conversation:\n  - user: hi\n  - model: {text: hello}\n"
    proc = orion_run(script, tmp_path / "ws", OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318",
                     OTEL_EXPORTER_OTLP_PROTOCOL="grpc", ORION_OTEL_SHUTDOWN_TIMEOUT_MS="0")
    assert proc.returncode == 0, proc.stderr
    assert "port 4318 is OTLP's http/protobuf port" in proc.stderr
    bad = orion_run(script, tmp_path / "ws2", OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:1",
                    OTEL_EXPORTER_OTLP_PROTOCOL="http/json")
    assert bad.returncode == 0  # traces are never in the way: the run goes on, unexported
    assert "OTEL_EXPORTER_OTLP_PROTOCOL='http/json'" in bad.stderr


# -- never in the way ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_backend_that_is_down_adds_about_a_second_at_exit_and_is_counted(tmp_path, protocol):
    # Before, a closed port held every process 6 to 22 s at exit. The bound is 1 s, and the
    # notice says it waited that long (no wall-clock assertion: a loaded machine is slow).
    port = closed_port()
    proc = orion_run(THREE_TURNS, tmp_path / "down",
                     OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}",
                     OTEL_EXPORTER_OTLP_PROTOCOL=protocol)
    assert proc.returncode == 0, proc.stderr
    [notice] = [line for line in proc.stderr.splitlines() if "did not reach" in line]
    stored = sqlite3.connect(tmp_path / "down" / ".orion" / "orion.db").execute(
        "SELECT count(*) FROM trace_events").fetchone()[0]
    assert f"orion: {stored} of {stored} trace spans did not reach" in notice
    assert "waited 1.0 s at exit" in notice and "orion traces --tree" in notice
    assert "Connection refused" in notice or "UNAVAILABLE" in notice
    assert "retrying" not in proc.stderr.replace(notice, "")  # no exporter noise mid-run


@pytest.mark.slow
def test_the_exit_bound_is_configurable(tmp_path):
    port = closed_port()
    proc = orion_run(THREE_TURNS, tmp_path / "ws", ORION_OTEL_SHUTDOWN_TIMEOUT_MS="0",
                     OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
    assert proc.returncode == 0
    assert "waited 0.0 s at exit" in proc.stderr
    bad = orion_run(THREE_TURNS, tmp_path / "ws2", ORION_OTEL_SHUTDOWN_TIMEOUT_MS="soon",
                    OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{port}")
    assert bad.returncode == 0
    assert "ORION_OTEL_SHUTDOWN_TIMEOUT_MS='soon'" in bad.stderr


@pytest.mark.slow
def test_a_backend_that_answers_gets_every_span_and_no_notice(tmp_path):
    with OTLPReceiver("http") as receiver:
        proc = orion_run(THREE_TURNS, tmp_path / "ws",
                         OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint)
        received = len(receiver.spans)
    assert proc.returncode == 0 and "did not reach" not in proc.stderr
    stored = sqlite3.connect(tmp_path / "ws" / ".orion" / "orion.db").execute(
        "SELECT count(*) FROM trace_events").fetchone()[0]
    assert received == stored > 20


# -- content-free, truly ---------------------------------------------------------------------

#: A run through the runtime with plugins of a team: a policy that denies with a reason quoting
#: the path, an observer that fails with a message quoting a transition's payload, and the
#: OpenTelemetry exporter the environment asks for (this process's real pipeline).
DRIVER = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from orion import hookimpl
    from orion.models.script import load_script
    from orion.hooks.manager import make_plugin_manager
    from orion.runtime.runner import play
    from orion.tools.gating import Decision

    class Policy:
        @hookimpl
        def authorize_tool_call(self, call, request):
            if "secret" in str(call.arguments.get("path")):
                return Decision.deny(f"{call.arguments['path']} is off limits zqxREASONQ")

    class Broken:
        @hookimpl
        def lifecycle_transition(self, lifecycle, transition):
            raise ValueError(f"cannot audit {transition.payload} zqxPLUGINERRORQ")

    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(Policy(), "policy")
    pm.register(Broken(), "broken")
    result = asyncio.run(play(load_script(sys.argv[1]), workspace=Path(sys.argv[2]), plugins=pm))
    print("ok" if result.ok else "failed: " + "; ".join(result.errors))
    """)

TEAM_RUN = f"""\
files:
  secret.txt: "{M['FILETEXT']}"
settings:
  write_session: {{max_corrections: 0}}
conversation:
  - user: "Check {M['USERONE']}"
  - model:
      tool_calls:
        - {{name: read_file, arguments: {{path: secret.txt}}}}
        - {{name: {M['TOOLNAME']}, arguments: {{path: x}}}}
  - model:
      tool_calls:
        - name: WritePlanTool_begin
          arguments: {{intent: data, target_file: "data/{M['PATH']}.json", operation: create}}
  - model: {{text: "{{\\"{M['JSONTEXT']}\\": }}\\nDONE\\n"}}
  - model: {{text: "Done."}}
"""

#: A scripted expectation that fails after read_file: the error quotes the file's text.
FAILED_EXPECTATION = f"""\
files:
  notes.md: "{M['FILETEXT']} is the only line\\n"
conversation:
  - user: "Read it {M['USERONE']}"
  - model:
      tool_calls: [{{name: read_file, arguments: {{path: notes.md}}}}]
  - expect: "{M['EXPECTED']}"
  - model: {{text: "never"}}
"""

#: A run that ends with its write session open: the next run finds it (a recovery).
LEFT_OPEN = f"""\
conversation:
  - user: "Write it {M['USERONE']}"
  - model:
      tool_calls:
        - name: WritePlanTool_begin
          arguments: {{intent: x, target_file: "{M['ORPHAN']}.md", operation: create}}
  - model: {{text: "# {M['CONTENT']}\\n", finish_reason: length}}
"""


def exported_runs(tmp_path: Path, receiver: OTLPReceiver, **variables: str) -> list[Path]:
    """Runs that touch every kind of trace event, exporting to ``receiver``."""
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, **variables}
    workspaces = []
    main = tmp_path / "main"
    assert orion_run(THREE_TURNS, main, **endpoint).returncode == 0
    workspaces.append(main)
    team = tmp_path / "team"
    (tmp_path / "team.yaml").write_text(TEAM_RUN)
    (tmp_path / "driver.py").write_text(DRIVER)
    proc = subprocess.run([sys.executable, str(tmp_path / "driver.py"),
                           str(tmp_path / "team.yaml"), str(team)], capture_output=True,
                          text=True, timeout=120, env=env(**endpoint))
    assert proc.stdout.strip() == "ok", proc.stdout + proc.stderr
    workspaces.append(team)
    failing = tmp_path / "failing"
    proc = orion_run(FAILED_EXPECTATION, failing, **endpoint)
    assert proc.returncode != 0 and M["EXPECTED"] in proc.stdout + proc.stderr
    workspaces.append(failing)
    orphan = tmp_path / "orphan"
    orion_run(LEFT_OPEN, orphan, **endpoint)
    proc = orion_run("conversation:\n  - user: hi\n  - model: {text: hello}\n", orphan,
                     **endpoint)
    assert proc.returncode == 0, proc.stderr
    workspaces.append(orphan)
    return workspaces


@pytest.mark.slow
def test_no_planted_text_reaches_the_trace_store_or_the_exported_spans(tmp_path):
    with OTLPReceiver("http") as receiver:
        workspaces = exported_runs(tmp_path, receiver)
        raw, spans = b"".join(receiver.raw), list(receiver.spans)
    kinds = {s["attributes"]["orion.kind"] for s in spans}
    assert kinds >= {"turn", "model_request", "tool_call", "policy_denial", "transition",
                     "phase", "finalize", "validation_issue", "write_report", "recovery",
                     "error"}, kinds
    assert leaked(raw) == []
    for workspace in workspaces:
        assert leaked(trace_tables(workspace)) == [], workspace
    # errors say what failed, never the message that quotes content
    errors = [s for s in spans if s["status"][0] == 2]  # STATUS_CODE_ERROR
    assert {s["status"][1] for s in errors} >= {"ExpectationFailed", "ValueError",
                                                 "unknown_tool", "denied"}
    assert all(e["attributes"].keys() == {"exception.type"} for s in errors
               for e in s["events"])
    # what stands for a text is its length and sha256, which a team can match
    [plan] = [s for s in spans if s["name"] == "execute_tool plan_set_content"]
    markdown = f"# {M['PLAN']}\n\n1. Ship it.\n"
    assert plan["attributes"]["orion.tool.arguments.plan_markdown.length"] == len(markdown)
    import hashlib
    assert plan["attributes"]["orion.tool.arguments.plan_markdown.sha256"] == \
        hashlib.sha256(markdown.encode()).hexdigest()


@pytest.mark.slow
def test_content_capture_is_opt_in_with_the_genai_variable(tmp_path):
    # The same runs with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true: the texts now
    # reach the team's backend (and the store's blob table), which shows the scan above sees
    # them when they are there.
    with OTLPReceiver("http") as receiver:
        workspaces = exported_runs(tmp_path, receiver,
                                   OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true")
        raw, spans = b"".join(receiver.raw), list(receiver.spans)
    assert {"TITLE", "USERONE", "PLAN", "FILETEXT", "PATH", "CONTENT", "REASON",
            "PLUGINERROR", "EXPECTED"} <= set(leaked(raw))
    assert {"TITLE", "PLAN", "USERONE"} <= set(leaked(trace_tables(workspaces[0])))
    llm = next(s for s in spans if s["name"] == "chat scripted")
    assert M["USERONE"] in llm["attributes"]["gen_ai.input.messages"]
    assert llm["attributes"]["input.value"] == llm["attributes"]["gen_ai.input.messages"]
    root = next(s for s in spans if s["name"] == "invoke_agent orion")
    assert M["USERONE"] in root["attributes"]["input.value"]
    bad = orion_run("conversation:\n  - user: hi\n  - model: {text: hello}\n",
                    tmp_path / "bad", OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="yes")
    assert bad.returncode != 0
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT='yes'" in bad.stdout + bad.stderr
