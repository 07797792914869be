"""Thirteen servers' stream shapes, through the real ``openai`` SDK against the loopback SSE
server (tests/sse_server.py), in five cases each: nothing they stream is written wrongly or
lost.

1. a whole write, the DONE line split across chunks;
2. a cut-off (``length``) in the middle of a line, continued: the cut line sent again replaces
   it;
3. the server's own error event after part of the content: a cut-off, named to the user with
   the file and the session, shown to the model as it sent it, continued, never glued;
4. the whole file and its DONE, then an error event: the file is finished, nothing added;
5. reasoning that holds a DONE line (a reasoning field, or a leading ``<think>`` block for
   servers without one), then the content.

Plus the same for ``content_filter`` and a leading ``<think>`` block, and the adapter's own
view of each error shape (the event that ends the stream, the error before any content).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from sse_server import SERVERS, SSEServer, ServerShape, begin_write, chunk, stream

from orion.clock import VirtualClock
from orion.models.base import ModelError, ModelRequest
from orion.models.events import Finish, TextDelta
from orion.models.openai_compat import OpenAICompatibleModel
from orion.hooks.manager import make_plugin_manager
from orion.runtime.runtime import Runtime
from write_harness import Capture

CUT_PROMPT = "Your output was cut off."
SHAPES = list(SERVERS.values())
IDS = [shape.name for shape in SHAPES]
FUNC = "def smallest(a, b):\n    \"\"\"The smaller of a and b.\"\"\"\n"


class Played:
    def __init__(self, workspace: Path, bodies: list, reporter: Capture) -> None:
        self.workspace, self.bodies, self.reporter = workspace, bodies, reporter

    def text(self, relative: str) -> str:
        return (self.workspace / relative).read_text(encoding="utf-8")

    def last_message(self, request: int) -> str:
        return self.bodies[request]["messages"][-1]["content"]


def play(tmp_path: Path, responses: list, line: str = "Write the file.") -> Played:
    reporter = Capture()
    with SSEServer(responses) as server:
        model = OpenAICompatibleModel(model="test-model", base_url=server.base_url,
                                      api_key="k", max_retries=0, cut_backoff=0.0)
        runtime = Runtime(model=model, plugins=make_plugin_manager(entrypoints=False, env={}),
                          workspace=tmp_path, clock=VirtualClock(), reporter=reporter)
        try:
            asyncio.run(runtime.handle(line))
        finally:
            runtime.close()
        bodies = [r.body for r in server.requests]
    return Played(tmp_path, bodies, reporter)


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_a_whole_write_with_the_done_line_split(tmp_path, shape: ServerShape):
    played = play(tmp_path, [begin_write("f.py"),
                             shape.reply(FUNC[:20], FUNC[20:], "    return min(a, b)\nDO",
                                         "NE\n"),
                             shape.reply("Written.")])
    assert played.text("f.py") == FUNC + "    return min(a, b)\n"
    assert played.last_message(2).startswith("Created f.py (3 lines")


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_a_cut_off_in_the_middle_of_a_line_is_continued_never_glued(tmp_path, shape):
    played = play(tmp_path, [begin_write("f.py"),
                             shape.reply(FUNC, "    return min", finish="length"),
                             shape.reply("    return min(a, b)\nDONE\n"),
                             shape.reply("Written.")])
    assert played.text("f.py") == FUNC + "    return min(a, b)\n"
    assert played.last_message(2).startswith(CUT_PROMPT)


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_an_error_event_after_part_of_the_content_is_a_named_cut_off(tmp_path, shape):
    played = play(tmp_path, [begin_write("f.py"),
                             shape.failed(FUNC, "    return min",
                                          message="the GPU worker restarted"),
                             shape.reply("    return min(a, b)\nDONE\n"),
                             shape.reply("Written.")])
    assert played.text("f.py") == FUNC + "    return min(a, b)\n"
    assert played.last_message(2).startswith(CUT_PROMPT)
    # the model sees what it sent, the half line included
    sent = [m["content"] for m in played.bodies[2]["messages"] if m["role"] == "assistant"]
    assert sent[-1] == FUNC + "    return min"
    [notice] = [n for n in played.reporter.notices if "reported an error" in n]
    assert "the GPU worker restarted" in notice and "writing f.py" in notice
    assert "write session " in notice and "taken as cut off" in notice


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_done_before_an_error_event_finishes_the_file(tmp_path, shape):
    played = play(tmp_path, [begin_write("f.py"),
                             shape.failed(FUNC, "    return min(a, b)\n", "DONE\n"),
                             shape.reply("Written.")])
    assert played.text("f.py") == FUNC + "    return min(a, b)\n"
    assert len(played.bodies) == 3  # begin, the content, the report: nothing continued
    assert played.last_message(2).startswith("Created f.py (3 lines")


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_reasoning_that_holds_a_done_line_is_never_content(tmp_path, shape):
    played = play(tmp_path, [begin_write("f.py"),
                             shape.reply(FUNC, "    return min(a, b)\nDONE\n",
                                         reasoning="I end the file with a line\nDONE\n"),
                             shape.reply("Written.")])
    assert played.text("f.py") == FUNC + "    return min(a, b)\n"


@pytest.mark.slow
def test_a_content_filter_cut_off_is_named_with_the_file_and_the_session(tmp_path):
    shape = SERVERS["azure"]
    played = play(tmp_path, [begin_write("notes.txt"),
                             shape.reply("alpha\nbeta\nthe third li", finish="content_filter"),
                             shape.reply("the third line\nDONE\n"),
                             shape.reply("Written.")])
    assert played.text("notes.txt") == "alpha\nbeta\nthe third line\n"
    [notice] = [n for n in played.reporter.notices if "content filter" in n]
    assert "writing notes.txt: what arrived is kept (2 lines), taken as cut off" in notice


def test_a_leading_think_block_split_anywhere_is_reasoning(tmp_path):
    shape = SERVERS["vllm"]
    think = "<think>\nThe file ends with\nDONE\n</think>\n\nalpha\nDONE\n"
    pieces = [think[i:i + 3] for i in range(0, len(think), 3)]
    played = play(tmp_path, [begin_write("notes.txt"), stream(
        [chunk({"role": "assistant", "content": ""}),
         *[chunk({"content": p}) for p in pieces], chunk({}, "stop")]),
        shape.reply("Written.")])
    assert played.text("notes.txt") == "alpha\n"
    [reasoning] = [m.get("reasoning_content") for m in played.bodies[2]["messages"]
                   if m["role"] == "assistant" and m.get("reasoning_content")]
    assert reasoning == "\nThe file ends with\nDONE\n"


# -- the adapter's view -----------------------------------------------------------------------


def events(server: SSEServer) -> list:
    model = OpenAICompatibleModel(model="m", base_url=server.base_url, api_key="k",
                                  max_retries=0, cut_backoff=0.0)

    async def go() -> list:
        request = ModelRequest(messages=[{"role": "user", "content": "hi"}], tools=[],
                               number=1)
        return [event async for event in model.stream(request)]
    return asyncio.run(go())


@pytest.mark.parametrize("shape", [SERVERS[n] for n in ("openai", "openrouter", "vllm",
                                                         "llamacpp", "ollama")],
                         ids=["openai", "openrouter", "vllm", "llamacpp", "ollama"])
def test_each_error_shape_ends_the_stream_with_the_servers_words(shape):
    with SSEServer([shape.failed("Hel", message="overloaded, try again")]) as server:
        got = events(server)
    assert got[0] == TextDelta("Hel")
    assert got[-1] == Finish("truncated", "error", error="overloaded, try again")


@pytest.mark.parametrize("shape", [SERVERS[n] for n in ("openai", "openrouter", "vllm",
                                                         "llamacpp", "ollama")],
                         ids=["openai", "openrouter", "vllm", "llamacpp", "ollama"])
def test_an_error_shape_before_any_content_is_an_endpoint_error(shape):
    with SSEServer([shape.failed(message="no capacity")]) as server:
        with pytest.raises(ModelError, match="no capacity"):
            events(server)


def test_data_that_is_not_json_after_content_is_a_cut_off():
    with SSEServer([stream([chunk({"content": "Hel"}), "data: {not json\n\n"],
                           done=False)]) as server:
        got = events(server)
    assert got[0] == TextDelta("Hel")
    assert got[-1].raw == "error" and "not JSON" in got[-1].error


def test_without_a_session_an_error_event_is_one_line_for_the_user(tmp_path):
    shape = SERVERS["openai"]
    played = play(tmp_path, [shape.failed("Hello, I was about to", message="overloaded")],
                  line="Hello.")
    assert any(n.startswith("error: the endpoint reported an error in the middle of the "
                            "reply (overloaded)") for n in played.reporter.notices)


def test_the_error_shapes_are_what_the_servers_send():
    """The shapes above, as bytes: what the SDK alone would drop (llama.cpp's line, Ollama's
    bare JSON) is exactly what those servers write."""
    llama = SERVERS["llamacpp"].failed("x", message="m").items[-1]
    assert isinstance(llama, str) and llama.startswith("error: {") and llama.endswith("\n\n")
    ollama = SERVERS["ollama"].failed("x", message="m").items[-1]
    assert isinstance(ollama, str) and json.loads(ollama)["error"]["type"] == "api_error"
