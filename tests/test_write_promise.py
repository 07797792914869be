"""The write promise: every case of "nothing the model streams is lost without a word",
played as a scripted conversation through the real runtime (``orion.runtime.runner.play``).

1. Content that comes after the idle prompt, without DONE, is content (the idle prompt says
   so); an empty first message is a pause like any other.
2. A continuation that ends without DONE is content too, and the write is complete.
3. The outcome never depends on a reply's size (23 or 25 table rows alike).
4. Text beside a tool call is set aside, announced to the user at once with its figures, told
   to the model in the next request with the same figures and WritePlanTool_keep, reported as
   "N lines set aside", printed by ``orion sessions show``; keep puts it back.
5. Identical rows are content: only what a prompt declares a repeat is dropped.
6. A last line without a line break is asked about, not glued to.
7. Repeated terminator lines never land in the file.
8. Messages the user types while a session is open are saved with it and delivered after the
   write, also in a later run that continues the session.

The stream shapes of real servers (error events, ``<think>``, ``content_filter``) are in
``tests/test_server_streams.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from orion.write_session.orphan_commands import mark_resume
from orion.write_session.orphans import scan
from write_harness import Played, begin, dump, make_runner, say, show, status

DONE_PROMPT = "If you're finished, reply with DONE on its own line; otherwise continue."
CUT_PROMPT = "Your output was cut off."
UNFINISHED = "Your message stopped in the middle of line"


@pytest.fixture
def run(tmp_path, monkeypatch):
    play_script = make_runner(tmp_path, monkeypatch)

    def _run(conversation: list[dict], *, settings: dict | None = None,
             files: dict | None = None, workspace=None) -> Played:
        script: dict[str, Any] = {"conversation": conversation}
        if settings:
            script["settings"] = {"write_session": settings}
        if files:
            script["files"] = files
        return play_script(script, workspace=workspace)
    return _run


def ok(played: Played) -> None:
    assert played.result.ok, played.result.errors


# -- 1. content after the idle prompt ----------------------------------------------------------


@pytest.mark.parametrize("operation,seed", [("overwrite", {"config.txt": "mode = slow\n"}),
                                            ("create", None)])
def test_case_1_content_after_the_idle_prompt_is_written(run, operation, seed):
    target = "config.txt" if seed else "README.md"
    played = run([
        {"user": f"{operation} {target}."}, begin(target, operation),
        say(""),  # an empty first message: a pause
        {"wait_ms": 2000}, {"expect": DONE_PROMPT},
        {"expect": "Anything you write but DONE alone is added to the file"},
        say("mode = fast\nretries = 3\n"),  # the content, without DONE
        {"wait_ms": 2000}, {"expect": DONE_PROMPT},
        say("DONE"),
        {"expect": f"{'Overwrote' if seed else 'Created'} {target} (2 lines"}, say("Done."),
    ], files=seed)
    ok(played)
    assert played.text(target) == "mode = fast\nretries = 3\n"
    assert status(played) == "written"


# -- 2. a continuation that ends without DONE --------------------------------------------------


def test_case_2_a_continuation_without_done_is_content_and_the_write_is_complete(run):
    played = run([
        {"user": "Write list.md."}, begin("list.md"),
        say("one\ntwo\nthree\nfour\n", finish_reason="length"),
        {"expect": CUT_PROMPT}, {"expect": "with line 5: everything you send is added"},
        say("five\nsix\n"),  # stop, no DONE
        {"wait_ms": 2000}, {"expect": DONE_PROMPT},
        say("DONE"),
        {"expect": "Created list.md (6 lines"}, say("Done."),
    ])
    ok(played)
    assert played.text("list.md") == "one\ntwo\nthree\nfour\nfive\nsix\n"
    assert status(played) == "written"
    assert "incomplete" not in played.result.prompts[-1]


# -- 3. the outcome never depends on the size --------------------------------------------------


@pytest.mark.parametrize("rows", [23, 25])
def test_case_3_lines_after_the_idle_prompt_are_written_whatever_their_size(run, rows):
    table = "".join(f"| row {n:02d} | {'value ' * 4}| {'x' * 3} |\n" for n in range(rows))
    assert len(table) == 43 * rows  # 989 and 1075 characters
    head = "| a | b | c |\n|---|---|---|\n| 1 | 2 | 3 |\n| 4 | 5 | 6 |\n"
    played = run([
        {"user": "Write table.md."}, begin("table.md"),
        say(head),
        {"wait_ms": 2000}, {"expect": DONE_PROMPT},
        say(table),
        {"wait_ms": 2000}, {"expect": DONE_PROMPT},
        say("DONE"),
        {"expect": f"Created table.md ({4 + rows} lines"}, say("Done."),
    ])
    ok(played)
    assert played.text("table.md") == head + table


# -- 4. text beside a tool call ----------------------------------------------------------------

TEN = "".join(f"Line {n} of notes.md.\n" for n in range(1, 11))


def test_case_4_content_beside_a_tool_call_is_set_aside_announced_told_and_shown(run):
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        {"model": {"text": TEN, "tool_calls": [{"name": "read_file",
                                                "arguments": {"path": "README.md"}}]}},
        {"expect": "the text you wrote beside your read_file call (10 lines, first line "
                   "'Line 1 of notes.md.') was set aside as part 1"},
        {"expect": "call WritePlanTool_keep with part 1"},
        say("Line 11 of notes.md.\nDONE\n"),
        {"expect": "Created notes.md (1 line"},
        {"expect": "10 lines set aside, not written: part 1 (10 lines, first line 'Line 1 of "
                   "notes.md.') beside a tool call"},
        say("Done."),
    ], files={"README.md": "readme\n"})
    ok(played)
    assert played.text("notes.md") == "Line 11 of notes.md.\n"
    assert status(played) == "written_with_set_aside"
    short = played.result.sessions[0]["id"][:8]
    assert (f"write session {short}: the text beside the read_file call (10 lines, first "
            "line 'Line 1 of notes.md.') was set aside, not written to notes.md (part 1); "
            f"`orion sessions show {short}` prints it") in played.reporter.notices
    assert show(played, "--part", "1") == TEN
    listing = show(played)
    assert "10 lines set aside" in listing and "part 1" in listing and TEN in listing
    # the trace has counts, never the text
    events = played.events("write_report")
    [aside] = [e for e in events if e["name"] == "text set aside"]
    assert aside["attributes"]["orion.lines"] == 10
    assert "Line 1 of notes.md." not in json.dumps(events)


def test_case_4_the_model_puts_the_text_back_with_write_plan_tool_keep(run):
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        {"model": {"text": TEN, "tool_calls": [{"name": "read_file",
                                                "arguments": {"path": "README.md"}}]}},
        {"expect": "set aside as part 1"},
        {"model": {"tool_calls": [{"name": "WritePlanTool_keep", "arguments": {"part": 1}}]}},
        {"expect": "Part 1 (10 lines) is back in notes.md at line 1"},
        say("Line 11 of notes.md.\nDONE\n"),
        {"expect": "Created notes.md (11 lines"}, say("Done."),
    ], files={"README.md": "readme\n"})
    ok(played)
    assert played.text("notes.md") == TEN + "Line 11 of notes.md.\n"
    assert status(played) == "written"


# -- 5. identical rows are content -------------------------------------------------------------

ROWS = "0,0,0,0\n" * 4


def test_case_5_identical_rows_are_content_after_a_pause(run):
    played = run([
        {"user": "Write zeros.csv."}, begin("zeros.csv"), say("a,b,c,d\n" + ROWS),
        {"wait_ms": 2000}, {"expect": DONE_PROMPT},
        say(ROWS + "DONE\n"),
        {"expect": "Created zeros.csv (9 lines"}, say("Done."),
    ])
    ok(played)
    assert played.text("zeros.csv") == "a,b,c,d\n" + ROWS + ROWS
    assert status(played) == "written"


def test_case_5_identical_rows_sent_again_after_a_cut_off_are_set_aside_and_kept_back(run):
    # The rows the request quoted, sent again: set aside, told, and put back by the model.
    played = run([
        {"user": "Write zeros.csv."}, begin("zeros.csv"),
        say("a,b,c,d\n" + ROWS, finish_reason="length"), {"expect": CUT_PROMPT},
        say(ROWS),
        {"wait_ms": 2000}, {"expect": "set aside as part 1, not written twice"},
        {"model": {"tool_calls": [{"name": "WritePlanTool_keep", "arguments": {"part": 1}}]}},
        say("DONE"),
        {"expect": "Created zeros.csv (9 lines"}, say("Done."),
    ])
    ok(played)
    assert played.text("zeros.csv") == "a,b,c,d\n" + ROWS + ROWS
    assert status(played) == "written"


def test_case_5_a_cut_line_sent_again_replaces_it(run):
    played = run([
        {"user": "Write f.py."}, begin("f.py"),
        say("def f(a, b):\n    x = a\n    return min", finish_reason="length"),
        {"expect": ">     return min"}, {"expect": "start your reply with line 3 again"},
        say("    return min(a, b)\nDONE\n"),
        {"expect": "Created f.py (3 lines"}, say("Done."),
    ])
    ok(played)
    assert played.text("f.py") == "def f(a, b):\n    x = a\n    return min(a, b)\n"
    assert status(played) == "written"


def test_case_5_identical_rows_around_a_cut_line_are_rows_not_repeats(run):
    played = run([
        {"user": "Write zeros.csv."}, begin("zeros.csv"),
        say("0,0,0,0\n0", finish_reason="length"),
        say("0,0,0,0\n0,0,0,0\nDONE\n"),  # the cut line again, then one more row
        {"expect": "Created zeros.csv (3 lines"}, say("Done."),
    ])
    ok(played)
    assert played.text("zeros.csv") == "0,0,0,0\n" * 3


def test_case_5_a_continuation_that_does_not_resend_the_cut_line_replaces_it_never_glued(run):
    played = run([
        {"user": "Write f.txt."}, begin("f.txt"),
        say("def f(a, b):\n    return min", finish_reason="length"),
        {"expect": CUT_PROMPT},
        say("(a, b)\nDONE\n"),
        {"expect": "Created f.txt (2 lines"},
        {"expect": "Line 2 as it was cut off (1 line, first line 'return min') was set aside "
                   "as part 1"},
        say("Done."),
    ])
    ok(played)
    assert played.text("f.txt") == "def f(a, b):\n(a, b)\n"  # never "    return min(a, b)"
    assert status(played) == "written_with_set_aside"
    assert show(played, "--part", "1") == "    return min"


# -- 6. a last line without a line break -------------------------------------------------------


@pytest.mark.parametrize("reply,content", [("1.4.2\nDONE", "1.4.2\n"), ("DONE", "1.4.2")])
def test_case_6_a_last_line_without_a_line_break_is_asked_about_never_glued(run, reply,
                                                                            content):
    played = run([
        {"user": "Write VERSION."}, begin("VERSION"),
        say("1.4.2"),
        {"expect": UNFINISHED}, {"expect": "> 1.4.2"},
        {"expect": "If the file is complete and ends there, without a final line break, reply "
                   "with DONE"},
        say(reply),
        {"expect": "Created VERSION (1 line"}, say("Done."),
    ])
    ok(played)
    assert played.text("VERSION") == content
    assert status(played) == "written"


@pytest.mark.parametrize("reply,content", [
    ("DONE not alone\nlast\nDONE\n", "alpha\nDONE not alone\nlast\n"),
    ("DONE\n", "alpha\n"),
    ("DONE", "alpha\n")])
def test_a_cut_right_after_done_is_an_unfinished_line_the_model_finishes(run, reply, content):
    """A reply cut off (``length``) just after ``DONE``, before its line break: the line may be
    the terminator or ``DONE not alone``. It is asked about as any unfinished line; the model's
    answer decides, so neither the lines after it nor a DONE in the file are a guess."""
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        say("alpha\nDONE", finish_reason="length"),
        {"expect": "> DONE"},
        say(reply),
        {"expect": "Created notes.md"}, say("Done."),
    ])
    ok(played)
    assert played.text("notes.md") == content
    assert status(played) == "written"


# -- 7. repeated terminator lines --------------------------------------------------------------


@pytest.mark.parametrize("text", ["alpha\nbeta\nDONE\n\nDONE\n", "alpha\nbeta\nDONE\nDONE",
                                  "alpha\nbeta\nDONE\n  DONE  \n\n"])
def test_case_7_repeated_terminator_lines_never_land_in_the_file(run, text):
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        say(text),
        {"expect": "Created notes.md (2 lines"}, say("Done."),
    ])
    ok(played)
    assert played.text("notes.md") == "alpha\nbeta\n"
    assert status(played) == "written"
    assert not any("set aside" in n for n in played.reporter.notices)


def test_case_7_text_after_done_is_set_aside_and_reported(run):
    played = run([
        {"user": "Write todo.md."}, begin("todo.md"),
        say("Task A\nDONE\nTask B\nTask C\nDONE\n"),
        {"expect": "Created todo.md (1 line, 7 B); 2 lines set aside, not written: part 1 "
                   "(2 lines, first line 'Task B') after DONE"},
        say("Done."),
    ])
    ok(played)
    assert played.text("todo.md") == "Task A\n"
    assert show(played, "--part", "1") == "Task B\nTask C\n"


# -- 8. held user messages ---------------------------------------------------------------------


def test_case_8_held_messages_are_saved_with_the_session_and_delivered_in_a_later_run(run):
    first = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        say("alpha\n"),
        {"user": "What is the capital of France?"},
        {"expect": DONE_PROMPT}, say(""),
    ])
    ok(first)
    [orphan] = scan(first.state_dir)
    assert orphan.saved_state["held"] == ["What is the capital of France?"]
    short = orphan.id[:8]
    assert any(n.startswith(f"write session {short} for notes.md is still open (1 lines saved)"
                            "; 1 message you typed is held with it ('What is the capital of "
                            "France?') and sent once the file is written")
               for n in first.reporter.notices)
    mark_resume(first.state_dir, short)
    second = run([
        {"expect": CUT_PROMPT}, say("beta\nDONE\n"),
        say("Paris."),  # the report, then the held message: the newest is the user's
    ], workspace=first.workspace)
    ok(second)
    assert second.text("notes.md") == "alpha\nbeta\n"
    last = second.sent(2)
    assert last[-2]["content"].startswith("Created notes.md")
    assert last[-1] == {"role": "user", "content": "What is the capital of France?"}


# -- the seed rules that were missing ----------------------------------------------------------


def test_an_insert_marker_may_be_a_regular_expression(run):
    played = run([
        {"user": "Add a route."},
        begin("app.py", "insert", location_marker=r"^def route_\w+\(\):$", marker_regex=True,
              position="after"),
        say("    pass\nDONE\n"),
        {"expect": "Inserted 1 line after marker in app.py"}, say("Done."),
    ], files={"app.py": "import os\n\ndef route_home():\n"})
    ok(played)
    assert played.text("app.py") == "import os\n\ndef route_home():\n    pass\n"


@pytest.mark.parametrize("marker,why", [
    (r"def (", "is not a valid regular expression (missing ), unterminated subpattern at "
               "position 4)"),
    (r"^def", "occurs 2 times in app.py (lines 1, 2); it must occur exactly once"),
    (r"x*", "matches an empty text in app.py"),
])
def test_a_regular_expression_marker_is_checked_before_any_content(run, marker, why):
    played = run([
        {"user": "Add a route."},
        begin("app.py", "insert", location_marker=marker, marker_regex=True, position="after"),
        {"expect": why}, say("I will pick another marker."),
    ], files={"app.py": "def a():\ndef b():\n"})
    ok(played)
    assert played.result.sessions == []


def test_the_begin_result_carries_the_session_directory(run):
    played = run([{"user": "Write notes.md."}, begin("notes.md"),
                  {"expect": '"session_dir": "'}, say("")])
    ok(played)
    [session] = played.result.sessions
    sent = [m for m in played.sent(2) if m["role"] == "tool"][-1]["content"]
    directory = json.loads(sent)["session_dir"]
    assert directory == str((played.state_dir / "write_sessions" / session["id"]).resolve())


def test_write_plan_tool_keep_is_advertised_only_while_a_session_is_open(run):
    played = run([{"user": "Write notes.md."}, begin("notes.md"), say("alpha\nDONE\n"),
                  say("Done.")])
    ok(played)
    advertised = [{t["function"]["name"] for t in log.sent.tools} for log in played.model.log]
    assert ["WritePlanTool_keep" in names for names in advertised] == [False, True, False]
    [keep] = [t for t in played.model.log[1].sent.tools
              if t["function"]["name"] == "WritePlanTool_keep"]
    assert set(keep["function"]["parameters"]["properties"]) == {"part"}


# -- 8, with a real crash and a real chat ------------------------------------------------------


@pytest.mark.slow
def test_case_8_a_held_message_survives_sigkill_and_is_delivered_after_the_write(tmp_path):
    # The process is killed while the model answers the question the held message brought
    # (its reply streams slowly); the message was saved when it was held.
    lines = [f"row {n}\n" for n in range(400)]
    script = tmp_path / "held.yaml"
    script.write_text(dump({"settings": {"write_session": {"flush_lines": 1}}, "conversation": [
        {"user": "Write rows.txt."}, begin("rows.txt"),
        say("first\n"),
        {"user": "What is the capital of France?"},
        {"model": {"chunks": lines, "chunk_delay_ms": 5}},
    ]}), encoding="utf-8")
    workspace = tmp_path / "ws"
    proc = subprocess.Popen([sys.executable, "-m", "orion", "run", str(script), "--workspace",
                             str(workspace)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:  # until the slow reply is streaming into the journal
            assert proc.poll() is None and time.monotonic() < deadline, "orion run ended"
            found = list(workspace.glob(".orion/write_sessions/*/content.txt"))
            if found and found[0].stat().st_size > 100:
                break
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    [orphan] = scan(workspace / ".orion")
    assert orphan.held == ["What is the capital of France?"]
    listed = subprocess.run([sys.executable, "-m", "orion", "sessions", "list", "--json",
                             "--workspace", str(workspace)], capture_output=True, text=True,
                            timeout=60)
    [row] = json.loads(listed.stdout)
    assert row["held"] == 1 and not row["live"], row
    mark_resume(workspace / ".orion", orphan.id)
    again = tmp_path / "again.yaml"
    again.write_text(dump({"conversation": [
        {"expect": CUT_PROMPT}, say("last row\nDONE\n"),
        say("Paris."),  # answers the report and the held question
    ]}), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "orion", "run", str(again), "--workspace",
                           str(workspace), "--json"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert (workspace / "rows.txt").read_text().endswith("last row\n")
    assert (workspace / "rows.txt").read_text().startswith("first\nrow 0\n")


@pytest.mark.slow
def test_case_8_quit_in_orion_chat_says_what_is_held_and_open(tmp_path):
    from sse_server import SSEServer, begin_write, stream, text_stream

    (tmp_path / "orion.yaml").write_text("settings:\n  write_session:\n    idle_ms: 600000\n")
    responses = [begin_write("notes.md"), stream(text_stream("alpha\n")),
                 stream(text_stream(""))]  # the answer to the prompt the held message brings
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    with SSEServer(responses) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "orion", "chat", "--base-url", server.base_url, "--model",
             "m", "--workspace", str(tmp_path)],
            input="Write notes.md.\nIs it raining?\n/quit\n", capture_output=True, text=True,
            timeout=120, env={**clean, "OPENAI_API_KEY": "k"})
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "is still open (1 lines saved); 1 message you typed is held with it ('Is it " \
           "raining?') and sent once the file is written" in said, proc.stderr
    assert "orion sessions recover" in said and "--continue" in said
    [orphan] = scan(tmp_path / ".orion")
    assert orphan.held == ["Is it raining?"] and not orphan.live


@pytest.mark.slow
def test_case_8_in_a_terminal_quit_names_the_held_message_and_the_open_session(tmp_path):
    import shutil

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (apt-get install tmux)")
    from sse_server import SSEServer, begin_write, stream, text_stream
    from tmux_terminal import chat_in_terminal

    (tmp_path / "orion.yaml").write_text("settings:\n  write_session:\n    idle_ms: 600000\n")
    with SSEServer([begin_write("notes.md"), stream(text_stream("alpha\n")),
                    stream(text_stream(""))]) as server:
        terminal = chat_in_terminal(server, tmp_path, "held-quit")
        try:
            terminal.wait_for("you>")
            terminal.keys("Write notes.md.", "Enter")
            # The content is a preview while it streams; then the session waits for DONE.
            terminal.wait_for_prompt("waiting notes.md: 1 line,")
            terminal.keys("Is it raining?", "Enter")
            terminal.wait_for_prompt("your message is held")
            terminal.keys("/quit", "Enter")
            status = terminal.exit_status()
            screen = " ".join(terminal.screen().split())
        finally:
            terminal.close()
    assert status == "0", screen
    assert "1 message you typed is held with it ('Is it raining?') and sent once the file " \
           "is written" in screen, screen
    assert "orion sessions recover" in screen and "Traceback" not in screen


def test_a_long_unfinished_line_sent_again_replaces_it_in_one_piece(run):
    # A minified file is one long line: sent again, whole, in small chunks, it is read as the
    # repeat it is (the reply's start is held until it says, however long that takes).
    line = "".join(f'"k{n}":{n},' for n in range(20_000))
    played = run([
        {"user": "Write data.txt."}, begin("data.txt"),
        say(line[:150_000], finish_reason="length", chunk_size=4096),
        {"expect": CUT_PROMPT}, {"expect": "[… 149600 more characters …]"},
        say(line + "\nDONE\n", chunk_size=64),
        {"expect": "Created data.txt (1 line"}, say("Done."),
    ])
    ok(played)
    assert played.text("data.txt") == line + "\n"
    assert status(played) == "written"


def test_text_set_aside_by_an_abandoned_session_is_kept_and_shown(run):
    played = run([
        {"user": "Write notes.md."}, begin("notes.md"),
        {"model": {"text": "Let me look first.", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "README.md"}}]}},
        {"expect": "set aside as part 1"},
        say("", finish_reason="length"),  # nothing to continue: abandoned
        {"expect": "The write session for notes.md was abandoned"},
        {"expect": "1 line set aside, not written: part 1"},
        say("I will try again."),
    ], files={"README.md": "readme\n"})
    ok(played)
    assert status(played) == "abandoned"
    listing = show(played)
    short = played.result.sessions[0]["id"][:8]
    assert listing.startswith(f"write session {short} for notes.md: abandoned, 1 line set "
                              "aside")
    assert "Let me look first." in listing
