"""Writing files safely: whole-file atomic replacement, and private files that are their
owner's only and never reached through a symbolic link.

A leaf: the write session's journal and operations, the statechart migrations and any other
part that writes a file use these, so none has to borrow them from another.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from orion.workspace.confined import open_temp, temp_name, write_and_close

__all__ = ["FILE_MODE", "fsync_directory", "open_private", "read_private", "write_atomically",
           "write_private"]

#: A private file holds what the model wrote for the user's file (a journal, a set-aside
#: part): its owner's only.
FILE_MODE = 0o600
#: Every private file is opened without following a symbolic link: one shipped in a cloned
#: repository (or changed under a running Orion) cannot make Orion read a file outside the
#: workspace as content, nor write into one.
_PRIVATE = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def fsync_directory(directory: Path) -> None:
    """Make a rename or a new name in ``directory`` durable, where the platform can."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:  # pragma: no cover - a platform that cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError as exc:  # pragma: no cover - file systems without directory fsync
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def write_atomically(target: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace ``target`` with ``data`` atomically: a uniquely named temp file in the same
    directory is written, flushed, fsynced, given ``mode`` (the old file's permission bits;
    None: the default from the umask) and renamed over ``target``; then the directory is
    fsynced. On any failure the temp file is removed and the error re-raised: the target keeps
    its old content and no temp file is left behind."""
    target = Path(target)
    temp = target.parent / temp_name(target.name)
    fd = open_temp(str(temp), mode=mode)
    try:
        write_and_close(fd, data)
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except FileNotFoundError:  # pragma: no cover - already renamed or never created
            pass
        raise
    fsync_directory(target.parent)


def open_private(path: str | os.PathLike[str], flags: int, mode: int = FILE_MODE) -> int:
    """``os.open`` of a private file, never through a symbolic link (ELOOP when ``path`` is
    one) and never blocking on a FIFO put in its place."""
    return os.open(path, flags | _PRIVATE | os.O_NONBLOCK, mode)


def read_private(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the private file ``path``: a regular file, not a symbolic link (ELOOP) nor
    anything else (EINVAL, naming what it is)."""
    fd = open_private(path, os.O_RDONLY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        chunks = []
        while chunk := os.read(fd, max(info.st_size + 1, 1 << 16)):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_private(path: str | os.PathLike[str], data: bytes, mode: int = FILE_MODE) -> None:
    """``path`` (created or truncated) holding ``data``, never through a symbolic link."""
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
