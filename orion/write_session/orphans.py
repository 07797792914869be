"""The session directories a process left behind (orphans), as found on disk.

A write session journals its content under ``<state_dir>/write_sessions/<id>/`` while it
streams (see :mod:`orion.write_session.journal`). When the process dies before the target is
written, the directory stays behind. :func:`scan` lists them and :func:`load` reads one, never
failing on a damaged one (its problems are listed instead); :func:`resolve_id` finds one by id
or unique prefix. The errors of the session commands live here too.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orion.clock import BootTime, kernel_boot_time
from orion.errors import OrionError
from orion.write_session.journal import (CONTENT, METADATA, STATUS, Journal, links_in,
                                         read_private, read_state)
from orion.write_session.plan import WritePlan
from orion.write_session.durations import format_age


#: Where the sessions live under the state directory.
SESSIONS = "write_sessions"
#: The file ``orion sessions recover ID --continue`` leaves in a session directory: the next
#: ``orion run`` / ``orion chat`` in the workspace adopts the session.
RESUME = "resume"


class RecoveryError(OrionError):
    """A session command that cannot be carried out; the message says why, for people."""


class SessionNotFound(RecoveryError):
    """No session (or undo record) has that id or id prefix."""


class AmbiguousSession(RecoveryError):
    """An id prefix that more than one session starts with."""

    def __init__(self, prefix: str, candidates: list[str]):
        self.prefix, self.candidates = prefix, candidates
        super().__init__(f"session id {prefix!r} is ambiguous: it starts "
                         f"{', '.join(candidates)}; give more characters")


class SessionLive(RecoveryError):
    """The session is owned by a running process."""


class UndoRefused(RecoveryError):
    """The target changed since the session wrote it (or there is nothing to undo)."""


# -- listing ------------------------------------------------------------------------------------


@dataclass
class Orphan:
    """A session directory as found on disk. Everything but ``id``, ``directory``, ``live``,
    ``status`` and ``problems`` may be unknown (None) when the directory is damaged."""

    id: str
    directory: Path
    target_file: str | None = None
    operation: str | None = None
    intent: str | None = None
    conversation_id: str | None = None
    lines: int = 0
    bytes: int = 0
    created_ms: float | None = None
    #: The last time content or state reached the disk (falls back to the creation time).
    last_save_ms: float | None = None
    #: When ``--continue`` marked it, if it was marked.
    resume_ms: float | None = None
    #: The second clock (:class:`orion.clock.BootTime`) at the last save and at the mark.
    last_save_boot: BootTime | None = None
    resume_boot: BootTime | None = None
    #: How long ago the last save (or the ``--continue`` mark) was: by the wall clock, and by
    #: the second clock when both readings are of this boot; the smaller one, so a wall clock
    #: stepped ahead never makes a session look older than it is.
    age_ms: float | None = None
    live: bool = False
    #: ``open``, ``finalizing`` (its saved state holds the finalizing record: the write may have
    #: happened), ``resume`` (marked by ``orion sessions recover ID --continue``) or
    #: ``degraded`` (its journal went memory-only: the disk holds a part at most).
    status: str = "open"
    #: The lifecycle state of the last snapshot, e.g. ``session_active.awaiting_content``.
    state: str | None = None
    continuations: int = 0
    corrections: int = 0
    finalizing: dict[str, Any] | None = None
    degraded: str | None = None
    #: Where the content was written when neither the journal nor the target took it.
    rescued: str | None = None
    #: How many bytes the session had received when its journal failed (None: it did not).
    received_bytes: int | None = None
    #: The issues that blocked its write (status ``blocked``), as ``line:col: code: message``.
    blocked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: Names in the session directory that are symbolic links, with where each leads (``.``:
    #: the directory itself). A journal never has one; Orion never follows them.
    links: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict, repr=False)
    saved_state: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def short(self) -> str:
        return self.id[:8]

    @property
    def last_activity_ms(self) -> float | None:
        """The later of the last save and the ``--continue`` mark: what the TTL counts from."""
        times = [t for t in (self.last_save_ms, self.resume_ms) if t is not None]
        return max(times) if times else None

    def age_at(self, now_ms: float, now_boot: BootTime | None) -> float | None:
        """How long ago the last save or the ``--continue`` mark was (see :attr:`age_ms`)."""
        ages = [_age(wall, boot, now_ms, now_boot)
                for wall, boot in ((self.last_save_ms, self.last_save_boot),
                                   (self.resume_ms, self.resume_boot)) if wall is not None]
        return min(ages) if ages else None

    @property
    def has_content(self) -> bool:
        """Whether deleting it would lose something: content, text set aside, held messages,
        or content a rescue file or the disk does not hold whole."""
        return bool(self.bytes or self.set_aside_lines or self.held
                    or self.received_bytes)

    @property
    def complete(self) -> bool:
        """Whether the model had finished the content (DONE seen) before the crash."""
        tags = self.saved_state.get("tags")
        if isinstance(tags, list):
            return self.finalizing is not None or bool({"finalizing", "correcting"} & set(tags))
        # A journal saved before sessions recorded their tags: the built-in chart's names.
        return self.finalizing is not None or (self.state or "").endswith(
            ("finalizing", "needs_corrections"))

    def plan(self) -> WritePlan:
        """The write plan, rebuilt from ``metadata.json``; :class:`RecoveryError` if it
        cannot be."""
        if not self.metadata:
            raise RecoveryError(f"write session {self.short} has no usable metadata.json "
                                f"({'; '.join(self.problems) or 'empty'}); it cannot be "
                                f"recovered, only discarded")
        try:
            return WritePlan.model_validate(_raw_plan(self.metadata))
        except ValueError as exc:
            raise RecoveryError(f"write session {self.short}: metadata.json holds no valid "
                                f"write plan ({_first_line(exc)})") from exc

    def describe(self, now_ms: float | None = None, now_boot: BootTime | None = None) -> str:
        """``docs/guide.md (120 lines, saved 5 min ago)``."""
        target = self.target_file or "an unknown file"
        age = self.age_ms if now_ms is None or self.last_save_ms is None \
            else _age(self.last_save_ms, self.last_save_boot, now_ms, now_boot)
        saved = f", saved {format_age(age)}" if age is not None else ""
        return f"{target} ({_lines(self.lines)}{saved})"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "directory": str(self.directory), "target_file": self.target_file,
            "operation": self.operation, "intent": self.intent,
            "conversation_id": self.conversation_id, "lines": self.lines, "bytes": self.bytes,
            "created_ms": self.created_ms, "last_save_ms": self.last_save_ms,
            "age_ms": self.age_ms, "live": self.live, "status": self.status,
            "state": self.state, "continuations": self.continuations,
            "corrections": self.corrections, "degraded": self.degraded,
            "rescued": self.rescued, "received_bytes": self.received_bytes,
            "set_aside_lines": self.set_aside_lines, "held": len(self.held),
            "blocked": list(self.blocked), "problems": list(self.problems)}

    @property
    def set_aside_lines(self) -> int:
        """Lines of text the session set aside beside its content (``orion sessions show``)."""
        value = self.saved_state.get("set_aside_lines")
        saved = value if isinstance(value, int) and not isinstance(value, bool) else 0
        if saved:
            return saved
        # The state is lost or older than the parts (a crash between the part's file and the
        # next checkpoint): the parts on disk count (FS-16), so such a session is never taken
        # for one that holds nothing.
        from orion.write_session.set_aside import SetAside

        return SetAside.of_journal(self.directory).lines

    @property
    def held(self) -> list[str]:
        """Messages the user typed while the session was open, not sent yet."""
        value = self.saved_state.get("held")
        return [str(m) for m in value] if isinstance(value, list) else []


def sessions_dir(state_dir: str | os.PathLike[str]) -> Path:
    return Path(state_dir) / SESSIONS


def scan(state_dir: str | os.PathLike[str], *, now_ms: float | None = None,
         now_boot: BootTime | None = None) -> list[Orphan]:
    """Every session directory under ``<state_dir>/write_sessions/``, oldest save first. A
    damaged directory is listed with its ``problems``; this never raises for one. The ages
    count from ``now_ms`` and ``now_boot`` (default: the real clocks, both given or neither)."""
    root = sessions_dir(state_dir)
    if now_ms is None:
        now_ms, now_boot = wall_ms(), kernel_boot_time()
    try:
        entries = [p for p in root.iterdir() if p.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [load(path, now_ms=now_ms, now_boot=now_boot) for path in entries]
    found.sort(key=lambda o: (o.last_save_ms is None, o.last_save_ms or 0.0, o.id))
    return found


def load(directory: Path, *, now_ms: float | None = None,
         now_boot: BootTime | None = None) -> Orphan:
    """One session directory as an :class:`Orphan` (never raises for its contents)."""
    if now_ms is None:
        now_ms, now_boot = wall_ms(), kernel_boot_time()
    orphan = Orphan(id=directory.name, directory=directory)
    orphan.links = links_in(directory)
    for name, target in orphan.links.items():
        what = "the session directory" if name == "." else name
        orphan.problems.append(f"{what} is a symbolic link to {target!r}, which Orion never "
                               "follows")
    _load_metadata(orphan, directory)
    _load_state(orphan, directory)
    _load_content(orphan, directory)
    _load_status(orphan)
    _load_resume(orphan, directory)
    _load_blocked(orphan)
    if orphan.last_save_ms is None:
        orphan.last_save_ms = orphan.created_ms if orphan.created_ms is not None \
            else _mtime_ms(directory)
    orphan.age_ms = orphan.age_at(now_ms, now_boot)
    orphan.live = Journal.is_live(directory)
    return orphan


def _load_metadata(orphan: Orphan, directory: Path) -> None:
    """What the session was to write (``metadata.json``)."""
    problems = orphan.problems
    metadata, problem = read_json(directory / METADATA)
    if problem:
        problems.append(problem)
        return
    if not isinstance(metadata, dict):
        problems.append(f"{METADATA} is not a JSON object")
        return
    orphan.metadata = metadata
    orphan.target_file = _str(metadata.get("target_file"))
    orphan.operation = _str(metadata.get("operation"))
    orphan.intent = _str(metadata.get("intent"))
    orphan.conversation_id = _str(metadata.get("conversation_id"))
    orphan.created_ms = _number(metadata.get("created_at"))
    if metadata.get("session_id") not in (None, orphan.id):
        problems.append(f"{METADATA} names session {metadata.get('session_id')!r}, not "
                        f"{orphan.id!r}")
    try:
        WritePlan.model_validate(_raw_plan(metadata))
    except ValueError as exc:
        problems.append(f"{METADATA} holds no valid write plan ({_first_line(exc)})")


def _load_state(orphan: Orphan, directory: Path) -> None:
    """Where the session stood at its last save (the journal's state)."""
    state, problem = read_state(directory)
    if problem:
        orphan.problems.append(problem)
    if state is None:
        return
    orphan.saved_state = state
    orphan.last_save_ms = _number(state.get("last_save_ms"))
    orphan.last_save_boot = BootTime.from_json(state.get("last_save_boot"))
    orphan.degraded = _str(state.get("degraded"))
    orphan.continuations = _int(state.get("continuations"))
    orphan.corrections = _int(state.get("corrections"))
    snapshot = state.get("snapshot")
    if isinstance(snapshot, dict):
        orphan.state = _str(snapshot.get("state"))
    record = state.get("finalizing")
    if isinstance(record, dict):
        orphan.finalizing = record


def _load_content(orphan: Orphan, directory: Path) -> None:
    """The size of the content saved."""
    try:
        data = read_private(directory / CONTENT)
        orphan.bytes, orphan.lines = len(data), data.count(b"\n")
    except FileNotFoundError:
        pass
    except OSError as exc:
        orphan.problems.append(f"{CONTENT} cannot be read: {exc.strerror or exc}")


def _load_resume(orphan: Orphan, directory: Path) -> None:
    """A session marked for ``--continue``, caught while writing, or gone memory-only."""
    resume = directory / RESUME
    if resume.exists():
        orphan.status = "resume"
        marked, _ = read_json(resume)
        orphan.resume_ms = _number(marked.get("marked_at_ms")) if isinstance(marked, dict) \
            else None
        orphan.resume_boot = BootTime.from_json(marked.get("marked_at_boot")) \
            if isinstance(marked, dict) else None
        if orphan.resume_ms is None:
            orphan.resume_ms = _mtime_ms(resume)
    elif orphan.finalizing is not None:
        orphan.status = "finalizing"
    elif orphan.degraded is not None:
        orphan.status = "degraded"  # its journal went memory-only: the notes say why


def _load_blocked(orphan: Orphan) -> None:
    """A session whose write a validator's rule blocked: the issues, and the status
    ``blocked`` unless another status says more."""
    blocked = orphan.saved_state.get("blocked")
    if orphan.saved_state.get("status") == "blocked" and isinstance(blocked, list):
        orphan.blocked = [str(issue) for issue in blocked]
        if orphan.status == "open":
            orphan.status = "blocked"


def _load_status(orphan: Orphan) -> None:
    """The reserved ``degraded`` file: why the journal went memory-only, how much it had
    received, where the content was rescued to."""
    try:
        text = read_private(orphan.directory / STATUS).strip()
    except OSError:
        return
    if not text:
        return
    try:
        record = json.loads(text)
    except ValueError:
        return
    if not isinstance(record, dict):
        return
    orphan.degraded = _str(record.get("reason")) or orphan.degraded or "the disk failed"
    orphan.rescued = _str(record.get("rescued"))
    received = record.get("bytes")
    if isinstance(received, int) and received > orphan.bytes:
        orphan.received_bytes = received


def resolve_id(state_dir: str | os.PathLike[str], session_id: str, *,
               now_ms: float | None = None) -> Orphan:
    """The session whose id is ``session_id`` or starts with it."""
    prefix = session_id.strip()
    orphans = scan(state_dir, now_ms=now_ms, now_boot=kernel_boot_time())
    return pick(prefix, {o.id: o for o in orphans}, "write session", sessions_dir(state_dir))


def pick(prefix: str, items: dict[str, Any], what: str, where: Path) -> Any:
    if not prefix or "/" in prefix or "\\" in prefix:
        raise SessionNotFound(f"invalid session id {prefix!r}")
    if prefix in items:
        return items[prefix]
    matches = sorted(key for key in items if key.startswith(prefix))
    if len(matches) > 1:
        raise AmbiguousSession(prefix, matches)
    if not matches:
        known = ", ".join(sorted(k[:8] for k in items)) or "none"
        raise SessionNotFound(f"no {what} {prefix!r} in {where} (known: {known})")
    return items[matches[0]]


# -- helpers ------------------------------------------------------------------------------------


def wall_ms() -> float:
    return time.time() * 1000.0


def _age(wall: float, boot: BootTime | None, now_ms: float, now_boot: BootTime | None) -> float:
    """Milliseconds since an event saved at ``wall`` (and ``boot``): the wall clock's figure,
    or the second clock's when it is smaller (a wall clock stepped ahead)."""
    age = max(0.0, now_ms - wall)
    elapsed = now_boot.elapsed_since(boot) if now_boot is not None else None
    return min(age, max(0.0, elapsed)) if elapsed is not None else age


def sha_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _lines(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def read_json(path: Path) -> tuple[Any, str | None]:
    try:
        text = read_private(path).decode("utf-8")
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path.name} cannot be read: {getattr(exc, 'strerror', None) or exc}"
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, f"{path.name} is not valid JSON ({exc})"



def _mtime_ms(path: Path) -> float | None:
    try:
        return path.stat().st_mtime * 1000.0
    except OSError:
        return None


def _raw_plan(metadata: dict[str, Any]) -> dict[str, Any]:
    raw = metadata.get("plan")
    if isinstance(raw, dict):
        return raw
    return {k: metadata.get(k) for k in ("intent", "target_file", "operation")}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
