"""The content rules, round 3: what the model streams into a write session is decided by a
rule it was told, announced when it is kept out of the file, and reversible.

Each test plays a scripted conversation through the real runtime (``orion.runtime.runner.play``)
and the write session's real journal, set-aside parts and write.

- A ``<think>`` block at the start of a reply is reasoning: set aside as a part and announced,
  never dropped; a file that starts with a ``<think>`` element comes back whole with
  ``WritePlanTool_keep``.
- Only ``DONE`` from the first character of its line ends the content.
- A suspected restart is set aside, announced and reversible, never decided from three lines.
- A continuation that starts with the complete lines the request quoted resends them: they are
  set aside (announced, told, reversible), never written twice in silence.
- ``orion sessions show ID --part N`` prints a part as it arrived; ``orion run`` counts lines
  set aside; a refused keep does not show an exception name; a regex marker without
  ``marker_regex`` is told that the flag exists.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from orion.cli import cli
from write_harness import Played, begin, dump, make_runner, say, show, status

DONE_PROMPT = "If you're finished, reply with DONE on its own line; otherwise continue."
CUT_PROMPT = "Your output was cut off"


@pytest.fixture
def run(tmp_path, monkeypatch):
    play_script = make_runner(tmp_path, monkeypatch)

    def _run(conversation: list[dict], *, files: dict | None = None) -> Played:
        script: dict = {"conversation": conversation}
        if files:
            script["files"] = files
        return play_script(script)
    return _run


def keep(part: int) -> dict:
    return {"model": {"tool_calls": [{"name": "WritePlanTool_keep",
                                      "arguments": {"part": part}}]}}


# -- reasoning inside a write session -----------------------------------------------------------

THINK = "<think>\n  <step>Read the input.</step>\n</think>\n\n"
TEMPLATE = "<template>\n  <answer/>\n</template>\n"


def test_a_think_block_in_a_write_session_is_set_aside_and_announced_never_dropped(run):
    played = run([
        {"user": "Write the fixture."}, begin("fixture.xml"),
        say(THINK + TEMPLATE + "DONE\n"),
        {"expect": "Created fixture.xml (3 lines"},
        {"expect": "part 1 (4 lines, first line '<think>') reasoning"},
        say("Done."),
    ])
    assert played.result.ok, played.result.errors
    assert played.text("fixture.xml") == TEMPLATE
    assert status(played) == "written_with_set_aside"
    assert any("the reasoning at the start of the reply (4 lines, first line '<think>') was "
               "set aside, not written to fixture.xml (part 1)" in n
               for n in played.reporter.notices)
    # kept exactly as it arrived: the tags and the blank line after the block included
    assert show(played, "--part", "1") == THINK


def test_a_file_that_starts_with_a_think_element_comes_back_whole_with_keep(run):
    played = run([
        {"user": "Write the fixture."}, begin("fixture.xml"),
        say(THINK + TEMPLATE),  # no DONE yet: the idle prompt follows
        {"wait_ms": 2000}, {"expect": "taken for reasoning and set aside as part 1"},
        {"expect": "call WritePlanTool_keep with part 1"},
        keep(1),
        {"expect": "Part 1 (4 lines) is back in fixture.xml at line 1"},
        say("DONE"),
        {"expect": "Created fixture.xml (7 lines"}, say("Done."),
    ])
    assert played.result.ok, played.result.errors
    assert played.text("fixture.xml") == THINK + TEMPLATE
    assert status(played) == "written"


# -- only DONE at the start of its line ends the content -------------------------------------

ENUM = "enum class State {\n    RUNNING,\n    DONE\n};\n"


def test_an_indented_done_is_content_and_the_file_is_whole(run):
    played = run([
        {"user": "Write state.h."}, begin("state.h"),
        say(ENUM + "DONE\n"),
        {"expect": "Created state.h (4 lines"}, say("Done."),
    ])
    assert played.result.ok, played.result.errors
    assert played.text("state.h") == ENUM
    assert status(played) == "written"


# -- a suspected restart -----------------------------------------------------------------------

DOC_A = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n"
DOC_B = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"
GRID_TOP = "+--+--+\n|ab|cd|\n+--+--+\n|ef|gh|\n"
GRID_NEXT = "+--+--+\n|ab|cd|\n+--+--+\n|ij|kl|\n+--+--+\n"


@pytest.mark.parametrize("first,rest", [(DOC_A, DOC_B), (GRID_TOP, GRID_NEXT)],
                         ids=["multi-document yaml", "grid"])
def test_a_part_that_starts_as_the_file_did_is_not_a_restart(run, first, rest):
    played = run([
        {"user": "Write it."}, begin("out.txt"),
        say(first, finish_reason="length"), {"expect": CUT_PROMPT},
        say(rest + "DONE\n"),
        {"expect": "Created out.txt"}, say("Done."),
    ])
    assert played.result.ok, played.result.errors
    assert played.text("out.txt") == first + rest
    assert status(played) == "written"


LONG = "".join(f"Line {n} of the guide.\n" for n in range(1, 13))


def test_a_restart_is_set_aside_announced_and_put_back_with_keep(run):
    restart = "".join(f"Line {n} of the guide.\n" for n in range(1, 11))
    played = run([
        {"user": "Write the guide."}, begin("guide.md"),
        say(LONG, finish_reason="length"), {"expect": CUT_PROMPT},
        say(restart),  # the file's first ten lines again
        {"wait_ms": 2000},
        {"expect": "Your reply started guide.md over"},
        {"expect": "set aside as part 1, not added; 12 lines are saved"},
        keep(1),
        {"expect": "Part 1 (10 lines) is back in guide.md at line 13"},
        say("DONE"),
        {"expect": "Created guide.md (22 lines"}, say("Done."),
    ])
    assert played.result.ok, played.result.errors
    assert played.text("guide.md") == LONG + restart
    assert status(played) == "written"
    assert any("the reply that started guide.md over (10 lines, first line 'Line 1 of the "
               "guide.') was set aside" in n for n in played.reporter.notices)


def test_a_restart_not_put_back_is_written_without_it_and_not_incomplete(run):
    played = run([
        {"user": "Write the guide."}, begin("guide.md"),
        say(LONG, finish_reason="length"), {"expect": CUT_PROMPT},
        say(LONG + "DONE\n"),  # the whole file again
        {"wait_ms": 2000}, {"expect": "Your reply started guide.md over"},
        say("DONE"),
        {"expect": "Created guide.md (12 lines"}, {"expect": "12 lines set aside"},
        say("Done."),
    ])
    assert played.result.ok, played.result.errors
    assert played.text("guide.md") == LONG
    assert status(played) == "written_with_set_aside"
    assert show(played, "--part", "1") == LONG


# -- quoted lines sent again ---------------------------------------------------------------------

STEPS = "# Setup\n\n1. Clone the repository.\n2. Install the dependencies.\n"


def test_quoted_lines_sent_again_are_set_aside_never_written_twice_in_silence(run):
    played = run([
        {"user": "Write setup.md."}, begin("setup.md"),
        say(STEPS, finish_reason="length"),
        {"expect": "The last lines of setup.md received were"},
        {"expect": "quoted lines sent again at the start are set aside"},
        say("2. Install the dependencies.\n3. Run the tests.\nDONE\n"),
        {"expect": "Created setup.md (5 lines"},
        {"expect": "1 line set aside, not written: part 1 (1 line, first line '2. Install the "
                   "dependencies.') quoted lines sent again"},
        say("Done."),
    ])
    assert played.result.ok, played.result.errors
    assert played.text("setup.md") == STEPS + "3. Run the tests.\n"
    assert status(played) == "written_with_set_aside"
    assert any("the quoted lines the reply sent again (1 line, first line '2. Install the "
               "dependencies.') was set aside" in n for n in played.reporter.notices)
    assert show(played, "--part", "1") == "2. Install the dependencies.\n"


def test_identical_rows_set_aside_as_a_resend_are_put_back_with_keep(run):
    rows = "0,0,0,0\n" * 4
    played = run([
        {"user": "Write zeros.csv."}, begin("zeros.csv"),
        say("a,b,c,d\n" + rows, finish_reason="length"), {"expect": CUT_PROMPT},
        say(rows),  # the first three rows are the quoted ones, sent again
        {"wait_ms": 2000},
        {"expect": "Your reply started with lines the request quoted as saved (3 lines"},
        keep(1),
        {"expect": "Part 1 (3 lines) is back in zeros.csv at line 6"},
        say("DONE"),
        {"expect": "Created zeros.csv (9 lines"}, say("Done."),
    ])
    assert played.result.ok, played.result.errors
    assert played.text("zeros.csv") == "a,b,c,d\n" + rows + rows
    assert status(played) == "written"


def test_quoted_lines_sent_again_before_the_cut_line_are_set_aside(run):
    played = run([
        {"user": "Write f.py."}, begin("f.py"),
        say("def f(a, b):\n    x = a\n    return min", finish_reason="length"),
        {"expect": "start your reply with line 3 again"},
        say("    x = a\n    return min(a, b)\nDONE\n"),
        {"expect": "Created f.py (3 lines"}, say("Done."),
    ])
    assert played.result.ok, played.result.errors
    assert played.text("f.py") == "def f(a, b):\n    x = a\n    return min(a, b)\n"
    assert show(played, "--part", "1") == "    x = a\n"


# -- what the user and the model see -------------------------------------------------------------


def test_a_part_is_shown_exactly_as_it_arrived_blank_lines_after_done_included(run):
    after = "\nThat was the file.\n\nIt has one line.\n"
    played = run([
        {"user": "Write todo.md."}, begin("todo.md"),
        say("Task A\nDONE\n" + after + "\nDONE\n\n"),
        {"expect": "Created todo.md (1 line"}, say("Done."),
    ])
    assert played.result.ok, played.result.errors
    assert show(played, "--part", "1") == after


def test_orion_run_counts_the_lines_set_aside(tmp_path):
    script = tmp_path / "script.yaml"
    script.write_text(dump({"conversation": [
        {"user": "Write todo.md."}, begin("todo.md"),
        say("Task A\nDONE\nTask B\nTask C\n"), say("Done.")]}))
    workspace = tmp_path / "ws"
    result = CliRunner().invoke(cli, ["run", str(script), "--workspace", str(workspace),
                                      "--json"])
    assert result.exit_code == 0, result.output
    [session] = json.loads(result.output)["sessions"]
    assert session["set_aside_lines"] == 2
    result = CliRunner().invoke(cli, ["run", str(script), "--workspace",
                                      str(tmp_path / "ws2")])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[-1] == "ok (2 lines set aside)"
    assert any(line.startswith("set aside 2 lines of todo.md, not written: orion sessions "
                               "show ") for line in lines)


def test_a_refused_keep_says_why_without_an_exception_name(run):
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        keep(3),
        {"expect": "has no part 3 set aside to put back"},
        say("Line.\nDONE\n"), {"expect": "Created notes.md"}, say("Done."),
    ])
    assert played.result.ok, played.result.errors
    refusal = [m["content"] for m in played.sent(3) if m["role"] == "tool"][-1]
    assert "KeepRefused" not in refusal
    assert "has no part 3 set aside" in refusal


def test_a_regex_marker_without_marker_regex_is_told_the_flag_exists(run):
    played = run([
        {"user": "Add a route."},
        begin("app.py", "insert", location_marker=r"^def route_\w+\(\):$", position="after"),
        {"expect": "add marker_regex: true to the plan"},
        say("I will fix the plan."),
    ], files={"app.py": "import os\n\ndef route_home():\n"})
    assert played.result.ok, played.result.errors


# -- the same through the real openai SDK against the loopback server -----------------------------


def test_a_think_block_streamed_by_a_server_is_set_aside_byte_exact(tmp_path):
    import asyncio

    from sse_server import SERVERS, SSEServer, begin_write, chunk, stream

    from orion.clock import VirtualClock
    from orion.hooks.manager import make_plugin_manager
    from orion.models.openai_compat import OpenAICompatibleModel
    from orion.runtime.runtime import Runtime
    from orion.write_session.orphan_commands import show as show_session
    from orion.write_session.orphans import scan
    from write_harness import Capture

    text = "\n" + THINK + TEMPLATE + "DONE\n"
    pieces = [text[i:i + 5] for i in range(0, len(text), 5)]
    reporter = Capture()
    with SSEServer([begin_write("fixture.xml"), stream(
            [chunk({"role": "assistant", "content": ""}),
             *[chunk({"content": p}) for p in pieces], chunk({}, "stop")]),
            SERVERS["vllm"].reply("Written.")]) as server:
        model = OpenAICompatibleModel(model="test-model", base_url=server.base_url,
                                      api_key="k", max_retries=0, cut_backoff=0.0)
        runtime = Runtime(model=model, plugins=make_plugin_manager(entrypoints=False, env={}),
                          workspace=tmp_path, clock=VirtualClock(), reporter=reporter)
        try:
            asyncio.run(runtime.handle("Write the fixture."))
        finally:
            runtime.close()
    assert (tmp_path / "fixture.xml").read_text() == TEMPLATE
    assert any("the reasoning at the start of the reply" in n for n in reporter.notices)
    state = tmp_path / ".orion"
    ids = [o.id for o in scan(state)] or [p.name for p in (state / "set_aside").iterdir()]
    shown = show_session(state, ids[0])
    [part] = shown.set_aside.parts
    assert shown.set_aside.read(part.number) == ("\n" + THINK).encode()
