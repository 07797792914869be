"""Files Orion reads because configuration names them: ``orion.yaml``, the charts it lists,
the shipped pipeline, scripts for ``orion run`` and the ``text_file`` of a script's reply.

Each is read only when it is a regular file, and (but for ``text_file``, which streams) only up
to a size cap, so a name that leads to ``/dev/zero`` cannot fill the memory and a FIFO cannot
hang ``orion check`` or ``orion run``. The file is stat'ed before it is opened (opening some
devices does something), opened with ``O_NONBLOCK`` (a FIFO swapped in meanwhile opens at
once instead of waiting for a writer) and checked again on the open descriptor; the read stops
one byte past the cap, so a file that grows while it is read is caught too.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from orion.errors import OrionError

#: ``orion.yaml``, statecharts and the pipeline: a real one is a few KiB.
CONFIG_LIMIT = 16 * 1024 * 1024
#: A script for ``orion run``: its replies may be inline, megabytes each (``text_file`` keeps
#: a larger reply out of the script and streams it).
SCRIPT_LIMIT = 256 * 1024 * 1024

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


class NotReadable(OrionError):
    """A file configuration names is not read: it is no regular file, or is over its size cap.
    The message says why, as a predicate of the file (``is not a regular file (a FIFO)``);
    the caller names the file. (The operating system's refusals stay :class:`OSError`.)"""


def kind_of(mode: int) -> str | None:
    """What a file of ``mode`` is when it is not a regular file (``a FIFO``), or
    ``None`` for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _size(n: int) -> str:
    return f"{n / (1024 * 1024):.1f} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"


def check_regular(path: str | os.PathLike[str], limit: int | None) -> os.stat_result:
    """``path``'s status (following links), or :class:`NotReadable` when it is no regular file
    or is larger than ``limit`` bytes (None: no cap). Opens nothing."""
    info = os.stat(path)
    _check(info, limit)
    return info


def _check(info: os.stat_result, limit: int | None) -> None:
    kind = kind_of(info.st_mode)
    if kind is not None:
        raise NotReadable(f"is not a regular file ({kind}); Orion reads configuration only "
                          "from regular files")
    if limit is not None and info.st_size > limit:
        raise NotReadable(f"is {_size(info.st_size)}, over the {_size(limit)} Orion reads at "
                          "most from such a file")


def open_regular(path: str | os.PathLike[str], limit: int | None = None) -> BinaryIO:
    """``path`` opened for reading (binary) once it is a regular file within
    ``limit``; :class:`NotReadable` otherwise (:class:`OSError` when the system refuses).
    Never blocks on a FIFO."""
    check_regular(path, limit)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        _check(os.fstat(fd), limit)  # what was opened, whatever the name leads to now
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them; :class:`NotReadable`
    for anything else (also a file that grew past ``limit`` while it was read)."""
    with open_regular(path, limit) as handle:
        # One read of the size fstat gave (one allocation), then to the end, in pieces.
        want = min(os.fstat(handle.fileno()).st_size, limit) + 1
        chunks, total = [], 0
        while chunk := handle.read(want):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise NotReadable(f"grew past the {_size(limit)} Orion reads at most from "
                                  "such a file while it was read")
            want = min(1 << 20, limit + 1 - total)
    return b"".join(chunks)
