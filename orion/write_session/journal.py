"""The journal: a write session's crash-safe record of its content.

Memory is primary, disk is the crash mirror. Every streamed chunk goes to :meth:`Journal.append`
(the hot path), which keeps all content in one ``io.BytesIO`` and appends the new bytes to
``content.txt`` at least every ``flush_lines`` lines or ``flush_interval_ms`` milliseconds. The
file is opened once in append mode and only ever grows: a flush writes the bytes received since
the previous flush, never the whole file.

A session directory holds::

    metadata.json   written once at creation: the caller's metadata plus ``created_at`` (ms)
    content.txt     the content, append-only bytes
    state.json      counts, time of the last save, degradation, plus the caller's state dict,
                    rewritten atomically (temp file + os.replace) at most once per flush
                    interval and when the journal closes
    state.log       every checkpoint in between (flush() with a state) as one JSON line,
                    written in place: a ring of at most STATE_LOG_MAX bytes that starts
                    over at its beginning when the next record would not fit, so a
                    checkpoint is one ``pwrite`` (a rename, or a new file, per checkpoint
                    would cost several times the transition it records). Each record ends
                    with its ``seq`` and a CRC-32 of what precedes it; the complete record
                    with the highest ``seq`` of the two files is the state
                    (:func:`read_state`), so a write torn by a kill, which can only damage
                    the oldest records of the ring, leaves the one before it. Removed when
                    state.json is rewritten.
    degraded        1 KiB of spaces reserved at creation; when the disk fails, why (JSON),
                    overwritten in place so that even a full disk takes it
    lock            the owning process: its pid, and on Linux its start time (see is_live)

Beside the directories, in ``write_sessions/`` itself, an empty ``.resume-<id>`` or
``.finalizing-<id>`` file marks a session that needs attention at the next start (marked for
``--continue``; crashed while its target was written): one listing of ``write_sessions/``
finds them among any number of sessions, without opening each (:func:`marks`).

"Crash-safe" means safe against the process dying (the CLI is killed, the machine sleeps):
writes reach the operating system at each flush, without ``fsync``. After a crash,
:meth:`Journal.open` takes the session over; ``content.txt`` is the truth, ``state.json`` only
adds the caller's state.

Content is encoded to UTF-8 with one twist, so the validator sees exactly what arrived: a lone
surrogate U+DC80..U+DCFF (an invalid byte escaped by ``surrogateescape``, as
:class:`~orion.write_session.protocol.Utf8StreamDecoder` produces) becomes that byte again, and
any other lone surrogate is encoded as ``surrogatepass`` does (three bytes, invalid UTF-8).

If the disk fails (:data:`DEGRADING_ERRNOS`: full, quota, file-size limit, read-only,
permission denied, I/O error), the journal warns once, records the reason in
:attr:`Journal.degraded` and in the ``degraded`` file, and goes on in memory only: the content
stays complete, so the target can still be written. When it cannot be, :meth:`Journal.secure`
tries the disk once more and :meth:`Journal.rescue` writes the content elsewhere. Other
``OSError`` s propagate. The flush interval counts real time as well as the given clock: a
virtual clock that does not move must not keep the content off the disk.
"""

from __future__ import annotations

import builtins
import codecs
import errno
import hashlib
import io
import json
import logging
import os
import re
import shutil
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from orion.clock import BootTime, kernel_boot_time
from orion.errors import OrionError
# The private-file helpers live in orion.workspace.files; their names stay importable here.
from orion.workspace.files import FILE_MODE, open_private, read_private, write_atomically
from orion.workspace.files import write_private as write_private
from orion.write_session.leftovers import remove_temp_leftovers

__all__ = ["Journal", "JournalLocked", "JournalOutOfMemory", "DEGRADING_ERRNOS", "ENCODING_ERRORS", "mark", "marks",
           "read_state", "remove_session", "unmark"]

log = logging.getLogger("orion.write_session")

METADATA = "metadata.json"
CONTENT = "content.txt"
STATE = "state.json"
STATE_LOG = "state.log"
#: The size of the state log's ring: a record that would end past it is written at its start.
STATE_LOG_MAX = 64 * 1024
#: A record larger than this replaces state.json instead: the ring always holds the record
#: before the one being written (a record at most a third of the ring never reaches it).
STATE_RECORD_MAX = STATE_LOG_MAX // 3
LOCK = "lock"

STATUS = "degraded"
#: The size of the ``degraded`` file, reserved at creation: saying why the disk failed then
#: overwrites reserved bytes in place, which needs no new space on a full disk.
STATUS_RESERVE = 1024

#: Disk errors that switch the journal to memory only instead of failing the session: the
#: disk's (full, quota, file-size limit, read-only, permission, I/O), a link where a journal
#: file belongs, and the process's own limits on opening files (EMFILE, ENFILE) and on kernel
#: memory (ENOMEM).
DEGRADING_ERRNOS = frozenset({errno.ENOSPC, errno.EACCES, errno.EROFS, errno.EDQUOT,
                              errno.EFBIG, errno.EIO, errno.EPERM, errno.ELOOP, errno.EMFILE,
                              errno.ENFILE, errno.ENOMEM})
#: Of those, the ones that only keep a new file from being opened: the content file, open
#: already, still takes the content, and only the state waits for the next checkpoint.
OPEN_LIMITS = frozenset({errno.EMFILE, errno.ENFILE})

#: Name of the codec error handler the journal encodes with (registered on import).
ENCODING_ERRORS = "orion.journal"
#: Bytes the running SHA-256 may lag behind the content between explicit flushes: hashing a
#: few kilobytes at every automatic flush costs more in calls than in hashing, and what is
#: left for finalizing stays small.
HASH_BATCH = 1 << 18

#: A journal holds what the model wrote for the user's file: its directory and files are their
#: owner's only (a target its owner may not even read keeps that for the journal too).
DIR_MODE = 0o700


def file_mode(target_mode: int | None) -> int:
    """The mode of a journal's files for a target of ``target_mode`` (None: a new file):
    :data:`FILE_MODE`, less the owner's read bit when the target withholds it."""
    if target_mode is None:
        return FILE_MODE
    return FILE_MODE & (target_mode | 0o200)


def links_in(directory: str | os.PathLike[str]) -> dict[str, str]:
    """The names in a session directory (and the directory itself, as ``.``) that are symbolic
    links, with where each leads: a journal never has one of its own."""
    found: dict[str, str] = {}
    d = Path(directory)
    try:
        if d.is_symlink():
            return {".": os.readlink(d)}
        entries = list(os.scandir(d))
    except OSError:
        return found
    for entry in entries:
        try:
            if entry.is_symlink():
                found[entry.name] = os.readlink(entry.path)
        except OSError:
            continue
    return found


def _encode_surrogates(exc: UnicodeError) -> tuple[bytes, int]:
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = bytearray()
    for ch in exc.object[exc.start:exc.end]:
        cp = ord(ch)
        if 0xDC80 <= cp <= 0xDCFF:
            out.append(cp - 0xDC00)
        elif 0xD800 <= cp <= 0xDFFF:
            out += ch.encode("utf-8", "surrogatepass")
        else:  # pragma: no cover - the UTF-8 encoder only fails on surrogates
            raise exc
    return bytes(out), exc.end


codecs.register_error(ENCODING_ERRORS, _encode_surrogates)


class JournalLocked(OrionError):
    """The session is owned by another running process."""


class JournalOutOfMemory(OrionError):
    """The journal could not grow its buffer (``MemoryError``). Everything received is on
    disk (``content.txt``), or in the rescue file :attr:`rescued` names, or, when neither took
    it, :attr:`saved` is False; the journal keeps no content in memory any more, and the
    session cannot be finished in this process."""

    def __init__(self, message: str, *, saved: bool, rescued: str | None = None):
        super().__init__(message)
        self.saved, self.rescued = saved, rescued


def _wall_ms() -> float:
    return time.time() * 1000.0


_monotonic = time.monotonic  # the hot path's clock, looked up once


def _real_ms() -> float:
    return _monotonic() * 1000.0


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), or None if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    # After "pid (comm)": state is field 3, starttime field 22.
    return fields[19].decode("ascii") if len(fields) > 19 else None


def _process_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    rest = stat[stat.rfind(b")") + 2:]
    return rest[:1].decode("ascii", "replace") or None


def _describe(exc: OSError, path: Path | None) -> str:
    name = errno.errorcode.get(exc.errno or 0, "OSError")
    filename = exc.filename or path
    where = f" ({filename})" if filename else ""
    return f"{name}: {exc.strerror or exc}{where}"


class Journal:
    """One session directory: the content in memory, mirrored to disk append-only.

    Build one with :meth:`create` (a new session) or :meth:`open` (take an existing session
    over, e.g. after a crash).
    """

    def __init__(self, directory: str | os.PathLike[str], *, flush_lines: int = 50,
                 flush_interval_ms: float = 5000, now_ms: Callable[[], float] | None = None,
                 on_degraded: Callable[[str], object] | None = None,
                 content_path: str | os.PathLike[str] | None = None, mode: int = FILE_MODE,
                 since_boot: Callable[[], BootTime | None] = kernel_boot_time):
        """Use :meth:`create` or :meth:`open`; this only sets the fields up. ``mode``: of the
        files the journal creates (see :func:`file_mode`). ``since_boot``: the second clock
        (:mod:`orion.clock`), read with every save, so a session's age is never the wall
        clock's word alone."""
        if flush_lines < 1:
            raise ValueError("flush_lines must be at least 1")
        if flush_interval_ms <= 0:
            raise ValueError("flush_interval_ms must be positive")
        self.directory = Path(directory)
        #: Where the content is appended: ``content.txt`` in the directory unless given (a seam
        #: for tests, e.g. ``/dev/full``, and for keeping the content on another filesystem).
        self.content_path = Path(content_path) if content_path is not None \
            else self.directory / CONTENT
        self._mode = mode
        self.metadata: dict[str, Any] = {}
        #: The caller's state as last passed to :meth:`flush` (or read back by :meth:`open`).
        self.state: dict[str, Any] = {}
        self._flush_lines = flush_lines
        self._interval = flush_interval_ms
        self._now_ms = now_ms or _wall_ms
        self._on_degraded = on_degraded
        # A BytesIO, not a bytearray: its getvalue() hands out the buffer itself as bytes, so
        # finalizing reads tens of megabytes of content without a second copy of them. The hot
        # path reads it through getbuffer(), which does not shrink it as getvalue() does.
        self._buf = io.BytesIO()
        self._size = 0
        # SHA-256 of the first _hashed bytes, brought up to date as content arrives: finalizing
        # records the content's hash, and hashing tens of megabytes then would delay the write.
        self._digest = hashlib.sha256()
        self._hashed = 0
        self._lines = 0
        #: How many more newlines make the next automatic flush: an attribute, not a property,
        #: since the session reads it for every chunk of a stream.
        self.lines_to_flush = flush_lines
        self._flushed = 0
        self._fd: int | None = None
        self._log_fd: int | None = None  # state.log, while checkpoints are written to it
        self._log_pos = 0  # where the next record goes in state.log's ring
        self._log_stale = False  # a dead process's state.log: folded before any write to it
        self._seq = 0  # of the last state record written
        self._degraded: str | None = None
        self._closed = False
        self._owns_lock = False
        self._last_flush_ms = self._now_ms()
        # The flush interval also runs on real time: a virtual clock (``orion run``) may never
        # advance while a model streams for seconds, and a crash would then lose everything.
        self._last_flush_real = _real_ms()
        self._last_save_ms: float | None = None
        self._since_boot = since_boot
        self._last_save_boot: BootTime | None = None
        self._last_state_ms = float("-inf")
        self._last_state_real = float("-inf")
        self._rescued: str | None = None
        self._state_waits = False  # the open-file limit kept the state from being saved
        self._buf_failed = False  # MemoryError: the content is on disk only (see _spill)

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: str | os.PathLike[str], metadata: Mapping[str, Any], *,
               flush_lines: int = 50, flush_interval_ms: float = 5000,
               now_ms: Callable[[], float] | None = None,
               on_degraded: Callable[[str], object] | None = None,
               content_path: str | os.PathLike[str] | None = None,
               mode: int = FILE_MODE,
               since_boot: Callable[[], BootTime | None] = kernel_boot_time) -> Journal:
        """Start a new session in ``directory`` (created if needed; it must not hold a session
        already: :class:`FileExistsError`)."""
        journal = cls(directory, flush_lines=flush_lines, flush_interval_ms=flush_interval_ms,
                      now_ms=now_ms, on_degraded=on_degraded, content_path=content_path,
                      mode=mode, since_boot=since_boot)
        journal.metadata = {**metadata, "created_at": journal._now_ms()}
        try:
            journal.directory.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            journal.directory.mkdir(mode=DIR_MODE, exist_ok=True)
            # Compact: an indent makes each dump a reference cycle (see undo.replace_json).
            _write_new(journal.directory / METADATA, json.dumps(
                journal.metadata, ensure_ascii=False, default=str).encode("utf-8"),
                journal._mode)
            _write_new(journal.directory / STATUS, b" " * STATUS_RESERVE, journal._mode)
            journal._take_lock()
            journal._open_content()
        except FileExistsError:
            raise
        except OSError as exc:
            journal._disk_failed(exc)
        return journal

    @classmethod
    def open(cls, directory: str | os.PathLike[str], *, flush_lines: int = 50,
             flush_interval_ms: float = 5000, now_ms: Callable[[], float] | None = None,
             on_degraded: Callable[[str], object] | None = None,
             content_path: str | os.PathLike[str] | None = None,
             mode: int = FILE_MODE,
             since_boot: Callable[[], BootTime | None] = kernel_boot_time) -> Journal:
        """Take over an existing session: read its content and state, count lines and bytes,
        take the lock. Raises :class:`JournalLocked` if another live process owns it and
        :class:`FileNotFoundError` if ``directory`` holds no session."""
        journal = cls(directory, flush_lines=flush_lines, flush_interval_ms=flush_interval_ms,
                      now_ms=now_ms, on_degraded=on_degraded, content_path=content_path,
                      mode=mode, since_boot=since_boot)
        d = journal.directory
        journal.metadata = json.loads(read_private(d / METADATA))
        owner = cls._lock_owner(d)
        if owner is not None and owner != os.getpid() and cls.is_live(d):
            raise JournalLocked(f"write session {d} is owned by running process {owner}")
        remove_temp_leftovers(d)  # a rewrite the dead process never renamed (a keep's)
        try:
            data = read_private(journal.content_path)
            journal._buf = io.BytesIO(data)
            journal._buf.seek(0, io.SEEK_END)
            journal._size = journal._flushed = len(data)
            journal._lines = data.count(b"\n")
            del data
        except FileNotFoundError:
            pass
        saved, _ = read_state(d)
        # The dead process's checkpoints: folded into state.json at the next one, never
        # overwritten in place (where its newest record is in the ring is not known here).
        journal._log_stale = os.path.lexists(d / STATE_LOG)
        if saved is not None:
            journal._last_save_ms = saved.get("last_save_ms")
            journal._last_save_boot = BootTime.from_json(saved.get("last_save_boot"))
            seq = saved.get("seq")
            journal._seq = seq if isinstance(seq, int) else 0
            journal.state = {k: v for k, v in saved.items() if k not in _COUNT_KEYS}
        try:
            journal._take_lock()
            journal._open_content()
        except OSError as exc:
            journal._disk_failed(exc)
        return journal

    # -- the hot path ------------------------------------------------------------------------

    def append(self, text: str) -> int:
        """Add streamed content; mirror it to disk when a flush threshold is reached. Returns
        :attr:`bytes`, the content's size so far (the caller's next check needs it)."""
        if not text:
            return self._size
        try:
            data = text.encode("utf-8", ENCODING_ERRORS)
            self._buf.write(data)
        except MemoryError:
            self._spill(text)  # raises JournalOutOfMemory
        size = self._size = self._size + len(data)
        n = data.count(b"\n")
        if n:
            self._lines += n
            self.lines_to_flush -= n
            if self.lines_to_flush <= 0:
                self._flush(False)
                return size
        if self._now_ms() - self._last_flush_ms >= self._interval \
                or _monotonic() * 1000.0 - self._last_flush_real >= self._interval:
            self._flush(False)
        return size

    def flush_wait_ms(self) -> float | None:
        """How long until the pending content is due on disk by the flush interval (by
        whichever of the two clocks gets there first), or None when nothing is pending. The
        session arms a timer with it, so a stream that stalls is saved on time even when no
        more text arrives to trigger :meth:`append`'s check."""
        if self._closed or self._fd is None or self._size == self._flushed:
            return None  # nothing to save, or nowhere to save it (memory only)
        return max(0.0, min(self._last_flush_ms + self._interval - self._now_ms(),
                            self._last_flush_real + self._interval - _real_ms()))

    def flush_if_due(self) -> bool:
        """Write the pending content when the flush interval has passed; return whether it
        did."""
        wait = self.flush_wait_ms()
        if wait is None or wait > 0:
            return False
        self._flush(False)
        return True

    def flush(self, state: Mapping[str, Any] | None = None) -> None:
        """Write the pending bytes, then the state (with ``state`` as the caller's part, if
        given): a line appended to ``state.log``, or ``state.json`` once per flush interval.

        The controller calls it at its checkpoints (message ends, before finalizing). In
        memory-only mode it only resets the flush thresholds.
        """
        if state is not None:
            self.state = dict(state)
        self._flush(True)

    def _flush(self, with_state: bool) -> None:
        # Automatic flushes (from append) always write the content; they write the state only
        # once per flush interval: the content file is the truth after a crash.
        now, real = self._now_ms(), _real_ms()
        self.lines_to_flush = self._flush_lines
        self._last_flush_ms, self._last_flush_real = now, real
        if with_state or self._size - self._hashed >= HASH_BATCH:
            self._hash_pending()
        if self._fd is None:
            return
        try:
            self._write_pending()
        except OSError as exc:
            self._disk_failed(exc, self.content_path)
            return
        self._last_save_ms = now
        self._last_save_boot = self._since_boot()
        due = now - self._last_state_ms >= self._interval \
            or real - self._last_state_real >= self._interval
        if not (with_state or due):
            return
        try:
            if due or self._log_stale:
                self._last_state_ms, self._last_state_real = now, real
                self._write_state()
            else:
                self._put_state()
        except OSError as exc:
            self._state_failed(exc)

    def truncate(self, size: int) -> None:
        """Take back everything after the first ``size`` bytes, in memory and on disk: a
        message that turned out not to be content (text beside a tool call, a reply that was
        not content) leaves the journal as it was before the message."""
        if size >= self._size:
            return
        with self._buf.getbuffer() as view:
            removed = bytes(view[size:]).count(b"\n")
        self._buf.truncate(size)
        self._buf.seek(size)
        self._size = size
        self._lines -= removed
        self.lines_to_flush = min(self._flush_lines, self.lines_to_flush + removed)
        if self._hashed > size:  # rare: the running hash already covered the removed bytes
            self._digest, self._hashed = hashlib.sha256(), 0
            self._hash_pending()
        if self._flushed > size:
            self._flushed = size
            if self._fd is not None:
                try:
                    os.ftruncate(self._fd, size)
                except OSError as exc:
                    self._disk_failed(exc, self.content_path)

    def insert(self, at: int, data: bytes) -> None:
        """Put ``data`` into the content at byte ``at`` (text set aside that the model put
        back): the content after it moves along, in memory and on disk. The file is replaced
        as a whole (a temp file, then a rename), never cut and written again in place: a kill
        at any moment leaves either the old content or the new one (FS-14)."""
        if not data:
            return
        at = max(0, min(at, self._size))
        content = self._buf.getvalue()
        whole = b"".join((content[:at], data, content[at:]))
        del content
        if self._fd is not None:
            try:
                self._replace_content(whole)
            except OSError as exc:
                self._disk_failed(exc, self.content_path)
        self._buf = io.BytesIO(whole)
        self._buf.seek(0, io.SEEK_END)
        self._size = len(whole)
        self._flushed = self._size if self._fd is not None else self._flushed
        self._lines = whole.count(b"\n")
        self.lines_to_flush = self._flush_lines
        self._digest, self._hashed = hashlib.sha256(), 0
        self._hash_pending()

    def _replace_content(self, whole: builtins.bytes) -> None:
        """``content.txt`` replaced by ``whole`` atomically and durably (the workspace's atomic
        writer: a temp file fsynced, renamed, the directory fsynced), then opened again for
        appending (the old descriptor names the old file)."""
        write_atomically(self.content_path, whole, mode=self._mode)
        old, self._fd = self._fd, None
        if old is not None:
            os.close(old)
        self._open_content()

    # -- reading -----------------------------------------------------------------------------

    def last_line(self) -> bytes:
        """The content after its last line break: the unfinished last line (empty when the
        content ends with a line break)."""
        with self._buf.getbuffer() as view:
            start = bytes(view[max(0, self._size - 4096):self._size]).rfind(b"\n")
            if start >= 0 or self._size <= 4096:
                start = (max(0, self._size - 4096) + start + 1) if start >= 0 else 0
                return bytes(view[start:self._size])
        content = self._buf.getvalue()
        return content[content.rfind(b"\n") + 1:]

    def head_lines(self, n: int) -> list[str]:
        """The first ``n`` complete lines, without their line breaks (``\r\n`` too)."""
        lines: list[str] = []
        with self._buf.getbuffer() as view:
            start = 0
            while len(lines) < n:
                end = bytes(view[start:start + 65536]).find(b"\n")
                if end < 0:
                    break
                line = bytes(view[start:start + end])
                lines.append(line.decode("utf-8", "replace").removesuffix("\r"))
                start += end + 1
        return lines

    def content(self) -> bytes:
        """Everything received so far: the journal's own buffer, not a copy (finalizing reads
        the content several times, and it can be tens of megabytes). While a caller holds it,
        the next append copies the buffer first, as it must not change under the caller."""
        return self._buf.getvalue()

    def sha256(self) -> str:
        """The SHA-256 (hex) of everything received so far."""
        self._hash_pending()
        return self._digest.copy().hexdigest()

    def _hash_pending(self) -> None:
        if self._hashed >= self._size:
            return
        with self._buf.getbuffer() as view:
            self._digest.update(view[self._hashed:])
        self._hashed = self._size

    def read(self, start: int) -> bytes:
        """The content from byte ``start`` on (a copy of that part only)."""
        with self._buf.getbuffer() as view:
            return bytes(view[start:])

    def whole_lines(self, start: int) -> bytes:
        """The complete lines from byte ``start`` on (up to the last line break; empty when
        none ends after ``start``): a copy of that part only, and no copy at all when it is
        the whole content (a one-line write of gigabytes is checked without a second copy).
        Drop it before the next :meth:`append`, which would otherwise copy the buffer."""
        content = self._buf.getvalue()  # the buffer itself (see content())
        end = content.rfind(b"\n", start) + 1
        if end <= start:
            return b""
        return content if start == 0 and end == len(content) else content[start:end]

    @property
    def lines(self) -> int:
        """Number of newlines received (a last line without one is not counted)."""
        return self._lines

    @property
    def bytes(self) -> int:
        """Number of content bytes received."""
        return self._size

    @property
    def flushed_bytes(self) -> int:
        """Number of content bytes written to disk."""
        return self._flushed

    @property
    def closed(self) -> bool:
        """Closed (or removed): the content is on disk only, :meth:`content` is empty."""
        return self._closed

    @property
    def degraded(self) -> str | None:
        """None, or why the journal went memory-only (e.g. ``"ENOSPC: No space left ..."``)."""
        return self._degraded

    @property
    def last_save_ms(self) -> float | None:
        return self._last_save_ms

    def tail_lines(self, n: int) -> list[str]:
        """The last ``n`` lines (a last line without a newline counts), without line endings,
        decoded with ``errors="replace"``: for the continuation prompt."""
        if n <= 0 or not self._size:
            return []
        buf = self._buf.getvalue()
        end = len(buf)
        if end and buf[end - 1] == 0x0A:
            end -= 1
        start = end
        for _ in range(n):
            i = buf.rfind(b"\n", 0, start)
            if i < 0:
                start = 0
                break
            start = i
        else:
            start += 1
        text = buf[start:end].decode("utf-8", "replace")
        return [line.removesuffix("\r") for line in text.split("\n")]

    # -- keeping the content when the disk failed ---------------------------------------------

    def secure(self) -> bool:
        """Whether ``content.txt`` holds every byte received, after writing what is pending.
        A degraded journal tries the disk once more (space may have been freed): the bytes the
        file lacks are appended and fsynced. Never raises for a disk error."""
        if self._buf_failed:  # out of memory: _spill saved what it could, and nothing is held
            return self._degraded is None and self._fd is not None
        if self._degraded is None and self._fd is not None:
            try:
                self._write_pending()
                os.fsync(self._fd)
                return True
            except OSError as exc:
                try:
                    self._disk_failed(exc, self.content_path)
                except OSError:
                    return False
        try:
            fd = open_private(self.content_path, os.O_WRONLY | os.O_CREAT, self._mode)
        except OSError:
            return False
        try:
            size = os.fstat(fd).st_size
            if size > self._size:
                return False
            os.lseek(fd, size, os.SEEK_SET)
            with memoryview(self._buf.getvalue()) as view:
                while size < len(view):
                    size += os.write(fd, view[size:])
            os.fsync(fd)
        except OSError:
            return False
        finally:
            os.close(fd)
        self._flushed = self._size
        self._degraded = None
        self._mark_status({})
        try:
            self._write_state()
        except OSError:
            pass  # content.txt is the truth; state.json only adds the caller's state
        return True

    def rescue(self, places: list[Path], name: str) -> Path:
        """Write all the content to a new file ``orion-rescued-<name>`` in the first of
        ``places`` that takes it (fsynced), note it in the session directory if possible and
        return its path; the last ``OSError`` when none does."""
        if self._buf_failed:  # out of memory: _spill wrote the rescue file, or none could be
            if self._rescued is not None:
                return Path(self._rescued)
            raise OSError(errno.ENOMEM, "out of memory, and no disk took the content")
        failure: OSError | None = None
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:100]
        for place in places:
            path = Path(place) / f"orion-rescued-{safe}.txt"
            try:
                Path(place).mkdir(parents=True, exist_ok=True)
                n = 1
                while True:
                    try:
                        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                        break
                    except FileExistsError:
                        n += 1
                        path = Path(place) / f"orion-rescued-{safe}-{n}.txt"
                try:
                    with memoryview(self._buf.getvalue()) as view:
                        done = 0
                        while done < len(view):
                            done += os.write(fd, view[done:])
                    os.fsync(fd)
                except OSError:
                    os.close(fd)
                    path.unlink(missing_ok=True)
                    raise
                os.close(fd)
            except OSError as exc:
                failure = exc
                continue
            self._rescued = str(path)
            self._mark_status({"reason": self._degraded, "rescued": str(path)})
            log.warning("write session %s: the content was written to %s", self.directory, path)
            return path
        assert failure is not None
        raise failure

    def _mark_status(self, record: dict[str, Any]) -> None:
        """Overwrite the reserved ``degraded`` file in place (no new space needed): blank for
        a journal on disk, else why it is not, how much reached the disk and where the content
        was rescued. Best effort: a disk that refuses even this is already reported."""
        if record:
            record = {**record, "bytes": self._size, "flushed_bytes": self._flushed}
            data = json.dumps(record, ensure_ascii=False, default=str).encode("utf-8")
            if len(data) > STATUS_RESERVE:
                record["reason"] = str(record.get("reason"))[:200]
                data = json.dumps(record, ensure_ascii=False, default=str).encode("utf-8")
            data = data[:STATUS_RESERVE]
        else:
            data = b""
        try:
            fd = open_private(self.directory / STATUS, os.O_WRONLY)
        except OSError:
            return
        try:
            os.pwrite(fd, data.ljust(STATUS_RESERVE), 0)
        except OSError:
            pass
        finally:
            os.close(fd)

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Flush what is pending, close the content file and release the lock. The content
        is on disk then, and no longer in memory (the counts stay)."""
        if self._closed:
            return
        if self._fd is not None and (self._flushed < self._size or self._last_save_ms is None):
            self.flush()
        if self._fd is not None and self._log_fd is not None:
            try:  # fold the checkpoints into state.json: one file for readers after a clean end
                self._write_state()
            except OSError as exc:
                self._state_failed(exc)
        if self._degraded is not None:  # how much the disk lacks, for orion sessions list
            self._mark_status({"reason": self._degraded, "rescued": self._rescued})
        self._close_fd()
        self._release_lock()
        self._closed = True
        self._buf = io.BytesIO()  # the disk has it; a closed journal holds no content

    def remove(self) -> None:
        """Delete the session directory (after the target was written or the session dropped)."""
        self._close_fd()
        self._owns_lock = False
        self._closed = True
        self._buf = io.BytesIO()
        remove_session(self.directory)

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the lock ----------------------------------------------------------------------------

    @staticmethod
    def is_live(directory: str | os.PathLike[str]) -> bool:
        """Whether the process named in the session's lock is running (and not a zombie).

        A missing or unreadable lock means not live. On Linux the lock also records the
        process's start time, so a pid reused by an unrelated process is not live either.
        """
        try:
            text = read_private(Path(directory) / LOCK).decode("ascii")
            parts = text.split()
            pid = int(parts[0])
        except (OSError, ValueError, IndexError, UnicodeDecodeError):
            return False
        if pid <= 0:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # it exists, it belongs to someone else
        except OSError:
            return False
        if _process_state(pid) == "Z":
            return False
        if len(parts) > 1:
            started = _start_time(pid)
            if started is not None and started != parts[1]:
                return False
        return True

    @staticmethod
    def _lock_owner(directory: Path) -> int | None:
        try:
            return int(read_private(directory / LOCK).decode("ascii").split()[0])
        except (OSError, ValueError, IndexError, UnicodeDecodeError):
            return None

    def _take_lock(self) -> None:
        pid = os.getpid()
        started = _start_time(pid)
        text = f"{pid}\n" if started is None else f"{pid}\n{started}\n"
        self._replace(self.directory / LOCK, text.encode("ascii"))
        self._owns_lock = True

    def _release_lock(self) -> None:
        if not self._owns_lock:
            return
        self._owns_lock = False
        path = self.directory / LOCK
        try:
            if self._lock_owner(self.directory) == os.getpid():
                path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            if exc.errno not in DEGRADING_ERRNOS:
                raise

    def redirect_content(self, path: str | os.PathLike[str]) -> None:
        """Append the content to ``path`` from now on instead of ``content.txt`` (a seam for
        fault tests: a full device, a file the kernel refuses; a disk error on opening it
        degrades the journal as any other would)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        self.content_path = Path(path)
        try:
            self._open_content()
        except OSError as exc:
            self._disk_failed(exc, self.content_path)

    # -- disk --------------------------------------------------------------------------------

    def _open_content(self) -> None:
        fd = open_private(self.content_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, self._mode)
        os.set_blocking(fd, True)
        self._fd = fd

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        log_fd, self._log_fd = self._log_fd, None
        if log_fd is not None:
            os.close(log_fd)

    def _write_pending(self) -> None:
        start = self._flushed
        end = self._size
        if start == end:
            return
        with self._buf.getbuffer() as view:
            while start < end:
                start += os.write(self._fd, view[start:end])  # type: ignore[arg-type]
                self._flushed = start

    def _state_record(self) -> builtins.bytes:
        """The next state record: one line of JSON, ending with its ``seq`` and the CRC-32 of
        the text before ``, "crc"`` (:func:`_ring_record`), and a line break."""
        self._seq += 1
        text = _ENCODER.encode({
            "lines": self._lines, "bytes": self._size, "flushed_bytes": self._flushed,
            "last_save_ms": self._last_save_ms, "last_save_boot": self._last_save_boot,
            "degraded": self._degraded, **self.state})
        # The caller's state never holds "seq" (read back without it), and JSON readers take
        # the last of two equal keys anyway.
        body = f'{text[:-1]}, "seq": {self._seq}'.encode("utf-8")
        return b'%s, "crc": "%08x"}\n' % (body, zlib.crc32(body))

    def _write_state(self, record: builtins.bytes | None = None) -> None:
        """``state.json`` rewritten atomically; the checkpoints written to state.log since
        are now in it."""
        self._replace(self.directory / STATE, record or self._state_record())
        log_fd, self._log_fd = self._log_fd, None
        if log_fd is not None:
            os.close(log_fd)
        if self._log_pos or self._log_stale or log_fd is not None:
            self._log_pos = 0
            self._log_stale = False
            try:
                os.unlink(self.directory / STATE_LOG)
            except FileNotFoundError:
                pass

    def _put_state(self) -> None:
        """One checkpoint as one record written in place in state.log's ring (a single
        ``pwrite``: no new file, no rename, no new block once the ring has gone round)."""
        data = self._state_record()
        if len(data) > STATE_RECORD_MAX:
            self._write_state(data)
            return
        pos = self._log_pos
        if pos + len(data) > STATE_LOG_MAX:
            pos = 0
        if self._log_fd is None:
            self._log_fd = open_private(self.directory / STATE_LOG,
                                        os.O_WRONLY | os.O_CREAT, self._mode)
            os.set_blocking(self._log_fd, True)
        pwrite = _PWRITE[0] if _PWRITE else _pwrite_function()
        start = pos
        while pos - start < len(data):
            pos += pwrite(self._log_fd, data[pos - start:] if pos > start else data, pos)
        self._log_pos = pos

    def _replace(self, path: Path, data: builtins.bytes) -> None:
        """``path`` replaced by ``data`` atomically (a temp file made anew, then renamed: a
        link in either name is replaced, never followed)."""
        tmp = path.with_name(path.name + ".tmp")
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        _write_new(tmp, data, self._mode)
        os.replace(tmp, path)

    def _state_failed(self, exc: OSError) -> None:
        """The state could not be saved. When only opening a file is refused (the process's
        open-file limit), the content file, open already, still takes the content: the state
        waits for the next checkpoint. Anything else is a disk failure."""
        if exc.errno not in OPEN_LIMITS or self._fd is None:
            self._disk_failed(exc, self.directory / STATE)
            return
        if not self._state_waits:
            self._state_waits = True
            log.warning("write session %s: cannot open a file to save its state (%s); the "
                        "content still reaches %s, the state waits for the next checkpoint",
                        self.directory, _describe(exc, None), self.content_path)

    def _spill(self, text: str) -> None:
        """The buffer cannot grow (``MemoryError``): everything received goes to disk instead
        (the pending bytes, then ``text`` in small pieces), the buffer is let go, and
        :class:`JournalOutOfMemory` says where the content is."""
        received = self._size
        self._buf_failed = True
        saved, rescued = False, None
        if self._fd is not None:
            try:
                self._write_pending()
                received += self._write_text(self._fd, text)
                os.fsync(self._fd)
                saved = True
            except OSError as exc:
                self._disk_failed(exc, self.content_path)
        if not saved:
            rescued = self._rescue_with(text)
        self._buf = io.BytesIO()  # what memory there is goes back to the process
        self._size = self._flushed = received if saved else self._size
        self._lines = self._lines + text.count("\n")
        size = f"{received / (1024 * 1024):.1f} MiB"
        if saved:
            where = f"all of it is saved in {self.content_path}"
        elif rescued:
            where = f"all of it was written to {rescued}"
        else:
            where = "it could not be saved anywhere"
        log.warning("write session %s: out of memory after %s of content; %s",
                    self.directory, size, where)
        raise JournalOutOfMemory(f"out of memory after {size} of content ({self._lines} "
                                 "lines)", saved=saved, rescued=rescued)

    @staticmethod
    def _write_text(fd: int, text: str) -> int:
        """``text`` encoded and written a piece at a time (no second copy of it in memory);
        the bytes written."""
        written = 0
        for start in range(0, len(text), 1 << 16):
            piece = text[start:start + (1 << 16)].encode("utf-8", ENCODING_ERRORS)
            view = memoryview(piece)
            while view:
                n = os.write(fd, view)
                view = view[n:]
                written += n
        return written

    def _rescue_with(self, text: str) -> str | None:
        """The buffer and ``text`` to a rescue file (the disk of the journal failed too)."""
        from tempfile import gettempdir

        for place in (self.directory.parent.parent / "rescued", Path(gettempdir()), Path.home()):
            path = place / f"orion-rescued-{self.directory.name[:8]}-out-of-memory.txt"
            try:
                place.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            except OSError:
                continue
            try:
                with self._buf.getbuffer() as view:
                    done = 0
                    while done < self._size:
                        done += os.write(fd, view[done:self._size])
                self._write_text(fd, text)
                os.fsync(fd)
            except OSError:
                os.close(fd)
                path.unlink(missing_ok=True)
                continue
            os.close(fd)
            self._rescued = str(path)
            return str(path)
        return None

    def _disk_failed(self, exc: OSError, path: Path | None = None) -> None:
        """Switch to memory only on a disk-full/read-only/permission error; re-raise others."""
        if exc.errno not in DEGRADING_ERRNOS:
            raise exc
        if self._degraded is not None:
            return
        self._degraded = _describe(exc, path)
        try:
            self._close_fd()
        except OSError:
            pass
        self._mark_status({"reason": self._degraded})
        log.warning("write session %s: cannot write to disk (%s); keeping the content in "
                    "memory only, it is still complete", self.directory, self._degraded)
        if self._on_degraded is not None:
            self._on_degraded(self._degraded)


#: The ``pwrite`` of the state records, once chosen (:func:`_pwrite_function`).
_PWRITE: list[Callable[[int, bytes, int], int]] = []


def _pwrite_function() -> Callable[[int, bytes, int], int]:
    """The C library's ``pwrite``, called without letting the GIL go, or ``os.pwrite`` where it
    cannot be had.

    ``os.pwrite`` lets the GIL go for the call, as every system call does, and a thread that
    waits for it (the trace writer, storing the step's events) takes it: the checkpoint then
    waits for the GIL back, about 15 us on a two-core machine, ten times what writing a record
    to the page cache takes. Holding the GIL for that microsecond costs the other threads
    nothing they would notice. Errors are ``OSError`` s with the call's errno, as from
    ``os.pwrite``; an interrupted call is made again."""
    chosen: Callable[[int, bytes, int], int] = os.pwrite
    try:
        import ctypes

        call = ctypes.PyDLL(None, use_errno=True).pwrite
    except (ImportError, OSError, AttributeError):
        pass
    else:
        # The symbol ``pwrite`` takes a C long for the offset where it is not 64 bits wide
        # (a 32-bit build without large-file offsets): the ring's offsets fit either way.
        call.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_long)
        call.restype = ctypes.c_ssize_t
        get_errno = ctypes.get_errno

        def pwrite(fd: int, data: bytes, offset: int) -> int:
            while True:
                written: int = call(fd, data, len(data), offset)
                if written >= 0:
                    return written
                code = get_errno()
                if code != errno.EINTR:
                    raise OSError(code, os.strerror(code))

        chosen = pwrite
    _PWRITE.append(chosen)
    return chosen


def _write_new(path: Path, data: bytes, mode: int) -> None:
    """A new journal file holding ``data`` (:class:`FileExistsError` when the name is taken,
    by a link too)."""
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


_COUNT_KEYS = frozenset({"lines", "bytes", "flushed_bytes", "last_save_ms", "last_save_boot",
                         "degraded", "seq", "crc"})

#: The state records' encoder, built once (``json.dumps`` with options builds one per call).
#: The records are counts and the session's state, JSON data copied from the lifecycle (see
#: orion.statechart.interpreter.snapshot.take): no reference cycle to look for at every record.
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, check_circular=False)
#: How a record of the ring ends: its sequence number, then the CRC-32 of the text before
#: ``, "crc"``.
_RECORD_END = re.compile(rb', "seq": (\d+), "crc": "([0-9a-f]{8})"\}')


def _ring_record(line: bytes) -> int | None:
    """The ``seq`` of a whole record of the state log's ring, None for anything else: a
    record torn by a kill, the tail of one partly overwritten, a line of another form."""
    at = line.rfind(b', "seq": ')
    if at < 0:
        return None
    end = _RECORD_END.fullmatch(line, at)
    if end is None or zlib.crc32(line[:end.end(1)]) != int(end.group(2), 16):
        return None
    return int(end.group(1))


# Each way a state file can be unreadable has its own branch and its own words for the user.
def read_state(directory: str | os.PathLike[str]  # noqa: C901
               ) -> tuple[dict[str, Any] | None, str | None]:
    """A session directory's newest saved state: the complete record with the highest ``seq``
    in ``state.json`` and ``state.log``. Returns ``(record, None)``, or ``(None, why)`` when
    neither file holds one (``why`` is ``None`` when there is simply no state yet)."""
    d = Path(directory)
    best: dict[str, Any] | None = None
    problem: str | None = None
    try:
        data = read_private(d / STATE)
    except FileNotFoundError:
        data = None
    except OSError as exc:
        problem = f"{STATE} cannot be read: {exc.strerror or exc}"
        data = None
    if data is not None:
        try:
            record = json.loads(data)
        except ValueError as exc:
            problem = f"{STATE} is not valid JSON: {exc}"
        else:
            if isinstance(record, dict):
                best = record
            else:
                problem = f"{STATE} is not a JSON object"
    logged = _newest_logged(d / STATE_LOG, _seq(best) if best is not None else -1)
    if logged is not None:
        best = logged
    if best is not None:
        best.pop("crc", None)
    return (best, None) if best is not None else (None, problem)


def _newest_logged(path: Path, above: int) -> dict[str, Any] | None:
    """The newest record of ``state.log`` if its ``seq`` is above ``above``: of the ring, the
    whole record with the highest ``seq``, wherever it is; of a log an earlier version
    appended to (records without a CRC), the last line that parses (a torn tail does not)."""
    try:
        lines = read_private(path).split(b"\n")
    except OSError:
        return None
    newest: bytes | None = None
    ringed = False
    for line in lines:
        seq = _ring_record(line)
        if seq is not None:
            ringed = True
            if seq > above:
                newest, above = line, seq
    if ringed:
        try:  # whole, by its CRC, unless it was made to look so
            record = json.loads(newest) if newest is not None else None
        except ValueError:
            return None
        return record if isinstance(record, dict) else None
    for line in reversed(lines):
        try:
            record = json.loads(line) if line else None
        except ValueError:
            continue
        if isinstance(record, dict):
            return record if _seq(record) > above else None
    return None


def _seq(record: Mapping[str, Any]) -> int:
    seq = record.get("seq")
    return seq if isinstance(seq, int) else -1


#: What a mark in ``write_sessions/`` says of a session: see :func:`mark`.
MARKS = ("resume", "finalizing")


def _mark_path(directory: Path, kind: str) -> Path:
    return directory.parent / f".{kind}-{directory.name}"


def mark(directory: str | os.PathLike[str], kind: str) -> bool:
    """Mark the session in ``directory`` as needing attention at the next start (``kind`` is
    one of :data:`MARKS`). ``False`` when the mark cannot be made (the session's own files
    still say the same; only the start-up shortcut misses it)."""
    if kind not in MARKS:
        raise ValueError(f"unknown mark {kind!r}")
    try:
        os.close(open_private(_mark_path(Path(directory), kind), os.O_WRONLY | os.O_CREAT))
        return True
    except OSError as exc:
        log.info("cannot mark write session %s as %s: %s", directory, kind, exc)
        return False


def marks(sessions: str | os.PathLike[str]) -> tuple[list[os.DirEntry[str]], dict[str, set[str]]]:
    """One listing of a ``write_sessions/`` directory: its session directories, and the ids
    each mark names (marks whose session is gone are removed)."""
    entries = list(os.scandir(sessions))
    found = {kind: set() for kind in MARKS}  # type: dict[str, set[str]]
    directories = [e for e in entries if not e.name.startswith(".") and e.is_dir()]
    names = {e.name for e in directories}
    for entry in entries:
        if not entry.name.startswith("."):
            continue
        kind, _, session_id = entry.name[1:].partition("-")
        if kind not in found or not session_id:
            continue
        if session_id in names:
            found[kind].add(session_id)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass
    return directories, found


def unmark(directory: str | os.PathLike[str], kind: str) -> None:
    """Take a mark back (never raises: a stray mark costs one look at the next start)."""
    try:
        os.unlink(_mark_path(Path(directory), kind))
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.info("cannot remove the %s mark of %s: %s", kind, directory, exc)


def remove_session(directory: str | os.PathLike[str], *, strict: bool = False) -> None:
    """Delete a session directory and its marks (the marks first: a stray directory is an
    ordinary orphan, a stray mark is cleaned up by :func:`marks`). With ``strict``, a
    directory that cannot be deleted raises :class:`OSError`."""
    for kind in MARKS:
        unmark(directory, kind)
    if os.path.islink(directory):  # a link in the place of a session: the link goes, not where it leads
        try:
            os.unlink(directory)
        except OSError:
            if strict:
                raise
        return
    shutil.rmtree(directory, ignore_errors=not strict)
