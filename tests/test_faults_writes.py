"""Real faults at the write points of a write session: nothing the user is told is saved may be
lost, nothing is written outside the workspace, no traceback.

The faults are real: a tiny tmpfs fills up (ENOSPC), a file-size limit in a subprocess (EFBIG),
a mount turned read-only under a running write (EROFS), a process without the right to write a
directory (EACCES), two processes appending to one file at once, a thread swapping a directory
for a symbolic link while writes run, and SIGKILL. Mounting needs root: without it those tests are
skipped, saying so.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import yaml

from orion.workspace.confined import PathSwapped, TEMP_MARK, open_parent, temp_name
from orion.models.script import load_script
from orion.hooks.manager import make_plugin_manager
from orion.runtime.report import Reporter
from orion.runtime.runner import play
from faults import (KILLED_WRITER, RACER, SWAPPER, WITHOUT_OVERRIDE, MountRefused,
                                  fill, mount_tmpfs, plans_into, remount, unmount)
from faults import AtFinalization as Plugin
from orion.write_session.operations import execute
from orion.write_session.plan import PlanRejected, WritePlan, check_plan
from orion.write_session.orphan_commands import undo
from orion.write_session.orphans import scan
from orion.write_session.recover import recover_finalize
from orion.write_session.undo import records

LINE = "line {:05d} of the long document, written by the model\n"


def lines(n: int) -> str:
    return "".join(LINE.format(i) for i in range(n))


# -- helpers: mounts, subprocesses, scripts -----------------------------------------------------


@pytest.fixture
def mount(tmp_path):
    """``mount(path, size="64k", ro=False)``: a tmpfs at ``path``; unmounted afterwards."""
    mounted: list[Path] = []

    def _mount(path: Path, size: str = "64k", ro: bool = False) -> Path:
        kib = int(size[:-1]) * (1024 if size.endswith("m") else 1)
        try:
            mount_tmpfs(path, kib, read_only=ro)
        except MountRefused as exc:
            pytest.skip(f"mounting a tmpfs is not permitted here: {exc}")
        mounted.append(path)
        return path

    yield _mount
    for path in reversed(mounted):
        unmount(path)


def write_script(path: Path, conversation: list, files: dict | None = None) -> Path:
    script: dict = {"conversation": conversation}
    if files:
        script["files"] = files
    path.write_text(yaml.safe_dump(script, sort_keys=False), encoding="utf-8")
    return path


def begin(target: str, operation: str = "create") -> dict:
    return {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
        "intent": "the document", "target_file": target, "operation": operation}}]}}


def small(target: str, operation: str, content: str) -> dict:
    return {"model": {"tool_calls": [{"name": "WritePlanTool_execute", "arguments": {
        "intent": "a small edit", "target_file": target, "operation": operation,
        "content": content}}]}}


NO_TRACES = "plugins:\n  disable: [orion_plugins.trace_sqlite]\n"


def orion(*args: str, cwd: Path, env: dict | None = None, preexec=None,
          user: int | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "COLUMNS": "400", **(env or {})}
    return subprocess.run([sys.executable, "-m", "orion", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, preexec_fn=preexec, user=user,
                          timeout=300)


def no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]


def play_in_process(workspace: Path, script: Path, *, state_dir: Path | None = None,
                    plugin: object | None = None):
    pm = make_plugin_manager(entrypoints=False, env={})
    if plugin is not None:
        pm.register(plugin, "fault")

    class Capture(Reporter):
        def __init__(self):
            super().__init__()
            self.notices: list[str] = []

        def notice(self, text: str) -> None:
            self.notices.append(text)

    reporter = Capture()
    result = asyncio.run(play(load_script(script), workspace=workspace, plugins=pm,
                              state_dir=state_dir, reporter=reporter))
    return result, reporter.notices


# -- 1. a full disk: the content is never only in memory when the user is told it is saved ------


@pytest.mark.slow
def test_a_full_disk_keeps_the_content_in_a_rescue_file_the_message_names(tmp_path, mount):
    ws = mount(tmp_path / "ws", size="256k")
    (ws / "orion.yaml").write_text(NO_TRACES)
    rescue_dir = tmp_path / "tmp"  # another file system, as /tmp usually is
    rescue_dir.mkdir()
    content = lines(12000)
    script = write_script(tmp_path / "s.yaml", [
        {"user": "Write big.md."}, begin("big.md"), {"model": {"text": content + "DONE\n"}},
        {"model": {"text": "Done."}}])
    done = orion("run", str(script), "--workspace", str(ws), cwd=tmp_path,
                 env={"TMPDIR": str(rescue_dir)})
    no_traceback(done)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "cannot save big.md's content to disk (ENOSPC" in done.stderr
    assert "The content is saved in write session" not in done.stderr
    rescued = list(rescue_dir.glob("orion-rescued-*big.md.txt"))
    assert len(rescued) == 1 and str(rescued[0]) in done.stderr
    assert rescued[0].read_text() == content
    assert not (ws / "big.md").exists()
    listed = orion("sessions", "list", "--workspace", str(ws), "--json", cwd=tmp_path)
    [session] = json.loads(listed.stdout)
    assert session["degraded"].startswith("ENOSPC") and session["status"] == "degraded"
    assert session["rescued"] == str(rescued[0])
    assert session["received_bytes"] == len(content) > session["bytes"]
    # recover --finalize must not write the prefix the journal holds as if it were the file
    recovered = orion("sessions", "recover", session["id"][:8], "--finalize", "--workspace",
                      str(ws), cwd=tmp_path)
    no_traceback(recovered)
    assert recovered.returncode == 1 and "holds only" in recovered.stderr
    assert str(rescued[0]) in recovered.stderr
    assert not (ws / "big.md").exists()


# -- 11. a file-size limit (EFBIG) ---------------------------------------------------------------


@pytest.mark.slow
def test_a_file_size_limit_ends_cleanly_and_recovery_never_writes_a_cut_file(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "orion.yaml").write_text(NO_TRACES)
    limit = 512 * 1024
    content = lines(20000)  # about 1.1 MB
    script = write_script(tmp_path / "s.yaml", [
        {"user": "Write big.md."}, begin("big.md"), {"model": {"text": content + "DONE\n"}},
        {"model": {"text": "Done."}}])

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = orion("run", str(script), "--workspace", str(ws), cwd=tmp_path, preexec=limited)
    no_traceback(done)
    assert done.returncode == 1
    assert "EFBIG" in done.stderr
    assert "The content is saved in write session" not in done.stderr
    assert not (ws / "big.md").exists()
    assert not list(ws.glob(f".big.md{TEMP_MARK}*"))
    [orphan] = scan(ws / ".orion")
    assert not orphan.live and not (orphan.directory / "lock").exists()  # no stale lock
    assert orphan.degraded and orphan.degraded.startswith("EFBIG")
    assert orphan.received_bytes == len(content) and orphan.bytes <= limit
    recovered = orion("sessions", "recover", orphan.short, "--finalize", "--workspace",
                      str(ws), cwd=tmp_path)
    no_traceback(recovered)
    assert recovered.returncode == 1 and not (ws / "big.md").exists()


# -- EROFS: the disk turns read-only under the write -------------------------------------------


def test_a_target_that_turns_read_only_keeps_the_content_and_recover_writes_it(tmp_path,
                                                                                mount):
    ws = mount(tmp_path / "ws", size="4m")
    state = tmp_path / "state"
    content = lines(300)
    script = write_script(tmp_path / "s.yaml", [
        {"user": "Write doc.md."}, begin("doc.md"), {"model": {"text": content + "DONE\n"}},
        {"model": {"text": "Sorry."}}])
    result, notices = play_in_process(ws, script, state_dir=state,
                                      plugin=Plugin(lambda: remount(ws, "ro")))
    assert not result.ok and not result.files
    message = next(n for n in notices if n.startswith("Could not write doc.md"))
    assert "not writable" in message or "Read-only file system" in message
    assert "The content is saved in write session" in message
    assert not (ws / "doc.md").exists()
    remount(ws, "rw")
    [orphan] = scan(state)
    assert orphan.bytes == len(content)
    pm = make_plugin_manager(entrypoints=False, env={})
    recovered = recover_finalize(ws, state, orphan.id, pm)
    assert (ws / "doc.md").read_text() == content and recovered.status == "recovered"


def test_a_state_directory_that_fills_up_rescues_the_content(tmp_path, mount):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("the user's notes\n")
    state = mount(tmp_path / "state", size="4m")
    content = lines(300)
    script = write_script(tmp_path / "s.yaml", [
        {"user": "Rewrite notes.md."}, begin("notes.md", "overwrite"),
        {"model": {"text": content + "DONE\n"}}, {"model": {"text": "Sorry."}}])
    result, notices = play_in_process(ws, script, state_dir=state,
                                      plugin=Plugin(lambda: fill(state)))
    assert not result.ok
    message = next(n for n in notices if n.startswith("Could not write notes.md"))
    # the backup could not be kept, so nothing was written; the journal had saved all of the
    # content before the disk filled, so the message may say so, and recovery writes it
    assert "No space left" in message and "The content is saved in write session" in message
    assert (ws / "notes.md").read_text() == "the user's notes\n"
    assert not list(ws.glob(f"*{TEMP_MARK}*"))
    (state / "filler").unlink()
    [orphan] = scan(state)
    recover_finalize(ws, state, orphan.id, make_plugin_manager(entrypoints=False, env={}))
    assert (ws / "notes.md").read_text() == content
    undo(ws, state, orphan.id)
    assert (ws / "notes.md").read_text() == "the user's notes\n"


# -- EACCES: a process without the right to write the state directory -------------------------


@pytest.mark.slow
def test_without_write_permission_the_content_is_rescued_and_the_target_kept(tmp_path):
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("root ignores directory modes, and setpriv (util-linux), which runs a "
                    "process without that right, is not installed")
    ws = tmp_path / "ws"
    state = ws / ".orion"
    state.mkdir(parents=True)
    (ws / "orion.yaml").write_text(NO_TRACES)
    (ws / "notes.md").write_text("the user's notes\n")
    locked = [state / "write_sessions", state / "backups"]  # the journal and backup fail
    for path in locked:
        path.mkdir(mode=0o555)
    rescue = tmp_path / "rescue"
    rescue.mkdir()
    content = lines(200)
    script = write_script(tmp_path / "s.yaml", [
        {"user": "Rewrite notes.md."}, begin("notes.md", "overwrite"),
        {"model": {"text": content + "DONE\n"}}, {"model": {"text": "Sorry."}}])
    run = [sys.executable, "-m", "orion", "run", str(script), "--workspace", str(ws)]
    try:
        done = subprocess.run((WITHOUT_OVERRIDE if os.geteuid() == 0 else []) + run,
                              cwd=tmp_path, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "TMPDIR": str(rescue), "HOME": str(rescue)})
    finally:
        for path in locked:
            path.chmod(0o755)
    no_traceback(done)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "EACCES" in done.stderr and "Permission denied" in done.stderr
    assert (ws / "notes.md").read_text() == "the user's notes\n"  # no backup, no write
    [rescued] = list(state.glob("rescued/orion-rescued-*")) or list(rescue.glob("orion-*"))
    assert rescued.read_text() == content and str(rescued) in done.stderr


# -- 2. undo never destroys a workspace file named undo.json --------------------------------


def test_undo_restores_a_workspace_file_named_undo_json(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    original = '{"keep": "me"}\n'
    script = write_script(tmp_path / "s.yaml", [
        {"user": "Replace undo.json."}, begin("undo.json", "overwrite"),
        {"model": {"text": '{"new": 1}\nDONE\n'}}, {"model": {"text": "Done."}}],
        files={"undo.json": original})
    result, _ = play_in_process(ws, script)
    assert result.ok and (ws / "undo.json").read_text() == '{"new": 1}\n'
    [record] = records(ws / ".orion")
    done = undo(ws, ws / ".orion", record.id)
    assert done.action == "restored"
    assert (ws / "undo.json").read_text() == original


# -- 4. WritePlanTool_execute: a backup and an undo record per write, across runs --------------


def test_small_writes_keep_their_own_backups_across_runs(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("v0\n")
    for version in ("v1\n", "v2\n"):
        script = write_script(tmp_path / "s.yaml", [
            {"user": "Edit notes.md."}, small("notes.md", "overwrite", version),
            {"model": {"text": "Done."}}])
        result, _ = play_in_process(ws, script)
        assert result.ok, result.errors
    newest, older = records(ws / ".orion")
    assert Path(newest.data["backup"]).read_text() == "v1\n"
    assert Path(older.data["backup"]).read_text() == "v0\n"
    undo(ws, ws / ".orion", newest.id)
    assert (ws / "notes.md").read_text() == "v1\n"
    undo(ws, ws / ".orion", older.id)
    assert (ws / "notes.md").read_text() == "v0\n"


# -- 3. two processes appending to one file at once: no update lost ----------------------------


@pytest.mark.slow
def test_two_processes_appending_at_once_lose_no_append(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shared.md").write_text("# shared\n")
    racer = tmp_path / "racer.py"
    racer.write_text(RACER)
    count = 40
    procs = [subprocess.Popen([sys.executable, str(racer), str(ws), name, str(count),
                               "shared.md", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("A", "B")]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (out, errout) in zip(procs, outputs):
        assert proc.returncode == 0, errout
    written = (ws / "shared.md").read_text().splitlines()
    expected = {f"{name} {i}" for name in "AB" for i in range(count)}
    assert set(written[1:]) == expected and len(written) == 2 * count + 1  # 0 lost, 0 twice


def test_a_file_changed_by_someone_else_refuses_the_write_and_keeps_the_content(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    content = "appended by the model\n"
    script = write_script(tmp_path / "s.yaml", [
        {"user": "Append to notes.md."}, begin("notes.md", "append"),
        {"model": {"text": content + "DONE\n"}}, {"model": {"text": "I will retry."}}],
        files={"notes.md": "first\n"})

    def someone_else():  # another editor saves the file while the model streams
        with open(ws / "notes.md", "a") as f:
            f.write("typed by the user\n")

    result, notices = play_in_process(ws, script, plugin=Plugin(someone_else))
    assert not result.ok and not result.files
    message = next(n for n in notices if n.startswith("Could not write notes.md"))
    assert "changed since the plan was checked" in message
    assert "WritePlanTool_begin" in message and "--finalize" in message
    assert (ws / "notes.md").read_text() == "first\ntyped by the user\n"
    [orphan] = scan(ws / ".orion")
    recover_finalize(ws, ws / ".orion", orphan.id, make_plugin_manager(entrypoints=False,
                                                                       env={}))
    assert (ws / "notes.md").read_text() == "first\ntyped by the user\n" + content


# -- 6. a directory swapped for a symbolic link while writes run -------------------------------


def test_a_symlink_swap_race_never_writes_outside(tmp_path):
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    sub, alt, stop = ws / "sub", ws / "alt", tmp_path / "stop"
    sub.mkdir()
    alt.symlink_to(outside)
    swapper = tmp_path / "swapper.py"
    swapper.write_text(SWAPPER)
    # another process atomically exchanges sub (a directory) with a link to outside, and back,
    # as fast as it can (renameat2 RENAME_EXCHANGE: sub is never missing)
    proc = subprocess.Popen([sys.executable, str(swapper), str(sub), str(alt), str(stop)],
                            stdout=subprocess.PIPE, text=True)
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        proc.wait()
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    try:
        written, refused = plans_into(ws, "sub", 500)
    finally:
        stop.touch()
        swaps = int(proc.communicate(timeout=60)[0].strip() or 0)
    assert list(outside.iterdir()) == []  # never a byte outside
    assert swaps > 0 and written > 0 and written + refused == 500, (swaps, written, refused)
    assert not list(ws.rglob(f"*{TEMP_MARK}*"))


def test_a_swapped_component_is_refused_through_the_directory_descriptors(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    checked = check_plan(WritePlan(intent="x", target_file="sub/a.md", operation="create"),
                         workspace=ws, state_dir=ws / ".orion")
    (ws / "sub").rmdir()
    (ws / "sub").symlink_to(outside)  # after the check, before the write
    with pytest.raises(PathSwapped), open_parent(ws, "sub/a.md", create=True):
        pass
    with pytest.raises((PathSwapped, PlanRejected)):
        execute(checked, b"x\n", state_dir=ws / ".orion", session_id="s")
    assert list(outside.iterdir()) == []


# -- 7. a script's files: seeding is confined too --------------------------------------------


def test_script_seeding_never_follows_a_symlink_outside(tmp_path):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "link").symlink_to(outside)
    script = write_script(tmp_path / "s.yaml", [{"user": "hi"}, {"model": {"text": "hello"}}],
                          files={"link/seeded.txt": "seed\n"})
    done = orion("run", str(script), "--workspace", str(ws), cwd=tmp_path)
    no_traceback(done)
    assert done.returncode == 2 and "link/seeded.txt" in done.stderr
    assert list(outside.iterdir()) == []


# -- 5. orion run's journal flushes on real time; state.json follows ---------------------------


JOURNAL_WRITER = textwrap.dedent("""
    import sys, time
    from orion.clock import VirtualClock
    from orion.write_session.journal import Journal

    clock = VirtualClock(start_ms=1_000_000)  # orion run's clock: it never moves by itself
    j = Journal.create(sys.argv[1], {"target_file": "x.md"}, flush_lines=1000,
                       flush_interval_ms=200, now_ms=clock.now_ms)
    for i in range(26):
        j.append(f"line {i}\\n")
        time.sleep(0.02)
    print("ready", flush=True)
    time.sleep(600)
""")


def test_a_killed_orion_run_had_flushed_on_real_time(tmp_path):
    writer = tmp_path / "writer.py"
    writer.write_text(JOURNAL_WRITER)
    directory = tmp_path / "session"
    proc = subprocess.Popen([sys.executable, str(writer), str(directory)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    saved = (directory / "content.txt").read_bytes().count(b"\n")
    assert saved > 0  # 26 lines over about half a second, 200 ms interval: some are on disk
    state = json.loads((directory / "state.json").read_text())
    assert state["lines"] > 0 and state["lines"] <= saved  # refreshed mid-message


# -- the run's report: only its own writes ----------------------------------------------------


def test_the_run_report_lists_only_its_own_writes(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    script = write_script(tmp_path / "s.yaml", [
        {"user": "Write a.md."}, begin("a.md"), {"model": {"text": "a\nDONE\n"}},
        {"model": {"text": "Done."}}])

    def another_process():
        (ws / "theirs.md").write_text("not ours\n")

    result, _ = play_in_process(ws, script, plugin=Plugin(another_process))
    assert result.ok and [f.path for f in result.files] == ["a.md"]


# -- 13. temp files a killed write left behind ---------------------------------------------------


def test_temp_files_of_killed_writes_are_removed_at_start(tmp_path):
    ws = tmp_path / "ws"
    (ws / "docs").mkdir(parents=True)
    (ws / "node_modules").mkdir()
    writer = tmp_path / "writer.py"
    writer.write_text(KILLED_WRITER)
    proc = subprocess.Popen([sys.executable, str(writer), str(ws / "docs")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    [leftover] = list((ws / "docs").glob(f".big.md{TEMP_MARK}*"))
    live = ws / temp_name("mine.md")  # a write in progress in a live process stays
    live.write_bytes(b"in progress")
    skipped = ws / "node_modules" / f".x.js{TEMP_MARK}1-abc"  # never even looked at
    skipped.write_bytes(b"")
    script = write_script(tmp_path / "s.yaml", [{"user": "hi"}, {"model": {"text": "hello"}}])
    result, notices = play_in_process(ws, script)
    assert result.ok
    assert not leftover.exists() and live.exists() and skipped.exists()
    assert any("temp file" in n and "docs/" in n for n in notices)


def test_backups_beyond_keep_backups_are_pruned_and_history_lists_the_rest(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "orion.yaml").write_text("settings:\n  write_session:\n    keep_backups: 2\n")
    (ws / "notes.md").write_text("v0\n")
    for version in range(1, 5):
        script = write_script(tmp_path / "s.yaml", [
            {"user": "Edit."}, small("notes.md", "overwrite", f"v{version}\n"),
            {"model": {"text": "Done."}}])
        play_in_process(ws, script)
    kept = records(ws / ".orion")
    # pruned down to two as each write happens: never more than keep_backups are kept
    assert [Path(r.data["backup"]).read_text() for r in kept] == ["v3\n", "v2\n"]
    assert len(list((ws / ".orion" / "backups").iterdir())) == 2
    listed = orion("sessions", "history", "--workspace", str(ws), "--json", cwd=tmp_path)
    assert [row["id"] for row in json.loads(listed.stdout)] == [r.id for r in kept]


@pytest.mark.slow
def test_a_session_still_open_at_the_end_on_a_full_disk_is_rescued(tmp_path, mount):
    ws = mount(tmp_path / "ws", size="256k")
    (ws / "orion.yaml").write_text(NO_TRACES)
    rescue_dir = tmp_path / "tmp"
    rescue_dir.mkdir()
    content = lines(12000)
    script = write_script(tmp_path / "s.yaml", [  # the script ends before DONE
        {"user": "Write big.md."}, begin("big.md"), {"model": {"text": content}}])
    done = orion("run", str(script), "--workspace", str(ws), cwd=tmp_path,
                 env={"TMPDIR": str(rescue_dir)})
    no_traceback(done)
    [rescued] = list(rescue_dir.glob("orion-rescued-*big.md.txt"))
    assert rescued.read_text() == content and str(rescued) in done.stderr
    assert "still open as Orion ends" in done.stderr


def test_an_undo_record_the_full_disk_refuses_costs_only_the_undo(tmp_path, mount):
    ws = tmp_path / "ws"
    ws.mkdir()
    state = mount(tmp_path / "state", size="4m")
    content = lines(50)
    script = write_script(tmp_path / "s.yaml", [
        {"user": "Write new.md."}, begin("new.md"), {"model": {"text": content + "DONE\n"}},
        {"model": {"text": "Done."}}])
    result, notices = play_in_process(ws, script, state_dir=state,
                                      plugin=Plugin(lambda: fill(state)))
    assert result.ok and [f.path for f in result.files] == ["new.md"]
    assert (ws / "new.md").read_text() == content
    assert any("its undo record could not be saved" in n and "No space left" in n
               for n in notices), notices
    assert records(state) == []
    (state / "filler").unlink()


def test_an_undo_record_of_an_older_orion_is_still_read(tmp_path):
    ws, state = tmp_path / "ws", tmp_path / "ws" / ".orion"
    ws.mkdir()
    (ws / "notes.md").write_text("after\n")
    legacy = state / "backups" / "feedface12345678"
    legacy.mkdir(parents=True)
    (legacy / "notes.md").write_text("before\n")
    (legacy / "undo.json").write_text(json.dumps({
        "session_id": "feedface12345678", "target_file": "notes.md", "operation": "overwrite",
        "sha256": hashlib.sha256(b"after\n").hexdigest(),
        "backup": str(legacy / "notes.md"), "written_at_ms": 1}))
    # a backed-up workspace file named undo.json is no record
    other = state / "backups" / "0123456789abcdef"
    other.mkdir()
    (other / "undo.json").write_text('{"keep": "me"}\n')
    assert [r.id for r in records(state)] == ["feedface12345678"]
    undo(ws, state, "feedface")
    assert (ws / "notes.md").read_text() == "before\n"


@pytest.mark.slow
def test_sigkill_at_the_atomic_write_leaves_no_half_file_and_no_leftover(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "orion.yaml").write_text(NO_TRACES)
    content = lines(60000)  # about 3.3 MB: the temp file lives long enough to be caught
    script = write_script(tmp_path / "s.yaml", [
        {"user": "Write big.md."}, begin("big.md"), {"model": {"text": content + "DONE\n"}},
        {"model": {"text": "Done."}}])
    proc = subprocess.Popen([sys.executable, "-m", "orion", "run", str(script), "--workspace",
                             str(ws)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    caught = False
    for _ in range(2_000_000):  # bounded: until the temp file shows or the run ends
        if any(TEMP_MARK in name for name in os.listdir(ws)):
            proc.send_signal(signal.SIGKILL)
            caught = True
            break
        if proc.poll() is not None:
            break
    proc.wait()
    target = ws / "big.md"
    assert not target.exists() or target.read_text() == content  # never half a file
    again = orion("run", str(write_script(tmp_path / "hi.yaml", [
        {"user": "hi"}, {"model": {"text": "hello"}}])), "--workspace", str(ws), cwd=tmp_path)
    no_traceback(again)
    assert not [name for name in os.listdir(ws) if TEMP_MARK in name]
    if caught and not target.exists():
        [orphan] = scan(ws / ".orion")
        done = orion("sessions", "recover", orphan.short, "--finalize", "--workspace", str(ws),
                     cwd=tmp_path)
        no_traceback(done)
        assert done.returncode == 0 and target.read_text() == content
