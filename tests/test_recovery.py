"""Crash recovery of write sessions on real directories: orphans left by scripted conversations
played through the real runtime (or built with the journal where that is clearer), the startup
handling of ``orion run``, ``orion sessions`` (list, recover, discard, clean, undo) and the
idempotent repair of a crash between the write and the cleanup."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from orion.cli import cli
from orion.clock import VirtualClock
from orion.models.script import load_script
from orion.models.scripted import ScriptedModel
from orion.hooks.manager import make_plugin_manager
from orion.runtime.report import Reporter
from orion.runtime.runner import play
from orion.runtime.runtime import Runtime
from orion.write_session.journal import Journal, _start_time, mark
from orion.write_session.manager import manager_for
from orion.write_session.operations import execute
from orion.write_session.plan import WritePlan, check_plan
from orion.write_session.durations import parse_duration
from orion.write_session.orphan_commands import clean, discard, mark_resume, undo
from orion.write_session.orphans import (AmbiguousSession, RecoveryError, SessionLive,
                                         SessionNotFound, UndoRefused, resolve_id, scan)
from orion.write_session.recover import recover_finalize

HOUR = 3_600_000.0

BEGIN = """\
  - user: "Write the guide."
  - model:
      tool_calls:
        - name: WritePlanTool_begin
          arguments: {intent: "operator guide", target_file: TARGET, operation: OPERATION}
"""


class Notes(Reporter):
    def __init__(self):
        self.notices: list[str] = []
        self.prompts: list[str] = []

    def notice(self, text):
        self.notices.append(text)

    def prompt(self, text):
        self.prompts.append(text)


@pytest.fixture
def pm():
    return make_plugin_manager(entrypoints=False, env={})


@pytest.fixture
def ws(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


def state_dir(ws: Path) -> Path:
    return ws / ".orion"


def play_text(tmp_path, ws, text, pm, reporter=None, name="script.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return asyncio.run(play(load_script(path), workspace=ws, plugins=pm, reporter=reporter))


def crash_script(content: str, *, target="docs/guide.md", operation="create", files="") -> str:
    """Begins a session and streams ``content`` that ends without DONE; then the script (and
    the process, as far as the session knows) ends: the journal stays behind."""
    begin = BEGIN.replace("TARGET", target).replace("OPERATION", operation)
    return (files + "conversation:\n" + begin
            + f"  - model:\n      text: {json.dumps(content)}\n")


def make_orphan(tmp_path, ws, pm, content="# Guide\n\nline one\nline two\n", **kw):
    before = {o.id for o in scan(state_dir(ws))}
    result = play_text(tmp_path, ws, crash_script(content, **kw), pm, name="crash.yaml")
    assert result.ok, result.errors
    (orphan,) = [o for o in scan(state_dir(ws)) if o.id not in before]
    return orphan


def hello(tmp_path, ws, pm, settings: str = ""):
    """An ``orion run`` that does nothing but start (and so handle the orphans)."""
    notes = Notes()
    result = play_text(tmp_path, ws, settings + textwrap.dedent("""\
        conversation:
          - user: "Hello"
          - model: {text: "Hi."}
        """), pm, notes, name="hello.yaml")
    assert result.ok, result.errors
    return notes


def runtime_at(ws, pm, now_ms, reporter=None):
    script = load_script("inline.yaml", text="conversation:\n  - user: hi\n")
    return Runtime(model=ScriptedModel(script.cursor()), plugins=pm, workspace=ws,
                   clock=VirtualClock(start_ms=now_ms), reporter=reporter or Notes())


def set_saved(orphan, ms: float) -> None:
    """Pretend the orphan was last saved at ``ms`` (as if it were older: by both clocks,
    as when that much time passed)."""
    path = orphan.directory / "state.json"
    state = json.loads(path.read_text())
    if state.get("last_save_boot"):
        state["last_save_boot"][1] -= state["last_save_ms"] - ms
    state["last_save_ms"] = ms
    path.write_text(json.dumps(state))
    os.utime(orphan.directory, (ms / 1000.0, ms / 1000.0))  # as a directory left that long ago


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "30"])
    yield proc
    proc.kill()
    proc.wait()


def hold_lock(directory: Path, proc) -> None:
    """Make a real running process (not this one) the owner of a session."""
    started = _start_time(proc.pid)
    text = f"{proc.pid}\n" if started is None else f"{proc.pid}\n{started}\n"
    (directory / "lock").write_text(text)


# -- scan -----------------------------------------------------------------------------------------


def test_a_crashed_session_is_listed_with_its_metadata(tmp_path, ws, pm):
    orphan = make_orphan(tmp_path, ws, pm)
    assert orphan.target_file == "docs/guide.md"
    assert orphan.operation == "create" and orphan.intent == "operator guide"
    assert (orphan.lines, orphan.bytes) == (4, len(b"# Guide\n\nline one\nline two\n"))
    assert orphan.status == "open" and not orphan.live and orphan.problems == []
    assert orphan.state == "session_active.awaiting_done_or_more_content"
    assert orphan.created_ms is not None and orphan.last_save_ms >= orphan.created_ms
    assert not (ws / "docs" / "guide.md").exists()
    data = orphan.to_json()
    assert json.loads(json.dumps(data)) == data


def test_damaged_sessions_are_listed_with_their_problems(ws):
    root = state_dir(ws) / "write_sessions"
    (root / "nometa").mkdir(parents=True)
    (root / "corrupt").mkdir()
    (root / "corrupt" / "metadata.json").write_text("{not json")
    (root / "badplan").mkdir()
    (root / "badplan" / "metadata.json").write_text(json.dumps(
        {"session_id": "badplan", "target_file": "x.md", "operation": "explode"}))
    (root / "badplan" / "state.json").write_text("[1, 2]")
    found = {o.id: o for o in scan(state_dir(ws))}
    assert set(found) == {"nometa", "corrupt", "badplan"}
    assert found["nometa"].problems == ["metadata.json is missing"]
    assert "metadata.json is not valid JSON" in found["corrupt"].problems[0]
    assert any("no valid write plan" in p for p in found["badplan"].problems)
    assert "state.json is not a JSON object" in found["badplan"].problems
    with pytest.raises(RecoveryError, match="no usable metadata.json"):
        found["nometa"].plan()


def test_scan_of_a_state_dir_without_sessions_is_empty(tmp_path):
    assert scan(tmp_path / "nothing") == []


def test_ids_resolve_by_unique_prefix(ws):
    root = state_dir(ws) / "write_sessions"
    for sid in ("aaaa1111", "aaaa2222", "bbbb3333"):
        Journal.create(root / sid, {"session_id": sid, "target_file": "a.md",
                                    "operation": "create", "intent": "x"}).close()
    assert resolve_id(state_dir(ws), "bbb").id == "bbbb3333"
    assert resolve_id(state_dir(ws), "aaaa1111").id == "aaaa1111"
    with pytest.raises(AmbiguousSession) as info:
        resolve_id(state_dir(ws), "aaaa")
    assert info.value.candidates == ["aaaa1111", "aaaa2222"]
    assert "aaaa1111, aaaa2222" in str(info.value)
    with pytest.raises(SessionNotFound, match="no write session 'cccc'"):
        resolve_id(state_dir(ws), "cccc")


# -- discard, clean ---------------------------------------------------------------------------


def test_discard_removes_the_session(tmp_path, ws, pm):
    orphan = make_orphan(tmp_path, ws, pm)
    assert discard(state_dir(ws), orphan.short).id == orphan.id
    assert not orphan.directory.exists()
    with pytest.raises(SessionNotFound):
        discard(state_dir(ws), orphan.short)


def test_clean_removes_sessions_by_the_age_of_their_last_save(tmp_path, ws, pm):
    old = make_orphan(tmp_path, ws, pm)
    new = make_orphan(tmp_path, ws, pm)
    set_saved(old, 1_000_000.0)
    set_saved(new, 1_000_000.0 + 2 * HOUR)
    now = 1_000_000.0 + 2.5 * HOUR
    assert [o.id for o in clean(state_dir(ws), HOUR, now)] == [old.id]
    assert not old.directory.exists() and new.directory.exists()
    assert clean(state_dir(ws), HOUR, now) == []
    assert [o.id for o in clean(state_dir(ws), 0, now)] == [new.id]
    assert scan(state_dir(ws)) == []


def test_clean_reports_what_it_removed(tmp_path, ws, pm):
    old = make_orphan(tmp_path, ws, pm)
    set_saved(old, 5_000.0)
    removed = clean(state_dir(ws), HOUR, 5_000.0 + HOUR + 1)
    assert [o.id for o in removed] == [old.id]
    assert clean(state_dir(ws), HOUR, 5_000.0 + HOUR + 1) == []


def test_live_sessions_are_never_touched(tmp_path, ws, pm, sleeper):
    orphan = make_orphan(tmp_path, ws, pm)
    hold_lock(orphan.directory, sleeper)
    files = sorted(p.name for p in orphan.directory.iterdir())
    (listed,) = scan(state_dir(ws))
    assert listed.live
    set_saved(orphan, 1.0)  # ancient: the TTL would remove it, were it not live
    assert clean(state_dir(ws), 0, time.time() * 1000.0 + 10 * HOUR) == []
    with pytest.raises(SessionLive):
        discard(state_dir(ws), orphan.short)
    with pytest.raises(SessionLive):
        mark_resume(state_dir(ws), orphan.short)
    with pytest.raises(SessionLive):
        recover_finalize(ws, state_dir(ws), orphan.short, pm)
    notes = hello(tmp_path, ws, pm)
    assert not any(orphan.short in n for n in notes.notices)
    assert sorted(p.name for p in orphan.directory.iterdir()) == files
    assert not (ws / "docs" / "guide.md").exists()
    sleeper.kill()
    sleeper.wait()
    assert not scan(state_dir(ws))[0].live


# -- startup ----------------------------------------------------------------------------------


def test_startup_offers_recovery_of_an_orphan(tmp_path, ws, pm):
    orphan = make_orphan(tmp_path, ws, pm)
    notes = hello(tmp_path, ws, pm)
    (notice,) = [n for n in notes.notices if orphan.short in n]
    assert notice.startswith(f"orphaned write session {orphan.short} for docs/guide.md "
                             "(4 lines, saved ")
    assert notice.endswith(f": orion sessions recover {orphan.short} --finalize | --continue, "
                           f"or orion sessions discard {orphan.short}")
    assert orphan.directory.exists()  # an offer, nothing more


def test_startup_removes_orphans_older_than_the_ttl(tmp_path, ws, pm):
    old = make_orphan(tmp_path, ws, pm)
    fresh = make_orphan(tmp_path, ws, pm)
    now = fresh.last_save_ms + 60_000
    set_saved(old, now - 2 * HOUR)
    notes = Notes()
    actions = manager_for(runtime_at(ws, pm, now, notes)).at_start  # what it did as it started
    assert {a.session_id: a.action for a in actions} == {old.id: "trashed",
                                                          fresh.id: "offered"}
    assert not old.directory.exists() and fresh.directory.exists()
    trashed = state_dir(ws) / "trash" / old.id
    assert (trashed / "content.txt").read_text() == "# Guide\n\nline one\nline two\n"
    assert f"moved orphaned write session {old.short} for docs/guide.md (4 lines, saved " \
           f"2 h ago) to {trashed}: older than 1 h. It is deleted from there after another " \
           f"1 h; `mv {trashed} {state_dir(ws) / 'write_sessions'}/` brings it back" \
           in notes.notices
    assert any("saved 1 min ago" in n and fresh.short in n for n in notes.notices)


def test_startup_ttl_comes_from_the_setting_and_0_keeps_orphans(tmp_path, ws, pm):
    old = make_orphan(tmp_path, ws, pm)
    set_saved(old, 1.0)
    notes = hello(tmp_path, ws, pm, "settings: {write_session: {orphan_ttl_ms: 0}}\n")
    assert old.directory.exists()
    assert any(old.short in n and "orphaned" in n for n in notes.notices)
    notes = hello(tmp_path, ws, pm)  # the default, 1 h
    assert not old.directory.exists()
    assert any(n.startswith(f"moved orphaned write session {old.short}")
               for n in notes.notices)


def test_many_orphans_are_summed_up_in_one_line_and_the_flagged_ones_still_handled(tmp_path,
                                                                                  ws, pm):
    # Twelve sessions from other runs: one line for them all, naming the newest, and none
    # opened beyond that; a session caught while writing its target is still repaired, one
    # marked for --continue still continued, and one past the TTL still removed.
    plain = [make_orphan(tmp_path, ws, pm, content=f"# Notes {i}\n\nline\n",
                         target=f"docs/notes-{i}.md") for i in range(12)]
    expired = plain.pop(0)
    set_saved(expired, time.time() * 1000.0 - 3 * HOUR)
    newest = plain[-1]
    os.utime(newest.directory)  # the newest change of them all
    marked = mark_resume(state_dir(ws), plain.pop(5).id)
    target, written = written_but_not_cleaned(ws)
    notes = Notes()
    runtime_at(ws, pm, time.time() * 1000.0, notes)  # a runtime handles orphans as it starts
    summed = [n for n in notes.notices if "write sessions from other runs" in n]
    assert len(summed) == 1, notes.notices
    assert summed[0].startswith(f"10 write sessions from other runs are kept in "
                                f"{state_dir(ws) / 'write_sessions'}; the newest is "
                                f"{newest.short} for docs/notes-11.md"), summed[0]
    assert "`orion sessions list` shows them all" in summed[0]
    assert not any(o.short in n for o in plain if o is not newest for n in notes.notices)
    assert "repaired session feedface: docs/guide.md was already written" in notes.notices
    assert not written.exists()
    assert any(n.startswith(f"continuing write session {marked.short}") for n in notes.notices)
    assert any(n.startswith(f"moved orphaned write session {expired.short}")
               for n in notes.notices)
    assert not expired.directory.exists()
    assert all(o.directory.exists() for o in plain)


def test_startup_flags_damaged_sessions(tmp_path, ws, pm):
    broken = state_dir(ws) / "write_sessions" / "deadbeef00"
    broken.mkdir(parents=True)
    (broken / "metadata.json").write_text("garbage")
    notes = hello(tmp_path, ws, pm)
    (notice,) = [n for n in notes.notices if "deadbeef" in n]
    assert notice.startswith("damaged write session deadbeef (metadata.json is not valid JSON")
    assert notice.endswith("orion sessions discard deadbeef")
    assert broken.exists()


# -- recover --finalize -----------------------------------------------------------------------


def test_recover_finalize_writes_the_target_once(tmp_path, ws, pm):
    content = "# Guide\n\nline one\nline two\n"
    orphan = make_orphan(tmp_path, ws, pm, content)
    result = recover_finalize(ws, state_dir(ws), orphan.short, pm)
    target = ws / "docs" / "guide.md"
    assert result.status == "recovered"
    assert target.read_bytes() == content.encode()
    assert result.sha256 == sha(content.encode()) and result.lines == 4
    assert not result.complete and "may be incomplete" in result.report
    assert not orphan.directory.exists()
    record = json.loads((state_dir(ws) / "undo" / f"{orphan.id}.json").read_text())
    assert record["status"] == "recovered" and record["sha256"] == sha(content.encode())
    with pytest.raises(SessionNotFound):
        recover_finalize(ws, state_dir(ws), orphan.short, pm)
    assert target.read_bytes() == content.encode()


def test_recover_finalize_of_an_append_appends_once(tmp_path, ws, pm):
    files = 'files: {notes.md: "# Notes\\n"}\n'
    orphan = make_orphan(tmp_path, ws, pm, "- one\n- two\n", target="notes.md",
                         operation="append", files=files)
    result = recover_finalize(ws, state_dir(ws), orphan.id, pm)
    assert (ws / "notes.md").read_text() == "# Notes\n- one\n- two\n"
    # An append keeps the range it added, not a copy of the file: the old length and hash.
    assert result.backup is not None
    kept = json.loads(Path(result.backup).read_text())
    assert kept == {"target_file": "notes.md", "length": 8, "sha256": sha(b"# Notes\n")}
    with pytest.raises(SessionNotFound):
        recover_finalize(ws, state_dir(ws), orphan.id, pm)
    assert (ws / "notes.md").read_text() == "# Notes\n- one\n- two\n"


def test_recover_finalize_repairs_invalid_bytes_without_a_model(tmp_path, ws, pm):
    orphan = make_orphan(tmp_path, ws, pm, "ok line\nbad \x07 bell\n", target="a.txt")
    result = recover_finalize(ws, state_dir(ws), orphan.short, pm)
    assert result.replaced == 1 and "safe replacement changed 1" in result.report
    assert b"\x07" not in (ws / "a.txt").read_bytes()
    assert (ws / "a.txt").read_bytes().startswith(b"ok line\n")


def test_recover_finalize_refuses_when_the_plan_no_longer_fits(tmp_path, ws, pm):
    orphan = make_orphan(tmp_path, ws, pm)
    (ws / "docs" / "guide.md").parent.mkdir(parents=True, exist_ok=True)
    (ws / "docs" / "guide.md").write_text("someone else's guide\n")
    with pytest.raises(RecoveryError, match="already exists"):
        recover_finalize(ws, state_dir(ws), orphan.short, pm)
    assert orphan.directory.exists() and not Journal.is_live(orphan.directory)
    assert (ws / "docs" / "guide.md").read_text() == "someone else's guide\n"


def test_recover_finalize_refuses_a_session_without_content(ws, pm):
    (ws / "keep.md").write_text("precious\n")
    plan = WritePlan(intent="x", target_file="keep.md", operation="overwrite")
    Journal.create(state_dir(ws) / "write_sessions" / "e0e0e0e0e0", {
        "session_id": "e0e0e0e0e0", "target_file": "keep.md", "operation": "overwrite",
        "intent": "x", "plan": plan.model_dump(mode="json")}).close()
    with pytest.raises(RecoveryError, match="saved no content"):
        recover_finalize(ws, state_dir(ws), "e0e0", pm)
    assert (ws / "keep.md").read_text() == "precious\n"


# -- the crash between the write and the cleanup ----------------------------------------------


def written_but_not_cleaned(ws, *, operation="overwrite", seed=b"old line\n",
                            content=b"new line 1\nnew line 2\n", sid="feedface12345678"):
    """What a crash right after the atomic write leaves: the journal with its finalizing
    record, the target holding the new bytes, the backup of the pre-image, no undo record."""
    target = ws / "docs" / "guide.md"
    target.parent.mkdir(parents=True, exist_ok=True)
    if seed is not None:
        target.write_bytes(seed)
    plan = WritePlan(intent="operator guide", target_file="docs/guide.md", operation=operation)
    checked = check_plan(plan, workspace=ws, state_dir=state_dir(ws))
    journal = Journal.create(state_dir(ws) / "write_sessions" / sid, {
        "session_id": sid, "conversation_id": "c1", "intent": plan.intent,
        "target_file": checked.relative, "operation": operation,
        "plan": plan.model_dump(mode="json")})
    journal.append(content.decode())
    mark(journal.directory, "finalizing")  # as WriteSession.write does before the write
    journal.flush({"status": "active", "finalizing": {
        "content_sha256": sha(content), "before_sha256": sha(seed) if seed is not None
        else None}})
    execute(checked, content, state_dir=state_dir(ws), session_id=sid)
    journal.close()  # the process is gone: its lock with it
    return target, journal.directory


def test_startup_only_cleans_up_a_session_that_had_written(tmp_path, ws, pm):
    target, directory = written_but_not_cleaned(ws)
    before = os.stat(target)
    (orphan,) = scan(state_dir(ws))
    assert orphan.status == "finalizing"
    notes = hello(tmp_path, ws, pm)
    assert "repaired session feedface: docs/guide.md was already written" in notes.notices
    after = os.stat(target)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert target.read_bytes() == b"new line 1\nnew line 2\n"
    assert not directory.exists()
    record = json.loads((state_dir(ws) / "undo" / "feedface12345678.json")
                        .read_text())
    assert record["status"] == "repaired" and record["sha256"] == sha(target.read_bytes())
    assert undo(ws, state_dir(ws), "feedface").action == "restored"
    assert target.read_bytes() == b"old line\n"


def test_recover_finalize_of_a_session_that_had_appended_only_cleans_up(ws, pm):
    target, directory = written_but_not_cleaned(ws, operation="append")
    assert target.read_bytes() == b"old line\nnew line 1\nnew line 2\n"
    before = os.stat(target)
    result = recover_finalize(ws, state_dir(ws), "feedface", pm)
    assert result.status == "repaired"
    assert target.read_bytes() == b"old line\nnew line 1\nnew line 2\n"
    assert os.stat(target).st_mtime_ns == before.st_mtime_ns
    assert not directory.exists()


def test_a_created_file_that_was_written_is_repaired_too(tmp_path, ws, pm):
    target, directory = written_but_not_cleaned(ws, operation="create", seed=None)
    before = os.stat(target)
    notes = hello(tmp_path, ws, pm)
    assert "repaired session feedface: docs/guide.md was already written" in notes.notices
    assert os.stat(target).st_ino == before.st_ino and not directory.exists()
    assert undo(ws, state_dir(ws), "feedface").action == "deleted"
    assert not target.exists()


def test_an_append_that_may_have_happened_is_not_done_again(ws, pm):
    target, directory = written_but_not_cleaned(ws, operation="append")
    target.write_bytes(target.read_bytes() + b"edited afterwards\n")
    with pytest.raises(RecoveryError, match="may have happened already; nothing written"):
        recover_finalize(ws, state_dir(ws), "feedface", pm)
    assert target.read_bytes() == b"old line\nnew line 1\nnew line 2\nedited afterwards\n"
    assert directory.exists()


def test_a_finalizing_session_whose_write_did_not_happen_is_written_once(tmp_path, ws, pm):
    target = ws / "docs" / "guide.md"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"old line\n")
    sid = "0123456789abcdef"
    plan = WritePlan(intent="guide", target_file="docs/guide.md", operation="append")
    journal = Journal.create(state_dir(ws) / "write_sessions" / sid, {
        "session_id": sid, "intent": "guide", "target_file": "docs/guide.md",
        "operation": "append", "plan": plan.model_dump(mode="json")})
    journal.append("more\n")
    journal.flush({"finalizing": {"content_sha256": sha(b"more\n"),
                                  "before_sha256": sha(b"old line\n")}})
    journal.close()  # crashed before the backup and the write
    notes = hello(tmp_path, ws, pm)
    assert any(n.startswith("orphaned write session 01234567") for n in notes.notices)
    assert target.read_bytes() == b"old line\n"
    result = recover_finalize(ws, state_dir(ws), "0123", pm)
    assert result.status == "recovered" and result.complete
    assert target.read_bytes() == b"old line\nmore\n"


# -- recover --continue -----------------------------------------------------------------------


def test_recover_continue_then_run_finishes_the_file(tmp_path, ws, pm):
    orphan = make_orphan(tmp_path, ws, pm, "# Guide\n\nline one\nline two\n")
    marked = mark_resume(state_dir(ws), orphan.short)
    assert marked.status == "resume" and scan(state_dir(ws))[0].status == "resume"
    notes = Notes()
    result = play_text(tmp_path, ws, """\
        conversation:
          - expect: "continue"
          - expect: "> line two"
          - model:
              text: "line three\\nline four\\nDONE\\n"
          - expect: "Created docs/guide.md"
          - model: {text: "The guide is written."}
        """, pm, notes, name="resume.yaml")
    assert result.ok, result.errors
    assert (ws / "docs" / "guide.md").read_text() == \
        "# Guide\n\nline one\nline two\nline three\nline four\n"
    assert not orphan.directory.exists()
    assert [f.path for f in result.files] == ["docs/guide.md"]
    assert [(s["id"], s["status"], s["continuations"]) for s in result.sessions] == \
        [(orphan.id, "written", 1)]
    assert any(n.startswith(f"continuing write session {orphan.short} for docs/guide.md")
               for n in notes.notices)
    assert "4 lines are saved" in notes.prompts[0]


def test_recover_continue_through_the_cli(tmp_path, ws, pm):
    orphan = make_orphan(tmp_path, ws, pm, "alpha\nbeta\n", target="notes.txt")
    runner = CliRunner()
    out = runner.invoke(cli, ["sessions", "recover", orphan.short, "--continue",
                              "--workspace", str(ws)])
    assert out.exit_code == 0, out.output
    script = tmp_path / "go_on.yaml"
    script.write_text(textwrap.dedent("""\
        conversation:
          - expect: "continue"
          - model: {text: "gamma\\nDONE\\n"}
          - model: {text: "Done."}
        """))
    out = runner.invoke(cli, ["run", str(script), "--workspace", str(ws), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["files"][0]["path"] == "notes.txt"
    assert (ws / "notes.txt").read_text() == "alpha\nbeta\ngamma\n"


def test_a_continued_session_that_crashed_after_done_is_finalized(tmp_path, ws, pm):
    """A snapshot in ``finalizing`` cannot take ``truncated``: the content was complete, so
    adopting it validates and writes it."""
    orphan = make_orphan(tmp_path, ws, pm, "complete\n", target="c.txt")
    path = orphan.directory / "state.json"
    state = json.loads(path.read_text())
    state["snapshot"]["state"] = "session_active.finalizing"
    state["snapshot"]["timers"] = []
    path.write_text(json.dumps(state))
    mark_resume(state_dir(ws), orphan.short)
    result = play_text(tmp_path, ws, """\
        conversation:
          - expect: "Created c.txt"
          - model: {text: "Written."}
        """, pm, name="after_done.yaml")
    assert result.ok, result.errors
    assert (ws / "c.txt").read_text() == "complete\n"


def test_a_session_that_waited_for_corrections_asks_for_them_again(tmp_path, ws, pm):
    orphan = make_orphan(tmp_path, ws, pm, "fine\nbad \x07 bell\n", target="n.txt")
    path = orphan.directory / "state.json"
    state = json.loads(path.read_text())
    snapshot = state["snapshot"]
    snapshot.update(state="session_active.needs_corrections", timers=[])
    snapshot["context"].update(corrections=1, outbox=["the old prompt"])
    path.write_text(json.dumps(state))
    mark_resume(state_dir(ws), orphan.short)
    result = play_text(tmp_path, ws, """\
        conversation:
          - expect: "Correction round 2 of 3"
          - expect: "L2: bad \\\\x07 bell"
          - model: {text: "L2: bad bell"}
          - expect: "Created n.txt"
          - model: {text: "Written."}
        """, pm, name="corrections.yaml")
    assert result.ok, result.errors
    assert "the old prompt" not in result.prompts
    assert (ws / "n.txt").read_text() == "fine\nbad bell\n"


def test_a_snapshot_of_another_statechart_version_still_continues(tmp_path, ws, pm):
    orphan = make_orphan(tmp_path, ws, pm, "one\ntwo\n", target="v.txt")
    path = orphan.directory / "state.json"
    state = json.loads(path.read_text())
    state["snapshot"]["definition_hash"] = "0" * 64
    path.write_text(json.dumps(state))
    mark_resume(state_dir(ws), orphan.short)
    result = play_text(tmp_path, ws, """\
        conversation:
          - expect: "2 lines are saved"
          - model: {text: "three\\nDONE\\n"}
          - model: {text: "Written."}
        """, pm, name="other_version.yaml")
    assert result.ok, result.errors
    assert (ws / "v.txt").read_text() == "one\ntwo\nthree\n"


def test_a_session_that_cannot_continue_is_offered_instead(tmp_path, ws, pm):
    orphan = make_orphan(tmp_path, ws, pm)
    mark_resume(state_dir(ws), orphan.short)
    (ws / "docs").mkdir()
    (ws / "docs" / "guide.md").write_text("in the way\n")  # create cannot write it now
    notes = hello(tmp_path, ws, pm)
    (notice,) = [n for n in notes.notices if orphan.short in n]
    assert notice.startswith(f"could not continue write session {orphan.short}")
    assert "already exists" in notice and "--finalize | --continue" in notice
    assert scan(state_dir(ws))[0].status == "open"


# -- undo -------------------------------------------------------------------------------------


def overwrite_session(tmp_path, ws, pm, new="new text\n"):
    reply = json.dumps(new + "DONE\n")
    result = play_text(tmp_path, ws, f"""\
        files: {{docs/guide.md: "old text\\n"}}
        conversation:
          - user: "Rewrite the guide."
          - model:
              tool_calls:
                - name: WritePlanTool_begin
                  arguments: {{intent: rewrite, target_file: docs/guide.md,
                               operation: overwrite}}
          - model: {{text: {reply}}}
          - model: {{text: "Done."}}
        """, pm, name="overwrite.yaml")
    assert result.ok, result.errors
    (session,) = result.sessions
    return session["id"]


def test_undo_restores_the_pre_image(tmp_path, ws, pm):
    sid = overwrite_session(tmp_path, ws, pm)
    target = ws / "docs" / "guide.md"
    assert target.read_text() == "new text\n"
    result = undo(ws, state_dir(ws), sid[:8])
    assert result.action == "restored" and target.read_text() == "old text\n"
    record = json.loads((state_dir(ws) / "undo" / f"{sid}.json").read_text())
    assert record["undone"] is True
    with pytest.raises(UndoRefused, match="already undone"):
        undo(ws, state_dir(ws), sid[:8])


def test_undo_refuses_after_a_later_change(tmp_path, ws, pm):
    sid = overwrite_session(tmp_path, ws, pm)
    target = ws / "docs" / "guide.md"
    target.write_text("new text\nedited by hand\n")
    with pytest.raises(UndoRefused) as info:
        undo(ws, state_dir(ws), sid[:8])
    assert str(info.value) == (f"docs/guide.md changed since session {sid[:8]} wrote it; "
                               "nothing undone")
    assert target.read_text() == "new text\nedited by hand\n"


def test_undo_of_a_created_file_deletes_it(tmp_path, ws, pm):
    orphan = make_orphan(tmp_path, ws, pm, "fresh\n", target="new.md")
    recover_finalize(ws, state_dir(ws), orphan.short, pm)
    assert (ws / "new.md").exists()
    assert undo(ws, state_dir(ws), orphan.short).action == "deleted"
    assert not (ws / "new.md").exists()


def test_undo_of_an_unknown_session(ws):
    with pytest.raises(SessionNotFound, match="no undo record"):
        undo(ws, state_dir(ws), "abc")


# -- the command line -------------------------------------------------------------------------


def invoke(*args):
    return CliRunner().invoke(cli, ["sessions", *map(str, args)])


def test_cli_list(tmp_path, ws, pm):
    out = invoke("list", "--workspace", ws)
    assert out.exit_code == 0 and "no write sessions" in out.stderr
    orphan = make_orphan(tmp_path, ws, pm)
    out = invoke("list", "--workspace", ws, "--json")
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.stdout)
    assert (row["id"], row["target_file"], row["status"], row["live"]) == \
        (orphan.id, "docs/guide.md", "open", False)
    out = invoke("list", "--workspace", ws)
    assert out.exit_code == 0 and out.stdout == "" and orphan.short in out.stderr


def test_cli_state_dir_option(tmp_path, pm):
    ws = tmp_path / "ws2"
    state = tmp_path / "state"
    path = tmp_path / "crash.yaml"
    path.write_text(crash_script("a\n", target="a.txt"))
    result = asyncio.run(play(load_script(path), workspace=ws, plugins=pm, state_dir=state))
    assert result.ok
    out = invoke("list", "--workspace", ws, "--state-dir", state, "--json")
    (row,) = json.loads(out.stdout)
    out = invoke("recover", row["id"][:8], "--finalize", "--workspace", ws, "--state-dir",
                 state)
    assert out.exit_code == 0, out.output
    assert "recovered" in out.stderr and (ws / "a.txt").read_text() == "a\n"
    out = invoke("undo", row["id"][:8], "--workspace", ws, "--state-dir", state)
    assert out.exit_code == 0, out.output
    assert not (ws / "a.txt").exists()


def test_cli_recover_finalize_and_exit_codes(tmp_path, ws, pm):
    orphan = make_orphan(tmp_path, ws, pm)
    assert invoke("recover", orphan.short, "--workspace", ws).exit_code == 2
    out = invoke("recover", orphan.short, "--finalize", "--workspace", ws)
    assert out.exit_code == 0, out.output
    assert out.stderr.startswith("recovered Created docs/guide.md (4 lines")
    assert f"orion sessions undo {orphan.short}" in out.stderr
    out = invoke("recover", orphan.short, "--finalize", "--workspace", ws)
    assert out.exit_code == 1 and "no write session" in out.stderr
    (ws / "docs" / "guide.md").write_text("changed\n")
    out = invoke("undo", orphan.short, "--workspace", ws)
    assert out.exit_code == 1
    assert "docs/guide.md changed since session" in out.stderr
    assert (ws / "docs" / "guide.md").read_text() == "changed\n"


def test_cli_discard_and_clean(tmp_path, ws, pm):
    first = make_orphan(tmp_path, ws, pm)
    second = make_orphan(tmp_path, ws, pm)
    out = invoke("discard", first.short, "--workspace", ws)
    assert out.exit_code == 0 and f"discarded write session {first.short}" in out.stderr
    assert invoke("discard", first.short, "--workspace", ws).exit_code == 1
    assert invoke("clean", "--older-than", "soon", "--workspace", ws).exit_code == 2
    out = invoke("clean", "--workspace", ws)  # default 1h: the session is fresh
    assert out.exit_code == 0 and "0 write session(s) removed" in out.stderr
    out = invoke("clean", "--older-than", "0", "--workspace", ws)
    assert out.exit_code == 0 and f"removed write session {second.short}" in out.stderr
    assert scan(state_dir(ws)) == []


def test_cli_ambiguous_prefix(ws):
    root = state_dir(ws) / "write_sessions"
    for sid in ("abcd0001", "abcd0002"):
        Journal.create(root / sid, {"session_id": sid, "target_file": "a.md",
                                    "operation": "create", "intent": "x"}).close()
    out = invoke("discard", "abcd", "--workspace", ws)
    assert out.exit_code == 1
    assert "ambiguous" in out.stderr and "abcd0001, abcd0002" in out.stderr


def test_parse_duration():
    assert parse_duration("1h") == HOUR
    assert parse_duration("1h30m") == 1.5 * HOUR
    assert parse_duration("500ms") == 500
    assert parse_duration("0") == 0
    with pytest.raises(ValueError):
        parse_duration("an hour")
