"""The write plan: the arguments of ``WritePlanTool_begin``, and their checks against the disk.

The model answers a small questionnaire (intent, target file, operation and the fields of that
operation) before any content streams. :class:`WritePlan` checks the answers on their own;
:func:`check_plan` checks them against the workspace and returns a :class:`CheckedPlan`, or
raises :class:`PlanRejected` with a message written for the model (it goes back as the tool
error). At finalization :func:`recheck` applies the same rules again, because the file may have
changed while the content streamed.

Semantics (the operations themselves live in :mod:`orion.write_session.operations`):

* **create**: a new file; rejected when the target exists. Missing parent directories are
  created.
* **overwrite**: the whole file is replaced by the content.
* **append**: the content goes at the end. When the file does not end with a line break, one
  is added first (exactly one).
* **insert**: the content goes before or after the *whole line* that contains
  ``location_marker`` (``before``: in front of the line where the marker starts; ``after``:
  behind the line break of the line where it ends). It is never spliced into the middle of a
  line.
* **replace_block**: the lines *strictly between* the line containing ``start_marker`` and the
  line containing ``end_marker`` are replaced by the content. **The marker lines are kept**,
  whole. ``end_marker`` must be on a later line than ``start_marker`` (adjacent lines are fine:
  the block is then empty and the content is inserted between them).
* **replace_all**: every (non-overlapping) occurrence of ``search`` is replaced by the content.
  Streamed content always ends with a line break (``DONE`` follows on its own line), so one
  line break at the end of the content is dropped unless ``search`` itself ends with one.

Matching. Markers and ``search`` are matched exactly (case, spaces and punctuation count) as
substrings of the file's bytes, in UTF-8 (an insert's ``location_marker`` may instead be a
regular expression, with ``marker_regex``: it is searched in each line); their line breaks are matched in the file's own
convention (so ``"a\\nb"`` finds ``a\\r\\nb`` in a CRLF file). A marker must occur exactly once,
counting overlapping occurrences; ``search`` at least once. A UTF-8 byte order mark at the
start of the file is never part of a match.

Text or binary. Orion edits UTF-8 text only. The target counts as binary when its first 8 KiB
(:data:`SNIFF_BYTES`) hold a NUL byte or are not valid UTF-8 (a multi-byte character cut at the
8 KiB boundary is fine). Only the head is inspected, as git does; a text file with a stray
invalid byte further down is still edited, byte for byte: Orion never decodes and re-encodes
the existing file, so bytes outside the edited range are kept exactly.

Paths. ``target_file`` is resolved with :func:`orion.workspace.resolve_inside` (absolute paths
outside the workspace, ``..`` escapes and symbolic links of the file or of any parent leading
outside are rejected). The write goes to the resolved file: a symlink inside the workspace to
another file inside it is followed, and stays a symlink. Nothing under a ``.git`` directory nor
under the state directory may be written (both compared as resolved paths).
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from orion.errors import OrionError
from orion.workspace import PathOutsideWorkspace, resolve_inside

#: How much of an existing target is inspected to tell text from binary.
SNIFF_BYTES = 8192
#: The UTF-8 byte order mark.
BOM = b"\xef\xbb\xbf"
#: At most this many line numbers are listed when a marker occurs more than once.
MAX_LINES_SHOWN = 10
#: Markers longer than this are shortened when quoted in a message.
QUOTE_CHARS = 60


class Operation(StrEnum):
    CREATE = "create"
    OVERWRITE = "overwrite"
    APPEND = "append"
    INSERT = "insert"
    REPLACE_BLOCK = "replace_block"
    REPLACE_ALL = "replace_all"


#: The fields each operation requires; every other operation must leave them out.
OPERATION_FIELDS: dict[Operation, tuple[str, ...]] = {
    Operation.CREATE: (),
    Operation.OVERWRITE: (),
    Operation.APPEND: (),
    Operation.INSERT: ("location_marker", "position"),
    Operation.REPLACE_BLOCK: ("start_marker", "end_marker"),
    Operation.REPLACE_ALL: ("search",),
}
#: Fields an operation may have but does not require.
OPTIONAL_FIELDS: dict[Operation, tuple[str, ...]] = {Operation.INSERT: ("marker_regex",)}
#: Which operation each operation-specific field belongs to.
FIELD_OPERATION: dict[str, Operation] = {
    name: op for fields in (OPERATION_FIELDS, OPTIONAL_FIELDS)
    for op, names in fields.items() for name in names}
#: Fields matched as text in the file (all but ``position``).
TEXT_FIELDS = ("location_marker", "start_marker", "end_marker", "search")


#: What each operation-specific field is, for the messages about a missing one.
FIELD_HINTS = {
    "location_marker": "text that occurs exactly once in the file; the content goes before or "
                       "after its line",
    "position": "'before' or 'after' the line containing location_marker",
    "start_marker": "text that occurs exactly once in the file, on the line just above the "
                    "block to replace",
    "end_marker": "text that occurs exactly once in the file, on the line just below the block "
                  "to replace",
    "search": "the exact text to replace; it must occur at least once",
}


class PlanRejected(OrionError):
    """The plan cannot be carried out. The message is for the model: what is wrong and how to
    fix it. ``field`` names the plan field at fault, when there is one."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class WritePlan(BaseModel):
    """The arguments of ``WritePlanTool_begin``. The content itself is not part of the plan: it
    follows as plain text, ended by a line ``DONE``."""

    model_config = ConfigDict(extra="forbid")

    intent: str = Field(
        min_length=1, max_length=500,
        description="One sentence saying what this write is for, e.g. 'Add a retry helper to "
                    "the HTTP client'. Appears in the log and in the report.")
    target_file: str = Field(
        min_length=1,
        description="The file to write, relative to the workspace root, e.g. 'src/app.py'. It "
                    "must stay inside the workspace; nothing under .git/ or Orion's state "
                    "directory can be written.")
    operation: Operation = Field(
        description="create: a new file (rejected if it exists). overwrite: replace the whole "
                    "file. append: add the content at the end of the file. insert: add the "
                    "content before or after the whole line containing location_marker. "
                    "replace_block: replace the lines between the line containing start_marker "
                    "and the line containing end_marker (both marker lines are kept). "
                    "replace_all: replace every occurrence of search with the content. Every "
                    "operation except create needs an existing file.")
    location_marker: str | None = Field(
        default=None,
        description="insert only (required there): text that occurs exactly once in the file, "
                    "matched exactly (case and spaces count). The content goes before or after "
                    "the whole line that contains it.")
    marker_regex: bool | None = Field(
        default=None,
        description="insert only (optional): true when location_marker is a regular "
                    "expression (Python syntax), searched in each line of the file; it must "
                    "match exactly once, and not an empty text.")
    position: Literal["before", "after"] | None = Field(
        default=None,
        description="insert only (required there): 'before' or 'after' the line containing "
                    "location_marker.")
    start_marker: str | None = Field(
        default=None,
        description="replace_block only (required there): text that occurs exactly once in the "
                    "file, matched exactly. Its line is kept; the block starts on the next "
                    "line.")
    end_marker: str | None = Field(
        default=None,
        description="replace_block only (required there): text that occurs exactly once in the "
                    "file, on a later line than start_marker. Its line is kept; the block ends "
                    "on the line before it.")
    search: str | None = Field(
        default=None,
        description="replace_all only (required there): the exact text to replace; it must "
                    "occur at least once, and every occurrence is replaced by the content. One "
                    "line break at the end of the content is dropped unless search ends with "
                    "one.")

    @model_validator(mode="after")
    def _fields_of_the_operation(self) -> WritePlan:
        problems: list[str] = []
        if not self.intent.strip():
            problems.append("intent is blank; say in one sentence what the write is for")
        op = self.operation
        required = OPERATION_FIELDS[op]
        for name in required:
            if getattr(self, name) is None:
                problems.append(f"operation '{op}' requires {name} ({FIELD_HINTS[name]})")
        for name, owner in FIELD_OPERATION.items():
            if owner is not op and getattr(self, name) is not None:
                problems.append(f"{name} belongs to operation '{owner}', not to '{op}'; "
                                f"leave it out")
        for name in TEXT_FIELDS:
            value = getattr(self, name)
            if name in required and value is not None and not value.strip():
                problems.append(f"{name} must contain visible text (it is matched exactly in "
                                f"the file)")
        if problems:
            # A custom error keeps pydantic from prefixing the text with "Value error, ".
            raise PydanticCustomError("write_plan", "; ".join(problems))
        return self


@dataclass(frozen=True)
class CheckedPlan:
    """A plan that passed :func:`check_plan`. ``target`` is the resolved file, ``relative`` its
    posix path relative to the (resolved) workspace, ``exists`` and ``mode`` (permission bits)
    describe it as it was at the check. ``state_dir`` is kept for :func:`recheck`."""

    plan: WritePlan
    workspace: Path
    target: Path
    relative: str
    exists: bool
    mode: int | None
    state_dir: Path
    #: SHA-256 (hex) of the target's bytes at the check (None for a new file): the write
    #: refuses to go ahead when the file no longer has them (someone else changed it).
    sha256: str | None = None


@dataclass(frozen=True)
class Match:
    """Where one text field of the plan occurs in a file body (the bytes after any BOM):
    ``needle`` is the field as matched (UTF-8, the file's line breaks) and ``positions`` its
    byte offsets (overlapping for markers, non-overlapping for ``search``)."""

    field: str
    needle: bytes
    positions: list[int]

    def line(self, index: int, body: bytes) -> int:
        return body.count(b"\n", 0, self.positions[index]) + 1

    def end_line(self, body: bytes) -> int:
        """The line of the last byte of the (single) match."""
        return body.count(b"\n", 0, self.positions[0] + len(self.needle) - 1) + 1


def line_ending(body: bytes) -> bytes:
    """``b"\\r\\n"`` when most of the line breaks of ``body`` are CRLF, else ``b"\\n"``."""
    crlf = body.count(b"\r\n")
    if not crlf:
        return b"\n"
    return b"\r\n" if crlf > body.count(b"\n") - crlf else b"\n"


def with_line_ending(text: bytes, eol: bytes) -> bytes:
    """``text`` with every line break (LF or CRLF) written as ``eol``."""
    if eol == b"\n":
        return text.replace(b"\r\n", b"\n") if b"\r\n" in text else text
    if b"\n" not in text:
        return text
    return text.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def split_bom(data: bytes) -> tuple[bytes, bytes]:
    """``(bom, body)``: the UTF-8 byte order mark at the start of ``data`` (or ``b""``) and
    the rest."""
    return (BOM, data[len(BOM):]) if data.startswith(BOM) else (b"", data)


def _positions(body: bytes, needle: bytes, *, overlapping: bool) -> list[int]:
    found, start = [], 0
    step = 1 if overlapping else max(1, len(needle))
    while (at := body.find(needle, start)) != -1:
        found.append(at)
        start = at + step
    return found


def _regex_match(name: str, pattern: str, body: bytes, relative: str) -> Match:
    """Where the regular expression ``pattern`` matches, line by line, searched within a time
    limit (FS-21): the byte offset of each match, and the bytes of the first one as the needle
    (one match is all a marker may have)."""
    from orion.write_session import marker_regex

    try:
        compiled = marker_regex.compile_pattern(pattern)
    except marker_regex.PatternError as exc:
        raise PlanRejected(f"{name} {_quote(pattern)} is not a valid regular expression "
                           f"({exc.why}); fix it, or leave marker_regex out to match the "
                           "text exactly.", field=name) from exc
    lines = body.split(b"\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    texts = [line.decode("utf-8", "surrogateescape").removesuffix("\r") for line in lines]
    positions: list[int] = []
    needle = b""
    try:
        for found in marker_regex.search_lines(compiled, texts,
                                               marker_regex.budget(len(body))):
            if found.start == found.end:
                raise PlanRejected(f"{name} {_quote(pattern)} matches an empty text in "
                                   f"{relative}; give a pattern that matches some of the "
                                   "line.", field=name)
            if not positions:
                needle = found.text[found.start:found.end].encode("utf-8", "surrogateescape")
            positions.append(starts[found.line]
                             + len(found.text[:found.start].encode("utf-8", "surrogateescape")))
    except marker_regex.SearchTooLong as exc:
        raise PlanRejected(f"{name} {_quote(pattern)} took more than {round(exc.seconds, 1):g} s to "
                           f"search {relative} and was stopped at line {exc.line}: the pattern "
                           "backtracks without end; give a simpler pattern (no repeated group "
                           "that can match the same text two ways), or leave marker_regex out "
                           "to match the text exactly.", field=name) from None
    return Match(name, needle, positions)


def _hint(plan: WritePlan, name: str, text: str, count: int) -> str:
    """What to do about a marker or ``search`` text that occurs ``count`` times, not once."""
    if count > 1:
        return "Pick a longer marker that occurs only once, such as the whole line or two lines."
    hint = "Read the file and copy the text exactly (case, spaces and punctuation count)."
    if name == "location_marker" and not plan.marker_regex and _looks_like_a_regex(text):
        hint += (" If it is a regular expression, add marker_regex: true to the plan: then it "
                 "is searched in each line.")
    return hint


#: What only a regular expression would hold: anchors, classes, escapes, repeats, groups.
_REGEX_SIGNS = re.compile(r"^\^|\$$|\\[wdsWDSbB.()\[\]^$*+?{}|]|\.[*+?]|\[[^\]]+\]|\(\?")


def _looks_like_a_regex(text: str) -> bool:
    """Whether a marker that matched nothing looks like a regular expression: the refusal
    then says that ``marker_regex`` exists."""
    return _REGEX_SIGNS.search(text) is not None


def _quote(text: str) -> str:
    shown = text if len(text) <= QUOTE_CHARS else text[:QUOTE_CHARS] + "..."
    return repr(shown)


def match_plan(plan: WritePlan, body: bytes, relative: str) -> dict[str, Match]:
    """The matches of the plan's markers or ``search`` in ``body`` (a file's bytes after its
    BOM), keyed by field, or :class:`PlanRejected` when a marker does not occur exactly once,
    ``search`` does not occur, or ``end_marker`` is not on a later line than ``start_marker``.
    Empty for create, overwrite and append."""
    eol = line_ending(body)
    matches: dict[str, Match] = {}
    for name in OPERATION_FIELDS[plan.operation]:
        if name not in TEXT_FIELDS:
            continue
        text = getattr(plan, name)
        marker = name != "search"
        if name == "location_marker" and plan.marker_regex:
            match = _regex_match(name, text, body, relative)
        else:
            needle = with_line_ending(text.encode("utf-8"), eol)
            match = Match(name, needle, _positions(body, needle, overlapping=marker))
        count = len(match.positions)
        if (marker and count != 1) or count == 0:
            lines = sorted({match.line(i, body) for i in range(count)})
            where = ""
            if lines:
                shown = ", ".join(map(str, lines[:MAX_LINES_SHOWN]))
                more = len(lines) - MAX_LINES_SHOWN
                where = (f" ({'line' if len(lines) == 1 else 'lines'} {shown}"
                         f"{f' and {more} more' if more > 0 else ''})")
            rule = "exactly once" if marker else "at least once"
            hint = _hint(plan, name, text, count)
            raise PlanRejected(f"{name} {_quote(text)} occurs {count} "
                               f"{'time' if count == 1 else 'times'} in {relative}{where}; it "
                               f"must occur {rule}. {hint}", field=name)
        matches[name] = match
    if plan.operation is Operation.REPLACE_BLOCK:
        start, end = matches["start_marker"], matches["end_marker"]
        start_line, end_line = start.end_line(body), end.line(0, body)
        if end_line <= start_line:
            raise PlanRejected(
                f"end_marker {_quote(plan.end_marker or '')} (line {end_line}) must be on a "
                f"later line than start_marker {_quote(plan.start_marker or '')} (line "
                f"{start_line}) in {relative}; the block is the lines between them. Swap them "
                f"or choose other markers.", field="end_marker")
    return matches


def _is_text(head: bytes, *, complete: bool) -> bool:
    if b"\x00" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=complete)
    except UnicodeDecodeError:
        return False
    return True


#: What a model leaves around a path it copied out of a sentence or a list ("notes.md, "),
#: each with the words that name it.
_SUSPECT = (
    (re.compile(r"[\x00-\x1f\x7f]"), "a control character"),
    (re.compile(r"[,;]\s*$"), "a trailing comma or semicolon"),
    (re.compile(r"(^|/)\s|\s($|/)"), "white space at the start or end of a name"),
)


def suspect_name(name: str) -> None:
    """Refuse a ``target_file`` that carries what a model leaves around a path it copied from
    a sentence (``'notes.md, '``): such a file is almost never meant, and is hard to see and to
    remove once written. Raises :class:`PlanRejected` naming the cleaned-up path."""
    for pattern, what in _SUSPECT:
        found = pattern.search(name)
        if found is None:
            continue
        cleaned = "/".join(part.strip() for part in name.strip().rstrip(",;").split("/"))
        raise PlanRejected(f"target_file {name!r} has {what} (at position {found.start()}), "
                           "which is almost never part of a file name; give the path alone, "
                           f"e.g. {cleaned!r}.", field="target_file")


def check_plan(plan: WritePlan, *, workspace: Path, state_dir: Path) -> CheckedPlan:
    """Check ``plan`` against the workspace before any content streams; see the module
    docstring for the rules. Raises :class:`PlanRejected`."""
    root = Path(workspace).resolve()
    state = Path(state_dir).resolve()
    name = plan.target_file
    target = _target_of(name, root, state)
    relative = target.relative_to(root).as_posix()
    shown = relative if relative == name else f"{name!r} ({relative})"
    info = _regular_or_none(target, shown)
    if plan.operation is Operation.CREATE:
        _check_create(info, target, root, shown)
        return CheckedPlan(plan, root, target, relative, False, None, state)
    if info is None:
        raise PlanRejected(f"{shown} does not exist; operation '{plan.operation}' edits an "
                           f"existing file. Use create to make a new file, or check the path "
                           f"(list the directory first).", field="target_file")
    data = _check_edit(plan, target, relative, shown)
    return CheckedPlan(plan, root, target, relative, True, stat.S_IMODE(info.st_mode), state,
                       hashlib.sha256(data).hexdigest())


def _target_of(name: str, root: Path, state: Path) -> Path:
    """The target ``name`` resolved inside the workspace ``root``: not the root, not in a
    ``.git`` directory, not in Orion's ``state`` directory."""
    suspect_name(name)
    try:
        target = resolve_inside(root, name)
    except PathOutsideWorkspace as exc:
        raise PlanRejected(f"target_file {str(exc)}. Give a path inside the workspace, "
                           f"relative to its root, e.g. 'docs/guide.md'.",
                           field="target_file") from exc
    except (RuntimeError, OSError) as exc:  # a symbolic link loop (RuntimeError in 3.11)
        raise PlanRejected(f"target_file {name!r} cannot be resolved: {exc}. Give the path "
                           "of a file, not of a symbolic link that leads to itself.",
                           field="target_file") from exc
    if target == root:
        raise PlanRejected(f"target_file {name!r} is the workspace root itself; give the path "
                           f"of a file.", field="target_file")
    if ".git" in target.relative_to(root).parts:
        raise PlanRejected(f"target_file {name!r} is inside a .git directory "
                           f"({target.relative_to(root).as_posix()}), which Orion never "
                           f"writes. Choose a file of the project.", field="target_file")
    if target.is_relative_to(state):
        raise PlanRejected(f"target_file {name!r} is inside Orion's state directory "
                           f"({state.name}), which cannot be written through a plan. Choose a "
                           f"file of the project.", field="target_file")
    return target


def _regular_or_none(target: Path, shown: str) -> os.stat_result | None:
    """The target's status: ``None`` when it does not exist; a regular file's otherwise."""
    try:
        info = target.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise PlanRejected(f"target_file {shown} cannot be inspected: {exc.strerror}.",
                           field="target_file") from exc
    if stat.S_ISDIR(info.st_mode):
        raise PlanRejected(f"target_file {shown} is a directory; give the path of a file "
                           f"inside it.", field="target_file")
    if not stat.S_ISREG(info.st_mode):
        raise PlanRejected(f"target_file {shown} is not a regular file (a device, pipe or "
                           f"socket); Orion only writes regular files.", field="target_file")
    return info


def _check_create(info: os.stat_result | None, target: Path, root: Path, shown: str) -> None:
    """``create``: the file must not exist, and its nearest existing directory be writable."""
    if info is not None:
        raise PlanRejected(f"{shown} already exists; create only makes new files. Use "
                           f"overwrite to replace it, or append, insert, replace_block or "
                           f"replace_all to edit it.", field="operation")
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise PlanRejected(f"cannot create {shown}: {parent.relative_to(root).as_posix()} "
                           f"is a file, not a directory.", field="target_file")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PlanRejected(f"cannot create {shown}: the directory "
                           f"{parent.relative_to(root).as_posix() or '.'} is not writable.",
                           field="target_file")


def _check_edit(plan: WritePlan, target: Path, relative: str, shown: str) -> bytes:
    """An edit of an existing file: writable, text, and its markers found. Returns the
    file's bytes."""
    if not os.access(target.parent, os.W_OK | os.X_OK):
        raise PlanRejected(f"cannot write {shown}: its directory is not writable.",
                           field="target_file")
    try:
        with open(target, "rb") as handle:
            head = handle.read(SNIFF_BYTES)
            data = head + handle.read()
    except OSError as exc:
        raise PlanRejected(f"{shown} cannot be read: {exc.strerror}.",
                           field="target_file") from exc
    if not _is_text(split_bom(head)[1], complete=len(head) < SNIFF_BYTES):
        raise PlanRejected(f"{shown} is a binary file (its first 8 KiB hold a NUL byte or are "
                           f"not UTF-8 text); Orion only writes text files.",
                           field="target_file")
    if OPERATION_FIELDS[plan.operation]:
        match_plan(plan, split_bom(data)[1], relative)
    return data


def recheck(checked: CheckedPlan) -> CheckedPlan:
    """:func:`check_plan` again, for finalization: the file may have changed (or appeared, or
    gone) while the content streamed."""
    return check_plan(checked.plan, workspace=checked.workspace, state_dir=checked.state_dir)
