"""`orion chat` end to end: a real subprocess, the real openai SDK, a loopback SSE server."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from sse_server import (KEEP_ALIVE, Pause, SSEServer, error, finish_chunk, stream, text_chunk,
                        text_stream, tool_call_chunk)


def chat(server: SSEServer, workspace, lines: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    return subprocess.run(
        [sys.executable, "-m", "orion", "chat", "--base-url", server.base_url,
         "--model", "test-model", "--workspace", str(workspace)],
        input=lines, capture_output=True, text=True, timeout=60, env={**clean, **env})


@pytest.mark.slow
def test_chat_streams_the_reply_and_quits(tmp_path):
    with SSEServer([stream([text_chunk("Hello"), KEEP_ALIVE, text_chunk(" there"),
                            finish_chunk("stop")])]) as server:
        proc = chat(server, tmp_path, "hi orion\n/quit\n", OPENAI_API_KEY="test-key")
    assert proc.returncode == 0, proc.stderr
    assert "Hello there" in proc.stdout
    body = server.requests[0].body
    assert body["model"] == "test-model" and body["stream"] is True
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][-1] == {"role": "user", "content": "hi orion"}
    assert server.requests[0].headers["authorization"] == "Bearer test-key"


@pytest.mark.slow
def test_chat_runs_a_tool_call_and_sends_the_result_back(tmp_path):
    (tmp_path / "notes.md").write_text("ship it on Friday\n")
    first = stream([tool_call_chunk(0, id="call_a", name="read_file", arguments='{"path": '),
                    tool_call_chunk(0, arguments='"notes.md"}'), finish_chunk("stop")])
    second = stream(text_stream("Friday."))
    with SSEServer([first, second]) as server:
        proc = chat(server, tmp_path, "when?\n", OPENAI_API_KEY="k")
    assert proc.returncode == 0, proc.stderr
    tool_message = server.requests[1].body["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_a"
    assert "ship it on Friday" in tool_message["content"]
    assistant = server.requests[1].body["messages"][-2]
    assert assistant["tool_calls"][0]["function"] == {"name": "read_file",
                                                      "arguments": '{"path": "notes.md"}'}
    assert "Friday." in proc.stdout


@pytest.mark.slow
def test_chat_slash_commands_work_without_the_model(tmp_path):
    with SSEServer([]) as server:
        proc = chat(server, tmp_path, "/help\n/nope\n/reset\n", OPENAI_API_KEY="k")
    assert proc.returncode == 0, proc.stderr
    assert "/reset" in proc.stderr and "unknown command /nope" in proc.stderr
    assert "The conversation was reset." in proc.stderr
    assert server.requests == []


@pytest.mark.slow
def test_chat_with_a_rejected_key_exits_1_with_a_clear_message(tmp_path):
    with SSEServer([error(401, message="Incorrect API key provided")]) as server:
        proc = chat(server, tmp_path, "hi\n", OPENAI_API_KEY="wrong")
    assert proc.returncode == 1
    assert "rejected the API key" in proc.stderr and "Incorrect API key provided" in proc.stderr


@pytest.mark.slow
def test_chat_uses_orion_yaml_and_the_api_key_variable_it_names(tmp_path):
    with SSEServer([stream(text_stream("ok"))]) as server:
        (tmp_path / "orion.yaml").write_text(
            f"model:\n  base_url: {server.base_url}\n  model: from-yaml\n"
            "  api_key_env: MY_ENDPOINT_KEY\n")
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
        proc = subprocess.run([sys.executable, "-m", "orion", "chat", "--workspace",
                               str(tmp_path)], input="hi\n", capture_output=True, text=True,
                              timeout=60, env={**clean, "MY_ENDPOINT_KEY": "secret-1"})
    assert proc.returncode == 0, proc.stderr
    assert server.requests[0].body["model"] == "from-yaml"
    assert server.requests[0].headers["authorization"] == "Bearer secret-1"


@pytest.mark.slow
def test_a_chat_keeps_one_connection_to_the_endpoint(tmp_path):
    # One client for the whole conversation: its requests reuse a kept-alive connection (one
    # TLS handshake with a remote endpoint, not one per request).
    with SSEServer([stream(text_stream("One.")), stream(text_stream("Two.")),
                    stream(text_stream("Three."))]) as server:
        proc = chat(server, tmp_path, "first\nsecond\nthird\n", OPENAI_API_KEY="k")
    assert proc.returncode == 0, proc.stderr
    assert "One." in proc.stdout and "Three." in proc.stdout
    assert len(server.requests) == 3
    assert len({request.peer for request in server.requests}) == 1, server.requests


STATE_NAMES = ("awaiting_content", "session_active", "receiving_content", "needs_corrections")


@pytest.mark.slow
def test_a_piped_chat_prints_the_reply_as_it_came(tmp_path):
    reply = "# Notes\n\nThis is **bold**, `code` and a [link](https://example.org).\n- one\n"
    with SSEServer([stream(text_stream(reply[:9], reply[9:30], reply[30:]))]) as server:
        proc = chat(server, tmp_path, "show me\n", OPENAI_API_KEY="k")
    assert proc.returncode == 0, proc.stderr
    assert reply in proc.stdout  # not a terminal: no rendering, nothing changed


@pytest.mark.slow
def test_a_piped_chat_shows_a_write_s_progress_in_words_and_what_stays_open_at_the_end(
        tmp_path):
    from sse_server import begin_write

    content = "".join(f"line {n}\n" for n in range(1, 121))
    with SSEServer([begin_write("notes.md"),
                    stream([text_chunk(content[i:i + 50]) for i in range(0, len(content), 50)]
                           + [finish_chunk("stop")]),
                    stream(text_stream("I am not finished.\n"))]) as server:
        proc = chat(server, tmp_path, "Write the notes.\nAlso add a summary.\n",
                    OPENAI_API_KEY="k", WRITE_SESSION_IDLE_MS="600000")
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "writing notes.md: " in said
    assert not any(name in said for name in STATE_NAMES), said
    (directory,) = [d for d in (tmp_path / ".orion" / "write_sessions").iterdir()
                    if d.is_dir()]
    short = directory.name[:8]
    # The model's answer to Orion's question joins the content (not DONE alone): 121 lines.
    assert (f"write session {short} for notes.md is still open (121 lines saved); 1 message "
            "you typed is held with it ('Also add a summary.') and sent once the file is "
            f"written: `orion sessions recover {short} --continue` lets the next orion run or "
            "orion chat finish it, `--finalize` writes what was saved") in said
    assert (directory / "content.txt").read_text() == content + "I am not finished.\n"


@pytest.mark.slow
def test_sigint_stops_a_piped_reply_which_stays_in_the_model_s_view(tmp_path):
    import signal
    import threading
    import time

    slow = stream([text_chunk("First, the"), Pause(30), text_chunk(" rest"),
                   finish_chunk("stop")])
    with SSEServer([slow, stream(text_stream("Fine."))]) as server:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
        proc = subprocess.Popen(
            [sys.executable, "-m", "orion", "chat", "--base-url", server.base_url, "--model",
             "test-model", "--workspace", str(tmp_path)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**clean, "OPENAI_API_KEY": "k"})
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.extend(iter(lambda: proc.stdout.read(1),
                                                                 "")))
        reader.start()
        try:
            proc.stdin.write("Explain it.\n")
            proc.stdin.flush()
            end = time.monotonic() + 60
            while "First, the" not in "".join(out):  # the reply is streaming
                assert time.monotonic() < end and proc.poll() is None, "".join(out)
                time.sleep(0.05)
            proc.send_signal(signal.SIGINT)
            proc.stdin.write("Go on.\n")
            proc.stdin.close()
            assert proc.wait(timeout=60) == 0
        finally:
            proc.kill()
            reader.join()
            err = proc.stderr.read()
    assert "reply stopped" in err, err
    messages = server.requests[1].body["messages"]
    assert [m["content"] for m in messages[-3:]] == [
        "Explain it.", "First, the\n\n[The user interrupted this reply here.]", "Go on."]
