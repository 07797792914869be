"""What real OpenAI-compatible servers sent (tests/data/real_server/, saved by the real-server
lane), replayed through the real ``openai`` SDK against the loopback server: the requests
Orion makes are ones every server accepts and caches, and every end of a reply is named."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from sse_server import (SSEServer, begin_write, error, finish_chunk, stream, text_chunk,
                        text_stream, tool_call_chunk)

from orion.clock import VirtualClock
from orion.hooks.manager import make_plugin_manager
from orion.models.base import ContextOverflowError, ModelError, ModelRequest
from orion.models.events import ToolCall
from orion.models.openai_compat import OpenAICompatibleModel
from orion.runtime.runtime import Runtime
from write_harness import Capture

DATA = Path(__file__).resolve().parent / "data" / "real_server"


def replay(name: str):
    """The response a real server gave, saved as data, for the loopback server to play."""
    saved = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    if saved["status"] != 200:
        return error(saved["status"], json.loads(saved["lines"][0]))
    return stream([f"{line}\n\n" for line in saved["lines"]], done=False)


def model_for(server: SSEServer, **settings) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(model="smollm2", base_url=server.base_url, api_key="k",
                                 max_retries=0, cut_backoff=0.0, **settings)


def events_of(name: str) -> list:
    async def collect(model: OpenAICompatibleModel) -> list:
        request = ModelRequest(messages=[{"role": "user", "content": "Read notes.md"}])
        return [event async for event in model.stream(request)]
    with SSEServer([replay(name)]) as server:
        return asyncio.run(collect(model_for(server)))


class Chat:
    """A runtime with the built-in plugins, talking to the loopback server."""

    def __init__(self, workspace: Path, responses: list, **settings) -> None:
        self.reporter = Capture()
        self.server = SSEServer(responses).start()
        self.model = model_for(self.server, **settings)
        self.runtime = Runtime(model=self.model,
                               plugins=make_plugin_manager(entrypoints=False, env={}),
                               workspace=workspace, clock=VirtualClock(), reporter=self.reporter)

    def say(self, line: str) -> None:
        asyncio.run(self.runtime.handle(line))

    def bodies(self) -> list[dict]:
        return [r.body for r in self.server.requests]

    def close(self) -> None:
        self.runtime.close()
        self.server.close()


@pytest.fixture
def chat(tmp_path):
    opened: list[Chat] = []

    def open_chat(responses: list, **settings) -> Chat:
        opened.append(Chat(tmp_path, responses, **settings))
        return opened[-1]
    yield open_chat
    for each in opened:
        each.close()


# -- one tool call per call id ---------------------------------------------------------------


def test_a_call_sent_both_as_tool_calls_and_function_call_is_one_call():
    calls = [e for e in events_of("llama_cpp_python_tool_call") if isinstance(e, ToolCall)]
    assert [(c.name, c.arguments) for c in calls] == [("read_file", '{"path": "notes.md"}')]
    assert calls[0].id.startswith("call__0_read_file_")


def test_the_legacy_function_call_alone_is_still_read():
    lines = ['data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
             '"choices":[{"index":0,"delta":{"function_call":{"name":"read_file",'
             '"arguments":"{\\"path\\": \\"a\\"}"}},"finish_reason":"function_call"}]}\n\n']

    async def collect(model: OpenAICompatibleModel) -> list:
        request = ModelRequest(messages=[{"role": "user", "content": "Read a"}])
        return [e async for e in model.stream(request)]
    with SSEServer([stream(lines)]) as server:
        events = asyncio.run(collect(model_for(server)))
    assert [e for e in events if isinstance(e, ToolCall)] == [
        ToolCall("call_1_1", "read_file", '{"path": "a"}')]


# -- content "" beside tool calls --------------------------------------------------------------


def test_content_null_beside_tool_calls_is_what_llama_cpp_python_refuses():
    """What the next test keeps Orion from sending: the server's answer, as saved."""
    saved = json.loads((DATA / "llama_cpp_python_null_content.json").read_text())
    assert saved["status"] == 500 and "validation errors" in saved["lines"][0]


def test_a_message_with_tool_calls_is_sent_back_with_empty_content_not_null(chat, tmp_path):
    (tmp_path / "notes.md").write_text("hello\n")
    played = chat([replay("llama_cpp_python_tool_call"), stream(text_stream("It says hello."))])
    played.say("What is in notes.md?")
    [assistant] = [m for m in played.bodies()[1]["messages"] if m.get("tool_calls")]
    assert assistant["content"] == ""
    tool_results = [m for m in played.bodies()[1]["messages"] if m["role"] == "tool"]
    assert len(tool_results) == 1 and "hello" in tool_results[0]["content"]


# -- the context window ------------------------------------------------------------------------


def test_a_request_past_the_context_window_is_a_named_error_and_the_window_is_learned():
    with SSEServer([replay("context_overflow")]) as server:
        model = model_for(server)

        async def ask() -> None:
            async for _ in model.stream(ModelRequest(messages=[{"role": "user",
                                                                "content": "word " * 3000}])):
                pass
        with pytest.raises(ContextOverflowError) as raised:
            asyncio.run(ask())
    message = str(raised.value)
    assert "does not fit the model's context window of 2,048 tokens" in message
    assert "(the request needs 3,031)" in message and "/compact" in message
    assert "model.context_window" in message
    assert model.context_window == 2048 and raised.value.window == 2048


def test_an_answer_with_nothing_in_it_is_a_named_error():
    with pytest.raises(ModelError) as raised:
        events_of("llama_cpp_python_overflow")
    message = str(raised.value)
    assert "answered but sent nothing" in message and "context window" in message
    assert "/compact" in message


def test_compaction_keeps_the_requests_inside_a_known_context_window(chat):
    long = "word " * 400  # about 500 tokens a message, by the four-characters estimate
    played = chat([stream(text_stream("One.")), stream(text_stream("Two.")), stream(text_stream("Three."))],
                  context_window=2048, max_tokens=256)
    for line in ("first " + long, "second " + long, "third " + long):
        played.say(line)
    sent = [[m["content"][:6] for m in body["messages"] if m["role"] == "user"]
            for body in played.bodies()]
    assert sent[1] == ["first ", "second"]
    assert sent[2] == ["second", "third "], sent  # the oldest turn went to fit the window
    assert any("compacted the conversation" in n for n in played.reporter.notices)


def test_compact_drops_the_oldest_turns_on_request(chat):
    played = chat([stream(text_stream("One.")), stream(text_stream("Two."))])
    played.say("first")
    played.say("second")
    assert played.runtime.conversation.messages[0].content == "first"
    asyncio.run(played.runtime.handle("/compact"))
    assert [m.content for m in played.runtime.conversation.messages] == ["second", "Two."]


# -- every end of a reply is named -------------------------------------------------------------


def test_a_chat_reply_cut_by_max_tokens_says_so(chat):
    played = chat([replay("length_cut")])
    played.say("Say hi")
    assert any("cut by the output limit (finish reason length)" in n and "max_tokens" in n
               for n in played.reporter.notices), played.reporter.notices


# -- the stable prefix -------------------------------------------------------------------------


def test_a_write_session_keeps_the_system_message_and_the_history_byte_identical(chat,
                                                                                 tmp_path):
    played = chat([begin_write("notes.md"),
                   stream([text_chunk("one\ntwo\n"), finish_chunk("length")]),
                   stream([text_chunk("three\nDONE\n"), finish_chunk("stop")]),
                   stream(text_stream("Written."))])
    played.say("Write notes.md.")
    assert (tmp_path / "notes.md").read_text() == "one\ntwo\nthree\n"
    bodies = played.bodies()
    in_session = bodies[1:3]
    assert all(body["messages"][0] == bodies[0]["messages"][0] for body in bodies)
    for before, after in zip(in_session, in_session[1:]):
        kept = before["messages"][:-1]  # the last one carries the session's state
        assert after["messages"][:len(kept)] == kept
    note = in_session[1]["messages"][-1]["content"]
    assert "A write session is open: notes.md" in note and "2 lines saved" in note
    assert "write session" not in bodies[0]["messages"][0]["content"]


# -- what a model makes of a file name ---------------------------------------------------------


def test_a_file_name_copied_with_its_comma_is_refused_with_the_path_it_meant(chat, tmp_path):
    played = chat([begin_write("notes.md, "), stream(text_stream("Sorry."))])
    played.say("Write notes.md.")
    [result] = [m["content"] for m in played.bodies()[1]["messages"] if m["role"] == "tool"]
    assert "target_file 'notes.md, ' has a trailing comma" in result, result
    assert "give the path alone, e.g. 'notes.md'" in result
    assert list(tmp_path.iterdir()) == [tmp_path / ".orion"] or not (tmp_path / "notes.md, ").exists()


def test_a_server_that_closes_the_connection_before_any_of_the_reply_is_named():
    """llama-cpp-python's server died on a forced call this way: the answer's headers, then the
    connection closed."""
    async def ask(model: OpenAICompatibleModel) -> None:
        async for _ in model.stream(ModelRequest(messages=[{"role": "user", "content": "Hi"}])):
            pass
    with SSEServer([stream([], done=False, cut=True)]) as server:
        model = model_for(server)
        with pytest.raises(ModelError) as raised:
            asyncio.run(ask(model))
    message = str(raised.value)
    assert "closed the connection before sending any of the reply" in message, message
    assert "may have crashed" in message and "after 0 chunks" not in message


def test_the_same_reply_to_orion_s_prompt_again_is_kept_once(chat):
    played = chat([stream(text_stream("Hello.")), stream(text_stream("Hello.")),
                   stream(text_stream("Fine."))])
    played.say("Hi")
    for _ in range(2):
        played.runtime.inject("Are you still there?")
        asyncio.run(played.runtime.pump())
    assert [m.content for m in played.runtime.conversation.messages] == [
        "Hi", "Hello.", "Are you still there?", "Are you still there?", "Fine."]
    assert any("the model sent the same reply again (6 characters)" in n
               for n in played.reporter.notices), played.reporter.notices


def test_plan_work_keeps_the_system_message_byte_identical_as_the_plan_changes(chat):
    draft = json.dumps({"plan_markdown": "# Release\n\n1. Tag it.\n"})
    played = chat([stream([tool_call_chunk(0, id="call_1", name="plan_set_content",
                                           arguments=draft), finish_chunk("tool_calls")]),
                   stream(text_stream("Stored."))])
    asyncio.run(played.runtime.handle("/plan on Release"))
    played.say("Draft the plan.")
    first, second = played.bodies()
    assert first["messages"][0] == second["messages"][0]
    assert "Plan work is active" not in first["messages"][0]["content"]
    assert "COLLECTING, revision 0" in first["messages"][-1]["content"]
    assert "READY, revision 1" in second["messages"][-1]["content"]
    assert second["messages"][1] == {"role": "user", "content": "Draft the plan."}
