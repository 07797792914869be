"""The state directory is confined like the targets: a ``.orion`` (or any entry of it) that is a
symbolic link out of the workspace, as a cloned repository can ship one, is refused at start
by every command that uses it, before anything is written there; ``--state-dir`` stays the
user's choice; a new state directory is made 0700.

The links, the directories and the commands are real: ``orion`` runs in a subprocess and the
directory the link leads to is checked byte for byte afterwards.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orion.errors import ConfigError
from orion.models.scripted import ScriptedModel
from faults import snapshot
from orion.models.script import load_script
from orion.hooks.manager import make_plugin_manager
from orion.runtime.runtime import Runtime
from orion.workspace import StateDirOutside, state_directory

#: A script that overwrites notes.md through a write session: it keeps a backup of the old
#: notes, an undo record, a journal and traces, all in the state directory.
OVERWRITE = {"conversation": [
    {"user": "Rewrite the notes."},
    {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
        "intent": "new notes", "target_file": "notes.md", "operation": "overwrite"}}]}},
    {"model": {"text": "the new notes\nDONE\n"}},
    {"expect": "Overwrote notes.md"},
    {"model": {"text": "Done."}}]}


def orion(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORION_", "WRITE_SESSION_"))}
    return subprocess.run([sys.executable, "-m", "orion", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**env, "COLUMNS": "400"}, input="")


@pytest.fixture
def layout(tmp_path):
    """A workspace with notes.md, a script that overwrites it, and a directory outside."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "notes.md").write_text("the user's old notes\n")
    script = tmp_path / "overwrite.yaml"
    script.write_text(yaml.safe_dump(OVERWRITE, sort_keys=False))
    return ws, outside, script


#: Each part of the state directory a repository could ship as a link out of the workspace.
PARTS = [".orion", ".orion/backups", ".orion/undo", ".orion/orion.db", ".orion/write_sessions",
         ".orion/rescued", ".orion/orion.db-wal", ".orion/plans.db", ".orion/plans.db-wal",
         ".orion/plans.db-shm", ".orion/plans.db.setup.lock"]


@pytest.mark.slow
@pytest.mark.parametrize("part", PARTS)
def test_a_state_directory_part_linked_out_of_the_workspace_is_refused_by_orion_run(layout,
                                                                                  part):
    ws, outside, script = layout
    link = ws / part
    link.parent.mkdir(parents=True, exist_ok=True)
    target = outside / "planted"
    if part.endswith((".db", "-wal", "-shm", ".lock")):
        target.write_bytes(b"")  # an empty file is a valid empty SQLite database
    else:
        target.mkdir()
    link.symlink_to(target)
    before_outside, before_ws = snapshot(outside), snapshot(ws)
    done = orion("run", str(script), "--workspace", str(ws), cwd=ws)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    # The message names the link and where it leads, and how to go on.
    assert f"error: {link} is a symbolic link to {str(target)!r}" in done.stderr
    assert "Nothing was written; remove the link, or give --state-dir" in done.stderr
    assert snapshot(outside) == before_outside  # no backup, undo record or trace out there
    assert snapshot(ws) == before_ws  # not even the target was written


@pytest.mark.slow
def test_the_refusal_comes_before_the_backup_that_would_have_leaked(layout):
    """The fault itself: with ``.orion/backups`` leading out, the old notes would be copied out
    of the workspace by the overwrite. ``--json`` says so as JSON."""
    ws, outside, script = layout
    (ws / ".orion").mkdir()
    (ws / ".orion" / "backups").symlink_to(outside, target_is_directory=True)
    done = orion("run", str(script), "--workspace", str(ws), "--json", cwd=ws)
    assert done.returncode == 2
    result = json.loads(done.stdout)
    assert result["ok"] is False and result["files"] == []
    assert "backups is a symbolic link to" in result["errors"][0]
    assert list(outside.iterdir()) == []
    assert (ws / "notes.md").read_text() == "the user's old notes\n"


@pytest.mark.slow
@pytest.mark.parametrize("command", [
    ["chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "none"],
    ["sessions", "list"], ["sessions", "history"], ["sessions", "clean", "--older-than", "0"],
    ["plan", "history"], ["plan", "show"], ["traces"], ["traces", "stats"]])
def test_every_command_that_uses_the_state_directory_refuses_a_link_out(tmp_path, command):
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "orion.db").write_bytes(b"")
    (ws / ".orion").symlink_to(outside, target_is_directory=True)
    done = orion(*command, "--workspace", str(ws), cwd=ws)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"error: {ws / '.orion'} is a symbolic link to {str(outside)!r}, outside the " \
           f"workspace {ws}" in done.stderr
    assert snapshot(outside) == {"orion.db": ("file", b"")}


@pytest.mark.slow
@pytest.mark.parametrize("command", [["sessions", "list"], ["plan", "history"], ["traces"],
                                     ["traces", "stats"], ["plan", "show"]])
def test_with_json_the_refusal_is_json(tmp_path, command):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".orion").symlink_to(tmp_path, target_is_directory=True)
    done = orion(*command, "--workspace", str(ws), "--json", cwd=ws)
    assert done.returncode == 2
    assert "is a symbolic link to" in json.loads(done.stdout)["error"]


def test_a_given_state_dir_is_the_users_choice(layout):
    ws, outside, script = layout
    done = orion("run", str(script), "--workspace", str(ws), "--state-dir", str(outside),
                 cwd=ws)
    assert done.returncode == 0, done.stderr
    assert (ws / "notes.md").read_text() == "the new notes\n"
    [backup] = (outside / "backups").rglob("notes.md")
    assert backup.read_text() == "the user's old notes\n"
    assert not (ws / ".orion").exists()


def test_a_link_within_the_workspace_is_allowed(layout):
    ws, _, script = layout
    (ws / "var" / "state").mkdir(parents=True)
    (ws / ".orion").symlink_to("var/state", target_is_directory=True)
    done = orion("run", str(script), "--workspace", str(ws), cwd=ws)
    assert done.returncode == 0, done.stderr
    [backup] = (ws / "var" / "state" / "backups").rglob("notes.md")
    assert backup.read_text() == "the user's old notes\n"


@pytest.mark.slow
@pytest.mark.parametrize("database", ["orion.db", "plans.db"])
def test_a_part_linked_to_a_workspace_file_is_refused(layout, database):
    """A part of the state directory stays in it: ``orion.db`` or ``plans.db`` linked to the
    user's own file would let SQLite write into that file."""
    ws, _, script = layout
    (ws / "empty.md").write_bytes(b"")
    (ws / ".orion").mkdir()
    (ws / ".orion" / database).symlink_to("../empty.md")
    done = orion("run", str(script), "--workspace", str(ws), cwd=ws)
    assert done.returncode == 2
    assert f"{database} is a symbolic link to '../empty.md'" in done.stderr
    assert "outside the state directory" in done.stderr
    assert (ws / "empty.md").read_bytes() == b""


def test_a_link_loop_is_refused_with_a_message(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".orion").symlink_to(".orion")
    done = orion("sessions", "list", "--workspace", str(ws), cwd=ws)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "is a symbolic link that cannot be followed" in done.stderr


def test_the_runtime_refuses_before_it_writes(tmp_path):
    """Runtime is where every start comes through (orion run, orion chat, a team's own
    program): it refuses too, with a ConfigError."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / ".orion").mkdir()
    (ws / ".orion" / "undo").symlink_to(outside, target_is_directory=True)
    script = load_script(tmp_path / "s.yaml", text="conversation:\n  - user: hi\n")
    with pytest.raises(StateDirOutside) as refused:
        Runtime(model=ScriptedModel(script), plugins=make_plugin_manager(env={}), workspace=ws)
    assert isinstance(refused.value, ConfigError)
    assert str(ws / ".orion" / "undo") in str(refused.value)
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in (ws / ".orion").iterdir()) == ["undo"]


@pytest.mark.slow
def test_a_new_state_directory_is_made_0700_and_an_existing_one_keeps_its_mode(layout):
    ws, _, script = layout
    old = os.umask(0o022)
    try:
        assert orion("run", str(script), "--workspace", str(ws), cwd=ws).returncode == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((ws / ".orion").stat().st_mode) == 0o700
    assert (ws / ".orion" / "orion.db").exists()  # the state is there, readable by the user
    (ws / ".orion").chmod(0o750)  # the user's choice (a group that shares the state)
    assert orion("sessions", "list", "--workspace", str(ws), cwd=ws).returncode == 0
    assert state_directory(ws, create=True) == ws.resolve() / ".orion"
    assert stat.S_IMODE((ws / ".orion").stat().st_mode) == 0o750


def test_a_state_directory_that_is_a_file_is_refused(tmp_path):
    (tmp_path / ".orion").write_text("not a directory\n")
    with pytest.raises(StateDirOutside, match="is not a directory"):
        state_directory(tmp_path, create=True)
