"""The file behind ``orion chat``'s history: private, a regular file, bounded (FS-23).

What the user typed can hold anything, so the file is its owner's only: created 0600 whatever
the umask, and an existing one that others may read is made 0600 (said once). It is opened
with ``O_NOFOLLOW`` and ``O_NONBLOCK`` and used only when it is a regular file: a FIFO there
would block the chat for ever, a directory would fail inside the line editor, a link could
lead anywhere. Anything else is named once and the chat goes on without history. Only the
last :data:`MAX_BYTES` are read, and the file is cut back to them when it grows past twice
that (the format is prompt_toolkit's ``FileHistory``'s, so entries are whole after a cut).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from orion.config.sourcefile import kind_of
from orion.workspace.files import write_atomically

#: How much of the history is read; the file is cut back to this when it reaches twice as much.
MAX_BYTES = 1 << 20
MODE = 0o600

def kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (``a FIFO``)."""
    return "a symbolic link" if stat.S_ISLNK(mode) else kind_of(mode) or "a regular file"


class HistoryFile:
    """The history file at ``path``; ``notice`` tells the user (at most once per reason)."""

    def __init__(self, path: Path, notice: Callable[[str], None]) -> None:
        self.path = path
        self.notice = notice
        self.off = False  # the file is not used for the rest of the chat
        self._tightened = False

    def read(self) -> bytes:
        """The last :data:`MAX_BYTES` of the history, from the start of an entry (nothing
        when there is no file, or it is not used)."""
        fd = self._open(os.O_RDONLY, create=False)
        if fd is None:
            return b""
        try:
            return _tail(fd, os.fstat(fd).st_size)
        except OSError as exc:
            self._give_up(f"cannot be read ({exc.strerror or exc})")
            return b""
        finally:
            os.close(fd)

    def append(self, data: bytes) -> None:
        """Add ``data`` at the end; past twice :data:`MAX_BYTES`, keep the last ones only."""
        fd = self._open(os.O_RDWR | os.O_APPEND, create=True)
        if fd is None:
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            size = os.fstat(fd).st_size
            if size > 2 * MAX_BYTES:
                self._cut(_tail(fd, size))
        except OSError as exc:
            self._give_up(f"cannot be saved ({exc.strerror or exc}); it is kept for this chat "
                          "only")
        finally:
            os.close(fd)

    # -- opening -------------------------------------------------------------------------------

    def _open(self, flags: int, *, create: bool) -> int | None:
        if self.off:
            return None
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            if not create:
                return None
            info = None
        except OSError as exc:
            self._give_up(f"cannot be read ({exc.strerror or exc})")
            return None
        if info is not None and not stat.S_ISREG(info.st_mode):
            self._refuse(kind(info.st_mode))
            return None
        try:
            if create:
                self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                flags |= os.O_CREAT
            fd = os.open(self.path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, MODE)
        except OSError as exc:  # ELOOP: a link put there since; ENXIO: a FIFO
            self._give_up(f"cannot be opened ({exc.strerror or exc})")
            return None
        try:
            self._private(fd)
        except OSError as exc:
            os.close(fd)
            self._give_up(f"cannot be opened ({exc.strerror or exc})")
            return None
        return fd

    def _private(self, fd: int) -> None:
        """A regular file readable by its owner only (an existing wider one is tightened,
        and the user told so); :class:`OSError` when it is no regular file."""
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            self._refuse(kind(mode))
            raise OSError(f"{self.path} is {kind(mode)}")
        if mode & 0o077:
            os.fchmod(fd, MODE)
            if not self._tightened:
                self._tightened = True
                self.notice(f"the chat history {self.path} could be read by others (mode "
                            f"{stat.S_IMODE(mode):04o}); it is now readable by you only "
                            "(0600)")

    def _cut(self, kept: bytes) -> None:
        """Replace the file by its last entries, atomically and still private."""
        write_atomically(self.path, kept, mode=MODE)

    def _refuse(self, what: str) -> None:
        self._give_up(f"is {what}, not a regular file: it is never opened, and this chat goes "
                      "on without history")

    def _give_up(self, why: str) -> None:
        if not self.off:
            self.off = True
            self.notice(f"the chat history {self.path} {why}")


def _tail(fd: int, size: int) -> bytes:
    """The last :data:`MAX_BYTES` of the open file ``fd`` of ``size`` bytes, from the first
    entry that starts in them."""
    start = max(0, size - MAX_BYTES)
    chunks: list[bytes] = []
    at = start
    while at < size and (chunk := os.pread(fd, min(size - at, 1 << 16), at)):
        chunks.append(chunk)
        at += len(chunk)
    data = b"".join(chunks)
    if start:
        entry = data.find(b"\n#")
        data = data[entry:] if entry >= 0 else b""
    return data
