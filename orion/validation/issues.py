"""The issues validators report, and their collection from the two validation hooks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orion.hooks.manager import PluginManager
    from orion.validation.streamed import StreamedLines


@dataclass(frozen=True)
class Issue:
    line: int
    column: int
    code: str
    message: str
    context: str = ""
    #: A rule the content breaks (a licence header it lacks), not bytes a repair could take
    #: out: the model is asked to correct it like any issue, but when it is still there after
    #: the last correction round the target is not written (docs/validation.md).
    blocking: bool = False

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.code}: {self.message}"


@dataclass(frozen=True)
class ValidationRequest:
    path: str
    content: bytes
    settings: Mapping[str, Any] = field(default_factory=dict)


def collect_issues(pm: PluginManager, request: ValidationRequest, *,
                   streamed: StreamedLines | None = None) -> list[Issue]:
    """All issues from every validator, in content order. ``streamed`` holds what the line
    checks found in the content's first pieces while it streamed; only the rest is checked."""
    if streamed is None:
        issues = gather_issues(pm.hook.validate_lines(request=request), "validate_lines")
    else:
        issues = streamed.issues_of(request)
    issues += gather_issues(pm.hook.validate_content(request=request), "validate_content")
    return sorted(issues, key=lambda i: (i.line, i.column, i.code))


def gather_issues(results: Iterable[Any], hook: str) -> list[Issue]:
    issues: list[Issue] = []
    for found in results:
        if not found:
            continue
        for issue in [found] if isinstance(found, (Issue, str, bytes)) else found:
            if not isinstance(issue, Issue):
                raise TypeError(f"{hook} returned {type(issue).__name__} {issue!r:.60}, "
                                "not an Issue")
            issues.append(issue)
    return issues
