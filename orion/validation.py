"""Content validation: plugins report issues, each with a position."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orion.plugins import PluginManager


@dataclass(frozen=True)
class Issue:
    line: int
    column: int
    code: str
    message: str
    context: str = ""

    def __str__(self) -> str:
        return f"{self.line}:{self.column}: {self.code}: {self.message}"


@dataclass(frozen=True)
class ValidationRequest:
    path: str
    content: bytes
    settings: Mapping[str, Any] = field(default_factory=dict)


def collect_issues(pm: PluginManager, request: ValidationRequest) -> list[Issue]:
    """All issues from every validator, in content order."""
    issues: list[Issue] = []
    for found in pm.hook.validate_content(request=request):
        if not found:
            continue
        for issue in [found] if isinstance(found, (Issue, str, bytes)) else found:
            if not isinstance(issue, Issue):
                raise TypeError(f"validate_content returned {type(issue).__name__} "
                                f"{issue!r:.60}, not an Issue")
            issues.append(issue)
    return sorted(issues, key=lambda i: (i.line, i.column, i.code))
