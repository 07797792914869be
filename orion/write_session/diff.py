"""What a finished write changed: the lines it added and removed, and the whole diff.

``orion chat`` prints a one-line summary after a write that changed an existing file
(``+12 -3 lines``), and ``orion sessions diff ID`` prints the unified diff those figures count:
both come from :func:`changes`, so they always agree. The pre-image is the backup the write
kept (``STATE_DIR/backups/<id>/``, named by its undo record); the after-image is the file as it
is now.

Lines are compared whole, bytes for bytes. The lines the two sides share at their start and
end are set aside, a line found on one side only can match nothing (it is added or removed),
and the lines found once on each side anchor the rest (the longest run of them in the same
order, as patience diff does). Between two anchors :class:`difflib.SequenceMatcher` (without
its junk heuristic) matches the lines, as long as the work stays bounded (FS-22): a stretch
whose lines are too alike to anchor (blank lines, repeated rows) and too long to compare pair
by pair is shown as removed and added whole, and the figures say how many lines that was. A
1,000,000 line file with a few lines edited takes about 0.5 s; rewritten entirely, about 1 s.
"""

from __future__ import annotations

import bisect
import difflib
import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from orion.config.sourcefile import kind_of

Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]

#: Lines of context around each change in the unified diff, as ``diff -u``.
CONTEXT = 3
#: The most pairs of lines one stretch between two anchors is compared by, and all of them
#: together; past these a stretch is shown as removed and added whole.
STRETCH_PAIRS = 250_000
TOTAL_PAIRS = 2_000_000


@dataclass(frozen=True)
class Changes:
    """The edit from ``before`` to ``after``, as lists of lines (with their line breaks)."""

    before: list[bytes]
    after: list[bytes]
    opcodes: list[Opcode]
    #: Lines (before and after) in stretches shown as removed and added whole (FS-22).
    uncompared: int = 0

    @property
    def added(self) -> int:
        return sum(j2 - j1 for tag, _, _, j1, j2 in self.opcodes if tag in ("insert", "replace"))

    @property
    def removed(self) -> int:
        return sum(i2 - i1 for tag, i1, i2, _, _ in self.opcodes if tag in ("delete", "replace"))

    def summary(self) -> str:
        """``+12 -3 lines``, or ``no line changed``."""
        if not self.added and not self.removed:
            return "no line changed"
        if self.uncompared:
            return (f"+{self.added} -{self.removed} lines (cut: {self.uncompared:,} lines too "
                    "alike to match one by one are counted as removed and added whole)")
        return f"+{self.added} -{self.removed} lines"

    def unified(self, before_name: str, after_name: str) -> Iterator[bytes]:
        """The unified diff (``diff -u``), line by line."""
        matcher = _Matched([], len(self.before), len(self.after))
        matcher.opcodes = self.opcodes
        groups = matcher.get_grouped_opcodes(CONTEXT)
        first = True
        for group in groups:
            if first:
                yield f"--- {before_name}\n".encode()
                yield f"+++ {after_name}\n".encode()
                first = False
            a1, a2, b1, b2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
            yield f"@@ -{_range(a1, a2)} +{_range(b1, b2)} @@\n".encode()
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    yield from _prefixed(b" ", self.before[i1:i2])
                    continue
                yield from _prefixed(b"-", self.before[i1:i2])
                yield from _prefixed(b"+", self.after[j1:j2])


def changes(before: bytes, after: bytes) -> Changes:
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    middle_a, middle_b = a[head:len(a) - tail], b[head:len(b) - tail]
    # A line on one side only matches nothing: compare the others, then map them back.
    shared = set(middle_a).intersection(middle_b)
    keep_a = [i for i, line in enumerate(middle_a) if line in shared]
    keep_b = [j for j, line in enumerate(middle_b) if line in shared]
    runs, uncompared = _matching_runs([middle_a[i] for i in keep_a],
                                      [middle_b[j] for j in keep_b])
    blocks = [(0, 0, head)]
    for i, j, size in runs:
        for k in range(size):  # one-sided lines may sit between the lines of a run
            _extend(blocks, keep_a[i + k] + head, keep_b[j + k] + head, 1)
    _extend(blocks, len(a) - tail, len(b) - tail, tail)
    return Changes(a, b, _Matched(blocks, len(a), len(b)).get_opcodes(), uncompared)


def _matching_runs(a: list[bytes], b: list[bytes]) -> tuple[list[tuple[int, int, int]], int]:
    """The runs of equal lines of ``a`` and ``b`` in order, ``(i, j, size)``, and how many
    lines were left unmatched because comparing them would cost too much."""
    runs: list[tuple[int, int, int]] = []
    uncompared = 0
    budget = TOTAL_PAIRS
    i0 = j0 = 0
    for i, j in [*_anchors(a, b), (len(a), len(b))]:
        pairs = (i - i0) * (j - j0)
        if pairs and a[i0:i] == b[j0:j]:  # the common case between two anchors: no edit
            runs.append((i0, j0, i - i0))
        elif pairs and pairs <= min(STRETCH_PAIRS, budget):
            budget -= pairs
            matcher = difflib.SequenceMatcher(None, a[i0:i], b[j0:j], autojunk=False)
            runs += [(i0 + x, j0 + y, n) for x, y, n in matcher.get_matching_blocks()[:-1]]
        elif pairs:
            uncompared += (i - i0) + (j - j0)
        if i < len(a):
            runs.append((i, j, 1))
        i0, j0 = i + 1, j + 1
    return runs, uncompared


def _anchors(a: list[bytes], b: list[bytes]) -> list[tuple[int, int]]:
    """The pairs ``(i, j)`` of lines found once in ``a`` and once in ``b``, equal, the longest
    chain of them in the same order on both sides (patience diff's anchors)."""
    count_a = Counter(a)
    where_b: dict[bytes, int] = {}
    count_b = Counter(b)
    for j, line in enumerate(b):
        if count_b[line] == 1 and count_a[line] == 1:
            where_b[line] = j
    pairs = [(i, where_b[line]) for i, line in enumerate(a) if line in where_b]
    # The longest increasing run of j (pairs are in order of i): patience sorting.
    tops: list[int] = []  # the smallest last j of a chain of each length
    ends: list[int] = []  # which pair ends that chain
    before: list[int] = []  # the pair before each pair in its chain
    for k, (_, j) in enumerate(pairs):
        at = bisect.bisect_left(tops, j)
        before.append(ends[at - 1] if at else -1)
        if at == len(tops):
            tops.append(j)
            ends.append(k)
        else:
            tops[at], ends[at] = j, k
    chain: list[tuple[int, int]] = []
    k = ends[-1] if ends else -1
    while k >= 0:
        chain.append(pairs[k])
        k = before[k]
    return chain[::-1]


def _extend(blocks: list[tuple[int, int, int]], i: int, j: int, size: int) -> None:
    """Add a matching run, joined to the last one when it follows it on both sides."""
    start_i, start_j, length = blocks[-1]
    if start_i + length == i and start_j + length == j:
        blocks[-1] = (start_i, start_j, length + size)
    elif size:
        blocks.append((i, j, size))


class _Matched(difflib.SequenceMatcher):
    """A SequenceMatcher whose matching runs are given: its opcodes and their grouping come
    from those runs, as difflib computes them."""

    opcodes: list[Opcode] | None  # SequenceMatcher's cache of get_opcodes(); not in its stubs

    def __init__(self, blocks: list[tuple[int, int, int]], size_a: int, size_b: int) -> None:
        super().__init__(None, [], [])
        self.matching_blocks = [difflib.Match(*block) for block in blocks if block[2]]
        self.matching_blocks.append(difflib.Match(size_a, size_b, 0))


def _range(start: int, stop: int) -> str:
    length = stop - start
    first = start + 1 if length else start
    return str(first) if length == 1 else f"{first},{length}"


def _prefixed(mark: bytes, lines: list[bytes]) -> Iterator[bytes]:
    for line in lines:
        if line.endswith(b"\n"):
            yield mark + line
        else:
            yield mark + line + b"\n\\ No newline at end of file\n"


# -- a finished write, by its undo record --------------------------------------------------------


class NotRegular(OSError):
    """A side of the diff is no regular file (a FIFO, a device, a directory): never read."""


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file ``path``; :class:`NotRegular` for anything else. Opened
    with ``O_NONBLOCK`` and checked once open, so a FIFO never makes the diff wait (FS-22)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        kind = kind_of(os.fstat(fd).st_mode)
        if kind is not None:
            raise NotRegular(f"{path.name} is {kind}, not a regular file: no diff is made of it")
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read()
    finally:
        os.close(fd)


@dataclass(frozen=True)
class WriteDiff:
    """A write's diff from its pre-image to the file as it is now, and what the reader must
    know about it (the file changed since, was deleted, or the write was undone)."""

    id: str
    target: str
    changes: Changes
    notes: list[str]


def write_diff(workspace: Path, state_dir: Path, session_id: str) -> WriteDiff:
    """The diff of write ``session_id`` (an id or a unique start of one, as ``orion sessions
    undo`` takes it). Raises :class:`~orion.write_session.orphans.RecoveryError` when there is
    no such write or its record or backup cannot be read."""
    from orion.write_session.orphans import RecoveryError

    full, record = _record(state_dir, session_id.strip())
    short = full[:8]
    relative = record.get("target_file") if isinstance(record, dict) else None
    if not isinstance(relative, str):
        raise RecoveryError(f"the undo record of write {short} names no target file")
    before = _before(state_dir, full, record, relative)
    after, notes = _after(workspace, record, relative, short)
    if record.get("undone"):
        notes.append(f"write {short} was undone (`orion sessions undo`)")
    return WriteDiff(full, relative, changes(before, after), notes)


def _record(state_dir: Path, prefix: str) -> tuple[str, Any]:
    """The full id and the undo record of the write ``prefix`` names."""
    from orion.write_session.orphans import AmbiguousSession, RecoveryError, SessionNotFound
    from orion.write_session.undo import record_paths

    paths = record_paths(state_dir)
    matches = sorted(key for key in paths if prefix and key.startswith(prefix))
    if len(matches) > 1 and prefix not in paths:
        raise AmbiguousSession(prefix, matches)
    if not matches or "/" in prefix:
        known = ", ".join(sorted(key[:8] for key in paths)) or "none"
        raise SessionNotFound(f"no finished write {prefix!r} in {state_dir / 'undo'} "
                              f"(known: {known}); `orion sessions history` lists them")
    full = prefix if prefix in paths else matches[0]
    try:
        return full, json.loads(paths[full].read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise RecoveryError(f"the undo record of write {full[:8]} cannot be read: "
                            f"{exc}") from exc


def _before(state_dir: Path, full: str, record: dict[str, Any], relative: str) -> bytes:
    """The file before the write: its backup, or nothing for a file the write created. The
    backup is found where Orion keeps it for this write (FS-15), never at the path the record
    claims."""
    from orion.write_session.orphans import RecoveryError
    from orion.write_session.undo import trusted_backup

    short = full[:8]
    backup = trusted_backup(state_dir, full, record)
    if backup is not None:
        try:
            return read_regular(backup)
        except NotRegular as exc:
            raise RecoveryError(f"the backup of {relative} from write {short}: {exc}") from exc
        except OSError as exc:
            raise RecoveryError(f"the backup of {relative} from write {short} cannot be read "
                                f"({exc.strerror or exc}); it was pruned or removed") from exc
    if record.get("operation") != "create":
        raise RecoveryError(f"the undo record of write {short} names no backup of {relative}")
    return b""


def _after(workspace: Path, record: dict[str, Any], relative: str,
           short: str) -> tuple[bytes, list[str]]:
    """The file now, and what the reader must know about it."""
    import hashlib

    from orion.workspace import PathOutsideWorkspace, resolve_inside
    from orion.write_session.orphans import RecoveryError

    try:
        after = read_regular(resolve_inside(workspace, relative))
    except NotRegular as exc:
        raise RecoveryError(f"{relative} is not a regular file now; nothing was read from it "
                            f"({exc})") from exc
    except PathOutsideWorkspace as exc:
        raise RecoveryError(f"the undo record of write {short} names {relative!r}, which is "
                            f"not inside {workspace}: {exc}") from exc
    except FileNotFoundError:
        return b"", [f"{relative} was deleted since write {short}: the diff is against an "
                     "empty file"]
    except OSError as exc:
        raise RecoveryError(f"cannot read {relative}: {exc.strerror or exc}") from exc
    if hashlib.sha256(after).hexdigest() != record.get("sha256"):
        return after, [f"{relative} changed since write {short}: the diff is against the "
                       "file as it is now"]
    return after, []
