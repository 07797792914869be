"""A session that crashed while it wrote its target: did the write already happen?

A session records, before it writes (the *finalizing record*), the hash of its content and of
the target's pre-image. :func:`already_written` compares the target with what that content
makes of that pre-image; :func:`finish_cleanup` then only adds the undo record a crash left out
and drops the journal."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from orion.write_session.journal import CONTENT, read_private, remove_session
from orion.write_session.operations import (append_range_path, apply_operation, backup_path,
                                            read_append_range)
from orion.write_session.plan import CheckedPlan, PlanRejected, WritePlan
from orion.write_session.repair import safe_replacement
from orion.write_session.undo import undo_record_path, write_undo_record
from orion.workspace import PathOutsideWorkspace, resolve_inside
from orion.write_session.leftovers import remove_temp_leftovers
from orion.write_session.set_aside import SetAside
from orion.write_session.orphans import Orphan, RecoveryError, sha_of

if TYPE_CHECKING:
    from orion.hooks.manager import PluginManager


# -- the finalizing record: did the write already happen? --------------------------------------


def unchecked_plan(plan: WritePlan, workspace: Path, state_dir: Path) -> CheckedPlan:
    """A :class:`CheckedPlan` for :func:`apply_operation` without :func:`check_plan`'s rules
    (create's target exists once it was written)."""
    root = Path(workspace).resolve()
    target = resolve_inside(root, plan.target_file)
    return CheckedPlan(plan, root, target, target.relative_to(root).as_posix(), target.exists(),
                       None, Path(state_dir).resolve())


def _content_candidates(raw: bytes, relative: str,
                        plugins: PluginManager | None) -> Iterable[bytes]:
    """What the session may have written: the journal as it is, normalized by the
    ``normalize_content`` hook, and either after the safe replacement."""
    yield raw
    normalized = raw
    if plugins is not None:
        result = plugins.hook.normalize_content(path=relative, content=raw)
        if result is not None:
            normalized = result
            yield normalized
    for data in {raw, normalized}:
        yield safe_replacement(data)[0]


def already_written(orphan: Orphan, workspace: str | os.PathLike[str],
                    state_dir: str | os.PathLike[str],
                    plugins: PluginManager | None = None) -> bool:
    """Whether a session that crashed while finalizing had written its target: the target
    holds what the recorded content makes of the recorded pre-image (the backup; "absent" for
    a new file). False when there is no finalizing record or it cannot be confirmed."""
    record = orphan.finalizing
    if not record:
        return False
    try:
        plan = orphan.plan()
        checked = unchecked_plan(plan, Path(workspace), Path(state_dir))
        current = checked.target.read_bytes() if checked.target.is_file() else None
    except (RecoveryError, PathOutsideWorkspace, OSError):
        return False
    if current is None:
        return False
    after_sha = record.get("after_sha256")
    if isinstance(after_sha, str):  # recorded by newer sessions: the bytes to be written
        return sha_of(current) == after_sha
    found, pre = _recorded_pre_image(orphan, record.get("before_sha256"), checked.relative,
                                     current, Path(state_dir))
    if not found:
        return False
    try:
        raw = read_private(orphan.directory / CONTENT)
    except OSError:
        raw = b""
    wanted = record.get("content_sha256")
    for content in _content_candidates(raw, checked.relative, plugins):
        if sha_of(content) != wanted:
            continue
        try:
            return apply_operation(checked, pre, content) == current
        except PlanRejected:
            return False
    return False


def _recorded_pre_image(orphan: Orphan, before_sha: object, relative: str, current: bytes,
                        state_dir: Path) -> tuple[bool, bytes | None]:
    """The pre-image the finalizing record names (``None``: the file was new), and whether it
    was found as recorded."""
    if before_sha is None:
        return True, None
    backup = backup_path(state_dir=state_dir, session_id=orphan.id, relative=relative)
    # execute() saves the backup (an append: the range it adds) before it writes: no backup
    # (or another one), no write.
    appended = read_append_range(append_range_path(state_dir, orphan.id))
    try:
        pre = appended.pre_image(current) if appended is not None else backup.read_bytes()
    except OSError:
        return False, None
    if pre is None or sha_of(pre) != before_sha:
        return False, None
    return True, pre


def write_recovered_undo_record(state_dir: Path, orphan: Orphan, relative: str, operation: str,
                                data: bytes, status: str, written_at_ms: float, *,
                                set_aside: int = 0) -> Path:
    """The record ``orion sessions undo`` reads (the format of the session's own);
    ``set_aside``: the lines of text set aside, kept in the archive."""
    backup = backup_path(state_dir=state_dir, session_id=orphan.id, relative=relative)
    if not backup.is_file():
        backup = append_range_path(state_dir, orphan.id)
    return write_undo_record(state_dir, session_id=orphan.id, relative=relative,
                             operation=operation, sha256=sha_of(data),
                             backup=backup if backup.is_file() else None,
                             written_at_ms=written_at_ms, status=status,
                             set_aside=set_aside)


def finish_cleanup(orphan: Orphan, workspace: Path, state_dir: Path, status: str,
                    now_ms: float) -> str:
    """The write happened: add the undo record if the crash left none, drop the journal."""
    plan = orphan.plan()
    checked = unchecked_plan(plan, workspace, state_dir)
    if not undo_record_path(state_dir, orphan.id).exists():
        write_recovered_undo_record(state_dir, orphan, checked.relative, plan.operation.value,
                           checked.target.read_bytes(), status,
                           orphan.last_save_ms if orphan.last_save_ms is not None else now_ms)
    aside = SetAside.of_journal(orphan.directory)
    if aside.parts and aside.archive(state_dir, orphan.id, checked.relative) is None:
        raise RecoveryError(f"write session {orphan.short}: its text set aside could not be "
                            f"kept in {state_dir / 'set_aside'}; the journal is kept")
    remove_session(orphan.directory)
    remove_temp_leftovers(checked.target.parent)
    return checked.relative
