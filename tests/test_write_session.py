"""The write session end to end: scripted conversations played through the real runtime
(``orion.runtime.runner.play`` and ``orion run``), with the built-in plugins and nothing mocked.

Each test states one rule of the protocol (docs/write-sessions.md) and checks it where it shows:
the files in the workspace, the prompts Orion injected, the requests the model received, the
sessions, the reporter's notices and the trace database.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from orion.cli import cli
from orion.hooks.manager import make_plugin_manager
from orion.statechart.interpreter import lifecycle as lifecycle_module
from write_harness import Played, begin, dump, make_runner, say

DONE_PROMPT = "If you're finished, reply with DONE on its own line; otherwise continue."
#: The idle prompt in full: the seed's question, then the rule that decides what the reply is.
IDLE_PROMPT = (DONE_PROMPT + " Anything you write but DONE alone is added to the file, after "
               "what is saved; end it with a line DONE.")
SHA_REFERENCE = re.compile(r"\[wrote (?P<path>\S+): (?P<lines>\d+) lines, sha256 [0-9a-f]{12}\]")


# -- the harness (tests/write_harness.py, shared with test_content_integrity.py) ---------------


def traced(text: str) -> dict:
    """What a trace keeps of a text: its length and sha256."""
    import hashlib

    return {"$text": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest()}


@pytest.fixture
def run(tmp_path, monkeypatch):
    return make_runner(tmp_path, monkeypatch)


def guide(lines: int, tag: str = "guide") -> str:
    """A Markdown document of exactly ``lines`` lines, every line distinct."""
    out = [f"# Operator guide ({tag})", ""]
    section = 0
    while len(out) < lines:
        if len(out) % 40 == 2:
            section += 1
            out += [f"## {section}. Section {section} of the {tag}", ""]
            continue
        n = len(out)
        out.append(f"- Step {n}: {tag} task {n}, then check the result of task {n}.")
    return "\n".join(out[:lines]) + "\n"


def assert_ok(played: Played) -> None:
    assert played.result.ok, played.result.errors


def assert_incomplete(played: Played) -> None:
    """An incomplete write is written, and fails the run: ``orion run`` exits 1."""
    assert not played.result.ok
    assert [e for e in played.result.errors if "is incomplete" in e], played.result.errors


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


# -- DONE --------------------------------------------------------------------------------------


def test_done_finalizes_and_the_target_is_written_once_atomically(run):
    played = run({"conversation": [
        {"user": "Write docs/x.md."},
        begin("docs/x.md"),
        {"expect": "awaiting_content"},
        {"expect": "end it with a line that is exactly DONE"},
        say("# X\n\nThe first paragraph.\nDONE\n"),
        {"expect": "Created docs/x.md (3 lines"},
        say("Written."),
        {"user": "Anything else?"},
        say("No."),
    ]}, watch="docs/x.md")
    assert_ok(played)
    assert played.text("docs/x.md") == "# X\n\nThe first paragraph.\n"
    # one atomic write (temp file + rename), and the file never changed after the report
    assert played.writes == [played.workspace.resolve() / "docs/x.md"]
    at_report, now = played.reporter.stat_at_report, (played.workspace / "docs/x.md").stat()
    assert at_report is not None
    assert (at_report.st_ino, at_report.st_mtime_ns) == (now.st_ino, now.st_mtime_ns)
    assert [p.name for p in (played.workspace / "docs").iterdir()] == ["x.md"]  # no temp file
    [session] = played.result.sessions
    assert session["status"] == "written" and session["continuations"] == 0
    assert not (played.state_dir / "write_sessions" / session["id"]).exists()
    assert played.result.prompts == ["Created docs/x.md (3 lines, 26 B)"]
    assert played.transitions() == [
        ("begin", "idle", "session_active.awaiting_content"),
        ("done", "session_active.awaiting_content", "session_active.finalizing"),
        ("valid", "session_active.finalizing", "done")]


def test_text_after_done_is_set_aside_not_written_and_traced_as_counts(run):
    played = run({"conversation": [
        {"user": "Write notes.md."},
        begin("notes.md"),
        say("alpha\nbeta\nDONE\nI kept it short; say if you want more.\n"),
        {"expect": "Created notes.md (2 lines"},
        {"expect": "1 line set aside, not written: part 1 (1 line, first line 'I kept it "
                   "short; say if you want more.') after DONE"},
        say("Ok."),
    ]})
    assert_ok(played)
    assert played.text("notes.md") == "alpha\nbeta\n"
    [event] = [e for e in played.events("write_report") if e["name"] == "text set aside"]
    # counts and the reason as an enum; the target's path, a text, by length and hash
    assert event["attributes"] == {"orion.target": traced("notes.md"),
                                   "orion.set_aside.kind": "after_done",
                                   "orion.part": 1, "orion.lines": 1, "orion.bytes": 39}
    # the model still sees its words, after the reference to the file
    assistant = [m["content"] for m in played.sent(3) if m["role"] == "assistant"]
    assert SHA_REFERENCE.fullmatch(assistant[-1].split("\n")[0])
    assert assistant[-1].endswith("\n\nI kept it short; say if you want more.")


def test_a_done_line_inside_a_fenced_block_is_content(run):
    document = ("# The protocol\n\nEnd the content with a line:\n\n```text\nDONE\n```\n\n"
                "~~~\n  DONE\n~~~\nThat is all.\n")
    played = run({"conversation": [
        {"user": "Document the protocol."},
        begin("docs/protocol.md"),
        say(document + "DONE\n", chunk_size=5),
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("docs/protocol.md") == document


@pytest.mark.parametrize("chunks", [["a\nb\nDONE"], ["a\nb\nDO", "NE"], ["a\nb", "\nD", "ONE"]])
def test_done_without_a_trailing_newline_ends_the_content(run, chunks):
    played = run({"conversation": [
        {"user": "Write ab.txt."},
        begin("ab.txt"),
        say(chunks=chunks),
        {"expect": "Created ab.txt (2 lines, 4 B)"},
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("ab.txt") == "a\nb\n"


@pytest.fixture
def fixed_ids(monkeypatch):
    """Lifecycle ids 1a2b3c4d000…001, 1a2b3c4d000…002, …: the strict terminator is known."""
    counter = iter(range(1, 1000))
    monkeypatch.setattr(lifecycle_module, "uuid", type("U", (), {
        "uuid4": staticmethod(lambda: uuid.UUID(f"1a2b3c4d{next(counter):024x}"))}))
    return "1a2b3c4d"


def test_strict_mode_needs_done_with_the_short_session_id(run, fixed_ids):
    played = run({"settings": {"write_session": {"strict_done": True}}, "conversation": [
        {"user": "Write notes.md about the protocol."},
        begin("notes.md"),
        {"expect": f"a line that is exactly DONE {fixed_ids}"},   # the begin result says so
        say("A bare line\nDONE\nis content in strict mode.\n", finish_reason="stop"),
        {"wait_ms": 2000},
        {"expect": f"reply with DONE {fixed_ids} on its own line"},
        say(f"DONE {fixed_ids}"),
        {"expect": "Created notes.md (3 lines"},
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("notes.md") == "A bare line\nDONE\nis content in strict mode.\n"


def test_strict_mode_done_with_the_id_ends_the_content_in_the_same_message(run, fixed_ids):
    played = run({"settings": {"write_session": {"strict_done": True}}, "conversation": [
        {"user": "Write notes.md."},
        begin("notes.md"),
        say(f"x\nDONE\nDONE 1a2b\ny\nDONE {fixed_ids}\nThat was it.\n", chunk_size=3),
        {"expect": "Created notes.md (4 lines"},
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("notes.md") == "x\nDONE\nDONE 1a2b\ny\n"


# -- the idle fallback -------------------------------------------------------------------------


def idle_script(reply: list[dict], *, first: str = "# Notes\n\nFirst part.\n",
                waits: tuple[float, ...] = (1999, 1)) -> dict:
    return {"conversation": [
        {"user": "Write docs/notes.md."},
        begin("docs/notes.md"),
        say(first),                         # finish reason stop, no DONE: a pause
        *[{"wait_ms": w} for w in waits],
        {"expect": DONE_PROMPT},
        *reply,
    ]}


def test_a_pause_without_done_is_asked_about_after_2000_ms_and_a_bare_done_finalizes(run):
    played = run(idle_script([say("DONE"), {"expect": "Created docs/notes.md (3 lines"},
                              say("Written.")]))
    # wait_ms 1999 then 1: had the prompt come at 1999 ms, its request would have met the
    # next wait_ms entry and the script would have failed
    assert_ok(played)
    assert played.result.prompts == [IDLE_PROMPT, "Created docs/notes.md (3 lines, 21 B)"]
    assert played.text("docs/notes.md") == "# Notes\n\nFirst part.\n"
    assert ("idle_timeout", "session_active.awaiting_done_or_more_content",
            "session_active.awaiting_done_or_more_content") in played.transitions()


def test_no_idle_prompt_before_the_timer(run):
    played = run({"conversation": [
        {"user": "Write docs/notes.md."},
        begin("docs/notes.md"),
        say("First part.\n"),
        {"wait_ms": 1999},
    ]})
    assert_ok(played)
    assert played.result.prompts == []
    assert played.result.sessions[0]["status"] == "active"


def test_the_idle_time_comes_from_the_environment(run, monkeypatch):
    monkeypatch.setenv("WRITE_SESSION_IDLE_MS", "500")
    played = run(idle_script([say("DONE"), say("Written.")], waits=(499, 1)))
    assert_ok(played)
    assert played.result.prompts[0] == IDLE_PROMPT


def test_the_idle_time_comes_from_the_script_settings(run):
    script = idle_script([say("DONE"), say("Written.")], waits=(299, 1))
    played = run({"settings": {"write_session": {"idle_ms": 300}}, **script})
    assert_ok(played)
    assert played.result.prompts[0] == IDLE_PROMPT


def test_the_idle_time_comes_from_orion_yaml(run):
    played = run(idle_script([say("DONE"), say("Written.")], waits=(99, 1)),
                 orion_yaml="settings: {write_session: {idle_ms: 100}}\n")
    assert_ok(played)


def test_more_text_after_the_idle_prompt_is_appended_to_the_same_content(run):
    # The idle prompt says so: anything but DONE alone is added, with DONE or without it.
    played = run(idle_script([
        say("Second part,\nwith two lines.\n"),
        {"wait_ms": 2000},
        {"expect": IDLE_PROMPT},
        say("Third part.\nDONE\n"),
        {"expect": "Created docs/notes.md (6 lines"},
        say("Written."),
    ]))
    assert_ok(played)
    assert played.text("docs/notes.md") == (
        "# Notes\n\nFirst part.\nSecond part,\nwith two lines.\nThird part.\n")
    [session] = played.result.sessions
    assert session["status"] == "written" and session["continuations"] == 0
    assert played.writes == [played.workspace.resolve() / "docs/notes.md"]


def test_an_empty_reply_to_the_idle_prompt_waits_again(run):
    played = run(idle_script([
        say(""),
        {"wait_ms": 2000},
        {"expect": DONE_PROMPT},
        say("DONE"),
        say("Written."),
    ]))
    assert_ok(played)
    assert played.result.prompts.count(IDLE_PROMPT) == 2
    assert played.text("docs/notes.md") == "# Notes\n\nFirst part.\n"


# -- truncation and auto-continue --------------------------------------------------------------


@pytest.mark.parametrize("reason", ["length", "insufficient_system_resource", "unknown",
                                    "content_filter", None])
def test_a_cut_off_message_is_continued_at_once_into_the_same_content(run, reason):
    played = run({"conversation": [
        {"user": "Write docs/guide.md."},
        begin("docs/guide.md"),
        say("# Guide\n\nInstall Orion with pip.\nThen run orion ch", finish_reason=reason),
        {"expect": "Your output was cut off. 3 lines are saved (continuation 1/3)"},
        {"expect": "> Install Orion with pip.\n> Then run orion ch\n"},
        {"expect": "start your reply with line 4 again, whole"},
        say("Then run orion check in the workspace.\nDONE\n"),
        {"expect": "Created docs/guide.md (4 lines"},
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("docs/guide.md") == (
        "# Guide\n\nInstall Orion with pip.\nThen run orion check in the workspace.\n")
    assert "part 1 saved (3 lines), continuing 1/3" in played.reporter.notices
    [session] = played.result.sessions
    assert session["status"] == "written" and session["continuations"] == 1


@pytest.mark.parametrize("continuation", [
    "Then run orion check in the workspace.\nDONE\n",                  # the cut line again
    "Then run orion ch" "eck in the workspace.\nDONE\n",
])
def test_a_continuation_that_repeats_the_saved_tail_drops_the_repeat(run, continuation):
    played = run({"conversation": [
        {"user": "Write docs/guide.md."},
        begin("docs/guide.md"),
        say("# Guide\n\nInstall Orion with pip.\nThen run orion ch", finish_reason="length"),
        {"expect": "continue exactly where you stopped"},
        say(continuation, chunk_size=4),
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("docs/guide.md") == (
        "# Guide\n\nInstall Orion with pip.\nThen run orion check in the workspace.\n")


def test_a_continuation_that_starts_over_is_set_aside_without_duplicating(run):
    document = guide(60)
    cut = document.index("- Step 30")
    played = run({"conversation": [
        {"user": "Write docs/guide.md."},
        begin("docs/guide.md"),
        say(document[:cut], finish_reason="length", chunk_size=64),
        {"expect": "continuation 1/3"},
        say(document + "DONE\n", chunk_size=7),                 # the whole file again
        {"wait_ms": 2000}, {"expect": "Your reply started docs/guide.md over"},
        say("DONE"),
        {"expect": "Created docs/guide.md"},
        {"expect": "set aside, not written: part 1"},
        say("Sorry about that."),
    ]})
    assert_ok(played)
    assert played.text("docs/guide.md") == document[:cut]
    [session] = played.result.sessions
    assert session["status"] == "written_with_set_aside"
    assert any("started docs/guide.md over" in n for n in played.reporter.notices)
    assert not any(t[0] == "circular" for t in played.transitions())
    [aside] = [e for e in played.events("write_report") if e["name"] == "text set aside"]
    assert aside["attributes"]["orion.set_aside.kind"] == "restart"


def test_at_most_three_continuations_then_the_file_is_written_incomplete(run):
    parts = ["part one\n", "part two\n", "part three\n", "part four\n"]
    conversation: list[dict] = [{"user": "Write long.md."}, begin("long.md")]
    for n, part in enumerate(parts):
        if n:
            conversation.append({"expect": f"(continuation {n}/3)"})
        conversation.append(say(part, finish_reason="length"))
    conversation += [{"expect": "Created long.md (4 lines"},
                     {"expect": "(incomplete: the output was cut off)"}, say("Noted.")]
    played = run({"conversation": conversation})
    assert_incomplete(played)
    assert played.text("long.md") == "".join(parts)
    notices = played.reporter.notices
    assert [n for n in notices if n.startswith("part ")] == [
        "part 1 saved (1 lines), continuing 1/3", "part 2 saved (2 lines), continuing 2/3",
        "part 3 saved (3 lines), continuing 3/3"]
    assert "continuations used up (3/3): writing long.md as incomplete (4 lines)" in notices
    [session] = played.result.sessions
    assert session["status"] == "incomplete" and session["continuations"] == 3
    assert any(e["name"] == "write incomplete" for e in played.events("error"))


def test_the_continuation_limit_is_a_setting(run):
    played = run({"settings": {"write_session": {"max_continuations": 1}}, "conversation": [
        {"user": "Write long.md."}, begin("long.md"),
        say("one\n", finish_reason="length"),
        {"expect": "(continuation 1/1)"},
        say("two\n", finish_reason="length"),
        {"expect": "(incomplete"},
        say("Noted."),
    ]})
    assert_incomplete(played)
    assert played.text("long.md") == "one\ntwo\n"


@pytest.mark.parametrize("text", ["", "\n\n", "   "])
def test_a_cut_off_message_with_nothing_saved_abandons_the_session(run, text):
    played = run({"conversation": [
        {"user": "Write empty.md."},
        begin("empty.md"),
        say(text, finish_reason="length"),
        {"expect": "The write session for empty.md was abandoned"},
        say("I will try again."),
    ]})
    assert_ok(played)
    assert not (played.workspace / "empty.md").exists()
    assert played.result.files == []
    [session] = played.result.sessions
    assert session["status"] == "abandoned"
    assert not list((played.state_dir / "write_sessions").iterdir())


def test_an_empty_continuation_that_stops_waits_for_done(run):
    played = run({"conversation": [
        {"user": "Write notes.md."},
        begin("notes.md"),
        say("all of it\n", finish_reason="length"),
        {"expect": "continuation 1/3"},
        say(""),                                       # nothing more, finish reason stop
        {"wait_ms": 2000},
        {"expect": DONE_PROMPT},
        say("DONE"),
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("notes.md") == "all of it\n"


def test_a_320_line_guide_cut_off_once_is_written_exactly(run):
    document = guide(324)
    cut = document.index("- Step 180:") + len("- Step 180: guide task 180, then ch")
    played = run({"conversation": [
        {"user": "Write the operator guide in docs/guide.md."},
        begin("docs/guide.md"),
        {"expect": "awaiting_content"},
        say(document[:cut], finish_reason="length", chunk_size=64),
        {"expect": "continuation 1/3"},
        # the continuation repeats the cut line, as models do
        say(document[document.rindex("\n", 0, cut) + 1:] + "DONE\n", chunk_size=50),
        {"expect": "Created docs/guide.md (324 lines"},
        say("The guide is written."),
    ]})
    assert_ok(played)
    assert played.text("docs/guide.md") == document
    assert played.writes == [played.workspace.resolve() / "docs/guide.md"]
    assert "part 1 saved (180 lines), continuing 1/3" in played.reporter.notices


def test_orion_run_json_reports_the_guide_session(tmp_path):
    document = guide(320)
    cut = document.index("- Step 150:")
    script = tmp_path / "guide.yaml"
    script.write_text(dump({"conversation": [
        {"user": "Write the guide."}, begin("docs/guide.md"),
        say(document[:cut], finish_reason="length", chunk_size=100),
        {"expect": "continuation 1/3"},
        say(document[cut:] + "DONE\n", chunk_size=100),
        say("Done."),
    ]}))
    result = CliRunner().invoke(cli, ["run", str(script), "--workspace", str(tmp_path / "ws"),
                                      "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] and [f["path"] for f in data["files"]] == ["docs/guide.md"]
    [session] = data["sessions"]
    assert (session["status"], session["continuations"], session["operation"]) == (
        "written", 1, "create")
    assert data["prompts"][-1].startswith("Created docs/guide.md (320 lines")
    assert (tmp_path / "ws/docs/guide.md").read_text() == document


# -- validation and repair ---------------------------------------------------------------------


def test_a_nul_byte_asks_for_corrections_once_then_the_corrected_content_is_written(run):
    played = run({"conversation": [
        {"user": "Write menu.txt."},
        begin("menu.txt"),
        say("coffee\nte\x00a\nbread\ncake\x00\nDONE\n"),
        {"expect": "Correction round 1 of 3: the content you wrote for menu.txt has 2 problems "
                   "on 2 lines"},
        {"expect": "L2: te\\x00a\n  - column 3: control character"},
        {"expect": "L4: cake\\x00\n"},
        say("L2: tea\nL4: cake\n"),
        {"expect": "Created menu.txt (4 lines"},
        say("Fixed."),
    ]})
    assert_ok(played)
    assert played.text("menu.txt") == "coffee\ntea\nbread\ncake\n"
    assert len(played.result.prompts) == 2  # one batched correction prompt, then the report
    assert ("issues_found", "session_active.finalizing", "session_active.needs_corrections") \
        in played.transitions()
    assert ("corrections_received", "session_active.needs_corrections",
            "session_active.finalizing") in played.transitions()
    issues = played.events("validation_issue")
    assert [(e["attributes"]["orion.line"], e["attributes"]["orion.code"]) for e in issues
            if e["name"] == "issue control-char"] == [(2, "control-char"), (4, "control-char")]
    [session] = played.result.sessions
    assert session["corrections"] == 1 and session["status"] == "written"


def test_a_lone_surrogate_is_shown_escaped_and_corrected(run):
    played = run({"conversation": [
        {"user": "Write menu.txt."},
        begin("menu.txt"),
        say("caf<SURROGATE>\nok\nDONE\n"),
        {"expect": "L1: caf\\xed\\xa0\\x80"},
        {"expect": "invalid UTF-8"},
        say("L1: café"),
        {"expect": "Created menu.txt"},
        say("Fixed."),
    ]}, substitutions={"<SURROGATE>": "\ud800"})
    assert_ok(played)
    assert played.text("menu.txt") == "café\nok\n"


def test_three_failed_correction_rounds_apply_the_safe_replacement(run):
    conversation: list[dict] = [{"user": "Write menu.txt."}, begin("menu.txt"),
                                say("coffee\nte\x00a\nDONE\n")]
    for n in (1, 2, 3):
        conversation += [{"expect": f"Correction round {n} of 3"}, say("L2: still\x00bad")]
    conversation += [{"expect": "Created menu.txt (2 lines"},
                     {"expect": "the safe replacement changed 1 place(s)"}, say("Sorry.")]
    played = run({"conversation": conversation})
    assert_ok(played)
    assert played.text("menu.txt") == "coffee\nstillbad\n"
    assert "This is the last round" in played.result.prompts[2]
    assert ("1 issue(s) left after 3 correction rounds; the safe replacement changed 1 "
            "place(s)") in played.reporter.notices
    [session] = played.result.sessions
    assert session["corrections"] == 3 and session["status"] == "written"


@pytest.mark.parametrize(("target", "content", "shown", "fix", "written"), [
    ("config.json", '{"name": "orion",}\n', "JSON:", 'L1: {"name": "orion"}',
     '{"name": "orion"}\n'),
    ("config.yaml", "name: [orion, check\n", "YAML:", "L1: name: [orion, check]",
     "name: [orion, check]\n"),
    ("tool.py", "def main(:\n    return 1\n", "Python:", "L1: def main():",
     "def main():\n    return 1\n"),
    ("notes.py", "x = 1\n# ... existing code ...\ny = 2\n", "placeholder instead of content",
     "L2: z = 3", "x = 1\nz = 3\ny = 2\n"),
])
def test_syntax_errors_and_placeholders_go_through_the_correction_round(
        run, target, content, shown, fix, written):
    played = run({"conversation": [
        {"user": f"Write {target}."},
        begin(target),
        say(content + "DONE\n"),
        {"expect": "Correction round 1 of 3"},
        {"expect": shown},
        say(fix),
        {"expect": f"Created {target}"},
        say("Fixed."),
    ]})
    assert_ok(played)
    assert played.text(target) == written


def test_a_syntax_error_left_after_the_last_round_is_written_and_reported(run):
    conversation: list[dict] = [{"user": "Write config.json."}, begin("config.json"),
                                say('{"a": 1,}\nDONE\n')]
    for n in (1, 2, 3):
        conversation += [{"expect": f"Correction round {n} of 3"}, say("I cannot fix it.")]
    conversation += [{"expect": "1 issue(s) remain after 3 correction rounds: 1:"},
                     {"expect": "syntax: JSON"}, say("Noted.")]
    played = run({"conversation": conversation})
    assert_ok(played)
    assert played.text("config.json") == '{"a": 1,}\n'


def test_a_file_wrapped_in_one_fence_is_unwrapped(run):
    played = run({"conversation": [
        {"user": "Write docs/readme.md."},
        begin("docs/readme.md"),
        say("```markdown\n# Readme\n\n```sh\norion check\n```\n```\nDONE\n"),
        {"expect": "Created docs/readme.md (5 lines"},
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("docs/readme.md") == "# Readme\n\n```sh\norion check\n```\n"


def test_a_longer_outer_fence_with_nested_blocks_is_unwrapped_too(run):
    played = run({"conversation": [
        {"user": "Write docs/readme.md."},
        begin("docs/readme.md"),
        say("````md\n# Readme\n\n```\nDONE\n```\n````\nDONE\n"),
        {"expect": "Created docs/readme.md (5 lines"},
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("docs/readme.md") == "# Readme\n\n```\nDONE\n```\n"


def test_a_wrapped_guide_with_nested_blocks_and_a_done_line_is_written_whole(run):
    """In a ```markdown wrapper fences nest: a DONE line inside the document is content, the
    wrapper's own closing fence ends it, and what follows the terminator is set aside."""
    guide_text = ("# The protocol\n\n```sh\norion run script.yaml\n```\n\nEnd the content "
                  "with a line:\n\n```text\nDONE\n```\n\nDONE\n\nThat line ends it.\n")
    played = run({"conversation": [
        {"user": "Document the protocol."},
        begin("docs/protocol.md"),
        say("```markdown\n" + guide_text + "```\nDONE\nThe guide is written.",
            chunk_size=7),
        {"expect": "Created docs/protocol.md (15 lines"},
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("docs/protocol.md") == guide_text
    [event] = [e for e in played.events("write_report") if e["name"] == "text set aside"]
    assert event["attributes"]["orion.set_aside.kind"] == "after_done"
    assert event["attributes"]["orion.lines"] == 1


def test_unwrapping_can_be_disabled_in_orion_yaml(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "orion.yaml").write_text("plugins: {disable: [orion_plugins.unwrap_fence]}\n")
    script = tmp_path / "s.yaml"
    script.write_text(dump({"conversation": [
        {"user": "Write app.py."}, begin("app.py"),
        say("```python\nprint('hi')\n```\nDONE\n"),
        {"expect": "Created app.py"}, say("Written.")]}))
    wrapped = CliRunner().invoke(cli, ["run", str(script), "--workspace", str(workspace),
                                       "--json"])
    assert wrapped.exit_code == 1  # .py with a fence is a syntax error: a correction round
    assert "Correction round 1 of 3" in json.loads(wrapped.stdout)["errors"][0]

    (workspace / "orion.yaml").write_text("plugins: {disable: [orion_plugins.unwrap_fence]}\n")
    (workspace / "app.py").unlink(missing_ok=True)
    script.write_text(dump({"conversation": [
        {"user": "Write app.md."}, begin("app.md"),
        say("```markdown\n# App\n```\nDONE\n"),
        {"expect": "Created app.md (3 lines"}, say("Written.")]}))
    kept = CliRunner().invoke(cli, ["run", str(script), "--workspace", str(workspace)])
    assert kept.exit_code == 0, kept.output
    assert (workspace / "app.md").read_text() == "```markdown\n# App\n```\n"


# -- operations --------------------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "plan", "content", "expected", "report"), [
    ("old\n", {"operation": "overwrite"}, "new\nlines\n", "new\nlines\n",
     "Overwrote notes.md (2 lines"),
    ("a\n", {"operation": "append"}, "b\nc\n", "a\nb\nc\n", "Appended 2 lines to notes.md"),
    ("a", {"operation": "append"}, "b\n", "a\nb\n", "Appended 1 line to notes.md"),
    ("one\ntwo\nthree\n", {"operation": "insert", "location_marker": "two",
                           "position": "before"}, "new\n", "one\nnew\ntwo\nthree\n",
     "Inserted 1 line before marker in notes.md"),
    ("one\ntwo\nthree\n", {"operation": "insert", "location_marker": "two",
                           "position": "after"}, "new\n", "one\ntwo\nnew\nthree\n",
     "Inserted 1 line after marker in notes.md"),
    ("start\nold 1\nold 2\nend\n", {"operation": "replace_block", "start_marker": "start",
                                    "end_marker": "end"}, "new\n", "start\nnew\nend\n",
     "Replaced block between markers in notes.md (1 line)"),
    ("foo bar foo\n", {"operation": "replace_all", "search": "foo"}, "baz\n", "baz bar baz\n",
     "Replaced 2 occurrences in notes.md"),
    ("\ufeffa\r\nb\r\n", {"operation": "append"}, "c\nd\n", "\ufeffa\r\nb\r\nc\r\nd\r\n",
     "Appended 2 lines to notes.md"),
    ("\ufeffold\r\n", {"operation": "overwrite"}, "new\nx\n", "\ufeffnew\r\nx\r\n",
     "Overwrote notes.md (2 lines"),
    ("one\r\ntwo\r\n", {"operation": "insert", "location_marker": "one",
                        "position": "after"}, "mid\n", "one\r\nmid\r\ntwo\r\n",
     "Inserted 1 line after marker in notes.md"),
])
def test_each_operation_through_begin_and_streamed_content(run, seed, plan, content, expected,
                                                           report):
    operation = plan.pop("operation")
    played = run({"files": {"notes.md": seed}, "conversation": [
        {"user": "Edit notes.md."},
        begin("notes.md", operation, **plan),
        say(content + "DONE\n"),
        {"expect": report},
        {"expect": "backup saved"},
        say("Edited."),
    ]})
    assert_ok(played)
    assert played.read("notes.md") == expected.encode("utf-8")
    [session] = played.result.sessions
    if operation == "append":  # the range it added: the old length and its hash, no copy
        kept = json.loads((played.state_dir / "appends" / f"{session['id']}.json").read_text())
        assert kept["length"] == len(seed.encode("utf-8"))
        assert kept["sha256"] == hashlib.sha256(seed.encode("utf-8")).hexdigest()
        assert not (played.state_dir / "backups" / session["id"]).exists()
    else:
        backup = played.state_dir / "backups" / session["id"] / "notes.md"
        assert backup.read_bytes() == seed.encode("utf-8")
    undo = json.loads((played.state_dir / "undo" / f"{session['id']}.json").read_text())
    assert undo["target_file"] == "notes.md" and undo["operation"] == operation


def test_create_keeps_crlf_content_as_it_came_without_a_bom(run):
    played = run({"conversation": [
        {"user": "Write win.txt."}, begin("win.txt"),
        say("\ufeffa\r\nb\r\nDONE\r\n"),
        say("Written."),
    ]})
    assert_ok(played)
    assert played.read("win.txt") == b"a\r\nb\r\n"


# -- rejected plans ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("plan", "error"), [
    ({"target_file": "{outside}/x.md"}, "is an absolute path outside the workspace"),
    ({"target_file": "../outside/x.md"}, "escapes the workspace with '..'"),
    ({"target_file": "link/x.md"}, "leads outside the workspace through a symbolic link"),
    ({"target_file": ".git/config"}, "is inside a .git directory"),
    ({"target_file": ".orion/notes.md"}, "is inside Orion's state directory"),
    ({"target_file": "notes.md"}, "notes.md already exists; create only makes new files"),
    ({"target_file": "missing.md", "operation": "overwrite"},
     "missing.md does not exist; operation 'overwrite' edits an existing file"),
    ({"target_file": "notes.md", "operation": "insert", "location_marker": "nowhere",
      "position": "after"}, "location_marker 'nowhere' occurs 0 times in notes.md"),
    ({"target_file": "notes.md", "operation": "insert", "location_marker": "twice",
      "position": "after"}, "location_marker 'twice' occurs 2 times in notes.md (lines 1, 3)"),
    ({"target_file": "notes.md", "operation": "replace_block", "start_marker": "twice",
      "end_marker": "end"}, "start_marker 'twice' occurs 2 times"),
    ({"target_file": "notes.md", "operation": "replace_all", "search": "absent"},
     "search 'absent' occurs 0 times in notes.md; it must occur at least once"),
    ({"target_file": "notes.md", "operation": "insert"},
     "operation 'insert' requires location_marker"),
])
def test_a_rejected_plan_is_a_clear_tool_error_and_writes_nothing(run, tmp_path, plan, error):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.md").write_text("outside\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")
    plan = {"operation": "create", **plan}
    target = plan.pop("target_file").format(outside=outside)
    before = files_under(tmp_path)
    played = run({"files": {"notes.md": "twice\nmiddle\ntwice\nend\n"}, "conversation": [
        {"user": "Write it."},
        begin(target, **plan),
        {"expect": error},
        {"expect": '"kind": "'},
        say("I will choose another path."),
    ]}, workspace=workspace)
    assert_ok(played)
    assert played.result.sessions == [] and played.result.files == []
    after = files_under(tmp_path)
    changed = {path for path in before.keys() | after.keys()
               if before.get(path) != after.get(path)
               and not path.startswith(("ws/.orion/orion.db", "ws/.orion/plans.db",
                                        "script.yaml"))}
    assert changed == {"ws/notes.md"}  # the seed, written by the runner before the run
    assert after["ws/notes.md"] == b"twice\nmiddle\ntwice\nend\n"
    assert not (played.state_dir / "write_sessions").exists() or \
        not list((played.state_dir / "write_sessions").iterdir())


def test_a_rejected_plan_then_a_good_one(run):
    played = run({"conversation": [
        {"user": "Write the notes."},
        begin("../notes.md"),
        {"expect": "escapes the workspace"},
        begin("notes.md"),
        {"expect": "awaiting_content"},
        say("notes\nDONE\n"),
        {"expect": "Created notes.md"},
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("notes.md") == "notes\n"
    assert not (played.workspace.parent / "notes.md").exists()


# -- one session at a time ---------------------------------------------------------------------


def test_a_second_begin_is_denied_naming_the_active_session(run, fixed_ids):
    played = run({"conversation": [
        {"user": "Write a.md and b.md."},
        {"model": {"tool_calls": [
            {"name": "WritePlanTool_begin", "arguments": {
                "intent": "a", "target_file": "docs/a.md", "operation": "create"}},
            {"name": "WritePlanTool_begin", "arguments": {
                "intent": "b", "target_file": "docs/b.md", "operation": "create"}}]}},
        {"expect": f"write session {fixed_ids} for docs/a.md is still open (awaiting_content)"
                   "; finish it with a line DONE before starting another"},
        say("A\nDONE\n"),
        {"expect": "Created docs/a.md"},
        begin("docs/b.md"),
        {"expect": "awaiting_content"},
        say("B\nDONE\n"),
        {"expect": "Created docs/b.md"},
        say("Both written."),
    ]})
    assert_ok(played)
    assert played.text("docs/a.md") == "A\n" and played.text("docs/b.md") == "B\n"
    assert [s["target_file"] for s in played.result.sessions] == ["docs/a.md", "docs/b.md"]


# -- WritePlanTool_execute ---------------------------------------------------------------------


def execute(**arguments: Any) -> dict:
    return {"model": {"tool_calls": [{"name": "WritePlanTool_execute", "arguments": {
        "intent": "small edit", **arguments}}]}}


def test_execute_makes_a_small_edit_at_once(run):
    played = run({"files": {"notes.md": "a\n"}, "conversation": [
        {"user": "Add b."},
        execute(target_file="notes.md", operation="append", content="b\n"),
        {"expect": "Appended 1 line to notes.md; backup saved"},
        say("Added."),
    ]})
    assert_ok(played)
    assert played.text("notes.md") == "a\nb\n"
    assert played.result.sessions == []


@pytest.mark.parametrize("content", ["x" * 5000, "é" * 3000])
def test_execute_refuses_content_over_4_kib_and_points_to_begin(run, content):
    played = run({"files": {"notes.md": "a\n"}, "conversation": [
        {"user": "Add a lot."},
        execute(target_file="notes.md", operation="append", content=content),
        {"expect": "WritePlanTool_begin"},
        say("I will use a write session."),
    ]})
    assert_ok(played)
    assert played.text("notes.md") == "a\n"
    result = [m for m in played.sent(2) if m["role"] == "tool"][-1]["content"]
    assert "4096" in result


def test_execute_refuses_invalid_content_and_writes_nothing(run):
    played = run({"conversation": [
        {"user": "Write config.json."},
        execute(target_file="config.json", operation="create", content='{"a": 1,}'),
        {"expect": "nothing was written: the content has 1 issue(s)"},
        say("I will fix it."),
    ]})
    assert_ok(played)
    assert not (played.workspace / "config.json").exists()


# -- the tool surface --------------------------------------------------------------------------

#: Parameter names that say "file content".
CONTENT_NAMES = re.compile(
    r"(?:^|_)(content|contents|text|body|data|raw|blob|payload|source|code|markdown|lines?)"
    r"(?:$|_)", re.IGNORECASE)
#: The only parameters allowed to carry content: WritePlanTool_execute's small edit, and the
#: plan document of plan mode (ADR "work by plan": the plan is stored in the plan store, never
#: written to a workspace file, and the tool is advertised only while plan work is active).
CONTENT_ALLOWED = {("WritePlanTool_execute", "content"): 4096,
                   ("plan_set_content", "plan_markdown"): None}
#: A string without a bound may only name a path of the workspace (resolved, never written).
UNBOUNDED_ALLOWED = {"path"}
MAX_BOUND = 1024


def string_parameters(schema: dict, defs: dict | None = None, where: str = ""):
    """``(dotted name, schema)`` of every string-typed parameter, at any depth (through
    ``$ref``, ``anyOf``/``oneOf``/``allOf``, objects and arrays)."""
    defs = schema.get("$defs", {}) if defs is None else defs
    if "$ref" in schema:
        yield from string_parameters(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, where)
        return
    for key in ("anyOf", "oneOf", "allOf"):
        for option in schema.get(key, []):
            yield from string_parameters(option, defs, where)
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "string" in types:
        yield where, schema
    if "object" in types or "properties" in schema:
        for name, sub in schema.get("properties", {}).items():
            yield from string_parameters(sub, defs, f"{where}.{name}" if where else name)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            yield from string_parameters(extra, defs, f"{where}.*")
    if "array" in types and isinstance(schema.get("items"), dict):
        yield from string_parameters(schema["items"], defs, f"{where}[]")


def test_no_tool_has_a_parameter_that_can_carry_file_content():
    """The rule, precisely: for every registered tool's OpenAI definition, every string
    parameter (at any depth) is either (1) an enum or const, or (2) bounded by ``maxLength``
    of at most 1024 characters and not named like content (content, text, body, data, raw,
    blob, payload, source, code, markdown, line(s), alone or as a ``_``-separated part), or
    (3) a workspace ``path`` of the read-only tools. The only exceptions are
    WritePlanTool_execute.content (``maxLength`` exactly 4096) and plan_set_content's
    plan_markdown (the plan document; not advertised unless plan work is active)."""
    pm = make_plugin_manager(entrypoints=False, env={})
    tools = pm.registry.tools
    assert "WritePlanTool_begin" in tools and "WritePlanTool_execute" in tools
    found = []
    for name, spec in tools.items():
        parameters = spec.openai_definition()["function"]["parameters"]
        for param, schema in string_parameters(parameters):
            found.append((name, param))
            if "enum" in schema or "const" in schema:
                continue
            key = (name, param)
            if key in CONTENT_ALLOWED:
                assert schema.get("maxLength") == CONTENT_ALLOWED[key], key
                continue
            assert not CONTENT_NAMES.search(param), f"{name}.{param} is named like content"
            if param in UNBOUNDED_ALLOWED and name in ("read_file", "list_files"):
                continue
            bound = schema.get("maxLength")
            assert bound is not None and bound <= MAX_BOUND, \
                f"{name}.{param} is a string of unbounded length ({bound})"
    assert ("WritePlanTool_begin", "target_file") in found
    assert ("WritePlanTool_begin", "search") in found
    assert not [n for n in tools if "finalize" in n.lower()]  # finalizeSession is internal


def test_the_default_tool_surface_advertises_no_content_parameter_but_execute(run):
    played = run({"conversation": [{"user": "hi"}, say("hello")]})
    advertised = {t["function"]["name"]: t["function"]["parameters"]
                  for t in played.model.log[0].sent.tools}
    assert "WritePlanTool_begin" in advertised and "plan_set_content" not in advertised
    carrying = [(name, param) for name, schema in advertised.items()
                for param, s in string_parameters(schema)
                if "enum" not in s and (s.get("maxLength") or 1 << 30) > MAX_BOUND
                and param != "path"]
    assert carrying == [("WritePlanTool_execute", "content")]
    begin_params = set(advertised["WritePlanTool_begin"]["properties"])
    assert begin_params == {"intent", "target_file", "operation", "location_marker",
                            "marker_regex", "position", "start_marker", "end_marker", "search"}


def test_a_marker_longer_than_the_bound_is_refused(run):
    played = run({"files": {"notes.md": "a\n"}, "conversation": [
        {"user": "Insert."},
        begin("notes.md", "insert", location_marker="a" * 1025, position="after"),
        {"expect": "at most 1024 characters"},
        say("Shorter then."),
    ]})
    assert_ok(played)


# -- the history reference ---------------------------------------------------------------------


def test_written_content_is_replaced_in_the_history_by_a_one_line_reference(run):
    document = guide(200, "history")
    cut = document.index("- Step 120")
    played = run({"conversation": [
        {"user": "Write docs/guide.md."},
        begin("docs/guide.md"),
        say(document[:cut], finish_reason="length", chunk_size=200),
        {"expect": "continuation 1/3"},
        say(document[cut:] + "DONE\n", chunk_size=200),
        {"expect": "Created docs/guide.md (200 lines"},
        say("Written."),
        {"user": "Thanks."},
        say("You're welcome."),
    ]})
    assert_ok(played)
    for request in (4, 5):  # the report's request, and the next user turn
        messages = played.sent(request)
        assistant = [m["content"] for m in messages if m["role"] == "assistant"]
        reference = next(c for c in assistant if c and c.startswith("[wrote"))
        match = SHA_REFERENCE.fullmatch(reference)
        assert match and match["path"] == "docs/guide.md" and match["lines"] == "200"
        assert "[continued: docs/guide.md]" in assistant
        assert not any("history task" in (m["content"] or "") for m in messages
                       if m["role"] != "user")
        # only the continuation prompt still quotes the 3 lines before the cut
        quoting = [m["content"] for m in messages if "history task" in (m["content"] or "")]
        assert len(quoting) == 1 and quoting[0].startswith("Your output was cut off.")
        assert quoting[0].count("history task") == 3
    # before the write, the model saw its own content as it sent it (the continuation needs
    # it), although the session took it over from the model system while it streamed
    assert [m["content"] for m in played.sent(3)
            if m["role"] == "assistant" and m["content"]] == [document[:cut]]


def test_replies_cut_off_again_are_in_the_history_as_the_model_sent_them(run):
    # The first part is cut in the middle of a line, which the second part sends again whole
    # (the file has it once); the history keeps every part's text as it came, repeat
    # included, until the file is written.
    document = guide(300, "exact")
    first, second = document.index("- Step 100") + 5, document.index("- Step 200")
    repeat = document.rindex("\n", 0, first) + 1
    played = run({"conversation": [
        {"user": "Write docs/guide.md."},
        begin("docs/guide.md"),
        say(document[:first], finish_reason="length", chunk_size=200),
        {"expect": "continuation 1/3"},
        say(document[repeat:second], finish_reason="length", chunk_size=200),
        {"expect": "continuation 2/3"},
        say(document[second:] + "DONE\n", chunk_size=200),
        {"expect": "Created docs/guide.md (300 lines"},
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("docs/guide.md") == document
    assert [m["content"] for m in played.sent(4) if m["role"] == "assistant" and m["content"]] \
        == [document[:first], document[repeat:second]]
    assert [m["content"] for m in played.sent(5) if m["role"] == "assistant"
            and m["content"]][1:] == ["[continued: docs/guide.md]"] * 2


def test_content_sent_back_for_corrections_is_in_the_history_with_its_done_line(run):
    played = run({"conversation": [
        {"user": "Write menu.txt."},
        begin("menu.txt"),
        say("coffee\nte\x00a\nDONE\nThat is the menu.", chunk_size=5),
        {"expect": "Correction round 1 of 3"},
        say("L2: tea\n"),
        {"expect": "Created menu.txt (2 lines"},
        say("Fixed."),
    ]})
    assert_ok(played)
    assert played.text("menu.txt") == "coffee\ntea\n"
    [content] = [m["content"] for m in played.sent(3) if m["role"] == "assistant"
                 and m["content"]]
    assert content == "coffee\nte\x00a\nDONE\nThat is the menu."


# -- traces ------------------------------------------------------------------------------------


def test_validation_issues_and_the_write_report_are_traced(run):
    played = run({"conversation": [
        {"user": "Write menu.txt."}, begin("menu.txt"),
        say("a\x00b\nDONE\n"),
        {"expect": "Correction round 1"},
        say("L1: ab"),
        say("Fixed."),
    ]})
    assert_ok(played)
    [session] = played.result.sessions
    issue = next(e for e in played.events("validation_issue") if e["name"] == "issue control-char")
    assert issue["session_id"] == session["id"]
    assert issue["attributes"]["orion.line"] == 1 and issue["attributes"]["orion.column"] == 2
    report = next(e for e in played.events("write_report") if e["name"] == "wrote …")
    assert report["attributes"]["orion.target"] == traced("menu.txt")  # a path: its hash
    attributes = report["attributes"]
    assert (attributes["orion.status"], attributes["orion.lines"], attributes["orion.bytes"],
            attributes["orion.operation"]) == ("written", 1, 3, "create")
    assert len(attributes["orion.sha256"]) == 64


def test_streamed_content_never_reaches_orion_state_outside_journals_and_backups(run):
    document = guide(200, "zqx7")  # every line holds the token zqx7
    cut = document.index("- Step 101:") + 20
    bad = document.replace("- Step 150: zqx7 task 150", "- Step 150: zqx7\x00task 150")
    line = bad[:bad.index("\x00")].count("\n") + 1
    played = run({"files": {"docs/guide.md": "old zqx7 guide\n"}, "conversation": [
        {"user": "Rewrite docs/guide.md."},
        begin("docs/guide.md", "overwrite"),
        say(bad[:cut], finish_reason="length", chunk_size=90),
        {"expect": "continuation 1/3"},
        say(bad[cut - 20:] + "DONE\nThe zqx7 guide is complete.\n", chunk_size=90),
        {"expect": "Correction round 1"},
        say(f"L{line}: - Step 150: zqx7 task 150, then check the result of task 150."),
        {"expect": "Overwrote docs/guide.md (200 lines"},
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("docs/guide.md") == document
    allowed = ("write_sessions/", "backups/")
    leaked = {}
    for relative, data in files_under(played.state_dir).items():
        if relative.startswith(allowed):
            continue
        for line in document.splitlines():
            if line.strip() and line.encode() in data:
                leaked.setdefault(relative, line)
        if b"task 1" in data and b"zqx7" in data:
            leaked.setdefault(relative, "fragments")
    assert "orion.db" in files_under(played.state_dir)
    assert leaked == {}


# -- the context block -------------------------------------------------------------------------


def test_the_write_session_block_is_in_every_request_while_open_even_after_compaction(run):
    played = run({"conversation": [
        {"user": "Hello."}, say("Hi."),
        {"user": "Write docs/notes.md."},
        begin("docs/notes.md"),
        say("first part\n"),
        {"user": "Go on."},  # held until the file is written; the idle prompt goes now
        say("second part\n", finish_reason="length"),
        say("third part\nDONE\n"),
        say("Written."),
        {"user": "Thanks."},
        say("Welcome."),
    ]}, orion_yaml="runtime: {max_messages: 3}\n")
    assert_ok(played)
    assert played.text("docs/notes.md") == "first part\nsecond part\nthird part\n"
    # the block is the state after the conversation (the last message), not in the system
    # message, which stays the same bytes from request to request
    blocks = ["A write session is open: docs/notes.md (create" in played.sent(n)[-1]["content"]
              for n in range(1, len(played.model.log) + 1)]
    assert not any("A write session is open" in played.sent(n)[0]["content"]
                   for n in range(1, len(played.model.log) + 1))
    # requests: hello, begin, first part, second (idle prompt), third (continuation),
    # report (with the held "Go on."), thanks
    assert blocks == [False, False, True, True, True, False, False]
    state = played.sent(5)[-1]["content"]
    assert "end it with a line DONE" in state and "2 lines saved" in state
    assert "earlier messages of this conversation were removed" in played.sent(5)[0]["content"]
    assert not any(m["content"] == "Hello." for m in played.sent(5))


# -- chunking does not matter ------------------------------------------------------------------

DOCUMENT = ("# Title\n\nSome text with DONE inside.\n```\nDONE\n```\n  indented\nDONE not alone\n"
            + "\n".join(f"line {n} of the body" for n in range(40)) + "\nlast line")
CUT = DOCUMENT.index("line 17 of") + 4


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)])]


@pytest.mark.slow
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(first=st.lists(st.integers(0, 10_000), max_size=30),
       second=st.lists(st.integers(0, 10_000), max_size=30),
       near_done=st.lists(st.integers(-3, 6), max_size=4),
       cut=st.integers(0, len(DOCUMENT) - 1))
# A cut after the first backtick of a fence line: the line sent again opens the block.
@example(first=[], second=[], near_done=[], cut=DOCUMENT.index("```") + 1)
# A cut right after "DONE" of the line "DONE not alone": the line is unfinished, not the end.
@example(first=[], second=[], near_done=[], cut=DOCUMENT.index("DONE not") + 4)
# A cut right after the "DONE" inside the fence, or after its line: the fence is open, but the
# model did not end the message, so the line is no terminator.
@example(first=[], second=[], near_done=[], cut=DOCUMENT.index("```\nDONE") + 8)
@example(first=[], second=[], near_done=[], cut=DOCUMENT.index("```\nDONE") + 9)
def test_any_chunking_writes_the_same_file(run, first, second, near_done, cut):
    """The same two messages (a part cut anywhere, then a continuation that sends the cut line
    again, as it is asked to, and ends with DONE and a remark), split into chunks anywhere,
    including inside the DONE lines, always write the same file."""
    part1 = DOCUMENT[:cut or CUT]
    part2 = DOCUMENT[DOCUMENT.rfind("\n", 0, len(part1)) + 1:] + "\nDONE\nthanks"
    done = part2.rindex("DONE")
    played = run({"conversation": [
        {"user": "Write doc.md."}, begin("doc.md"),
        say(chunks=split(part1, first), finish_reason="length"),
        {"expect": "continuation 1/3"},
        say(chunks=split(part2, second + [done + d for d in near_done])),
        {"expect": "Created doc.md"},
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("doc.md") == DOCUMENT + "\n"


# -- /reset ------------------------------------------------------------------------------------


def test_reset_sets_an_open_session_aside_and_keeps_its_content(run):
    played = run({"conversation": [
        {"user": "Write notes.md."},
        begin("notes.md"),
        say("kept line\n"),
        {"user": "/reset"},
        {"wait_ms": 5000},                  # no idle prompt: the session no longer listens
        {"user": "Hello again."},
        say("Hello! Nothing is open."),
    ]})
    assert_ok(played)
    assert not (played.workspace / "notes.md").exists()
    [session] = played.result.sessions
    assert session["status"] == "set_aside"
    journal = played.state_dir / "write_sessions" / session["id"]
    assert (journal / "content.txt").read_bytes() == b"kept line\n"
    assert not (journal / "lock").exists()
    assert any("was set aside" in n and "orion sessions recover" in n
               for n in played.reporter.notices)
    assert "A write session is open" not in played.sent(3)[-1]["content"]


# -- the disk-full fallback --------------------------------------------------------------------


def test_a_full_disk_keeps_the_journal_in_memory_and_the_target_is_still_written(run,
                                                                                  monkeypatch):
    import errno

    from orion.write_session.journal import Journal

    def full(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Journal, "_write_pending", full)
    played = run({"conversation": [
        {"user": "Write notes.md."}, begin("notes.md"),
        say("first\nsecond\n", finish_reason="length"),
        {"expect": "continuation 1/3"},
        say("third\nDONE\n"),
        {"expect": "Created notes.md (3 lines"},
        say("Written."),
    ]})
    assert_ok(played)
    assert played.text("notes.md") == "first\nsecond\nthird\n"
    warnings = [n for n in played.reporter.notices if "cannot save notes.md" in n]
    assert len(warnings) == 1 and "ENOSPC" in warnings[0]
    report = next(e for e in played.events("write_report") if e["name"] == "wrote …")
    assert set(report["attributes"]["orion.degraded"]) == {"$text", "sha256"}  # an OS message


# -- validating edits: the file after the edit, issues on the content's lines ------------------

APP = "import sys\n\n\ndef main():\n    return 0\n"


def test_an_edit_of_a_code_file_is_validated_as_the_file_after_the_edit(run):
    played = run({"files": {"src/app.py": APP, "settings.toml": 'host = "localhost"\n'},
                  "conversation": [
        {"user": "Edit."},
        begin("src/app.py", "insert", location_marker="def main():", position="after"),
        say('    """Run the tools."""\nDONE\n'),    # not valid Python alone; fine in place
        {"expect": "Inserted 1 line after marker in src/app.py"},
        begin("settings.toml", "replace_all", search="localhost"),
        say("db.internal\nDONE\n"),                  # not valid TOML alone
        {"expect": "Replaced 1 occurrence in settings.toml"},
        say("Done."),
    ]})
    assert_ok(played)
    assert played.text("src/app.py") == APP.replace(
        "def main():\n", 'def main():\n    """Run the tools."""\n')
    assert played.text("settings.toml") == 'host = "db.internal"\n'
    assert [s["corrections"] for s in played.result.sessions] == [0, 0]


def test_an_edit_that_breaks_the_file_is_corrected_on_the_lines_of_the_content(run):
    played = run({"files": {"src/app.py": APP}, "conversation": [
        {"user": "Add a helper."},
        begin("src/app.py", "insert", location_marker="def main():", position="before"),
        say("def helper(:\n    return 1\n\n\nDONE\n"),
        {"expect": "L1: def helper(:"},              # line 1 of the content (line 4 of the file)
        {"expect": "Python:"},
        say("L1: def helper():"),
        {"expect": "Inserted 4 lines before marker in src/app.py"},
        say("Done."),
    ]})
    assert_ok(played)
    assert "def helper():\n    return 1\n\n\ndef main():" in played.text("src/app.py")


def test_an_error_the_content_causes_further_down_names_the_file_line(run):
    played = run({"files": {"data.json": '{\n  "a": 1\n}\n'}, "conversation": [
        {"user": "Add b."},
        begin("data.json", "insert", location_marker='"a": 1', position="after"),
        say('  , "b": [2\nDONE\n'),                    # the list is never closed
        {"expect": "Correction round 1 of 3"},
        {"expect": "of data.json after the edit)"},
        say('L1:   , "b": [2]'),
        {"expect": "Inserted 1 line after marker in data.json"},
        say("Done."),
    ]})
    assert_ok(played)
    assert json.loads(played.text("data.json")) == {"a": 1, "b": [2]}


def test_a_problem_the_file_had_before_the_edit_is_not_the_contents_fault(run):
    broken = "def main(:\n    return 0\n"
    played = run({"files": {"src/old.py": broken}, "conversation": [
        {"user": "Append a line."},
        begin("src/old.py", "append"),
        say("x = 1\nDONE\n"),
        {"expect": "Appended 1 line to src/old.py"},
        say("Done."),
    ]})
    assert_ok(played)
    assert played.text("src/old.py") == broken + "x = 1\n"


def test_bad_characters_in_appended_content_are_shown_on_the_contents_lines(run):
    played = run({"files": {"notes.md": "one\ntwo\nthree\n"}, "conversation": [
        {"user": "Append."},
        begin("notes.md", "append"),
        say("four\nfi\x00ve\nDONE\n"),
        {"expect": "L2: fi\\x00ve"},
        say("L2: five"),
        {"expect": "Appended 2 lines to notes.md"},
        say("Done."),
    ]})
    assert_ok(played)
    assert played.text("notes.md") == "one\ntwo\nthree\nfour\nfive\n"


def test_execute_validates_an_edit_as_the_file_after_it(run):
    played = run({"files": {"src/app.py": APP}, "conversation": [
        {"user": "Add a docstring."},
        execute(target_file="src/app.py", operation="insert", location_marker="def main():",
                position="after", content='    """Run."""\n'),
        {"expect": "Inserted 1 line after marker in src/app.py"},
        say("Done."),
    ]})
    assert_ok(played)
    assert '    """Run."""\n' in played.text("src/app.py")
