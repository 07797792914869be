"""The scripted model: chunking, tool calls, finish reasons, expectations, exhaustion and
desynchronization, delays, and the log of served requests. Real scripts, no mocks."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from orion.models.base import ModelError, ModelRequest, ScriptError
from orion.models.events import Finish, ReasoningDelta, TextDelta, ToolCall, Usage
from orion.models.script import Script, load_script
from orion.models.scripted import ExpectationFailed, ScriptDesync, ScriptedModel, ServedRequest

ROOT = Path(__file__).resolve().parent.parent


def script_of(text: str) -> Script:
    return load_script("t.yaml", text=textwrap.dedent(text))


def request(number: int = 1, newest: str | None = None) -> ModelRequest:
    return ModelRequest(messages=[{"role": "user", "content": "hi"}], number=number,
                        newest_orion_message=newest)


def play(model: ScriptedModel, number: int = 1, newest: str | None = None) -> list:
    async def collect():
        return [event async for event in model.stream(request(number, newest))]
    return asyncio.run(collect())


def reply(yaml_reply: str, number: int = 1) -> list:
    """The events of a one-entry script whose model entry is ``yaml_reply`` (flow mapping)."""
    return play(ScriptedModel(script_of(f"conversation:\n  - model: {yaml_reply}\n")), number)


def texts(events: list) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


def test_it_is_a_model_named_scripted():
    model = ScriptedModel(script_of("conversation: [{model: {text: a}}]\n"))
    assert model.name == "scripted" == ScriptedModel.name
    assert model.cursor.position == 0


# -- chunking ------------------------------------------------------------------------------


def test_text_is_cut_every_chunk_size_characters():
    events = reply('{text: "abcdefghij", chunk_size: 4}')
    assert events == [TextDelta("abcd"), TextDelta("efgh"), TextDelta("ij"),
                      Finish("stop", "stop")]


def test_default_chunk_size_is_16_and_an_exact_multiple_leaves_no_empty_chunk():
    text = "0123456789abcdef" * 2
    assert texts(reply(json.dumps({"text": text}))) == [text[:16], text[16:]]
    text = "x" * 17
    assert texts(reply(json.dumps({"text": text}))) == ["x" * 16, "x"]


def test_unicode_text_is_cut_by_characters_and_reassembles_exactly():
    text = "héllo 👋 世界 — naïve café\n🙂🙂🙂"
    chunks = texts(reply(json.dumps({"text": text, "chunk_size": 3}, ensure_ascii=False)))
    assert "".join(chunks) == text
    assert all(len(c) == 3 for c in chunks[:-1]) and 1 <= len(chunks[-1]) <= 3
    assert chunks[:3] == ["hél", "lo ", "👋 世"]


def test_chunk_size_larger_than_the_text_gives_one_chunk_and_empty_text_none():
    assert texts(reply('{text: "short", chunk_size: 100}')) == ["short"]
    assert reply('{text: ""}') == [Finish("stop", "stop")]


def test_explicit_chunks_are_sent_verbatim_including_empty_ones():
    events = reply('{chunks: ["...", "rest\\n", "", "DO", "NE\\n"]}')
    assert texts(events) == ["...", "rest\n", "", "DO", "NE\n"]
    assert events[-1] == Finish("stop", "stop")


def test_reasoning_streams_before_the_text_in_its_own_events():
    events = reply('{reasoning: "think hard", text: "answer", chunk_size: 5}')
    assert events == [ReasoningDelta("think"), ReasoningDelta(" hard"),
                      TextDelta("answe"), TextDelta("r"), Finish("stop", "stop")]


# -- tool calls ----------------------------------------------------------------------------


def test_tool_call_with_dict_arguments_is_sent_as_json_with_a_default_id():
    args = {"intent": "operator guide", "target_file": "docs/guide.md", "operation": "create"}
    events = reply(json.dumps({"tool_calls": [{"name": "WritePlanTool_begin",
                                               "arguments": args}]}), number=4)
    assert events == [ToolCall("call_4_1", "WritePlanTool_begin", json.dumps(args)),
                      Finish("tool_calls", "tool_calls")]
    assert json.loads(events[0].arguments) == args


def test_string_arguments_are_sent_verbatim_even_when_not_valid_json():
    events = reply("""{tool_calls: [
        {name: a, arguments: '{"text": "unterminated'},
        {name: b, arguments: '{"ok": true}'},
        {name: c, arguments: ''}]}""", number=2)
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert calls == [ToolCall("call_2_1", "a", '{"text": "unterminated'),
                     ToolCall("call_2_2", "b", '{"ok": true}'),
                     ToolCall("call_2_3", "c", "")]


def test_missing_arguments_are_an_empty_object_and_explicit_ids_are_kept():
    events = reply('{tool_calls: [{name: t, id: my_call}, {name: u}]}', number=3)
    assert [e for e in events if isinstance(e, ToolCall)] == [
        ToolCall("my_call", "t", "{}"), ToolCall("call_3_2", "u", "{}")]


def test_text_then_tool_calls_then_usage_then_finish():
    events = reply('{text: "ok", tool_calls: [{name: t, arguments: {x: 1}}], '
                   'usage: {prompt_tokens: 100, completion_tokens: 7}}')
    assert events == [TextDelta("ok"), ToolCall("call_1_1", "t", '{"x": 1}'),
                      Usage(100, 7, 107), Finish("tool_calls", "tool_calls")]


def test_usage_total_can_be_given():
    events = reply('{text: a, usage: {prompt_tokens: 1, completion_tokens: 2, total_tokens: 9}}')
    assert Usage(1, 2, 9) in events


# -- finish reasons ------------------------------------------------------------------------


@pytest.mark.parametrize(("entry", "finish"), [
    ('{text: a}', Finish("stop", "stop")),
    ('{tool_calls: [{name: t}]}', Finish("tool_calls", "tool_calls")),
    ('{text: a, tool_calls: [{name: t}], finish_reason: stop}', Finish("tool_calls", "stop")),
    ('{text: a, finish_reason: length}', Finish("truncated", "length")),
    ('{text: a, finish_reason: insufficient_system_resource}',
     Finish("truncated", "insufficient_system_resource")),
    ('{text: a, finish_reason: made_up_reason}', Finish("truncated", "made_up_reason")),
    ('{text: a, finish_reason: null}', Finish("truncated", None)),
    ('{tool_calls: [{name: t}], finish_reason: length}', Finish("truncated", "length")),
], ids=["default stop", "default tool_calls", "stop with tool calls", "length", "resource",
        "unknown", "no reason", "truncated tool calls"])
def test_finish_reasons(entry, finish):
    events = reply(entry)
    assert events[-1] == finish
    assert sum(isinstance(e, Finish) for e in events) == 1
    assert events[-1].truncated == (finish.reason == "truncated")


# -- expectations --------------------------------------------------------------------------

EXPECTING = """\
    conversation:
      - model: {text: "first"}
      - expect: "Continue"
      - expect: "where you stopped"
      - model: {text: "second"}
    """


def test_expect_passes_case_insensitively_and_consumes_every_expect_before_the_reply():
    model = ScriptedModel(script_of(EXPECTING))
    assert texts(play(model, 1)) == ["first"]
    events = play(model, 2, "Please CONTINUE exactly WHERE YOU STOPPED.")
    assert texts(events) == ["second"]
    assert model.cursor.done
    assert model.log == [ServedRequest(1, 1, 2, ()), ServedRequest(2, 4, 5, (2, 3))]


def test_expect_failure_shows_the_expected_text_beside_the_whole_actual_message():
    model = ScriptedModel(script_of(EXPECTING))
    play(model, 1)
    actual = "The content stopped early.\nPlease continue."
    with pytest.raises(ExpectationFailed) as info:
        play(model, 2, actual)
    error = info.value
    assert isinstance(error, ScriptError) and isinstance(error, ModelError)
    assert str(error) == (
        "entry 3 (line 4): expected the newest message Orion added to contain "
        "'where you stopped' (request 2); it was: 'The content stopped early.\\nPlease "
        "continue.'")
    assert (error.expected, error.actual, error.request) == ("where you stopped", actual, 2)
    assert error.entry.index == 3


def test_expect_failure_when_orion_added_no_message():
    model = ScriptedModel(script_of("conversation:\n  - expect: continue\n  - model: {text: a}\n"))
    with pytest.raises(ExpectationFailed) as info:
        play(model, 1, None)
    assert str(info.value).startswith(
        "entry 1 (line 2): expected the newest message Orion added to contain 'continue' "
        "(request 1); Orion added no message to this request")
    assert info.value.actual is None and info.value.expected == "continue"


def test_a_long_actual_message_is_shown_whole():
    model = ScriptedModel(script_of("conversation:\n  - expect: zzz\n  - model: {text: a}\n"))
    actual = "word " * 500
    with pytest.raises(ExpectationFailed) as info:
        play(model, 1, actual)
    assert repr(actual) in str(info.value)


# -- exhaustion and desynchronization -----------------------------------------------------


def test_exhausted_script_names_the_request():
    model = ScriptedModel(script_of("conversation:\n  - model: {text: a}\n"
                                    "  - model: {text: b}\n"))
    play(model, 1)
    play(model, 2)
    with pytest.raises(ScriptDesync) as info:
        play(model, 3)
    assert str(info.value).startswith("script exhausted at request 3")
    assert isinstance(info.value, ScriptError)
    assert (info.value.request, info.value.entry) == (3, None)


def test_exhaustion_after_passing_expectations_still_says_exhausted():
    model = ScriptedModel(script_of("conversation:\n  - expect: ok\n"))
    with pytest.raises(ScriptError, match=r"^script exhausted at request 1\b"):
        play(model, 1, "ok")


def test_a_request_where_the_script_has_a_user_line_is_a_desync():
    script = script_of("""\
        conversation:
          - user: "write it"
          - model: {text: "done"}
          - user: "/plan off"
        """)
    cursor = script.cursor()
    model = ScriptedModel(cursor)
    assert cursor.next().kind == "user"  # the runner
    play(model, 1)
    with pytest.raises(ScriptDesync) as info:
        play(model, 2)
    message = str(info.value)
    assert message.startswith("request 2 came but the next entry, entry 3 (line 4), is a user "
                              "line ('/plan off'), not a model reply: the script and the "
                              "conversation disagree")
    assert info.value.entry is script.entries[2] and info.value.request == 2
    assert cursor.peek() is script.entries[2]  # left for the runner to report


def test_a_request_where_the_script_waits_is_a_desync():
    model = ScriptedModel(script_of("conversation:\n  - wait_ms: 2500\n  - model: {text: a}\n"))
    with pytest.raises(ScriptDesync, match=r"^request 1 came but the next entry, entry 1 "
                                           r"\(line 2\), is a wait \(wait_ms: 2500\)"):
        play(model, 1)


# -- sharing the cursor with a runner ------------------------------------------------------


def test_runner_and_model_play_a_script_in_order():
    """A minimal runner: it takes user and wait entries; each model request takes the rest."""
    script = script_of("""\
        conversation:
          - user: "Please echo 'hi'."
          - model:
              tool_calls: [{name: echo, arguments: {text: hi}}]
          - expect: hi
          - model: {text: "The echo tool said: hi"}
        """)
    cursor = script.cursor()
    model = ScriptedModel(cursor)
    transcript = []
    number = 0
    while (entry := cursor.peek()) is not None:
        assert entry.kind == "user"
        transcript.append(("user", cursor.next().user))
        newest = None
        while True:  # the turn: requests until the model answers without tool calls
            number += 1
            events = play(model, number, newest)
            calls = [e for e in events if isinstance(e, ToolCall)]
            transcript.append(("model", "".join(texts(events)), [c.name for c in calls]))
            if not calls:
                break
            newest = json.loads(calls[0].arguments)["text"]  # the echo tool's result
    assert transcript == [("user", "Please echo 'hi'."), ("model", "", ["echo"]),
                          ("model", "The echo tool said: hi", [])]
    assert [(s.request, s.entry, s.expects) for s in model.log] == [(1, 2, ()), (2, 4, (3,))]


def test_the_model_can_be_built_from_a_script():
    model = ScriptedModel(load_script(ROOT / "examples" / "hello.yaml"))
    model.cursor.next()
    assert "".join(texts(play(model, 1)))


def test_the_python_example_in_the_docs_runs():
    text = (ROOT / "docs" / "scripts.md").read_text(encoding="utf-8")
    (code,) = [block.split("```")[0] for block in text.split("```python\n")[1:]]
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    assert "ToolCall(id='call_1_1', name='read_file'" in proc.stdout
    assert "TextDelta(text='The release is o')" in proc.stdout


# -- delays --------------------------------------------------------------------------------


def test_no_delay_means_no_sleeping_at_all(monkeypatch):
    slept = []

    async def record(seconds, *args, **kwargs):
        slept.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", record)
    reply('{reasoning: "rr", text: "abcdefgh", chunk_size: 1, tool_calls: [{name: t}]}')
    assert slept == []


def test_chunk_delay_sleeps_between_pieces_not_before_the_first(monkeypatch):
    slept = []
    real_sleep = asyncio.sleep

    async def record(seconds, *args, **kwargs):
        slept.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", record)
    events = reply('{text: "abcdef", chunk_size: 2, chunk_delay_ms: 250, '
                   'tool_calls: [{name: t}]}')
    assert texts(events) == ["ab", "cd", "ef"]
    assert slept == [0.25, 0.25, 0.25]  # before "cd", "ef" and the tool call


def test_chunk_delay_is_real_time():
    started = time.monotonic()
    events = reply('{chunks: ["a", "b", "c"], chunk_delay_ms: 40}')
    elapsed = time.monotonic() - started
    assert texts(events) == ["a", "b", "c"]
    assert elapsed >= 0.075


def test_a_consumer_sees_chunks_before_the_stream_ends():
    """Chunks arrive one by one (a crash test can kill the process mid-stream)."""
    model = ScriptedModel(script_of('conversation:\n  - model: {chunks: ["a", "b"], '
                                    'chunk_delay_ms: 30}\n'))

    async def first_then_time():
        stream = model.stream(request())
        start = time.monotonic()
        first = await anext(stream)
        at_first = time.monotonic() - start
        rest = [e async for e in stream]
        return first, at_first, rest

    first, at_first, rest = asyncio.run(first_then_time())
    assert first == TextDelta("a") and at_first < 0.025
    assert rest == [TextDelta("b"), Finish("stop", "stop")]
