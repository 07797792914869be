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

The replacement keeps the file's identity as far as a rename can (:func:`open_temp`): the temp
file is created owner-only, given the replaced file's owner and group (when the process may:
as root always, otherwise the group when the user is in it), then its mode, all before the
first byte is written, so the new content is never readable by anyone the old file kept out.
What a rename cannot keep is said, never hidden (:func:`identity_notes`): a file with several
hard links gets a file of its own (its other names keep the old text), and a file of another
user that the process may not give back becomes the process's user's.
"""

from __future__ import annotations

import errno
import fcntl
import grp
import os
import pwd
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from orion.errors import OrionError

__all__ = ["Parent", "PathSwapped", "TEMP_MARK", "identity_notes", "open_parent", "open_temp",
           "temp_name", "write_and_close"]

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


def open_temp(name: str, *, dir_fd: int | None = None, like: os.stat_result | None = None,
              mode: int | None = None) -> int:
    """Create the new temp file ``name`` (in ``dir_fd``; never through a symbolic link) as
    the file it will replace is: ``like``'s owner and group where the process may set them,
    then ``mode`` (default: ``like``'s permission bits), before anything is written. Without
    ``like`` or ``mode`` it is a new file: the umask's default mode, at once.

    The order matters: created 0600, so nobody else can open it while it is empty; the owner
    before the mode, since changing the owner clears the set-user-ID and set-group-ID bits."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    if like is None and mode is None:
        return os.open(name, flags, 0o666, dir_fd=dir_fd)  # 0666 & ~umask: the final mode
    final = mode if mode is not None else stat.S_IMODE(like.st_mode)  # type: ignore[union-attr]
    fd = os.open(name, flags, 0o600, dir_fd=dir_fd)
    try:
        if like is not None:
            _give_owner(fd, like)
        os.fchmod(fd, final)
    except BaseException:
        os.close(fd)
        os.unlink(name, dir_fd=dir_fd)
        raise
    return fd


def _give_owner(fd: int, like: os.stat_result) -> None:
    """``like``'s owner and group for ``fd``, as far as the process may give them: root gives
    both; any other user keeps the file and gives it ``like``'s group when it is one of its
    own groups. A file system without owners (or ids a user namespace cannot map) keeps
    the process's: :func:`identity_notes` says so."""
    uid = like.st_uid if os.geteuid() == 0 else -1
    gid = like.st_gid if os.geteuid() == 0 or like.st_gid in _groups() else -1
    mine = os.fstat(fd)
    if (uid == -1 or uid == mine.st_uid) and (gid == -1 or gid == mine.st_gid):
        return
    try:
        os.fchown(fd, uid, gid)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise


def _groups() -> set[int]:
    return {os.getegid(), *os.getgroups()}


def identity_notes(relative: str, before: os.stat_result | None, fd: int) -> list[str]:
    """What the new file ``fd`` does not keep of the file it replaces (``before``), as
    clauses of the write's report: its other names (hard links) and its owner."""
    if before is None:
        return []
    notes = []
    if before.st_nlink > 1:
        others = ("its other name keeps" if before.st_nlink == 2
                  else f"its {before.st_nlink - 1} other names keep")
        notes.append(f"{relative} had {before.st_nlink} hard links: it is a file of its own "
                     f"now, and {others} the old text")
    now = os.fstat(fd)
    if (now.st_uid, now.st_gid) != (before.st_uid, before.st_gid):
        notes.append(f"{relative} belonged to {_owner(before)}; it belongs to {_owner(now)} now "
                     "(only root can give a file to another user)")
    return notes


def _owner(info: os.stat_result) -> str:
    try:
        user = pwd.getpwuid(info.st_uid).pw_name
    except KeyError:
        user = str(info.st_uid)
    try:
        group = grp.getgrgid(info.st_gid).gr_name
    except KeyError:
        group = str(info.st_gid)
    return f"{user}:{group}"


def write_and_close(fd: int, data: bytes) -> None:
    """Write all of ``data`` to the new temp file ``fd``, fsync it and close it, also on
    failure."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
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
            # O_NONBLOCK: a FIFO put in the file's place must not hang the write; the fstat
            # below refuses it (on a regular file the flag changes nothing).
            fd = os.open(self.name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW
                         | getattr(os, "O_CLOEXEC", 0), dir_fd=self.fd)
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

    def replace(self, data: bytes, *, mode: int | None = None) -> list[str]:
        """Replace the file with ``data`` atomically: a temp file in this directory, created
        with the file's owner, group and mode (``mode`` instead, when given; a new file gets
        the umask's), is written, fsynced and renamed over the name; then the directory is
        fsynced. Returns what the new file does not keep of the old one
        (:func:`identity_notes`). On any failure the temp file is removed and the error
        re-raised (the file keeps its old content)."""
        temp = temp_name(self.name)
        before = self.stat()
        like = before if before is not None and stat.S_ISREG(before.st_mode) else None
        fd = open_temp(temp, dir_fd=self.fd, like=like, mode=mode)
        try:
            try:
                notes = identity_notes(self.relative, like, fd)
            except BaseException:
                os.close(fd)
                raise
            write_and_close(fd, data)
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
        return notes

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
