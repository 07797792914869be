"""Validating a write: the content for a create or an overwrite, the file after the edit for
the other operations (a fragment such as an indented method is rarely a valid file alone)."""

from __future__ import annotations

from typing import Any

from orion.errors import OrionError
from orion.validation import Issue, StreamedLines, ValidationRequest, collect_issues
from orion.write_session.operations import apply_operation
from orion.write_session.plan import CheckedPlan, Operation, line_ending, match_plan, split_bom
from orion.write_session.repair import LINE_BREAK, line_spans, text_lines

def validate_write(pm: Any, checked: CheckedPlan, content: bytes,
                   settings: dict[str, Any] | None = None, *,
                   streamed: StreamedLines | None = None) -> list[Issue]:
    """The issues of ``content`` for ``checked``'s write, with lines and columns of the
    content (what the model wrote, and what its ``L<line>:`` corrections refer to).

    create and overwrite: the content is the file, and is validated as it is. The edits
    (append, insert, replace_block, replace_all): the content is a fragment, which on its own
    is rarely a valid Python, JSON or YAML file. The file as it will be after the edit is
    validated instead; an issue on a line of the content is moved to that line of the content,
    an issue elsewhere counts only if the file did not have it before the edit (a bracket the
    content leaves open is reported further down) and is shown on the content's nearest line,
    saying where it is in the file.

    ``streamed``: the line checks already run on ``content``'s first pieces as it streamed
    (for a create or an overwrite)."""
    settings = dict(settings or {})
    path = checked.relative
    if checked.plan.operation in (Operation.CREATE, Operation.OVERWRITE):
        return collect_issues(pm, ValidationRequest(path, content, settings), streamed=streamed)
    target = checked.target
    try:
        existing = target.read_bytes()
        after = apply_operation(checked, existing, content)
        start = _content_offset(checked, existing, content)
    except (OSError, OrionError):
        # The file changed under the plan: the write will say so. Judge the content alone.
        return collect_issues(pm, ValidationRequest(path, content, settings))
    found = collect_issues(pm, ValidationRequest(path, after, settings))
    if not found:
        return []
    first = len(LINE_BREAK.findall(after, 0, start)) + 1  # the content's first line in after
    count = max(1, len(line_spans(content)))
    line_begin = max(after.rfind(b"\n", 0, start), after.rfind(b"\r", 0, start)) + 1
    shift = len(after[line_begin:start].decode("utf-8", "replace"))  # replace_all: mid-line
    lines = text_lines(after)
    before: set[tuple[str, str, str]] | None = None
    issues: list[Issue] = []
    for issue in found:
        if first <= issue.line < first + count:
            line = issue.line - first + 1
            column = issue.column - shift if line == 1 else issue.column
            issues.append(Issue(line, max(1, column), issue.code, issue.message,
                                issue.context, issue.blocking))
            continue
        if before is None:
            old = collect_issues(pm, ValidationRequest(path, existing, settings))
            old_lines = text_lines(existing)
            before = {(i.code, i.message, old_lines[i.line - 1] if 0 < i.line <= len(old_lines)
                       else "") for i in old}
        text = lines[issue.line - 1] if 0 < issue.line <= len(lines) else ""
        if (issue.code, issue.message, text) in before:
            continue  # the file had it before this edit
        line = 1 if issue.line < first else count
        issues.append(Issue(line, 1, issue.code, f"{issue.message} (line {issue.line} of "
                            f"{path} after the edit)", issue.context, issue.blocking))
    return sorted(issues, key=lambda i: (i.line, i.column, i.code))


def _content_offset(checked: CheckedPlan, existing: bytes, content: bytes) -> int:
    """Where the (first copy of the) content starts in the file after the edit, in bytes; the
    same rules as :func:`~orion.write_session.operations.apply_operation`."""
    plan = checked.plan
    op = plan.operation
    bom, body = split_bom(existing)
    gap = len(line_ending(body)) if body and not body.endswith(b"\n") and content else 0
    if op is Operation.APPEND:
        return len(existing) + gap
    matches = match_plan(plan, body, checked.relative)
    if op is Operation.INSERT:
        marker = matches["location_marker"]
        at = marker.positions[0]
        if plan.position == "before":
            return len(bom) + body.rfind(b"\n", 0, at) + 1
        end = body.find(b"\n", at + len(marker.needle) - 1)
        return len(bom) + (end + 1 if end != -1 and end + 1 < len(body) else len(body) + gap)
    if op is Operation.REPLACE_BLOCK:
        start = matches["start_marker"]
        end = body.find(b"\n", start.positions[0] + len(start.needle) - 1)
        return len(bom) + (len(body) if end == -1 else end + 1)
    return len(bom) + matches["search"].positions[0]  # replace_all
