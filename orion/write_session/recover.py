"""``orion sessions recover ID --finalize``: a session's saved content written without a model."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orion.validation import ValidationRequest, collect_issues
from orion.write_session.journal import CONTENT, Journal, mark
from orion.write_session.operations import apply_operation, count_lines, execute
from orion.write_session.plan import PlanRejected, WritePlan, check_plan
from orion.write_session.repair import safe_replacement
from orion.workspace import PathOutsideWorkspace
from orion.write_session.interrupted import (already_written, finish_cleanup, unchecked_plan,
                                             write_recovered_undo_record)
from orion.write_session.leftovers import remove_temp_leftovers
from orion.write_session.set_aside import SetAside
from orion.write_session.orphans import (Orphan, RecoveryError, SessionLive, resolve_id, sha_of,
                                         wall_ms)

if TYPE_CHECKING:
    from orion.hooks.manager import PluginManager


# -- orion sessions recover ID --finalize ------------------------------------------------------


@dataclass
class RecoveryResult:
    """What :func:`recover_finalize` did. ``status`` is ``recovered`` (the target was written
    now) or ``repaired`` (it had been written before the crash; only cleaned up)."""

    session_id: str
    target_file: str
    status: str
    report: str
    bytes: int = 0
    lines: int = 0
    sha256: str = ""
    backup: str | None = None
    complete: bool = True
    replaced: int = 0
    issues: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _refuse_live_or_linked(orphan: Orphan) -> None:
    """A session another process owns, or a journal with a link in it, is not recovered."""
    if orphan.live:
        raise SessionLive(f"write session {orphan.short} is owned by a running process; "
                          "finish it there (or stop that process first)")
    if orphan.links:
        name, target = next(iter(orphan.links.items()))
        what = "its directory" if name == "." else f"its {name}"
        raise RecoveryError(
            f"write session {orphan.short} cannot be recovered: {what} is a symbolic link to "
            f"{target!r}, and Orion never follows a link in a journal (it could make Orion copy "
            f"a file from anywhere into the workspace). Nothing written; discard it with orion "
            f"sessions discard {orphan.short}")


def _refuse_partial(orphan: Orphan) -> None:
    """A journal that could not take all the content it received is not written as if whole."""
    if orphan.received_bytes is None:
        return
    where = f"; the whole content was written to {orphan.rescued}" if orphan.rescued else ""
    raise RecoveryError(
        f"write session {orphan.short} holds only {orphan.bytes} of the "
        f"{orphan.received_bytes} bytes it received: its journal could not be written "
        f"({orphan.degraded}){where}. Nothing written; discard it with orion sessions "
        f"discard {orphan.short} once the content is safe")


def _checked_content(plugins: PluginManager, relative: str, content: bytes,
                     settings: dict[str, Any]) -> tuple[bytes, list[Any], int]:
    """The content normalized and validated, with the safe replacement applied when issues
    are found (no model to ask for corrections): the content, its issues, and the places
    replaced."""
    normalized = plugins.hook.normalize_content(path=relative, content=content)
    if normalized is not None:
        content = normalized
    issues = collect_issues(plugins, ValidationRequest(relative, content, dict(settings)))
    replaced = 0
    if issues:
        content, changes = safe_replacement(content, settings.get("safe_replacement", ""))
        replaced = len(changes)
        if replaced:
            issues = collect_issues(plugins, ValidationRequest(relative, content,
                                                               dict(settings)))
    return content, issues, replaced


def recover_finalize(workspace: str | os.PathLike[str], state_dir: str | os.PathLike[str],
                     session_id: str, plugins: PluginManager, *,
                     settings: dict[str, Any] | None = None) -> RecoveryResult:
    """Write a session's journaled content to its target without a model: the internal
    ``finalizeSession(session_id, journal_path)``. The plan is rebuilt from the metadata and
    checked again, the content normalized and validated; with no model to ask for
    corrections, the safe replacement removes invalid UTF-8 and control characters, and what
    other issues remain are reported. The target is written once, atomically, with a backup
    and an undo record; then the journal is removed. Idempotent: when the finalizing record
    shows the target already written, only the cleanup is done."""
    workspace, state_dir = Path(workspace).resolve(), Path(state_dir).resolve()
    orphan = resolve_id(state_dir, session_id)
    _refuse_live_or_linked(orphan)
    plan = orphan.plan()
    now = wall_ms()
    if orphan.finalizing and already_written(orphan, workspace, state_dir, plugins):
        relative = finish_cleanup(orphan, workspace, state_dir, "repaired", now)
        data = (workspace / relative).read_bytes()
        return RecoveryResult(orphan.id, relative, "repaired",
                              f"{relative} was already written by session {orphan.short}; "
                              "cleaned up", len(data), count_lines(data), sha_of(data))
    _refuse_a_second_edit(orphan, plan, workspace, state_dir)
    _refuse_partial(orphan)
    try:
        checked = check_plan(plan, workspace=workspace, state_dir=state_dir)
    except PlanRejected as exc:
        raise RecoveryError(f"cannot write {plan.target_file} for session {orphan.short}: "
                            f"{exc}") from exc
    if settings is None:
        settings = workspace_settings(workspace, plugins)
    _take_deadline(workspace, plugins)
    journal = Journal.open(orphan.directory, now_ms=wall_ms)
    try:
        content = journal.content()
        if not content.strip():
            raise RecoveryError(f"write session {orphan.short} saved no content, so there is "
                                f"nothing to write to {checked.relative}; discard it with "
                                f"orion sessions discard {orphan.short}")
        content, issues, replaced = _checked_content(plugins, checked.relative, content,
                                                     settings)
        _refuse_blocked(orphan, checked.relative, issues, journal.directory / CONTENT)
        before = checked.target.read_bytes() if checked.exists else None
        after = apply_operation(checked, before, content)
        mark(journal.directory, "finalizing")
        journal.flush({**journal.state, "status": "recovering", "finalizing": {
            "content_sha256": sha_of(content),
            "before_sha256": sha_of(before) if before is not None else None,
            "after_sha256": sha_of(after)}})
        result = execute(checked, content, state_dir=state_dir, session_id=orphan.id)
    except BaseException:
        journal.close()
        raise
    aside = SetAside.of_journal(orphan.directory)
    kept = _keep_set_aside(aside, state_dir, orphan, result.relative)
    write_recovered_undo_record(state_dir, orphan, result.relative, plan.operation.value,
                                result.path.read_bytes(), "recovered", wall_ms(),
                                set_aside=aside.lines)
    journal.remove()
    remove_temp_leftovers(result.path.parent)
    report = result.report
    if not orphan.complete:
        report += " (the model had not finished: the content may be incomplete)"
    if replaced:
        report += f"; the safe replacement changed {replaced} place(s)"
    report += kept
    return RecoveryResult(orphan.id, result.relative, "recovered", report, result.bytes,
                          result.lines, result.sha256,
                          str(result.backup) if result.backup else None, orphan.complete,
                          replaced, [str(issue) for issue in issues])


def _keep_set_aside(aside: SetAside, state_dir: Path, orphan: Orphan, relative: str) -> str:
    """The journal's text set aside moves to the archive before the journal goes (FS-16):
    what the report says of it, with the figures and how to print it. When the archive
    cannot be written, the recovery stops before anything is removed."""
    if not aside.parts:
        return ""
    if aside.archive(state_dir, orphan.id, relative) is None:
        raise RecoveryError(
            f"write session {orphan.short}: its text set aside could not be kept in "
            f"{state_dir / 'set_aside'}; the journal is kept, nothing is lost")
    pending = aside.pending
    if not pending:
        return ""
    parts = "; ".join(f"{part.describe()} {part.why}" for part in pending)
    lines = aside.lines
    return (f"; {lines} line{'s' if lines != 1 else ''} set aside, not written: {parts}. "
            f"`orion sessions show {orphan.short}` prints them")


def _refuse_a_second_edit(orphan: Orphan, plan: WritePlan, workspace: Path,
                          state_dir: Path) -> None:
    """An append or insert must not run twice. A session that crashed while finalizing, whose
    target is neither its recorded pre-image nor what the write makes of it, may have written
    and then been edited: refuse, unless the session itself recorded that its write failed."""
    record = orphan.finalizing
    if not record or plan.operation.value not in ("append", "insert"):
        return
    if orphan.saved_state.get("status") == "failed":
        return
    try:
        current = unchecked_plan(plan, workspace, state_dir).target.read_bytes()
    except (OSError, PathOutsideWorkspace):
        return
    if sha_of(current) != record.get("before_sha256"):
        raise RecoveryError(
            f"{plan.target_file} changed since session {orphan.short} began writing it, so "
            f"the {plan.operation.value} may have happened already; nothing written. Check the "
            f"file, then discard the session (orion sessions discard {orphan.short}) or add "
            "the content by hand")


def workspace_settings(workspace: Path, plugins: PluginManager) -> dict[str, Any]:
    """The ``write_session`` settings of the workspace (``orion.yaml`` and the environment
    applied), or ``{}`` when the statechart cannot be loaded."""
    from orion.config import load_config
    from orion.errors import ConfigError, StatechartError
    from orion.statechart.io.catalog import Catalog

    try:
        config = load_config(workspace)
        definition = Catalog(plugins, config).definition(  # as Runtime.definition finds it
            "write_session", overrides=config.overrides("write_session"),
            overrides_origin=config.origin("write_session"))
        return dict(definition.settings)
    except (ConfigError, StatechartError):
        pass
    return {}


def _take_deadline(workspace: Path, plugins: PluginManager) -> None:
    """The workspace's ``runtime.validator_deadline_ms`` for the plugins' validators (their
    default when ``orion.yaml`` cannot be read: that is said where it is read for a run)."""
    from orion.config import load_config
    from orion.errors import ConfigError

    try:
        deadline = load_config(workspace).model.runtime.validator_deadline_ms
    except ConfigError:
        return
    if hasattr(plugins, "validator_deadline_ms"):
        plugins.validator_deadline_ms = deadline


def _refuse_blocked(orphan: Orphan, relative: str, issues: list[Any], content: Path) -> None:
    """A validator's rule that the content still breaks keeps it from being written."""
    blocking = [issue for issue in issues if issue.blocking]
    if blocking:
        raise RecoveryError(
            f"write session {orphan.short} is blocked: {len(blocking)} issue(s) keep "
            f"{relative} from being written ({'; '.join(map(str, blocking[:3]))}). Nothing "
            f"written; fix {content} and recover again, or orion sessions discard "
            f"{orphan.short}")
