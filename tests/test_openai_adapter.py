"""The OpenAI-compatible adapter, through the real ``openai`` SDK against a loopback server.

Nothing is mocked: every test scripts :class:`SSEServer` (real HTTP, chunked server-sent
events on 127.0.0.1) and checks the complete list of normalized events the adapter produced,
and what the server received.
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from sse_server import (
    KEEP_ALIVE,
    OMIT,
    SSEServer,
    chunk,
    drop,
    error,
    finish_chunk,
    reasoning_chunk,
    retryable,
    stream,
    text_chunk,
    text_stream,
    tool_call_chunk,
    tool_call_fragment,
    tool_calls_chunk,
    usage_chunk,
)
from sse_server import sse_server  # noqa: F401  (the fixture)

from orion.models.base import ModelAuthError, ModelConnectionError, ModelError, ModelRequest
from orion.models.events import (CONNECTION_LOST, Finish, ReasoningDelta, TextDelta, ToolCall,
                                 Usage)
from orion.models.openai_compat import OpenAICompatibleModel

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
TOOLS = [
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                       "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "list_dir", "description": "List a directory",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
]


@pytest.fixture(autouse=True)
def _no_openai_env(monkeypatch):
    """The developer's own OpenAI settings must not leak into the tests."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
                 "OPENAI_ADMIN_KEY", "OPENAI_CUSTOM_HEADERS"):
        monkeypatch.delenv(name, raising=False)


def make_model(server: SSEServer, **kwargs) -> OpenAICompatibleModel:
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("api_key", "sk-test")
    return OpenAICompatibleModel(model="test-model", base_url=server.base_url, **kwargs)


def run(model: OpenAICompatibleModel, request: ModelRequest | None = None, *,
        seen: list | None = None) -> list:
    """All events of one stream (appended to ``seen`` as they arrive, if given)."""
    request = request or ModelRequest(messages=MESSAGES, tools=TOOLS)
    events = [] if seen is None else seen

    async def go():
        async for event in model.stream(request):
            events.append(event)
        return events

    return asyncio.run(go())


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def split(text: str, size: int = 3) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


# -- text, reasoning, usage ------------------------------------------------------------------


def test_plain_text_with_keep_alive_comments(sse_server):
    sse_server.enqueue(stream([KEEP_ALIVE, chunk({"role": "assistant", "content": ""}),
                               KEEP_ALIVE, text_chunk("Hel"), KEEP_ALIVE, text_chunk("lo!"),
                               finish_chunk("stop"), KEEP_ALIVE]))
    events = run(make_model(sse_server), ModelRequest(messages=MESSAGES))
    assert events == [TextDelta("Hel"), TextDelta("lo!"), Finish("stop", "stop")]

    [request] = sse_server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["model"] == "test-model"
    assert request.body["messages"] == MESSAGES
    assert request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert "tools" not in request.body  # no tools: the field is left out, not sent empty


def test_the_request_carries_the_tools_and_stream_true(sse_server):
    sse_server.enqueue(stream(text_stream("ok")))
    run(make_model(sse_server), ModelRequest(messages=MESSAGES, tools=TOOLS))
    [request] = sse_server.requests
    assert request.body["tools"] == TOOLS
    assert request.body["stream"] is True
    assert request.headers["content-type"] == "application/json"


def test_a_long_history_arrives_as_the_conversation_holds_it(sse_server):
    # Every kind of message a conversation holds, many times over: tool calls with no text,
    # their results, reasoning sent back, non-ASCII text, an injected prompt.
    history = [{"role": "system", "content": "Be brief. — ok"}]
    for i in range(300):
        history += [
            {"role": "user", "content": f"Read notes {i}, s'il vous plaît ✓"},
            {"role": "assistant", "content": None, "reasoning_content": "Read it first.",
             "tool_calls": [{"id": f"c{i}", "type": "function", "function": {
                 "name": "read_file", "arguments": json.dumps({"path": f"n{i}.md"})}}]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": "line 1\nline 2\t€"},
            {"role": "assistant", "content": f"Done {i}."},
        ]
    sse_server.enqueue(stream(text_stream("ok")))
    run(make_model(sse_server), ModelRequest(messages=history, tools=TOOLS))
    [request] = sse_server.requests
    assert request.body["messages"] == history
    assert request.body["tools"] == TOOLS
    assert request.body["model"] == "test-model"


def test_reasoning_content_becomes_reasoning_deltas(sse_server):
    sse_server.enqueue(stream([reasoning_chunk("The user "), reasoning_chunk("greets."),
                               chunk({"content": "Hello", "reasoning_content": None}),
                               finish_chunk("stop")]))
    assert run(make_model(sse_server)) == [
        ReasoningDelta("The user "), ReasoningDelta("greets."), TextDelta("Hello"),
        Finish("stop", "stop")]


def test_usage_only_final_chunk_gives_one_usage_before_finish(sse_server):
    sse_server.enqueue(stream(text_stream("Hi", " there", usage=(12, 3))))
    events = run(make_model(sse_server))
    assert events == [TextDelta("Hi"), TextDelta(" there"), Usage(12, 3, 15),
                      Finish("stop", "stop")]


# -- tool calls ------------------------------------------------------------------------------


def test_parallel_tool_call_fragments_are_reassembled_by_index(sse_server):
    args_a = '{"path": "notes/a.txt"}'
    args_b = '{"path": "src"}'
    pieces_a, pieces_b = split(args_a), split(args_b)
    items: list = [chunk({"role": "assistant", "content": None}),
                   tool_call_chunk(0, id="call_A", name="read_file", arguments=""),
                   tool_call_chunk(1, id="call_B", name="list_dir", arguments="")]
    # Interleave the argument fragments of the two calls, sometimes two in one chunk.
    for i in range(max(len(pieces_a), len(pieces_b))):
        fragments = []
        if i < len(pieces_a):
            fragments.append(tool_call_fragment(0, arguments=pieces_a[i]))
        if i < len(pieces_b):
            fragments.append(tool_call_fragment(1, arguments=pieces_b[i]))
        if i % 2:
            items.append(tool_calls_chunk(*fragments))
        else:
            items.extend(tool_calls_chunk(f) for f in fragments)
    items += [finish_chunk("tool_calls"), usage_chunk(40, 20)]
    sse_server.enqueue(stream(items))

    assert run(make_model(sse_server)) == [
        ToolCall("call_A", "read_file", args_a), ToolCall("call_B", "list_dir", args_b),
        Usage(40, 20, 60), Finish("tool_calls", "tool_calls")]


def test_tool_calls_come_after_the_text_of_the_message(sse_server):
    sse_server.enqueue(stream([
        text_chunk("Let me look."),
        tool_call_chunk(0, id="c1", name="list_dir", arguments='{"path": '),
        text_chunk(" One moment."),
        tool_call_chunk(0, arguments='"."}'),
        finish_chunk("tool_calls")]))
    assert run(make_model(sse_server)) == [
        TextDelta("Let me look."), TextDelta(" One moment."),
        ToolCall("c1", "list_dir", '{"path": "."}'), Finish("tool_calls", "tool_calls")]


def test_ollama_style_index_always_zero_with_distinct_ids(sse_server):
    sse_server.enqueue(stream([
        tool_call_chunk(0, id="call_x1", name="read_file", arguments='{"path": "a"}'),
        tool_call_chunk(0, id="call_x2", name="read_file", arguments='{"path": "b"}'),
        tool_call_chunk(0, id="call_x3", name="list_dir", arguments='{"path": '),
        tool_call_chunk(0, arguments='"."}'),  # no id: continues the newest call at index 0
        finish_chunk("tool_calls")]))
    assert run(make_model(sse_server)) == [
        ToolCall("call_x1", "read_file", '{"path": "a"}'),
        ToolCall("call_x2", "read_file", '{"path": "b"}'),
        ToolCall("call_x3", "list_dir", '{"path": "."}'),
        Finish("tool_calls", "tool_calls")]


def test_missing_index_falls_back_to_id(sse_server):
    sse_server.enqueue(stream([
        tool_call_chunk(OMIT, id="g1", name="read_file", arguments='{"pa'),
        tool_call_chunk(OMIT, arguments='th": "a"}'),
        tool_call_chunk(OMIT, id="g2", name="read_file", arguments='{"path": "b"}'),
        # The same id again (some proxies repeat it on every fragment) continues the call.
        tool_call_chunk(OMIT, id="g2", arguments=""),
        finish_chunk("tool_calls")]))
    assert run(make_model(sse_server)) == [
        ToolCall("g1", "read_file", '{"path": "a"}'),
        ToolCall("g2", "read_file", '{"path": "b"}'),
        Finish("tool_calls", "tool_calls")]


def test_calls_without_ids_get_generated_ones(sse_server):
    sse_server.enqueue(stream([
        tool_call_chunk(0, name="read_file", arguments='{"path": "a"}'),
        tool_call_chunk(1, name="list_dir", arguments="{}"),
        # Neither id nor index, but another function: a complete call of its own.
        tool_call_chunk(OMIT, name="read_file", arguments='{"path": "c"}'),
        finish_chunk("tool_calls")]))
    events = run(make_model(sse_server), ModelRequest(messages=MESSAGES, tools=TOOLS, number=4))
    assert events == [
        ToolCall("call_4_1", "read_file", '{"path": "a"}'),
        ToolCall("call_4_2", "list_dir", "{}"),
        ToolCall("call_4_3", "read_file", '{"path": "c"}'),
        Finish("tool_calls", "tool_calls")]


def test_arguments_are_kept_raw_even_when_not_json(sse_server):
    sse_server.enqueue(stream([
        tool_call_chunk(0, id="c1", name="read_file", arguments='{"path": "a'),
        finish_chunk("length")]))
    assert run(make_model(sse_server)) == [
        ToolCall("c1", "read_file", '{"path": "a'), Finish("truncated", "length")]


def test_stop_is_promoted_to_tool_calls(sse_server):
    sse_server.enqueue(stream([
        tool_call_chunk(0, id="c1", name="list_dir", arguments="{}"),
        finish_chunk("stop")]))
    assert run(make_model(sse_server)) == [
        ToolCall("c1", "list_dir", "{}"), Finish("tool_calls", "stop")]


# -- finish reasons --------------------------------------------------------------------------


@pytest.mark.parametrize("reason", ["length", "insufficient_system_resource", "content_filter",
                                    "eos_token_budget_exhausted"])
def test_unclean_finish_reasons_are_truncation(sse_server, reason):
    sse_server.enqueue(stream([text_chunk("Once upon"), finish_chunk(reason),
                               usage_chunk(5, 2)]))
    assert run(make_model(sse_server)) == [
        TextDelta("Once upon"), Usage(5, 2, 7), Finish("truncated", reason)]


def test_a_stream_without_finish_reason_is_truncation(sse_server):
    sse_server.enqueue(stream([text_chunk("Once upon"), text_chunk(" a time")]))
    events = run(make_model(sse_server))
    assert events == [TextDelta("Once upon"), TextDelta(" a time"), Finish("truncated", None)]
    assert events[-1].truncated


def test_a_response_that_ends_cleanly_without_done_is_truncation(sse_server):
    # No [DONE], no finish reason, and the server ends the body by closing the connection.
    sse_server.enqueue(stream([text_chunk("Once upon")], done=False, chunked=False))
    assert run(make_model(sse_server)) == [TextDelta("Once upon"), Finish("truncated", None)]


def test_a_stream_cut_mid_way_keeps_what_arrived_and_ends_as_a_cut_off(sse_server):
    sse_server.enqueue(stream([text_chunk("Once upon"),
                               tool_call_chunk(0, id="c1", name="read_file", arguments="{")],
                              done=False, cut=True))
    model = make_model(sse_server, max_retries=3)
    # No half tool call; the finish says why, and the runtime treats it as cut off.
    assert run(model) == [TextDelta("Once upon"), Finish("truncated", CONNECTION_LOST)]
    assert len(sse_server.requests) == 1  # a partial response is never replayed


def test_the_request_after_a_cut_stream_waits_and_backs_off(sse_server, monkeypatch):
    cut = stream([text_chunk("Once")], done=False, cut=True)
    sse_server.enqueue(cut, cut, stream(text_stream("upon a time")), stream(text_stream("!")))
    model = make_model(sse_server, cut_backoff=0.01)
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds, *args):
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    first, second, third, fourth = run(model), run(model), run(model), run(model)
    assert first[-1] == second[-1] == Finish("truncated", CONNECTION_LOST)
    assert third == [TextDelta("upon a time"), Finish("stop", "stop")]
    assert fourth == [TextDelta("!"), Finish("stop", "stop")]
    # before the 2nd request 0.01 s, before the 3rd (two cuts in a row) 0.02 s, then none
    assert waits == [0.01, 0.02]


@pytest.mark.slow
def test_a_connection_dropped_before_the_first_byte_is_retried_by_the_sdk(sse_server):
    sse_server.enqueue(drop(), drop(), stream(text_stream("hello")))
    model = make_model(sse_server, max_retries=2)
    assert run(model) == [TextDelta("hello"), Finish("stop", "stop")]
    assert len(sse_server.requests) == 3


def test_a_cut_before_the_first_chunk_is_a_connection_error(sse_server):
    sse_server.enqueue(stream([], done=False, cut=True))
    with pytest.raises(ModelConnectionError, match="closed the connection before sending any of the reply"):
        run(make_model(sse_server))


def test_max_tokens_and_temperature_are_sent_when_set(sse_server):
    sse_server.enqueue(stream(text_stream("a")), stream(text_stream("b")))
    run(make_model(sse_server, max_tokens=256, temperature=0.2))
    run(make_model(sse_server))
    assert sse_server.requests[0].body["max_tokens"] == 256
    assert sse_server.requests[0].body["temperature"] == 0.2
    assert "max_tokens" not in sse_server.requests[1].body
    assert "temperature" not in sse_server.requests[1].body


def test_an_error_event_after_content_is_a_cut_off_with_the_servers_words(sse_server):
    sse_server.enqueue(stream([text_chunk("Hel"),
                               {"error": {"message": "upstream overloaded", "code": 503}}]))
    assert run(make_model(sse_server)) == [
        TextDelta("Hel"), Finish("truncated", "error", error="upstream overloaded")]


def test_an_error_event_before_any_content_is_a_model_error(sse_server):
    sse_server.enqueue(stream([chunk({"role": "assistant", "content": ""}),
                               {"error": {"message": "upstream overloaded", "code": 503}}]))
    with pytest.raises(ModelError, match="upstream overloaded") as info:
        run(make_model(sse_server))
    assert not isinstance(info.value, (ModelAuthError, ModelConnectionError))


# -- retries and errors ----------------------------------------------------------------------


def test_429_then_500_then_200_succeeds_with_the_default_retries(sse_server):
    sse_server.enqueue(retryable(429, message="slow down"), retryable(500),
                       stream(text_stream("finally")))
    model = OpenAICompatibleModel(model="test-model", base_url=sse_server.base_url,
                                  api_key="sk-test")  # default max_retries
    assert run(model) == [TextDelta("finally"), Finish("stop", "stop")]
    assert len(sse_server.requests) == 3
    assert [r.body for r in sse_server.requests] == [sse_server.requests[0].body] * 3
    assert [r.headers.get("x-stainless-retry-count") for r in sse_server.requests] == [
        "0", "1", "2"]


def test_retries_give_up_with_the_servers_message(sse_server):
    sse_server.enqueue(retryable(429, message="Rate limit reached for requests"),
                       retryable(429, message="Rate limit reached for requests"))
    with pytest.raises(ModelError) as info:
        run(make_model(sse_server, max_retries=1))
    message = str(info.value)
    assert "HTTP 429" in message and "Rate limit reached for requests" in message
    assert sse_server.base_url in message
    assert len(sse_server.requests) == 2


@pytest.mark.parametrize("status", [401, 403])
def test_a_rejected_key_is_an_auth_error(sse_server, status):
    sse_server.enqueue(error(status, message="Incorrect API key provided: sk-test."))
    with pytest.raises(ModelAuthError) as info:
        run(make_model(sse_server, max_retries=3))
    assert str(info.value) == (
        f"the endpoint at {sse_server.base_url} rejected the API key (HTTP {status}): "
        "Incorrect API key provided: sk-test.")
    assert len(sse_server.requests) == 1  # never retried


def test_other_4xx_is_a_model_error_with_the_servers_message(sse_server):
    sse_server.enqueue(error(400, message="messages[1].content must be a string"))
    with pytest.raises(ModelError) as info:
        run(make_model(sse_server, max_retries=3))
    assert type(info.value) is ModelError
    assert str(info.value) == (
        f"the endpoint at {sse_server.base_url} refused the request (HTTP 400): "
        "messages[1].content must be a string")
    assert len(sse_server.requests) == 1


def test_an_unknown_model_names_it(sse_server):
    sse_server.enqueue(error(404, {"error": "model 'test-model' not found"}))  # Ollama's shape
    with pytest.raises(ModelError) as info:
        run(make_model(sse_server))
    message = str(info.value)
    assert "model 'test-model' not found" in message and "'test-model'" in message
    assert sse_server.base_url in message


def test_a_closed_port_is_a_connection_error_naming_the_url():
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    model = OpenAICompatibleModel(model="m", base_url=base_url, api_key="k", max_retries=0)
    with pytest.raises(ModelConnectionError) as info:
        run(model)
    assert f"cannot connect to the model endpoint at {base_url}" in str(info.value)


# -- configuration ---------------------------------------------------------------------------


def test_a_missing_key_for_openai_is_a_clear_auth_error():
    with pytest.raises(ModelAuthError) as info:
        OpenAICompatibleModel(model="gpt-4o-mini")
    message = str(info.value)
    assert "OPENAI_API_KEY" in message and "`api_key_env`" in message
    assert "https://api.openai.com/v1" in message


def test_environment_variables_are_honoured(sse_server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", sse_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    sse_server.enqueue(stream(text_stream("env")))
    model = OpenAICompatibleModel(model="test-model", max_retries=0)
    assert model.base_url == sse_server.base_url
    assert model.name == "test-model"
    assert run(model) == [TextDelta("env"), Finish("stop", "stop")]
    assert sse_server.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_a_local_server_without_key_gets_a_placeholder(sse_server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", sse_server.base_url)
    sse_server.enqueue(stream(text_stream("ok")), error(401, message="key required"))
    model = OpenAICompatibleModel(model="test-model", max_retries=0)
    assert run(model) == [TextDelta("ok"), Finish("stop", "stop")]
    assert sse_server.requests[0].headers["authorization"] == "Bearer not-needed"
    # A server that does want a key gets an error that says none was configured.
    with pytest.raises(ModelAuthError, match="no API key is configured: set OPENAI_API_KEY"):
        run(model)


def test_a_supplied_client_is_used_and_left_open(sse_server):
    from openai import AsyncOpenAI

    sse_server.enqueue(stream(text_stream("one")), stream(text_stream("two")))

    async def go():
        client = AsyncOpenAI(base_url=sse_server.base_url, api_key="sk-own", max_retries=0)
        async with client:
            model = OpenAICompatibleModel(model="test-model", client=client)
            first = [e async for e in model.stream(ModelRequest(messages=MESSAGES))]
            second = [e async for e in model.stream(ModelRequest(messages=MESSAGES))]
            return model, first, second

    model, first, second = asyncio.run(go())
    assert model.base_url == sse_server.base_url
    assert first == [TextDelta("one"), Finish("stop", "stop")]
    assert second == [TextDelta("two"), Finish("stop", "stop")]
    assert sse_server.requests[1].headers["authorization"] == "Bearer sk-own"


def test_one_model_serves_successive_event_loops(sse_server):
    sse_server.enqueue(stream(text_stream("a")), stream(text_stream("b")))
    model = make_model(sse_server)

    async def once():
        return [e async for e in model.stream(ModelRequest(messages=MESSAGES))]

    assert asyncio.run(once()) == [TextDelta("a"), Finish("stop", "stop")]
    assert run(model) == [TextDelta("b"), Finish("stop", "stop")]


def test_a_consumer_may_stop_early(sse_server):
    sse_server.enqueue(stream(text_stream("a", "b", "c")), stream(text_stream("next")))
    model = make_model(sse_server)

    async def first_event_only():
        events = model.stream(ModelRequest(messages=MESSAGES))
        first = await anext(events)
        await events.aclose()  # what ``break`` in ``async for`` leads to
        return first

    assert asyncio.run(first_event_only()) == TextDelta("a")
    assert run(model) == [TextDelta("next"), Finish("stop", "stop")]


# -- the test server itself -------------------------------------------------------------------


def test_the_server_binds_loopback_only_and_records_requests():
    with SSEServer([stream(text_stream("x"))]) as server:
        assert server._httpd.server_address[0] == "127.0.0.1"
        run(make_model(server))
        with pytest.raises(ModelError, match="no scripted response left for request #2"):
            run(make_model(server))  # the script is exhausted: a clear 400, not a hang
    assert len(server.requests) == 2
    assert server.remaining == 0
    assert json.loads(json.dumps(server.requests[0].body))["messages"] == MESSAGES


def test_streams_in_a_session_share_one_connection_and_the_session_closes_it(sse_server):
    sse_server.enqueue(*[stream(text_stream(f"reply {n}")) for n in range(4)])
    model = make_model(sse_server)
    request = ModelRequest(messages=MESSAGES, tools=TOOLS)

    async def text() -> str:
        return "".join([e.text async for e in model.stream(request) if type(e) is TextDelta])

    async def go() -> list[str]:
        async with model.session():
            replies = [await text(), await text()]
        return [*replies, await text(), await text()]  # after it: a client per stream

    assert asyncio.run(go()) == [f"reply {n}" for n in range(4)]
    peers = [request.peer for request in sse_server.requests]
    assert peers[0] == peers[1]
    assert len({peers[1], peers[2], peers[3]}) == 3
