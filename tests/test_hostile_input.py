"""Hostile model output is bounded: tool arguments nested 100,000 deep or holding a 5,000-digit
integer end as a tool error the model reads, and the run goes on (they used to end it with a
RecursionError or ValueError traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ORION = str(Path(sys.executable).parent / "orion")


@pytest.mark.slow
def test_orion_run_answers_hostile_tool_arguments_with_tool_errors(tmp_path):
    deep = '{"intent": ' + "[" * 100_000 + "]" * 100_000 + "}"
    digits = '{"intent": ' + "9" * 5000 + "}"
    conversation = [
        {"user": "Write the notes."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": deep}]}},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": digits}]}},
        {"model": {"text": "I could not start the write."}},
    ]
    script = tmp_path / "hostile.yaml"
    script.write_text(json.dumps({"description": "hostile arguments",
                                  "conversation": conversation}))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    proc = subprocess.run([ORION, "run", str(script), "--workspace", str(workspace)],
                          capture_output=True, text=True, timeout=120)
    said = proc.stdout + proc.stderr
    assert "Traceback" not in said, said[-3000:]
    assert proc.returncode == 0, said[-3000:]
    assert "100,001 levels deep; at most 64" in said
    assert "hold a number that cannot be read" in said
    assert "I could not start the write." in said  # the conversation went on to its end


@pytest.mark.slow
def test_a_setting_of_10_to_the_400_is_a_located_error_of_orion_check_and_orion_run(tmp_path):
    (tmp_path / "orion.yaml").write_text("settings:\n  write_session:\n    idle_ms: 1"
                                         + "0" * 400 + "\n")
    check = subprocess.run([ORION, "check", "--workspace", str(tmp_path)], capture_output=True,
                           text=True, timeout=120)
    assert check.returncode == 1, check.stdout + check.stderr
    assert "orion.yaml:3:5: write_session.idle_ms: a 401-digit number is beyond the largest " \
           "number a setting takes" in check.stdout
    run = subprocess.run([ORION, "run", "hello", "--workspace", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "idle_ms" in run.stderr and "nothing was run" in run.stderr


@pytest.mark.slow
def test_an_invalid_setting_stops_orion_run_before_anything_runs(tmp_path):
    (tmp_path / "orion.yaml").write_text("settings:\n  write_session:\n    flush_lines: 0\n")
    run = subprocess.run([ORION, "run", "hello", "--workspace", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stdout + run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines == [f"error: {tmp_path / 'orion.yaml'}:3:5: write_session.flush_lines: 0 is "
                     "below the minimum 1; nothing was run"]
    assert "Hello" not in run.stdout  # the conversation never started


@pytest.mark.slow
def test_a_lone_surrogate_from_the_model_does_not_end_orion_chat(tmp_path):
    # A gateway can send "\ud800" (valid JSON, not valid text): the console shows a
    # replacement character, the chat goes on to the next line.
    import os

    from sse_server import SSEServer, finish_chunk, stream, text_chunk, text_stream

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    with SSEServer([stream([text_chunk("broken \ud800 text"), finish_chunk("stop")]),
                    stream(text_stream("still here"))]) as server:
        proc = subprocess.run(
            [ORION, "chat", "--base-url", server.base_url, "--model", "test-model",
             "--workspace", str(tmp_path)],
            input="first\nsecond\n/quit\n", capture_output=True, text=True, timeout=60,
            env={**clean, "OPENAI_API_KEY": "test-key", "PYTHONIOENCODING": "utf-8"})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "broken" in proc.stdout and "still here" in proc.stdout, (proc.stdout, proc.stderr)


def test_a_limit_of_10_to_the_20_is_a_usage_error_not_an_overflow(tmp_path):
    for command in (["traces"], ["plan", "history"], ["sessions", "history"]):
        proc = subprocess.run([ORION, *command, "--limit", str(10**20), "--workspace",
                               str(tmp_path)], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (command, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert "is not in the range" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_a_symbolic_link_loop_as_target_is_a_rejected_plan_not_a_plugin_failure(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "loop").symlink_to("loop")
    conversation = [
        {"user": "Write loop."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "x", "target_file": "loop", "operation": "create"}}]}},
        {"model": {"text": "I will pick another name."}},
    ]
    script = tmp_path / "loop.yaml"
    script.write_text(json.dumps({"description": "a link loop", "conversation": conversation}))
    proc = subprocess.run([ORION, "run", str(script), "--workspace", str(workspace)],
                          capture_output=True, text=True, timeout=120)
    said = proc.stdout + proc.stderr
    assert "Traceback" not in said and "plugin" not in said, said
    assert "target_file 'loop' cannot be resolved" in said, said
