"""Carry out a checked write plan: compute the new bytes, keep a backup, write atomically.

:func:`apply_operation` is pure and deterministic (bytes in, bytes out); :func:`execute` ties
it to the disk. The operations are defined in :mod:`orion.write_session.plan`; here is what
they do to the bytes:

* **BOM.** Orion never adds a UTF-8 byte order mark and never duplicates one. A BOM at the
  start of the content is always dropped; the existing file's BOM, if it has one, is kept
  (also by overwrite). A created file therefore never starts with a BOM.
* **Line breaks.** The existing file's convention wins: when most of its line breaks are CRLF
  the content's line breaks are written as CRLF, otherwise as LF (so CRLF content going into
  an LF file becomes LF). Markers and ``search`` are matched in that convention too. Bytes of
  the existing file outside the edited range are never touched, even in a file with mixed
  line breaks. create keeps the content exactly as it came (apart from a leading BOM).
* **Whole lines.** insert and replace_block put the content on lines of its own: when the
  content does not end with a line break and something follows it, one is added. append adds
  one line break first when the file does not end with one (never when the content is empty).
* **Markers again.** The markers (and ``search``) are matched once more on the exact bytes
  being edited; if they no longer occur as required, :class:`PlanRejected` says so.

:func:`execute` writes through directory descriptors (:mod:`orion.workspace.confined`): a temp file next
to the target is written, fsynced, given the old file's permission bits and renamed over the
target, then the directory is fsynced: readers see the old file or the new one, never a mix, a
failure leaves the old file and no temp file, and no symbolic link swapped into the path after
the check can redirect the write. It holds the directory's lock while it reads, compares with
the bytes the plan was checked against (:class:`TargetChanged` when someone else changed them)
and replaces. :func:`write_atomically` does the same by path, for files Orion owns.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from orion.workspace.confined import TEMP_MARK, Parent, open_parent, temp_name
from orion.errors import OrionError
from orion.workspace.files import write_atomically
from orion.write_session.undo import replace_json
from orion.write_session.plan import (BOM, CheckedPlan, Operation, PlanRejected, line_ending,
                                      match_plan, recheck, split_bom, with_line_ending)

__all__ = ["TEMP_MARK", "AppendedRange", "TargetChanged", "WriteResult", "append_range_path",
           "apply_operation", "backup_path", "read_append_range",
           "count_lines", "describe", "execute", "save_backup", "write_atomically"]
#: Where backups go, under the state directory: ``backups/<session_id>/<relative path>``.
BACKUPS = "backups"
#: Where an append keeps the range it added instead: ``appends/<session_id>.json``.
APPENDS = "appends"
#: From this size on, the SHA-256 of the new content is computed in a thread during the write.
HASH_IN_THREAD = 1 << 20


@dataclass(frozen=True)
class WriteResult:
    """What :func:`execute` wrote: the file, its size, line count and SHA-256 (hex), where the
    pre-image was saved (None for a new file) and the one-line report for the model."""

    path: Path
    relative: str
    bytes: int
    lines: int
    sha256: str
    backup: Path | None
    report: str


def count_lines(data: bytes) -> int:
    """Lines of ``data``: its line breaks, plus one for a last line without a break."""
    breaks = data.count(b"\n")
    return breaks + 1 if data and not data.endswith(b"\n") else breaks


def _terminated(content: bytes, eol: bytes) -> bytes:
    return content if not content or content.endswith(b"\n") else content + eol


def _line_start(body: bytes, at: int) -> int:
    return body.rfind(b"\n", 0, at) + 1


def _line_end(body: bytes, at: int) -> int:
    """The offset just after the line break of the line holding byte ``at`` (or the end)."""
    end = body.find(b"\n", at)
    return len(body) if end == -1 else end + 1


# One branch per operation, each a few lines, as the module docstring lists them: a table of
# functions would scatter what reads best side by side.
def apply_operation(checked: CheckedPlan, existing: bytes | None,  # noqa: C901
                    content: bytes) -> bytes:
    """The new bytes of the target: ``checked``'s operation applied to ``existing`` (None when
    the file does not exist) with ``content``. Pure; raises :class:`PlanRejected` when the
    file no longer fits the plan (it exists for create, is gone, or its markers changed)."""
    plan, relative = checked.plan, checked.relative
    op = plan.operation
    content = content[len(BOM):] if content.startswith(BOM) else content
    if op is Operation.CREATE:
        if existing is not None:
            raise PlanRejected(f"{relative} exists now, so create cannot write it. Use overwrite "
                               f"to replace it.", field="operation")
        return content
    if existing is None:
        raise PlanRejected(f"{relative} no longer exists, so '{op}' cannot edit it. Use create "
                           f"to make it again.", field="target_file")
    bom, body = split_bom(existing)
    eol = line_ending(body)
    content = with_line_ending(content, eol)
    if op is Operation.OVERWRITE:
        return bom + content
    if op is Operation.APPEND:
        if not content:
            return existing
        gap = eol if body and not body.endswith(b"\n") else b""
        return existing + gap + content
    matches = match_plan(plan, body, relative)
    if op is Operation.INSERT:
        marker = matches["location_marker"]
        at = marker.positions[0]
        if plan.position == "before":
            start = _line_start(body, at)
            return bom + body[:start] + _terminated(content, eol) + body[start:]
        end = _line_end(body, at + len(marker.needle) - 1)
        if end < len(body):
            return bom + body[:end] + _terminated(content, eol) + body[end:]
        gap = eol if not body.endswith(b"\n") and content else b""
        return bom + body + gap + content
    if op is Operation.REPLACE_BLOCK:
        opening, closing = matches["start_marker"], matches["end_marker"]
        first = _line_end(body, opening.positions[0] + len(opening.needle) - 1)
        last = _line_start(body, closing.positions[0])
        return bom + body[:first] + _terminated(content, eol) + body[last:]
    if op is Operation.REPLACE_ALL:
        needle = matches["search"].needle
        if not needle.endswith(b"\n"):
            for tail in (b"\r\n", b"\n"):
                if content.endswith(tail):
                    content = content[:-len(tail)]
                    break
        return bom + body.replace(needle, content)
    raise AssertionError(f"unknown operation {op!r}")  # pragma: no cover


def _safe_relative(relative: str) -> PurePosixPath:
    path = PurePosixPath(relative)
    if not relative or path.is_absolute() or ".." in path.parts or "\x00" in relative:
        raise ValueError(f"not a relative path inside the workspace: {relative!r}")
    return path


def backup_path(*, state_dir: Path, session_id: str, relative: str) -> Path:
    """Where :func:`save_backup` keeps the pre-image of ``relative`` for ``session_id``:
    ``<state_dir>/backups/<session_id>/<relative>`` (whether or not a backup is there)."""
    if (not session_id or session_id in (".", "..")
            or any(c in session_id for c in "/\\\x00")):
        raise ValueError(f"invalid session id {session_id!r}")
    return Path(state_dir) / BACKUPS / session_id / _safe_relative(relative)


def save_backup(target: Path, *, state_dir: Path, session_id: str,
                relative: str) -> Path | None:
    """Copy ``target``'s current bytes, mode and times to :func:`backup_path`, before it is
    written; None when ``target`` does not exist. A session keeps the first pre-image: when
    the backup already exists it is left as it is (that is the state to undo to)."""
    dest = backup_path(state_dir=state_dir, session_id=session_id, relative=relative)
    if not Path(target).exists():
        return None
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    temp = dest.parent / temp_name(dest.name)
    try:
        shutil.copy2(target, temp)
        os.replace(temp, dest)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return dest


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def describe(checked: CheckedPlan, before: bytes | None, after: bytes, content: bytes,
             backup: Path | None, *, lines: int | None = None) -> str:
    """The one-line report of a write, e.g. ``Appended 15 lines to notes.md; backup saved``.
    ``lines`` is ``count_lines(after)`` when the caller has it already."""
    plan, relative = checked.plan, checked.relative
    op = plan.operation
    content = content[len(BOM):] if content.startswith(BOM) else content
    if op in (Operation.CREATE, Operation.OVERWRITE):
        total = count_lines(after) if lines is None else lines
        verb = "Created" if op is Operation.CREATE else "Overwrote"
        text = f"{verb} {relative} ({_lines(total)}, {_size(len(after))})"
    elif op is Operation.APPEND:
        text = f"Appended {_lines(count_lines(content))} to {relative}"
    elif op is Operation.INSERT:
        text = f"Inserted {_lines(count_lines(content))} {plan.position} marker in {relative}"
    elif op is Operation.REPLACE_BLOCK:
        text = (f"Replaced block between markers in {relative} "
                f"({_lines(count_lines(content))})")
    else:
        body = split_bom(before or b"")[1]
        count = len(match_plan(plan, body, relative)["search"].positions)
        text = (f"Replaced {count} {'occurrence' if count == 1 else 'occurrences'} in "
                f"{relative}")
    return text + ("; backup saved" if backup is not None else "")


class TargetChanged(OrionError):
    """The target's bytes are not those the plan was checked against: another program (or
    another Orion process) changed it meanwhile. Nothing was written."""


def _store_backup(data: bytes, info: os.stat_result, dest: Path) -> Path:
    """Keep ``data`` (the pre-image, read under the lock) at ``dest`` with its mode and times;
    a backup already there is the session's first pre-image and is kept."""
    if dest.exists():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    temp = dest.parent / temp_name(dest.name)
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, stat_mode(info))
        finally:
            os.close(fd)
        os.utime(temp, ns=(info.st_atime_ns, info.st_mtime_ns))
        os.replace(temp, dest)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return dest


def append_range_path(state_dir: Path, session_id: str) -> Path:
    """Where an append keeps the range it added (instead of a copy of the file): the file's
    old length and the SHA-256 of those bytes, ``<state_dir>/appends/<id>.json``."""
    if (not session_id or session_id in (".", "..")
            or any(c in session_id for c in "/\\\x00")):
        raise ValueError(f"invalid session id {session_id!r}")
    return Path(state_dir) / APPENDS / f"{session_id}.json"


@dataclass(frozen=True)
class AppendedRange:
    """What an append added to a file: everything after its first ``length`` bytes, which
    had the SHA-256 ``sha256``."""

    target_file: str
    length: int
    sha256: str

    def pre_image(self, current: bytes) -> bytes | None:
        """The file as it was before the append, from the file as it is now; None when the
        file no longer starts with those bytes."""
        head = current[:self.length]
        return head if len(head) == self.length and \
            hashlib.sha256(head).hexdigest() == self.sha256 else None


def read_append_range(path: Path) -> AppendedRange | None:
    """The range an append kept at ``path``, or None when there is none (or it is damaged)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return AppendedRange(str(data["target_file"]), int(data["length"]),
                             str(data["sha256"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store_append_range(existing: bytes, dest: Path, relative: str) -> Path:
    """Keep the range an append adds (a session keeps the first one, as it keeps the first
    pre-image)."""
    if dest.exists():
        return dest

    replace_json(dest, {"target_file": relative, "length": len(existing),
                        "sha256": hashlib.sha256(existing).hexdigest()})
    return dest


def stat_mode(info: os.stat_result) -> int:
    return info.st_mode & 0o7777


def changed_message(relative: str) -> str:
    return (f"{relative} changed since the plan was checked (another program or another Orion "
            "process wrote it); nothing written, so that change is not lost")


def execute(checked: CheckedPlan, content: bytes, *, state_dir: Path,
            session_id: str) -> WriteResult:
    """Finalize a write: :func:`~orion.write_session.plan.recheck` the plan; then, holding the
    lock on the target's directory (see :mod:`orion.workspace.confined`), read the file through directory
    descriptors, refuse with :class:`TargetChanged` when its bytes are not those the plan was
    checked against (``checked.sha256``), :func:`apply_operation`, keep the pre-image as a
    backup, replace the file atomically (with its mode; missing parent directories of a new
    file are created, never through a symbolic link) and report."""
    first = checked
    checked = recheck(checked)
    if checked.relative != first.relative:
        raise TargetChanged(f"{first.relative} now leads to {checked.relative} (a symbolic link "
                            "changed since the plan was checked); nothing written")
    with open_parent(checked.workspace, checked.relative, create=not checked.exists) as parent, \
            parent.locked():
        return _execute_locked(first, checked, parent, content, state_dir, session_id)


def _execute_locked(first: CheckedPlan, checked: CheckedPlan, parent: Parent, content: bytes,
                    state_dir: Path, session_id: str) -> WriteResult:
    existing = parent.read()
    if first.exists and first.sha256 is not None:
        if existing is None or hashlib.sha256(existing).hexdigest() != first.sha256:
            raise TargetChanged(changed_message(checked.relative))
    elif not first.exists and existing is not None:
        raise TargetChanged(changed_message(checked.relative))
    after = apply_operation(checked, existing, content)
    backup = None
    if existing is not None and checked.plan.operation is Operation.APPEND \
            and after.startswith(existing):
        # The old bytes stay in the file: what an undo needs is where they end.
        backup = _store_append_range(existing, append_range_path(state_dir, session_id),
                                     checked.relative)
    elif existing is not None:
        info = parent.stat()
        assert info is not None  # read() found it, under the lock
        backup = _store_backup(existing, info, backup_path(
            state_dir=state_dir, session_id=session_id, relative=checked.relative))
    digest = _sha256(after)
    kept_apart = parent.replace(after)  # the file's mode and owner, as they are now
    lines = count_lines(after)
    report = "; ".join([describe(checked, existing, after, content, backup, lines=lines),
                        *kept_apart])
    return WriteResult(path=checked.target, relative=checked.relative, bytes=len(after),
                       lines=lines, sha256=digest(), backup=backup, report=report)


def _sha256(data: bytes) -> Callable[[], str]:
    """A function returning the SHA-256 (hex) of ``data``. From :data:`HASH_IN_THREAD` bytes on,
    the hash runs in a thread meanwhile (hashlib releases the GIL), overlapping the write."""
    if len(data) < HASH_IN_THREAD:
        value = hashlib.sha256(data).hexdigest()
        return lambda: value
    result: list[str] = []
    thread = threading.Thread(target=lambda: result.append(hashlib.sha256(data).hexdigest()),
                              name="orion-write-sha256", daemon=True)
    thread.start()

    def join() -> str:
        thread.join()
        return result[0] if result else hashlib.sha256(data).hexdigest()
    return join
