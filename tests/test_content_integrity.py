"""Nothing but the content, all of the content: the rules of what is content under real model
and gateway behaviour, each played as a scripted conversation through the real runtime
(``orion.runtime.runner.play``), and the gateway's exact chunk sequence replayed through the
real ``openai`` SDK against the loopback SSE server. The rules are listed in
docs/write-sessions.md ("What is content"); features/content_integrity.feature states them, and
tests/test_write_promise.py plays the cases that used to lose content.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sse_server import (SSEServer, begin_write, chunk, finish_chunk, retryable, stream,
                        text_chunk, text_stream, tool_call_chunk)

from orion.clock import VirtualClock
from orion.models.openai_compat import OpenAICompatibleModel
from orion.hooks.manager import make_plugin_manager
from orion.runtime.runtime import Runtime
from write_harness import Capture, Played, begin, make_runner, say

DONE_PROMPT = "If you're finished, reply with DONE on its own line; otherwise continue."
CUT_PROMPT = "Your output was cut off."
UNFINISHED = "Your message stopped in the middle of line"


@pytest.fixture
def run(tmp_path, monkeypatch):
    """``run(conversation, settings=..., files=...)``: the write-session harness
    (tests/write_harness.py) playing a script of these entries."""
    play_script = make_runner(tmp_path, monkeypatch)

    def _run(conversation: list[dict], *, settings: dict | None = None,
             files: dict | None = None) -> Played:
        script: dict[str, Any] = {"conversation": conversation}
        if settings:
            script["settings"] = {"write_session": settings}
        if files:
            script["files"] = files
        return play_script(script)
    return _run


def lines(path: str, first: int, last: int) -> str:
    return "".join(f"Line {n} of {path}.\n" for n in range(first, last + 1))


def ok(played: Played) -> None:
    assert played.result.ok, played.result.errors


# -- 1. a reply to the idle prompt -------------------------------------------------------------


def test_1_a_reply_to_the_idle_prompt_is_content_as_the_prompt_says(run):
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        say("alpha\nbeta\n"),
        {"wait_ms": 2000}, {"expect": DONE_PROMPT},
        {"expect": "Anything you write but DONE alone is added to the file"},
        say("gamma\n"),
        {"wait_ms": 2000}, {"expect": DONE_PROMPT},
        say("DONE"),
        {"expect": "Created notes.md (3 lines"}, say("Written."),
    ])
    ok(played)
    assert played.text("notes.md") == "alpha\nbeta\ngamma\n"
    assert played.result.sessions[0]["status"] == "written"


def test_1_replies_are_never_glued_onto_a_line_that_ended_mid_way(run):
    # The content stops mid-line: the model is asked whether the file ends there. A reply that
    # does not send the line again takes its place, and the old text is set aside, never glued.
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        say("First line.\nSomething else!"),
        {"expect": UNFINISHED},  # at once: no waiting for the idle timer
        say("Second line.\nDONE"),
        {"expect": "Created notes.md (2 lines, 25 B)"}, say("Written."),
    ])
    ok(played)
    assert played.text("notes.md") == "First line.\nSecond line.\n"
    assert played.result.sessions[0]["status"] == "written_with_set_aside"
    assert any("line 2 as it was cut off (1 line, first line 'Something else!'), which the "
               "reply did not send again, was set aside" in n for n in played.reporter.notices)


# -- 2. narration beside a tool call -------------------------------------------------------------


def test_2_text_beside_a_tool_call_is_narration_not_content(run):
    played = run([
        {"user": "Write summary.md from notes.md."}, begin("summary.md"),
        {"model": {"text": "Let me check the notes first.", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "notes.md"}}]}},
        say("# Summary\n\nShip on Friday.\nDONE\n"),
        {"expect": "Created summary.md (3 lines"}, say("Written."),
    ], files={"notes.md": "ship it on Friday\n"})
    ok(played)
    assert played.text("summary.md") == "# Summary\n\nShip on Friday.\n"
    [narration] = [m for m in played.sent(4) if m["role"] == "assistant" and
                   m.get("tool_calls") and m["tool_calls"][0]["function"]["name"] == "read_file"]
    assert narration["content"] == "Let me check the notes first."  # kept in the history
    assert any("the text beside the read_file call (1 line, first line 'Let me check the notes "
               "first.') was set aside, not written to summary.md (part 1)" in n
               for n in played.reporter.notices)
    told = [m["content"] for m in played.sent(3) if m["role"] == "user"][-1]
    assert "(1 line, first line 'Let me check the notes first.') was set aside as part 1" in told
    assert "WritePlanTool_keep with part 1" in told
    assert [e["name"] for e in played.events("write_report")][0] == "text set aside"
    assert played.result.sessions[0]["status"] == "written_with_set_aside"
    assert "1 line set aside, not written: part 1" in played.result.prompts[-1]


def test_2_narration_in_a_reply_to_the_idle_prompt_is_set_aside_too(run):
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        say("alpha\n"),
        {"wait_ms": 2000}, {"expect": DONE_PROMPT},
        {"model": {"text": "I will look at the README before I go on.", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "README.md"}}]}},
        say("beta\nDONE\n"),
        {"expect": "Created notes.md (2 lines"}, say("Written."),
    ], files={"README.md": "readme\n"})
    ok(played)
    assert played.text("notes.md") == "alpha\nbeta\n"


def test_2_content_that_ends_with_done_beside_a_tool_call_is_kept(run):
    # The terminator line says the content is complete: the text before it is the file.
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        {"model": {"text": "alpha\nbeta\nDONE\n", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "README.md"}}]}},
        say("Written."),  # answers the report and the tool result
    ], files={"README.md": "readme\n"})
    ok(played)
    assert played.text("notes.md") == "alpha\nbeta\n"
    assert played.result.prompts[-1].startswith("Created notes.md (2 lines")


# -- 3. a user's message while a session is open ----------------------------------------------


def test_3_a_user_message_mid_session_is_held_until_the_file_is_written(run):
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        say("alpha\nbeta\n"),
        {"user": "What is the capital of France?"},
        {"expect": DONE_PROMPT},  # at once: no waiting for the idle timer
        say("DONE"),
        say("Written. And Paris is the capital of France."),
    ])
    ok(played)
    assert played.text("notes.md") == "alpha\nbeta\n"
    # The question reached the model only with the request after the write.
    for request in range(1, 4):
        assert not any(m["content"] == "What is the capital of France?"
                       for m in played.sent(request))
    last = played.sent(4)
    assert last[-2]["content"].startswith("Created notes.md")
    assert last[-1] == {"role": "user", "content": "What is the capital of France?"}
    assert any("your message is held and sent to the model once the file is written" in n
               for n in played.reporter.notices)


# -- 4. nothing after DONE lands in the file, nothing is dropped without a word ---------------


def test_4_text_after_done_is_set_aside_and_counted_in_the_report_and_the_notice(run):
    played = run([
        {"user": "Write todo.md."}, begin("todo.md"),
        say("Task A\nDONE\nTask B\nTask C\nThat is all."),
        {"expect": "Created todo.md (1 line, 7 B); 3 lines set aside, not written: part 1 (3 "
                   "lines, first line 'Task B') after DONE"},
        say("Written."),
    ])
    ok(played)
    assert played.text("todo.md") == "Task A\n"
    short = played.result.sessions[0]["id"][:8]
    assert (f"write session {short}: the text after DONE (3 lines, first line 'Task B') was "
            f"set aside, not written to todo.md (part 1); `orion sessions show {short}` prints "
            "it") in played.reporter.notices
    assert played.result.sessions[0]["status"] == "written_with_set_aside"


def test_4_a_document_with_done_lines_uses_a_fence_or_strict_mode(run):
    played = run([
        {"user": "Write todo.md."}, begin("todo.md"),
        say("```\nTask A\nDONE\n```\nDONE\n"),
        {"expect": "Created todo.md (4 lines"}, say("Written."),
    ])
    ok(played)
    assert played.text("todo.md") == "```\nTask A\nDONE\n```\n"


# -- 5. a message that stops in the middle of a line -------------------------------------------


def test_5_a_message_ending_mid_line_without_done_is_asked_about_at_once(run):
    path = "docs/guide.md"
    played = run([
        {"user": f"Write {path}."}, begin(path),
        say(lines(path, 1, 200) + "Line 201 of", finish_reason="stop"),
        {"expect": UNFINISHED},  # at once, without the idle timer
        say(lines(path, 201, 250) + "DONE\n"),  # line 201 again, whole: it replaces it
        {"expect": f"Created {path} (250 lines"}, say("Written."),
    ])
    ok(played)
    assert played.text(path) == lines(path, 1, 250)
    assert not any(p.startswith(DONE_PROMPT) for p in played.result.prompts)
    short = played.result.sessions[0]["id"][:8]
    assert (f"write session {short}: the reply stopped in the middle of line 201 of {path} "
            "without DONE: asking the model whether the file ends there") in \
        played.reporter.notices


def test_5_nothing_is_dropped_as_a_repeat_after_the_idle_prompt(run):
    # The idle prompt quotes nothing, so nothing is a declared repeat: lines the model sends
    # twice are written twice (and the user can see them).
    path = "docs/guide.md"
    played = run([
        {"user": f"Write {path}."}, begin(path),
        say(lines(path, 1, 20)),
        {"wait_ms": 2000}, {"expect": DONE_PROMPT},
        say(lines(path, 19, 30) + "DONE\n"),  # lines 19 and 20 again
        {"expect": f"Created {path} (32 lines"}, say("Written."),
    ])
    ok(played)
    assert played.text(path) == lines(path, 1, 20) + lines(path, 19, 30)


def _gateway_cut(text: str) -> list[dict | str]:
    """What LiteLLM's proxy sends for an upstream stream that ended without a finish reason:
    the role in a chunk of its own, the text, ``finish_reason: "stop"`` after the mid-line cut,
    then the usage in a chunk whose choice has an empty delta."""
    pieces = [text[i:i + 40] for i in range(0, len(text), 40)]
    return [chunk({"role": "assistant", "content": ""}),
            *[text_chunk(p) for p in pieces],
            chunk({}, "stop"),
            chunk(choices=[{"index": 0, "delta": {}}],
                  usage={"prompt_tokens": 120, "completion_tokens": 2000,
                         "total_tokens": 2120})]


def test_5_the_gateway_chunk_sequence_through_the_openai_sdk(tmp_path):
    path = "docs/guide.md"
    begin_call = stream([chunk({"role": "assistant"}),
                         tool_call_chunk(0, id="call_1", name="WritePlanTool_begin",
                                         arguments=json.dumps({
                                             "intent": "the guide", "target_file": path,
                                             "operation": "create"})),
                         finish_chunk("tool_calls")])
    responses = [begin_call,
                 stream(_gateway_cut(lines(path, 1, 200) + "Line 201 of")),
                 # the cut line again, whole, as the question asks
                 stream(_gateway_cut(lines(path, 201, 250) + "DONE")),
                 stream(text_stream("The guide is written."))]
    reporter = Capture()
    with SSEServer(responses) as server:
        model = OpenAICompatibleModel(model="test-model", base_url=server.base_url,
                                      api_key="k", max_retries=0)
        runtime = Runtime(model=model, plugins=make_plugin_manager(entrypoints=False, env={}),
                          workspace=tmp_path, clock=VirtualClock(), reporter=reporter)
        asyncio.run(runtime.handle(f"Write {path}."))
        runtime.close()
        bodies = [r.body for r in server.requests]
    assert (tmp_path / path).read_text() == lines(path, 1, 250)
    assert len(bodies) == 4  # begin, content, the question, report: no idle wait
    assert bodies[2]["messages"][-1]["content"].startswith(UNFINISHED)
    assert bodies[3]["messages"][-1]["content"].startswith(f"Created {path} (250 lines")


# -- 6. idle prompts are bounded ---------------------------------------------------------------


def test_6_a_model_that_never_says_done_is_asked_max_idle_prompts_times(run):
    ask = [{"wait_ms": 2000}, {"expect": "reply with DONE on its own line"}, say("")]
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        say("alpha\nbeta\n"),
        *ask, *ask, *ask,
        {"expect": "Created notes.md (2 lines, 11 B) (incomplete: no DONE after 3 idle "
                   "prompts)"},
        say("Sorry."),
        {"wait_ms": 60000},
    ])
    # an incomplete write fails the run, saying why
    assert played.result.errors == [
        f"the write of notes.md (session {played.result.sessions[0]['id'][:8]}) is "
        "incomplete: no DONE after 3 idle prompts"]
    assert played.text("notes.md") == "alpha\nbeta\n"
    assert [p for p in played.result.prompts if "reply with DONE" in p].__len__() == 3
    assert played.result.sessions[0]["status"] == "incomplete"
    assert "no DONE after 3 idle prompts: writing notes.md as incomplete (2 lines)" in \
        played.reporter.notices


def test_6_max_idle_prompts_is_a_setting(run):
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        say("alpha\n"),
        {"wait_ms": 2000}, {"expect": DONE_PROMPT}, say(""),
        {"expect": "(incomplete: no DONE after 1 idle prompts)"}, say("Sorry."),
    ], settings={"max_idle_prompts": 1})
    assert played.result.errors[0].endswith("is incomplete: no DONE after 1 idle prompts")
    assert played.result.sessions[0]["status"] == "incomplete"


def test_6_new_content_starts_the_count_again(run):
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        say("alpha\n"),
        {"wait_ms": 2000}, {"expect": DONE_PROMPT}, say(""),
        {"wait_ms": 2000}, {"expect": DONE_PROMPT},
        say("beta\n", finish_reason="length"),  # new content (cut off): the count is 0 again
        {"expect": CUT_PROMPT}, say(""),
        {"wait_ms": 2000}, {"expect": DONE_PROMPT}, say("DONE"),
        {"expect": "Created notes.md (2 lines"}, say("Written."),
    ], settings={"max_idle_prompts": 2})
    ok(played)
    assert played.text("notes.md") == "alpha\nbeta\n"
    assert played.result.sessions[0]["status"] == "written"


# -- 7. transport faults in `orion chat` -----------------------------------------------------


def chat(server: SSEServer, workspace: Path, lines_in: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    return subprocess.run(
        [sys.executable, "-m", "orion", "chat", "--base-url", server.base_url,
         "--model", "test-model", "--workspace", str(workspace)],
        input=lines_in, capture_output=True, text=True, timeout=120,
        env={**clean, "OPENAI_API_KEY": "k"})


@pytest.mark.slow
def test_7_a_connection_cut_mid_reply_is_continued_and_chat_goes_on(tmp_path):
    path = "notes.md"
    responses = [begin_write(path),
                 stream([text_chunk("alpha\nbeta\ngamma is the third l")], done=False,
                        cut=True),
                 # a continuation repeats the cut line; the repeat is dropped
                 stream(text_stream("gamma is the third letter\ndelta\nDONE")),
                 stream(text_stream("Written.")),
                 stream(text_stream("Still here."))]
    with SSEServer(responses) as server:
        proc = chat(server, tmp_path, "Write notes.md.\nAre you there?\n")
        bodies = [r.body for r in server.requests]
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / path).read_text() == "alpha\nbeta\ngamma is the third letter\ndelta\n"
    assert "the connection broke in the middle of the reply" in proc.stderr
    assert bodies[2]["messages"][-1]["content"].startswith(CUT_PROMPT)
    assert "Still here." in proc.stdout
    assert not list((tmp_path / ".orion" / "write_sessions").glob("*"))  # nothing orphaned


@pytest.mark.slow
def test_7_chat_survives_an_endpoint_error_with_one_line_and_keeps_the_conversation(tmp_path):
    # 503 four times: the SDK's own retries (3) are used up, the request fails.
    responses = [retryable(503, message="upstream unavailable")] * 4 + [
        stream(text_stream("Hello again."))]
    with SSEServer(responses) as server:
        proc = chat(server, tmp_path, "Hello?\nAnyone?\n")
        bodies = [r.body for r in server.requests]
    assert proc.returncode == 0, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "HTTP 503" in errors[0] and "upstream unavailable" in errors[0]
    assert "the conversation is kept" in errors[0]
    assert "Hello again." in proc.stdout
    users = [m["content"] for m in bodies[-1]["messages"] if m["role"] == "user"]
    assert users == ["Hello?", "Anyone?"]  # the conversation was kept


@pytest.mark.slow
def test_7_max_tokens_and_temperature_come_from_orion_yaml(tmp_path):
    (tmp_path / "orion.yaml").write_text(textwrap.dedent("""\
        model:
          max_tokens: 512
          temperature: 0.3
        """))
    with SSEServer([stream(text_stream("ok"))]) as server:
        proc = chat(server, tmp_path, "hi\n")
        body = server.requests[0].body
    assert proc.returncode == 0, proc.stderr
    assert body["max_tokens"] == 512 and body["temperature"] == 0.3


def test_2_narration_is_taken_back_from_the_journal_on_disk_too(run):
    # 60 lines of narration: more than flush_lines (50), so part of it had reached content.txt
    # before the tool call showed what it was. It is truncated away on disk as in memory.
    narration = "".join(f"Thinking aloud, step {n}.\n" for n in range(60))
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        {"model": {"text": narration, "tool_calls": [
            {"name": "read_file", "arguments": {"path": "README.md"}}]}},
        say("alpha\n"),
    ], files={"README.md": "readme\n"})
    ok(played)
    [session] = (played.workspace / ".orion" / "write_sessions").iterdir()
    assert (session / "content.txt").read_bytes() == b"alpha\n"
    assert json.loads((session / "state.json").read_text())["lines"] == 1


def test_7_a_bad_max_tokens_in_orion_yaml_is_reported_with_its_position(tmp_path):
    from orion.config import load_config
    from orion.errors import ConfigError

    (tmp_path / "orion.yaml").write_text("model:\n  model: m\n  max_tokens: 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, env={})
    assert "orion.yaml:3:" in str(info.value) and "max_tokens" in str(info.value)


@pytest.mark.slow
def test_3_in_orion_chat_a_question_typed_mid_session_is_answered_after_the_write(tmp_path):
    # The idle timer is set far away: only the user's lines drive this conversation.
    (tmp_path / "orion.yaml").write_text("settings:\n  write_session:\n    idle_ms: 600000\n")
    responses = [begin_write("notes.md"),
                 stream(text_stream("alpha\nbeta\n")),       # a pause, no DONE
                 stream(text_stream("gamma\n")),              # answers the prompt: content
                 stream(text_stream("DONE")),
                 stream(text_stream("The notes are written; Paris is the capital."))]
    with SSEServer(responses) as server:
        proc = chat(server, tmp_path, "Write notes.md.\nWhat is the capital of France?\n"
                                      "Finish the notes, please.\n")
        bodies = [r.body for r in server.requests]
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "notes.md").read_text() == "alpha\nbeta\ngamma\n"
    assert proc.stderr.count("your message is held") == 2
    assert bodies[2]["messages"][-1]["content"].startswith(DONE_PROMPT)  # asked at once
    assert bodies[3]["messages"][-1]["content"].startswith(DONE_PROMPT)
    last = bodies[4]["messages"]
    assert last[-3]["content"].startswith("Created notes.md (3 lines")
    assert [m["content"] for m in last[-2:]] == ["What is the capital of France?",
                                                 "Finish the notes, please."]
    assert "Paris is the capital" in proc.stdout


def test_3_reset_keeps_the_held_messages_with_the_session_and_says_so(run):
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        say("alpha\n"),
        {"user": "Is it raining?"},
        {"expect": DONE_PROMPT}, say(""),
        {"user": "/reset"},
        {"user": "Hello."}, say("Hello!"),
    ])
    ok(played)
    assert any("1 message(s) you typed meanwhile are kept with it and sent once it is "
               "continued with --continue" in n for n in played.reporter.notices)
    assert not any(m["content"] == "Is it raining?" for m in played.sent(4))
    [journal] = (played.state_dir / "write_sessions").iterdir()
    assert json.loads((journal / "state.json").read_text())["held"] == ["Is it raining?"]


def test_3_the_idle_timer_does_not_ask_again_while_the_model_answers(tmp_path):
    # In real time a model may take longer than idle_ms to answer the prompt a user's
    # message caused (a slow first token): the timer must not put a second prompt in.
    from orion.testing.world import World

    world = World(tmp_path, plugins=make_plugin_manager(entrypoints=False, env={}))
    try:
        world.say("Write notes.md.")
        world.reply(tool_calls=[{"name": "WritePlanTool_begin", "arguments": {
            "intent": "notes", "target_file": "notes.md", "operation": "create"}}])
        world.reply(text="alpha\n")
        world.say("Is it raining?")  # held; the model is asked at once and thinks
        [asked] = world.reporter.prompts
        assert asked.startswith(DONE_PROMPT)
        world.advance(10_000)  # while the request waits for its reply
        assert world.reporter.prompts == [asked]
        world.reply(text="DONE")
        assert (world.workspace / "notes.md").read_text() == "alpha\n"
        assert world.reporter.prompts[1:] and world.reporter.prompts[1].startswith(
            "Created notes.md")
        assert [p for p in world.reporter.prompts if DONE_PROMPT in p] == [asked]
    finally:
        world.close()


def test_7_an_endpoint_error_on_the_idle_prompt_is_one_notice_and_the_session_stays(tmp_path):
    # In real time the idle prompt is sent from a timer, where no caller awaits the request:
    # its endpoint error must still reach the user, and the session must stay open.
    from orion.clock import RealClock

    (tmp_path / "orion.yaml").write_text("settings:\n  write_session:\n    idle_ms: 20\n")
    responses = [begin_write("notes.md"), stream(text_stream("alpha\n")),
                 retryable(400, message="the gateway is restarting")]
    reporter = Capture()

    async def go() -> None:
        with SSEServer(responses) as server:
            model = OpenAICompatibleModel(model="m", base_url=server.base_url, api_key="k",
                                          max_retries=0)
            runtime = Runtime(model=model,
                              plugins=make_plugin_manager(entrypoints=False, env={}),
                              workspace=tmp_path, clock=RealClock(), reporter=reporter)
            await runtime.handle("Write notes.md.")
            for _ in range(500):  # until the timer's request has failed
                if any(n.startswith("error:") for n in reporter.notices):
                    break
                await asyncio.sleep(0.01)
            from orion.write_session.manager import manager_for
            assert manager_for(runtime).active is not None
            runtime.close()

    asyncio.run(go())
    [error] = [n for n in reporter.notices if n.startswith("error:")]
    assert "the gateway is restarting" in error
