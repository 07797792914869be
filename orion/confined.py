"""File access confined to a directory tree, through directory file descriptors.

A path checked by name and then opened by name can be swapped in between: replace a directory
by a symbolic link to ``/etc`` after the check, and a write by path lands outside. Here every
component is opened relative to the descriptor of its parent (``os.open(name, dir_fd=...)``)
with ``O_NOFOLLOW``, from the root down, and the file is created, written, renamed and read
through those descriptors: once a directory is open, swapping its name changes nothing, and a
component that is a symbolic link when it is opened is refused (:class:`PathSwapped`).

:class:`Parent` is one opened parent directory: it reads the file, writes a temp file beside
it, fsyncs and renames it over the target, and holds an exclusive ``flock`` on the directory
while a caller reads, checks and replaces the file (other Orion processes writing a file in
that directory wait for it).
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from orion.errors import OrionError

__all__ = ["Parent", "PathSwapped", "TEMP_MARK", "open_parent", "temp_name"]

#: Temp files are named ``.{name}.orion-tmp-{pid}-{random}`` in the target's directory; the
#: pid lets a later start tell a leftover of a dead process from a write in progress.
TEMP_MARK = ".orion-tmp-"

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class PathSwapped(OrionError):
    """A component of the path is a symbolic link (or not a directory) now, though it was a
    directory when the plan was checked: something changed the tree under the write."""


def temp_name(name: str) -> str:
    return f".{name[:200]}{TEMP_MARK}{os.getpid()}-{secrets.token_hex(6)}"


def write_and_close(fd: int, data: bytes, mode: int | None) -> None:
    """Write all of ``data`` to the new temp file ``fd``, fsync it, give it ``mode`` (if not
    None) and close it, also on failure."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        if mode is not None:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _parts(relative: str) -> list[str]:
    path = PurePosixPath(relative)
    if not relative or path.is_absolute() or "\x00" in relative \
            or any(part in ("..", ".") for part in path.parts):
        raise ValueError(f"not a relative path inside the tree: {relative!r}")
    return list(path.parts)


def _open_dir(name: str, dir_fd: int | None, shown: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS | _NOFOLLOW, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PathSwapped(f"{shown} is not a directory any more (a symbolic link or a file "
                              "took its place); nothing written") from exc
        raise


class Parent:
    """The open parent directory of one file, and the file's name in it."""

    def __init__(self, fd: int, name: str, relative: str, root: Path):
        self.fd, self.name, self.relative = fd, name, relative
        #: The file's path by name (for messages; never opened by it).
        self.path = root / relative

    def stat(self) -> os.stat_result | None:
        """The file's status, not following a symbolic link; None when it does not exist."""
        try:
            return os.stat(self.name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def read(self) -> bytes | None:
        """The file's bytes, or None when it does not exist; :class:`PathSwapped` when it is a
        symbolic link or not a regular file."""
        try:
            fd = os.open(self.name, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                         dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathSwapped(f"{self.relative} is a symbolic link now; nothing "
                                  "written") from exc
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise PathSwapped(f"{self.relative} is not a regular file now; nothing written")
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def replace(self, data: bytes, *, mode: int | None = None) -> None:
        """Replace the file with ``data`` atomically: a temp file in this directory is written,
        fsynced, given ``mode`` and renamed over the name; then the directory is fsynced. On
        any failure the temp file is removed and the error re-raised (the file keeps its old
        content)."""
        temp = temp_name(self.name)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
                     | getattr(os, "O_CLOEXEC", 0), 0o666, dir_fd=self.fd)
        try:
            write_and_close(fd, data, mode)
            os.replace(temp, self.name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            try:
                os.unlink(temp, dir_fd=self.fd)
            except OSError:  # pragma: no cover - already renamed, or the disk is gone
                pass
            raise
        try:
            os.fsync(self.fd)
        except OSError as exc:  # pragma: no cover - file systems without directory fsync
            if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
                raise

    def unlink(self) -> None:
        os.unlink(self.name, dir_fd=self.fd)

    @contextmanager
    def locked(self) -> Iterator[Parent]:
        """Hold an exclusive lock on the directory: every Orion process reading, checking and
        replacing a file in it does so under this lock, one at a time."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            yield self
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)


@contextmanager
def open_parent(root: str | os.PathLike[str], relative: str, *,
                create: bool = False) -> Iterator[Parent]:
    """Open the parent directory of ``relative`` beneath ``root``, one component at a time,
    never following a symbolic link; with ``create``, missing directories are made on the way.
    Raises :class:`PathSwapped` for a component that is a link or a file, and
    :class:`FileNotFoundError` for a missing one without ``create``."""
    parts = _parts(relative)
    fd = os.open(Path(root), _DIR_FLAGS)
    try:
        walked: list[str] = []
        for part in parts[:-1]:
            walked.append(part)
            shown = "/".join(walked)
            try:
                child = _open_dir(part, fd, shown)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass
                child = _open_dir(part, fd, shown)
            os.close(fd)
            fd = child
        yield Parent(fd, parts[-1], relative, Path(root))
    finally:
        os.close(fd)
