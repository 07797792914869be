"""Finalize: the content validated, corrected if need be, and written once (the internal
``finalizeSession`` of the design; the model never calls it).

The :class:`Finalizer` owns the content as the checks and corrections leave it (normalized
once, corrected, repaired by the safe replacement) and its issues; each of its steps returns
what it found (the issues, a :class:`Verdict`, a :class:`Written`), and the session carries it
out. What a session that ends without a write tells is in :mod:`orion.write_session.endings`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from orion.trace.events import Kind
from orion.write_session.edit_validation import validate_write
from orion.write_session.journal import Journal, mark
from orion.write_session.operations import WriteResult, execute
from orion.write_session.repair import (apply_corrections, correction_prompt, parse_corrections,
                                        safe_replacement)
from orion.write_session.view import WriteStatus

if TYPE_CHECKING:
    from pathlib import Path

    from orion.hooks.manager import PluginManager
    from orion.validation import Issue, StreamedLines
    from orion.write_session.context import WriteContext
    from orion.write_session.plan import CheckedPlan
    from orion.write_session.set_aside import SetAside

Trace = Callable[[str, str, dict[str, Any]], None]


@dataclass(frozen=True)
class Verdict:
    """What follows issues found in the content: a correction round (its ``prompt``), a write
    blocked by issues no replacement fixes (``blocking``), or the write after the safe
    replacement (neither)."""

    prompt: str | None = None
    blocking: list[Issue] = field(default_factory=list)


@dataclass(frozen=True)
class Written:
    """The target written: the result, the session's status after it, and its report."""

    result: WriteResult
    status: WriteStatus
    report: str


class Finalizer:
    """The content's checks, corrections and write (see the module docstring)."""

    def __init__(self, journal: Journal, plan: CheckedPlan, plugins: PluginManager,
                 settings: Mapping[str, Any], trace: Trace) -> None:
        self.journal = journal
        self.plan = plan
        self.plugins = plugins
        self.settings = settings
        self._trace = trace
        self.fixed: bytes | None = None  # the content after normalizing and corrections
        self._normalized = False  # normalize_content runs once, on the content as streamed
        self.issues: list[Issue] = []
        self.replaced = 0  # places the safe replacement changed
        self.remaining: list[Issue] = []  # issues still there after the last correction round

    def content(self) -> bytes:
        """The content as it stands: the journal, with the corrections applied so far."""
        return self.fixed if self.fixed is not None else self.journal.content()

    def check(self, content: bytes, streamed: StreamedLines | None) -> bytes:
        """``content`` normalized once and validated: the content to write; its issues in
        :attr:`issues`. ``streamed``: the line checks run while it streamed."""
        pm = self.plugins
        if not self._normalized:
            # Once, on the content as it streamed: the correction prompt's line numbers refer
            # to the normalized content, and normalizing it again could shift them.
            self._normalized = True
            normalized = pm.hook.normalize_content(path=self.plan.relative, content=content)
            if normalized is not None and normalized != content:
                content = normalized
                self.fixed = content
                self._trace(Kind.VALIDATION_ISSUE, "content normalized", {
                    "orion.code": "normalized", "orion.bytes.before": len(self.journal.content()),
                    "orion.bytes.after": len(content)})
        # The streamed checks saw the journal's bytes: they hold for content that is still those.
        self.issues = validate_write(pm, self.plan, content, dict(self.settings),
                                     streamed=streamed if self.fixed is None else None)
        for issue in self.issues:
            self._trace(Kind.VALIDATION_ISSUE, f"issue {issue.code}", {
                "orion.line": issue.line, "orion.column": issue.column,
                "orion.code": issue.code, "orion.message": issue.message})
        return content

    def decide(self, content: bytes, rounds: int) -> Verdict:
        """Issues were found in ``content`` after ``rounds`` correction rounds: another round,
        or the last resort (blocked, or the safe replacement, applied here)."""
        limit = self.settings["max_corrections"]
        if rounds < limit:
            return Verdict(prompt=correction_prompt(self.issues, content, rounds + 1, limit,
                                                    path=self.plan.relative))
        blocking = [issue for issue in self.issues if issue.blocking]
        if blocking:  # a rule, not bytes: no replacement makes it hold, so nothing is written
            return Verdict(blocking=blocking)
        repaired, replaced = safe_replacement(content, self.settings.get("safe_replacement", ""))
        self.fixed, self.replaced = repaired, len(replaced)
        self.remaining = validate_write(self.plugins, self.plan, repaired, dict(self.settings))
        return Verdict()

    def correct(self, content: bytes, reply: str) -> None:
        """The model's corrections (``L<line>: ...``) applied to ``content``."""
        corrections, problems = parse_corrections(reply)
        fixed = apply_corrections(content, corrections)
        self.fixed = fixed.content
        self._trace(Kind.VALIDATION_ISSUE, "corrections received", {
            "orion.corrections": len(corrections), "orion.unparsed": len(problems),
            "orion.out_of_range": list(fixed.out_of_range)})

    def write(self, content: bytes, *, state: dict[str, Any], state_dir: Path,
              session_id: str, context: WriteContext, aside: SetAside) -> Written:
        """The plan, executed once, atomically: a crash from the mark on is repaired at start
        with ``state`` (the journal's state) and what the write is to make."""
        state = {**state, "finalizing": self._finalizing()}
        mark(self.journal.directory, "finalizing")
        self.journal.flush(state)
        result = execute(self.plan, content, state_dir=state_dir, session_id=session_id)
        if context.incomplete:
            status = WriteStatus.INCOMPLETE
        elif aside.pending:
            status = WriteStatus.WRITTEN_WITH_SET_ASIDE
        else:
            status = WriteStatus.WRITTEN
        report = result.report
        if status is WriteStatus.INCOMPLETE:
            report += f" (incomplete: {context.incomplete_reason or 'the output was cut off'})"
        report += set_aside_report(aside, session_id, self.plan.relative)
        if self.replaced:
            report += f"; the safe replacement changed {self.replaced} place(s)"
        if self.remaining:
            shown = "; ".join(str(issue) for issue in self.remaining[:3])
            more = len(self.remaining) - 3
            report += (f"; {len(self.remaining)} issue(s) remain after "
                       f"{self.settings['max_corrections']} correction rounds: {shown}"
                       + (f" (and {more} more)" if more > 0 else ""))
        return Written(result, status, report)


    def _finalizing(self) -> dict[str, str | None]:
        """Enough to finish the job idempotently after a crash during the write: the target
        still has its pre-image (write it), or it has what this content makes of the
        pre-image (only clean up)."""
        target = self.plan.target
        before = target.read_bytes() if target.is_file() else None
        fixed = self.fixed
        return {"content_sha256": self.journal.sha256() if fixed is None
                else hashlib.sha256(fixed).hexdigest(),
                "before_sha256": hashlib.sha256(before).hexdigest() if before is not None
                else None}


def set_aside_report(aside: SetAside, session_id: str, relative: str) -> str:
    """``; 3 lines set aside, not written: part 1 (...) after DONE; ...``: what the report
    says of the text set aside, with the figures the user saw, and how to get it."""
    pending = aside.pending
    if not pending:
        return ""
    lines = sum(part.lines for part in pending)
    parts = "; ".join(f"{part.describe()} {part.why}" for part in pending)
    return (f"; {lines} line{'s' if lines != 1 else ''} set aside, not written: {parts}. "
            f"`orion sessions show {session_id[:8]}` prints them; if they belong in "
            f"{relative}, write them with WritePlanTool_begin")

