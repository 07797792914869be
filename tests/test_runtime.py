"""The runtime end to end: scripted conversations through the real pipeline, tools, gating,
lifecycle prompts and the `orion run` command with its exit codes."""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from orion import hookimpl
from orion.cli import cli
from orion.clock import VirtualClock
from orion.models.script import load_script
from orion.models.scripted import ScriptedModel
from orion.hooks.manager import make_plugin_manager
from orion.runtime.runner import play
from orion.runtime.runtime import Runtime
from orion.tools.gating import Decision


def script_file(tmp_path: Path, text: str, name: str = "script.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def run_script(tmp_path, text, pm=None):
    workspace = tmp_path / "ws"
    script = load_script(script_file(tmp_path, text))
    pm = pm or make_plugin_manager(entrypoints=False, env={})
    return asyncio.run(play(script, workspace=workspace, plugins=pm)), workspace


class DenyReads:
    """A policy plugin: no reading of secrets."""

    def __init__(self):
        self.seen = []

    @hookimpl
    def authorize_tool_call(self, call, request):
        self.seen.append(call.name)
        if call.name == "read_file" and "secret" in call.arguments.get("path", ""):
            return Decision.deny("secrets are off limits")
        return None


def test_a_tool_round_trip_returns_the_result_to_the_model(tmp_path):
    result, _ = run_script(tmp_path, """\
        files: {notes.md: "release on Friday\\n"}
        conversation:
          - user: When is the release?
          - model:
              tool_calls: [{name: read_file, arguments: {path: notes.md}}]
          - expect: release on Friday
          - model: {text: Friday.}
        """)
    assert result.ok, result.errors


def test_a_symbolic_link_loop_is_a_tool_error_the_model_can_act_on(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "loop").symlink_to("loop")  # a real loop: ELOOP for every lookup
    (workspace / "notes.md").write_text("release on Friday\n")
    pm = make_plugin_manager(entrypoints=False, env={})
    result, _ = run_script(tmp_path, """\
        conversation:
          - user: Read loop.
          - model:
              tool_calls: [{name: read_file, arguments: {path: loop}}]
          - expect: "'loop' cannot be resolved: it is a symbolic link that leads back to itself"
          - model:
              tool_calls: [{name: list_files, arguments: {}}]
          - expect: '{"name": "loop", "type": "link"}'
          - model: {text: It is a loop.}
        """, pm)
    assert result.ok, result.errors
    assert pm.failures == []  # refused on purpose, not a plugin failure


def test_a_denied_tool_call_changes_nothing_and_tells_the_model_why(tmp_path):
    pm = make_plugin_manager(entrypoints=False, env={})
    policy = DenyReads()
    pm.register(policy, "policy")
    result, workspace = run_script(tmp_path, """\
        files: {secret.txt: "hunter2\\n"}
        conversation:
          - user: Read the secret.
          - model:
              tool_calls: [{name: read_file, arguments: {path: secret.txt}}]
          - expect: "denied by policy: secrets are off limits"
          - model: {text: I may not.}
        """, pm)
    assert result.ok, result.errors
    assert policy.seen == ["read_file"]


def test_invalid_tool_arguments_reach_the_model_with_the_parse_position(tmp_path):
    result, _ = run_script(tmp_path, """\
        conversation:
          - user: List the files.
          - model:
              tool_calls: [{name: list_files, arguments: '{"path": "."'}]
          - expect: "line 1"
          - model: {text: Sorry.}
        """)
    assert result.ok, result.errors


def test_a_tool_that_is_not_advertised_is_refused(tmp_path):
    class HideReads:
        @hookimpl
        def gate_tools(self, tools, request):
            return ["read_file"]

    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(HideReads(), "hide-reads")
    script = load_script(script_file(tmp_path, """\
        conversation:
          - model:
              tool_calls: [{name: read_file, arguments: {path: notes.md}}]
          - expect: unknown tool
          - model: {text: I cannot.}
        """))
    model = ScriptedModel(script.cursor())
    runtime = Runtime(model=model, plugins=pm, workspace=tmp_path, clock=VirtualClock())
    asyncio.run(runtime.handle("Read notes.md."))
    advertised = [t["function"]["name"] for t in model.log[0].sent.tools]
    assert "read_file" not in advertised and "list_files" in advertised


class WaitingLifecycle:
    """A test command that starts a bare write_session lifecycle and leaves it waiting for DONE
    (its idle timer armed), without a write session around it."""

    @hookimpl
    def register_slash_commands(self, register):
        def begin(runtime, args):
            session = runtime.start_lifecycle("write_session")
            session.trigger("begin")
            session.trigger("message_end")
            return "session waiting"
        register("begin-write", begin, "test: start a write_session lifecycle")


def test_a_lifecycle_timer_prompt_reaches_the_model_after_virtual_time(tmp_path):
    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(WaitingLifecycle(), "start-write")
    result, _ = run_script(tmp_path, """\
        conversation:
          - user: /begin-write
          - wait_ms: 1999
          - wait_ms: 1
          - expect: reply with DONE on its own line
          - model: {text: "DONE"}
        """, pm)
    assert result.ok, result.errors
    [prompt] = result.prompts
    assert prompt.startswith(
        "If you're finished, reply with DONE on its own line; otherwise continue.")


def test_script_settings_override_the_lifecycle_timer(tmp_path):
    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(WaitingLifecycle(), "start-write")
    result, _ = run_script(tmp_path, """\
        settings: {write_session: {idle_ms: 500}}
        conversation:
          - user: /begin-write
          - wait_ms: 500
          - expect: DONE
          - model: {text: "DONE"}
        """, pm)
    assert result.ok, result.errors


def test_a_turn_that_never_ends_hits_the_request_limit(tmp_path):
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "orion.yaml").write_text("runtime: {max_requests_per_turn: 2}\n")
    call = "  - model:\n      tool_calls: [{name: list_files, arguments: {}}]\n"
    result, _ = run_script(tmp_path, "conversation:\n  - user: go\n" + call * 3)
    assert not result.ok
    assert "more than 2 model requests" in result.errors[0]


def test_reasoning_content_is_sent_back_on_the_next_request(tmp_path):
    script = load_script(script_file(tmp_path, """\
        conversation:
          - model:
              reasoning: "think first"
              tool_calls: [{name: list_files, arguments: {}}]
          - model: {text: done}
        """))
    model = ScriptedModel(script.cursor())
    runtime = Runtime(model=model, plugins=make_plugin_manager(entrypoints=False, env={}),
                      workspace=tmp_path, clock=VirtualClock())
    asyncio.run(runtime.handle("hi"))
    assistant = [m for m in model.log[1].sent.messages if m["role"] == "assistant"]
    assert assistant[0]["reasoning_content"] == "think first"


# -- orion run: output and exit codes ----------------------------------------------------------

def invoke(*args):
    return CliRunner().invoke(cli, list(args))


def test_orion_run_json_reports_files_prompts_and_errors(tmp_path):
    workspace = tmp_path / "ws"
    path = script_file(tmp_path, """\
        files: {a.md: "x\\n"}
        conversation:
          - user: hello
          - model: {text: hi}
        """)
    result = invoke("run", str(path), "--workspace", str(workspace), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data == {"ok": True, "files": [], "sessions": [], "prompts": [], "plan": None,
                    "errors": []}


def test_orion_run_fails_with_1_showing_expected_beside_actual(tmp_path):
    path = script_file(tmp_path, """\
        conversation:
          - user: list
          - model:
              tool_calls: [{name: list_files, arguments: {}}]
          - expect: "no such text"
          - model: {text: x}
        """)
    result = invoke("run", str(path), "--workspace", str(tmp_path / "ws"), "--json")
    assert result.exit_code == 1
    error = json.loads(result.stdout)["errors"][0]
    assert "'no such text'" in error and '"entries"' in error


def test_orion_run_reports_an_exhausted_script(tmp_path):
    path = script_file(tmp_path, """\
        conversation:
          - user: list
          - model:
              tool_calls: [{name: list_files, arguments: {}}]
        """)
    result = invoke("run", str(path), "--workspace", str(tmp_path / "ws"))
    assert result.exit_code == 1
    assert "script exhausted at request 2" in result.output


def test_orion_run_reports_a_model_entry_nobody_asked_for(tmp_path):
    path = script_file(tmp_path, """\
        conversation:
          - model: {text: unprompted}
        """)
    result = invoke("run", str(path), "--workspace", str(tmp_path / "ws"), "--json")
    assert result.exit_code == 1
    assert "entry 1 (line 2)" in json.loads(result.stdout)["errors"][0]


def test_orion_run_of_an_invalid_script_is_a_usage_error(tmp_path):
    path = script_file(tmp_path, """\
        conversation:
          - user: hi
            model: {text: both}
        """)
    result = invoke("run", str(path), "--workspace", str(tmp_path / "ws"))
    assert result.exit_code == 2
    assert f"{path}:3:5: entry 1: has both 'user' and 'model'" in result.output


def test_orion_run_never_overwrites_a_users_file_with_seed_content(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.md").write_text("my work\n")
    path = script_file(tmp_path, """\
        files: {a.md: "seed\\n"}
        conversation:
          - user: hi
          - model: {text: hi}
        """)
    result = invoke("run", str(path), "--workspace", str(workspace))
    assert result.exit_code == 2
    assert (workspace / "a.md").read_text() == "my work\n"


@pytest.mark.parametrize("example", sorted((Path(__file__).parents[1] / "examples").glob("*.yaml")))
def test_every_example_script_plays(example, tmp_path):
    result = invoke("run", str(example), "--workspace", str(tmp_path / "ws"), "--json")
    assert result.exit_code == 0, result.output


def test_a_failing_slash_command_is_a_command_error_and_a_recorded_failure(tmp_path):
    class Broken:
        @hookimpl
        def register_slash_commands(self, register):
            def explode(runtime, args):
                raise ValueError("no such plan")
            register("explode", explode, "")

    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(Broken(), "broken")
    runtime = Runtime(model=ScriptedModel(load_script(script_file(
        tmp_path, "conversation: [{user: x}]\n")).cursor()), plugins=pm, workspace=tmp_path)
    from orion.runtime.runtime import CommandError
    with pytest.raises(CommandError, match=r"/explode failed: plugin 'broken' failed in slash "
                                           r"command /explode \(.*test_runtime.py:\d+\): "
                                           r"ValueError: no such plan; the conversation is kept"):
        asyncio.run(runtime.handle("/explode"))
    assert [(f.plugin, f.hook) for f in pm.failures] == [("broken", "slash command /explode")]


def test_reset_starts_a_new_conversation_with_a_new_id(tmp_path):
    runtime = Runtime(model=ScriptedModel(load_script(script_file(
        tmp_path, "conversation: [{user: x}]\n")).cursor()),
        plugins=make_plugin_manager(entrypoints=False, env={}), workspace=tmp_path)
    runtime.conversation.add_user("hello")
    old = runtime.conversation.id
    asyncio.run(runtime.handle("/reset"))
    assert runtime.conversation.messages == [] and runtime.conversation.id != old


def test_the_sessions_command_lists_this_conversations_write_sessions(tmp_path):
    script = load_script(script_file(tmp_path, """\
        conversation:
          - model:
              tool_calls:
                - name: WritePlanTool_begin
                  arguments: {intent: note, target_file: a.md, operation: create}
          - model: {text: "one line\\nDONE\\n"}
          - model: {text: written}
        """))
    runtime = Runtime(model=ScriptedModel(script.cursor()),
                      plugins=make_plugin_manager(entrypoints=False, env={}),
                      workspace=tmp_path / "ws", clock=VirtualClock())
    asyncio.run(runtime.handle("Write a.md."))
    reply = asyncio.run(runtime.handle("/sessions"))
    assert reply.startswith(f"{runtime.services['write_sessions'].sessions[0].id[:8]}  a.md  "
                            "written  1 lines")


def sinks_see(tmp_path, reply: str) -> tuple[list[str], list[str]]:
    """What a text sink that keeps nothing, and one that takes deltas saying "take", see of
    ``reply``; and the conversation after it."""
    script = load_script(script_file(tmp_path, f"""
        conversation:
          - model: {reply}
    """))
    runtime = Runtime(model=ScriptedModel(script), workspace=tmp_path, clock=VirtualClock(),
                      plugins=make_plugin_manager(entrypoints=False, env={}), env={})
    seen: list[str] = []
    runtime.text_sinks.append(lambda text: seen.append(text) or text)  # truthy, not True
    runtime.text_sinks.append(lambda text: "take" in text)
    asyncio.run(runtime.handle("hello"))
    runtime.close()
    return seen, [m.content for m in runtime.conversation.messages]


def test_a_text_sink_that_returns_true_takes_the_text_over_and_any_other_value_does_not(
        tmp_path):
    # Deltas that trickle (the loop goes round between them) reach a sink one by one; only a
    # sink that returns True (a write session does, for content its journal keeps) takes one
    # out of the turn's text and the history.
    seen, messages = sinks_see(
        tmp_path, '{text: "keep this, take that", chunk_size: 10, chunk_delay_ms: 1}')
    assert seen == ["keep this,", " take that"]
    assert messages == ["hello", "keep this,"]


def test_deltas_that_arrive_in_a_burst_reach_the_sinks_joined(tmp_path):
    # Three deltas before the loop goes round: one call of each sink, with the three.
    seen, messages = sinks_see(tmp_path, '{text: "keep this, take that", chunk_size: 7}')
    assert seen == ["keep this, take that"]
    assert messages == ["hello", ""]  # taken whole: the sink gives the message its content


def test_a_scripts_explicit_chunks_arrive_one_by_one_as_separate_reads_do(tmp_path):
    # No delay, yet the loop goes round between explicit chunks: a script that splits a
    # reply on purpose (a DONE cut in two) is seen split.
    seen, messages = sinks_see(tmp_path, '{chunks: ["keep this,", " take that"]}')
    assert seen == ["keep this,", " take that"]
    assert messages == ["hello", "keep this,"]


def test_a_burst_is_handed_on_every_4096_characters(tmp_path):
    seen, _ = sinks_see(tmp_path, f'{{text: "{"x" * 10_000}", chunk_size: 1000}}')
    assert [len(text) for text in seen] == [5000, 5000]


def test_a_scripted_reply_read_from_a_file_is_written_by_a_write_session(tmp_path):
    content = "".join(f"line {i}: café — part of a long reply\n" for i in range(5000))
    (tmp_path / "reply.md").write_text(content + "DONE\n", encoding="utf-8")
    result, workspace = run_script(tmp_path, """
        conversation:
          - user: Write docs/big.md.
          - model:
              tool_calls:
                - name: WritePlanTool_begin
                  arguments: {intent: big, target_file: docs/big.md, operation: create}
          - model: {text_file: reply.md, chunk_size: 4096}
          - expect: Created docs/big.md (5000 lines
          - model: {text: Written.}
    """)
    assert result.ok, result.errors
    assert (workspace / "docs" / "big.md").read_text(encoding="utf-8") == content
