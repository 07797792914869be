"""Text set aside: what a write session's model streamed that is not in the content.

A session keeps every character the model streams. What a rule keeps out of the file (text
beside a tool call, text after the ``DONE`` line, an unfinished line the continuation did not
send again, a continuation that started the file over; see :mod:`orion.write_session.decision`)
is a *part*: numbered from 1, with why it was set aside, where it was in the content (where
``WritePlanTool_keep`` puts it back), its size and its first line. Each part's bytes are a file
beside the journal, exactly as they arrived::

    <session directory>/set_aside/
        1.txt           the text of part 1
        index.json      the parts: why, where, size, first line, whether they were put back

Once the session's target is written (or the session is abandoned) the journal goes, and the
parts move to ``<state_dir>/set_aside/<session id>/``, where ``orion sessions show ID`` prints
them; they are pruned with the session's undo record (``keep_backups``). The bytes are held in
memory too: a disk that refuses the part file (full, read-only) loses nothing while the
process lives, as the journal does.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from orion.write_session.journal import DIR_MODE, read_private, write_private

__all__ = ["Part", "SetAside", "ARCHIVE", "archived", "first_line", "count_lines"]

#: The directory of a session's parts, in its journal directory and under the state directory.
ARCHIVE = "set_aside"
INDEX = "index.json"
#: How much of a part's first line notices and prompts quote.
FIRST_LINE_CHARS = 60


def part_file(number: int) -> str:
    """The name of part ``number``'s file: a whole number's, never a path."""
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"a part number is a whole number from 1, not {number!r}")
    return f"{number}.txt"


def count_lines(data: bytes) -> int:
    """Lines as people count them: a last line without a line break counts too."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def first_line(data: bytes) -> str:
    """The first line that is not blank, shortened for a notice."""
    for raw in data.split(b"\n"):
        line = raw.decode("utf-8", "replace").strip()
        if line:
            return line if len(line) <= FIRST_LINE_CHARS else line[:FIRST_LINE_CHARS] + "…"
    return ""


@dataclass
class Part:
    number: int
    #: Why it was set aside (one of the reasons in :mod:`orion.write_session.decision`).
    why: str
    #: Where it was in the content, in bytes: where putting it back inserts it.
    at: int
    bytes: int
    lines: int
    first_line: str
    kept: bool = False
    #: Where it comes among parts at the same place: the stream's order (its number, unless an
    #: unfinished line was set aside after text that followed it).
    order: float = 0.0

    def __post_init__(self) -> None:
        if not self.order:
            self.order = float(self.number)

    def describe(self) -> str:
        """``part 2 (3 lines, first line 'Task B')``."""
        count = f"{self.lines} line{'s' if self.lines != 1 else ''}"
        first = f", first line {self.first_line!r}" if self.first_line else ""
        return f"part {self.number} ({count}{first})"


class SetAside:
    """The parts of one session, kept in ``directory`` (``set_aside/`` in the session's journal
    directory, or its archive)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.parts: list[Part] = []
        self._texts: dict[int, bytes] = {}
        #: The file the parts were set aside from (kept in an archive's index).
        self.target: str | None = None
        #: Index entries refused as no part (a forged number, a missing field), each named.
        self.problems: list[str] = []

    # -- reading ------------------------------------------------------------------------------

    @property
    def pending(self) -> list[Part]:
        """The parts not put back."""
        return [part for part in self.parts if not part.kept]

    @property
    def lines(self) -> int:
        """Lines still set aside."""
        return sum(part.lines for part in self.pending)

    def get(self, number: int) -> Part | None:
        for part in self.parts:
            if part.number == number:
                return part
        return None

    def read(self, number: int) -> bytes:
        """A part's text, as it arrived."""
        if number in self._texts:
            return self._texts[number]
        return read_private(self.directory / part_file(number))

    # -- changing ----------------------------------------------------------------------------

    def add(self, why: str, data: bytes, at: int, *, tail: bool = False) -> Part:
        """Set ``data`` aside (it was at byte ``at`` of the content). ``tail``: ``data`` was the
        content's end, from ``at`` on, and leaves it now: parts set aside after it (at the
        content's end) come to ``at`` too, after it."""
        part = Part(len(self.parts) + 1, why, at, len(data), count_lines(data),
                    first_line(data))
        if tail:
            later = [p for p in self.pending if p.at > at]
            for other in later:
                other.at = at
            if later:
                part.order = min(p.order for p in later) - 0.5
        self.parts.append(part)
        self._texts[part.number] = data
        self._save(part.number, data)
        return part

    def put_back(self, number: int) -> bytes:
        """Mark part ``number`` as put back into the content at its place; returns its text.
        Parts that were later in the content move by its size."""
        part = self.get(number)
        if part is None or part.kept:
            raise KeyError(number)
        data = self.read(number)
        part.kept = True
        for other in self.pending:
            if other.at > part.at or (other.at == part.at and other.order > part.order):
                other.at += len(data)
        self._save(None, None)
        return data

    def _save(self, number: int | None, data: bytes | None) -> None:
        """Best effort: the bytes stay in memory whatever the disk says."""
        try:
            self.directory.mkdir(mode=DIR_MODE, exist_ok=True)
            if number is not None and data is not None:
                write_private(self.directory / part_file(number), data)
            _replace(self.directory / INDEX, {"parts": [asdict(p) for p in self.parts]})
        except OSError:
            pass

    def archive(self, state_dir: Path, session_id: str, target: str) -> Path | None:
        """Keep the parts where ``orion sessions show`` finds them once the journal is gone:
        ``<state_dir>/set_aside/<session id>/``, with the ``target`` they were set aside from.
        Nothing happens when nothing was set aside."""
        if not self.parts:
            return None
        folder = Path(state_dir) / ARCHIVE / session_id
        try:
            folder.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            for part in self.parts:
                write_private(folder / part_file(part.number), self.read(part.number))
            _replace(folder / INDEX, {"target_file": self.target or target,
                                      "parts": [asdict(p) for p in self.parts]})
        except OSError:
            return None
        return folder

    # -- the state a checkpoint saves -------------------------------------------------------------

    def to_state(self) -> list[dict[str, Any]]:
        return [asdict(part) for part in self.parts]

    @classmethod
    def of_journal(cls, journal_directory: Path) -> SetAside:
        """The parts saved in a session's journal directory (none yet for a new session):
        what an adopted session and ``orion sessions show`` read."""
        return cls.load(Path(journal_directory) / ARCHIVE)

    @classmethod
    def load(cls, directory: Path) -> SetAside:
        store = cls(directory)
        store.parts = _read_index(store.directory, store.problems)
        index, _ = _read(store.directory / INDEX)
        if isinstance(index, dict) and isinstance(index.get("target_file"), str):
            store.target = index["target_file"]
        return store


def archived(state_dir: Path, session_id: str) -> SetAside | None:
    """The archived parts of a finished session, or None."""
    directory = Path(state_dir) / ARCHIVE / session_id
    if not directory.is_dir():
        return None
    return SetAside.load(directory)


def archived_ids(state_dir: Path) -> list[str]:
    try:
        return [e.name for e in os.scandir(Path(state_dir) / ARCHIVE) if e.is_dir()]
    except OSError:
        return []


def remove_archive(state_dir: Path, session_id: str) -> None:
    shutil.rmtree(Path(state_dir) / ARCHIVE / session_id, ignore_errors=True)


def _read(path: Path) -> tuple[Any, str | None]:
    try:
        return json.loads(read_private(path).decode("utf-8")), None
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return None, str(exc)


#: The fields of an index entry and the types each must have: an entry is data read from a
#: file a repository may ship, so a part's number is a whole number, never a name (FS-15).
_FIELDS: dict[str, tuple[type, ...]] = {
    "number": (int,), "why": (str,), "at": (int,), "bytes": (int,), "lines": (int,),
    "first_line": (str,), "kept": (bool,), "order": (int, float)}


def part_problem(item: Any) -> str | None:
    """What makes an index entry no part (None: it is one): a field missing or of the wrong
    type, a number below 1, a negative place or size."""
    if not isinstance(item, dict):
        return "not an object"
    for name, types in _FIELDS.items():
        if name not in item and name in ("kept", "order"):
            continue
        value = item.get(name)
        wrong_bool = isinstance(value, bool) and bool not in types
        if not isinstance(value, types) or wrong_bool:
            return f"{name} {value!r} is not {'a whole number' if int in types else 'valid'}"
    if item["number"] < 1 or min(item["at"], item["bytes"], item["lines"]) < 0:
        return f"number {item['number']!r} or a size is out of range"
    unknown = set(item) - set(_FIELDS)
    return f"unknown field {sorted(unknown)[0]!r}" if unknown else None


def _read_index(directory: Path, problems: list[str] | None = None) -> list[Part]:
    data, _ = _read(directory / INDEX)
    parts: list[Part] = []
    if isinstance(data, dict) and isinstance(data.get("parts"), list):
        for position, item in enumerate(data["parts"], 1):
            problem = part_problem(item)
            if problem is None:
                parts.append(Part(**item))
            elif problems is not None:
                problems.append(f"{directory / INDEX}: entry {position} is no part, refused "
                                f"({problem})")
    if parts or problems:
        return parts
    # No index (a crash between the part file and the index): the files are the truth.
    try:
        numbers = sorted(int(e.name[:-4]) for e in os.scandir(directory)
                         if e.name.endswith(".txt") and e.name[:-4].isdigit())
    except OSError:
        return []
    for number in numbers:
        try:
            data_bytes = read_private(directory / f"{number}.txt")
        except OSError:
            continue
        parts.append(Part(number, "unknown", 0, len(data_bytes), count_lines(data_bytes),
                          first_line(data_bytes)))
    return parts


def _replace(path: Path, data: Any) -> None:
    temp = path.with_name(path.name + ".tmp")
    # Compact, as undo records are: an indent makes each dump a reference cycle (see undo).
    write_private(temp, json.dumps(data, ensure_ascii=False).encode("utf-8"))
    os.replace(temp, path)
