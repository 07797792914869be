"""A replaced file stays the user's file: its mode from the first byte on, its owner and group
where the process may give them, and what a rename cannot keep (other hard links, an owner only
root could give back) said in the report.

Everything is real: ``orion run`` in a subprocess writes the file, a second process watches the
directory with inotify (as another user, or as root to read the temp file's status), files are
owned by ``nobody``, and Orion itself runs as ``nobody`` with a supplementary group
(``setpriv``). The tests that need root or ``setpriv`` are skipped without them, saying so.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import yaml

from orion.confined import TEMP_MARK

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
    """A directory every user can enter (pytest's own tmp directory is root's alone), removed
    afterwards."""
    path = Path(tempfile.mkdtemp(prefix="orion-identity-", dir="/tmp"))
    path.chmod(0o755)
    request.addfinalizer(lambda: shutil.rmtree(path, ignore_errors=True))
    return path


#: Watches one directory with inotify until stdin closes; prints one JSON line. With
#: ``read``, it tries to open every temp file the moment it is created and reads what it
#: can; with ``stat``, it records each temp file's status when it is created and the first
#: time it holds a byte.
OBSERVER = textwrap.dedent(r"""
    import ctypes, errno, json, os, select, struct, sys
    directory, how, mark = sys.argv[1], sys.argv[2], sys.argv[3]
    libc = ctypes.CDLL(None, use_errno=True)
    IN_CREATE, IN_MODIFY = 0x100, 0x2
    fd = libc.inotify_init1(os.O_NONBLOCK)
    if libc.inotify_add_watch(fd, directory.encode(), IN_CREATE | IN_MODIFY) < 0:
        raise OSError(ctypes.get_errno(), "inotify_add_watch")
    seen = {"created": 0, "opened": 0, "bytes": 0, "refused": [], "at_create": [],
            "first_byte": []}
    handles, watching = [], {}
    print("ready", flush=True)

    def drain():
        for handle in handles:
            while True:
                try:
                    chunk = os.read(handle, 1 << 20)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                seen["bytes"] += len(chunk)

    def status(name):
        try:
            info = os.stat(os.path.join(directory, name))
        except FileNotFoundError:
            return None
        return [stat_mode(info.st_mode), info.st_uid, info.st_gid, info.st_size]

    def stat_mode(mode):
        return mode & 0o7777

    stdin_open = True
    while stdin_open:
        ready, _, _ = select.select([fd, sys.stdin], [], [], 0.01)
        if sys.stdin in ready and not sys.stdin.readline():
            stdin_open = False
        if fd in ready:
            data = os.read(fd, 65536)
            offset = 0
            while offset < len(data):
                _, mask, _, length = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16: offset + 16 + length].rstrip(b"\0").decode()
                offset += 16 + length
                if mark not in name:
                    continue
                if mask & IN_CREATE:
                    seen["created"] += 1
                    if how == "read":
                        try:
                            handles.append(os.open(os.path.join(directory, name),
                                                   os.O_RDONLY | os.O_NONBLOCK))
                            seen["opened"] += 1
                        except OSError as exc:
                            seen["refused"].append(errno.errorcode[exc.errno])
                    else:
                        seen["at_create"].append(status(name))
                        watching[name] = True
                if mask & IN_MODIFY and how == "stat" and watching.get(name):
                    now = status(name)
                    if now is not None and now[3] > 0:
                        seen["first_byte"].append(now)
                        watching[name] = False
        drain()
    drain()
    print(json.dumps(seen), flush=True)
""")


def observe(directory: Path, how: str, as_user: list[str] | None = None):
    watcher = subprocess.Popen([*(as_user or []), sys.executable, "-c", OBSERVER,
                                str(directory), how, TEMP_MARK],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert watcher.stdout.readline().strip() == "ready"

    def result() -> dict:
        out, _ = watcher.communicate("", timeout=60)
        return json.loads(out.strip().splitlines()[-1])
    return result


def big_text(path: Path, megabytes: int) -> Path:
    line = "the new confidential line of the document, streamed by the model\n"
    path.write_text(line * (megabytes * 1024 * 1024 // len(line)) + "DONE\n")
    return path


# -- privacy: the temp file is never more readable than the file ---------------------------


@needs_root
def test_another_user_cannot_read_a_0600_files_new_content_through_the_temp_file(shared):
    ws = shared / "ws"
    ws.mkdir(mode=0o755)
    ws.chmod(0o755)
    secret = ws / "secret.md"
    secret.write_text("the old secret\n")
    secret.chmod(0o600)
    reply = big_text(shared / "reply.md", 48)
    run = script(shared / "s.yaml", begin("secret.md", "overwrite"),
                 {"model": {"text_file": str(reply)}})
    watched = observe(ws, "read", ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                                   "--clear-groups"])
    done = orion("run", str(run), "--workspace", str(ws), cwd=shared)
    seen = watched()
    assert done.returncode == 0, done.stderr[-2000:]
    assert secret.read_text().startswith("the new confidential line")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert seen["created"] >= 1, seen  # the observer did see the temp file appear
    assert seen["opened"] == 0 and seen["bytes"] == 0, seen
    assert set(seen["refused"]) == {"EACCES"}, seen


@needs_root
def test_the_temp_file_has_the_files_owner_and_mode_before_its_first_byte(shared):
    ws = shared / "ws"
    ws.mkdir()
    target = ws / "shared.md"
    target.write_text("the old text\n")
    os.chown(target, NOBODY, USERS_GID)
    target.chmod(0o2640)  # setgid: cleared by a chown that came after the mode
    reply = big_text(shared / "reply.md", 24)
    run = script(shared / "s.yaml", begin("shared.md", "overwrite"),
                 {"model": {"text_file": str(reply)}})
    watched = observe(ws, "stat")
    done = orion("run", str(run), "--workspace", str(ws), cwd=shared)
    seen = watched()
    assert done.returncode == 0, done.stderr[-2000:]
    [created] = seen["at_create"]
    assert created is None or created[0] & 0o077 == 0, seen  # nobody else could open it
    [first] = seen["first_byte"]
    assert first[:3] == [0o2640, NOBODY, USERS_GID], seen
    info = target.stat()
    assert (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid) == (0o2640, NOBODY, USERS_GID)


# -- owner and group ---------------------------------------------------------------------------


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
    done = orion("run", str(run), "--workspace", str(ws), cwd=shared,
                 as_user=["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                          f"--groups={USERS_GID}"], env={"HOME": str(shared)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert notes.read_text() == "root's notes\na line from nobody\n"
    info = notes.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (NOBODY, USERS_GID, 0o664)


# -- hard links: the file gets a file of its own, and that is said -------------------------


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
