"""A replaced file stays the user's file: its mode from the first byte on, its owner and group
where the process may give them, and what a rename cannot keep (other hard links, an owner only
root could give back) said in the report.

Everything is real: ``orion run`` in a subprocess writes the file, a second process watches the
directory with inotify (as another user, or as root to read the temp file's status), files are
owned by ``nobody``, and Orion itself runs as ``nobody`` with a supplementary group
(``setpriv``). The tests that need root or ``setpriv`` are skipped without them, saying so.
"""

from __future__ import annotations

import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from orion.workspace.confined import TEMP_MARK
from orion.testing.observer import Observer

NOBODY = 65534
#: A group ``nobody`` is not in by default; the test gives it as a supplementary group.
USERS_GID = 100

needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                                reason="needs root and setpriv (util-linux) to act as another "
                                       "user and to own files as one")


def begin(target: str, operation: str) -> dict:
    return {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
        "intent": "the document", "target_file": target, "operation": operation}}]}}


def script(path: Path, *entries: dict) -> Path:
    path.write_text(yaml.safe_dump({"conversation": [{"user": "Write it."}, *entries,
                                                     {"model": {"text": "Done."}}]},
                                   sort_keys=False))
    return path


def orion(*args: str, cwd: Path, as_user: list[str] | None = None, preexec=None,
          env: dict | None = None) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ORION_", "WRITE_SESSION"))}
    return subprocess.run([*(as_user or []), sys.executable, "-m", "orion", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, preexec_fn=preexec,
                          env={**clean, "COLUMNS": "400", **(env or {})})


@pytest.fixture
def shared(request):
    """A directory every user can enter (pytest's own tmp directory is root's alone), for
    Orion run as another user; removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="orion-identity-", dir="/tmp"))
    path.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(path, ignore_errors=True))
    return path


def observe(directory: Path, user: int | None = None):
    """Another process watching ``directory`` (as ``user``); call the result to stop it."""
    observer = Observer(directory, user=user)
    return observer.result


def big_text(path: Path, megabytes: int) -> Path:
    line = "the new confidential line of the document, streamed by the model\n"
    path.write_text(line * (megabytes * 1024 * 1024 // len(line)) + "DONE\n")
    return path


# -- privacy: the temp file is never more readable than the file ---------------------------


@pytest.mark.slow
@needs_root
def test_another_user_cannot_read_a_0600_files_new_content_through_the_temp_file(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    ws.chmod(0o755)  # the other user may list and open what the directory holds
    secret = ws / "secret.md"
    secret.write_text("the old secret\n")
    secret.chmod(0o600)
    reply = big_text(tmp_path / "reply.md", 48)
    run = script(tmp_path / "s.yaml", begin("secret.md", "overwrite"),
                 {"model": {"text_file": str(reply)}})
    watched = observe(ws, user=NOBODY)
    done = orion("run", str(run), "--workspace", str(ws), cwd=tmp_path)
    seen = watched()
    assert done.returncode == 0, done.stderr[-2000:]
    assert secret.read_text().startswith("the new confidential line")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert seen["created"] >= 1, seen  # the observer did see the temp file appear
    assert seen["opened"] == 0 and seen["bytes"] == 0, seen
    assert set(seen["refused"]) == {"EACCES"}, seen


@pytest.mark.slow
@needs_root
def test_the_temp_file_has_the_files_owner_and_mode_before_its_first_byte(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    target = ws / "shared.md"
    target.write_text("the old text\n")
    os.chown(target, NOBODY, USERS_GID)
    target.chmod(0o2750)  # setgid: cleared by a chown that came after the mode
    reply = big_text(tmp_path / "reply.md", 24)
    run = script(tmp_path / "s.yaml", begin("shared.md", "overwrite"),
                 {"model": {"text_file": str(reply)}})
    watched = observe(ws)
    done = orion("run", str(run), "--workspace", str(ws), cwd=tmp_path)
    seen = watched()
    assert done.returncode == 0, done.stderr[-2000:]
    final = [0o2750, NOBODY, USERS_GID]
    [created] = seen["at_create"]
    # As it appeared: owner-only, or (the observer came a moment later) already the file's.
    assert created is None or created[0] & 0o077 == 0 or created[:3] == final, seen
    [first] = seen["first_byte"]
    assert first[:3] == final, seen
    info = target.stat()
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o2750, NOBODY, USERS_GID)


# -- owner and group ---------------------------------------------------------------------------


@pytest.mark.slow
@needs_root
def test_root_appending_to_another_users_file_keeps_its_owner_group_and_mode(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    log = ws / "log.md"
    log.write_text("first entry\n")
    os.chown(log, NOBODY, NOBODY)
    log.chmod(0o4750)
    run = script(tmp_path / "s.yaml", begin("log.md", "append"),
                 {"model": {"text": "second entry\nDONE\n"}},
                 {"expect": "Appended 1 line to log.md; backup saved"})
    done = orion("run", str(run), "--workspace", str(ws), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "belonged to" not in done.stderr
    assert log.read_text() == "first entry\nsecond entry\n"
    info = log.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (NOBODY, NOBODY, 0o4750)


@pytest.mark.slow
@needs_root
def test_a_user_keeps_the_files_group_and_is_told_it_now_owns_the_file(shared):
    """Orion as ``nobody`` (with ``users`` as a supplementary group) appends to root's file:
    a rename makes the file nobody's (only root gives files away), the group ``users`` is
    given back (nobody is in it), the mode is kept, and the report says what changed."""
    ws = shared / "ws"
    ws.mkdir()
    os.chown(ws, NOBODY, NOBODY)
    notes = ws / "notes.md"
    notes.write_text("root's notes\n")
    os.chown(notes, 0, USERS_GID)
    notes.chmod(0o664)
    run = script(shared / "s.yaml", begin("notes.md", "append"),
                 {"model": {"text": "a line from nobody\nDONE\n"}},
                 {"expect": "notes.md belonged to root:users; it belongs to nobody:users now "
                            "(only root can give a file to another user)"})
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", f"--groups={USERS_GID}"]
    reach = subprocess.run([*as_nobody, sys.executable, "-c", "import orion"], cwd=shared,
                           capture_output=True, text=True, timeout=60)
    if reach.returncode != 0:  # a checkout in a private directory (a home of mode 0700)
        pytest.skip("user nobody cannot import Orion from this checkout's interpreter, so "
                    f"Orion cannot run as another user here: {reach.stderr.strip()[-200:]}")
    done = orion("run", str(run), "--workspace", str(ws), cwd=shared, as_user=as_nobody,
                 env={"HOME": str(shared)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert notes.read_text() == "root's notes\na line from nobody\n"
    info = notes.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (NOBODY, USERS_GID, 0o664)


# -- hard links: the file gets a file of its own, and that is said -------------------------


@pytest.mark.slow
@pytest.mark.parametrize("links", [2, 3])
def test_a_file_with_hard_links_gets_a_file_of_its_own_and_the_report_says_so(tmp_path, links):
    ws = tmp_path / "ws"
    ws.mkdir()
    notes = ws / "notes.md"
    notes.write_text("the shared text\n")
    others = [ws / f"other{i}.md" for i in range(1, links)]
    for other in others:
        os.link(notes, other)
    said = ("its other name keeps" if links == 2 else f"its {links - 1} other names keep")
    run = script(tmp_path / "s.yaml", begin("notes.md", "overwrite"),
                 {"model": {"text": "the new text\nDONE\n"}},
                 {"expect": f"backup saved; notes.md had {links} hard links: it is a file of "
                            f"its own now, and {said} the old text"})
    done = orion("run", str(run), "--workspace", str(ws), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert f"notes.md had {links} hard links" in done.stderr  # the user reads it too
    assert notes.read_text() == "the new text\n" and notes.stat().st_nlink == 1
    for other in others:
        assert other.read_text() == "the shared text\n"
        assert other.stat().st_nlink == links - 1


@pytest.mark.slow
def test_a_write_to_a_linked_file_that_fails_half_way_leaves_every_name_as_it_was(tmp_path):
    """Why the write is not done in place: a failure in the middle (here a real file-size
    limit, EFBIG, after the first half megabyte) leaves both names with the old text, whole,
    and no temp file. An in-place write would have cut the file for every name."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "orion.yaml").write_text("plugins:\n  disable: [orion_plugins.trace_sqlite]\n")
    notes, other = ws / "notes.md", ws / "other.md"
    notes.write_text("the shared text\n")
    os.link(notes, other)
    limit = 512 * 1024
    reply = big_text(tmp_path / "reply.md", 1)
    run = script(tmp_path / "s.yaml", begin("notes.md", "overwrite"),
                 {"model": {"text_file": str(reply)}})

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = orion("run", str(run), "--workspace", str(ws), cwd=tmp_path, preexec=limited)
    assert "Traceback" not in done.stderr and done.returncode == 1, done.stderr[-2000:]
    assert "EFBIG" in done.stderr
    assert notes.read_text() == other.read_text() == "the shared text\n"
    assert notes.stat().st_ino == other.stat().st_ino and notes.stat().st_nlink == 2
    assert not [name for name in os.listdir(ws) if TEMP_MARK in name]
