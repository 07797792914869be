"""A write session's journal is its owner's only, and never a way out of the workspace: its
directories are 0700 and its files 0600 (or the target's mode, when stricter), and no journal
file is followed through a symbolic link: a journal shipped in a cloned repository whose
``content.txt`` leads to a file outside cannot make ``orion sessions recover --finalize`` copy
that file into the workspace.

Real journals left by real ``orion run`` processes, real links and modes.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orion.write_session.journal import Journal

ORION = str(Path(sys.executable).parent / "orion")


def orion(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORION_", "OPENAI_"))}
    return subprocess.run([ORION, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def leave_a_journal(tmp_path: Path, ws: Path, *, operation: str = "create",
                    files: str = "") -> Path:
    """``orion run`` of a script whose write never ends (no DONE, and the script ends): the
    journal stays behind, as after a crash."""
    script = tmp_path / "open.yaml"
    script.write_text(files + textwrap.dedent(f"""\
        conversation:
          - user: Write the notes.
          - model:
              tool_calls:
                - name: WritePlanTool_begin
                  arguments: {{intent: notes, target_file: notes.md, operation: {operation}}}
          - model:
              text: "first line\\nsecond line\\n"
              finish_reason: length
          - model:
              text: "third line\\n"
              finish_reason: length
        """), encoding="utf-8")
    done = orion("run", str(script), "--workspace", str(ws), cwd=tmp_path)
    (journal,) = [p for p in (ws / ".orion" / "write_sessions").iterdir() if p.is_dir()]
    assert (journal / "content.txt").exists(), done.stdout + done.stderr
    return journal


def modes(journal: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(journal.stat().st_mode),
             "..": stat.S_IMODE(journal.parent.stat().st_mode)}
    for path in journal.rglob("*"):
        found[path.relative_to(journal).as_posix()] = stat.S_IMODE(path.stat().st_mode)
    return found


def test_a_journal_is_its_owners_only(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    old = os.umask(0o022)  # the usual umask: it would make 0755 directories and 0644 files
    try:
        journal = leave_a_journal(tmp_path, ws)
    finally:
        os.umask(old)
    found = modes(journal)
    assert found["."] == 0o700 and found[".."] == 0o700, found
    files = {name: mode for name, mode in found.items() if name not in (".", "..")}
    assert {"content.txt", "metadata.json", "state.json", "degraded"} <= files.keys(), files
    assert all(mode == 0o600 for mode in files.values()), {k: oct(v) for k, v in files.items()}


def test_a_journal_is_never_more_open_than_its_target(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("old\n")
    (ws / "notes.md").chmod(0o200)  # not even its owner may read it
    journal = leave_a_journal(tmp_path, ws, operation="overwrite")
    files = {name: mode for name, mode in modes(journal).items() if name not in (".", "..")}
    assert files["content.txt"] == 0o200, {k: oct(v) for k, v in files.items()}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("a secret from outside the workspace\n")
    return secret


def test_recover_finalize_refuses_a_journal_whose_content_is_a_link(tmp_path, outside):
    ws = tmp_path / "ws"
    ws.mkdir()
    journal = leave_a_journal(tmp_path, ws)
    (journal / "content.txt").unlink()
    (journal / "content.txt").symlink_to(outside)
    short = journal.name[:8]
    done = orion("sessions", "recover", short, "--finalize", "--workspace", str(ws), cwd=ws)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"write session {short} cannot be recovered: its content.txt is a symbolic link " \
           f"to '{outside}'" in done.stderr, done.stderr
    assert "Nothing written" in done.stderr
    assert not (ws / "notes.md").exists()
    assert outside.read_text() == "a secret from outside the workspace\n"
    listed = json.loads(orion("sessions", "list", "--json", "--workspace", str(ws),
                              cwd=ws).stdout)
    (session,) = listed["sessions"] if isinstance(listed, dict) else listed
    assert any("content.txt is a symbolic link" in p for p in session["problems"]), session
    assert session["bytes"] == 0  # what the link leads to was never read


@pytest.mark.parametrize("name", ["state.json", "metadata.json", "degraded", "lock"])
def test_no_journal_file_is_read_through_a_link(tmp_path, outside, name):
    ws = tmp_path / "ws"
    ws.mkdir()
    journal = leave_a_journal(tmp_path, ws)
    outside.write_text(json.dumps({"last_save_ms": 1.0, "reason": "outside", "session_id":
                                   journal.name}))
    (journal / name).unlink(missing_ok=True)
    (journal / name).symlink_to(outside)
    short = journal.name[:8]
    done = orion("sessions", "recover", short, "--finalize", "--workspace", str(ws), cwd=ws)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"its {name} is a symbolic link to '{outside}'" in done.stderr, done.stderr
    assert not (ws / "notes.md").exists()


def test_a_journal_directory_that_is_a_link_is_neither_followed_nor_emptied(tmp_path, outside):
    ws = tmp_path / "ws"
    ws.mkdir()
    journal = leave_a_journal(tmp_path, ws)
    elsewhere = tmp_path / "outside" / "journal"
    journal.rename(elsewhere)
    journal.symlink_to(elsewhere)
    short = journal.name[:8]
    done = orion("sessions", "recover", short, "--finalize", "--workspace", str(ws), cwd=ws)
    assert "its directory is a symbolic link" in done.stderr, done.stderr
    assert not (ws / "notes.md").exists()
    done = orion("sessions", "discard", short, "--workspace", str(ws), cwd=ws)
    assert done.returncode == 0, done.stderr
    assert not journal.is_symlink() and (elsewhere / "content.txt").exists()


def test_the_journal_never_writes_through_a_link_put_in_its_place(tmp_path, outside):
    # A running journal whose state file and temp file were swapped for links: the links are
    # replaced, never written through.
    directory = tmp_path / "journal"
    journal = Journal.create(directory, {"target_file": "notes.md"})
    journal.append("line\n")
    (directory / "state.json.tmp").symlink_to(outside)
    (directory / "state.log").symlink_to(outside)
    journal.flush({"step": 1})
    journal.flush({"step": 2})
    journal.close()
    assert outside.read_text() == "a secret from outside the workspace\n"
    assert not (directory / "state.json").is_symlink()
