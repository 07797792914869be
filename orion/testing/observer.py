"""Another process watching a directory while Orion writes in it: what a local user could see
of a temp file. Used by the step ``Given another user watches the directory of "<path>"`` and by
Orion's own tests; Linux only (inotify).

Run as ``python -m orion.testing.observer DIRECTORY MARK [--user UID]``. It watches DIRECTORY
with inotify, prints ``ready``, and, until its stdin closes, for every file created there whose
name holds MARK (``.orion-tmp-`` for Orion's temp files): records its mode, owner and group the
moment it is created and the first time it holds a byte, and tries to open it for reading and
read all it can. With ``--user``, it does that as user UID (its own group, no other groups),
after it opened the directory as the user that started it: only the directory's own
permissions matter then, not those of the directories above it. At the end it prints one JSON
line: ``{"created", "opened", "bytes", "refused", "at_create", "first_byte"}``, each status a
list ``[mode, uid, gid, size]``.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import select
import struct
import subprocess
import sys
from pathlib import Path

IN_MODIFY, IN_CREATE = 0x2, 0x100
_EVENT = struct.Struct("iIII")


def watch(directory: str, mark: str, user: int | None = None) -> dict:
    libc = ctypes.CDLL(None, use_errno=True)
    inotify = libc.inotify_init1(os.O_NONBLOCK)
    if inotify < 0 or libc.inotify_add_watch(inotify, os.fsencode(directory),
                                             IN_CREATE | IN_MODIFY) < 0:
        raise OSError(ctypes.get_errno(), f"cannot watch {directory}")
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    if user is not None:
        os.setgroups([])
        os.setresgid(user, user, user)
        os.setresuid(user, user, user)
    seen: dict = {"created": 0, "opened": 0, "bytes": 0, "refused": [], "at_create": [],
                  "first_byte": []}
    handles: list[int] = []
    waiting: set[str] = set()  # created, no byte seen yet
    print("ready", flush=True)

    def status(name: str) -> list[int] | None:
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return [info.st_mode & 0o7777, info.st_uid, info.st_gid, info.st_size]

    def drain() -> None:
        for handle in handles:
            while True:
                try:
                    chunk = os.read(handle, 1 << 20)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                seen["bytes"] += len(chunk)

    def created(name: str) -> None:
        seen["created"] += 1
        seen["at_create"].append(status(name))
        waiting.add(name)
        try:
            handles.append(os.open(name, os.O_RDONLY | os.O_NONBLOCK, dir_fd=dir_fd))
            seen["opened"] += 1
        except OSError as exc:
            seen["refused"].append(errno.errorcode.get(exc.errno or 0, str(exc.errno)))

    def modified(name: str) -> None:
        if name in waiting:
            now = status(name)
            if now is not None and now[3] > 0:
                seen["first_byte"].append(now)
                waiting.discard(name)

    open_input = True
    while open_input:
        ready, _, _ = select.select([inotify, sys.stdin], [], [], 0.01)
        if sys.stdin in ready and not sys.stdin.readline():
            open_input = False
        if inotify in ready:
            data = os.read(inotify, 1 << 16)
            offset = 0
            while offset < len(data):
                _, mask, _, length = _EVENT.unpack_from(data, offset)
                raw = data[offset + _EVENT.size: offset + _EVENT.size + length]
                offset += _EVENT.size + length
                name = os.fsdecode(raw.rstrip(b"\0"))
                if mark not in name:
                    continue
                if mask & IN_CREATE:
                    created(name)
                if mask & IN_MODIFY:
                    modified(name)
        drain()
    drain()
    return seen


class Observer:
    """:func:`watch` in a process of its own, started and ready when this returns."""

    def __init__(self, directory: str | os.PathLike[str], *, mark: str | None = None,
                 user: int | None = None):
        if mark is None:
            from orion.workspace.confined import TEMP_MARK
            mark = TEMP_MARK
        self.process = subprocess.Popen(
            [sys.executable, "-m", "orion.testing.observer", str(Path(directory)), mark,
             *(["--user", str(user)] if user is not None else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.process.stdin is not None and self.process.stdout is not None
        first = self.process.stdout.readline().strip()
        if first != "ready":
            _, err = self.process.communicate(timeout=60)
            raise RuntimeError(f"the observer did not start: {first} {err[-2000:]}")

    def result(self) -> dict:
        """Stop watching; what was seen."""
        out, err = self.process.communicate("", timeout=60)
        if self.process.returncode != 0:
            raise RuntimeError(f"the observer failed: {err[-2000:]}")
        return json.loads(out.strip().splitlines()[-1])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()


def main(argv: list[str]) -> None:
    directory, mark, *rest = argv
    user = int(rest[1]) if rest[:1] == ["--user"] else None
    print(json.dumps(watch(directory, mark, user)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
