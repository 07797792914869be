"""What a feature adds to the report of ``orion run``: the ``report_run`` hook's answer.

The runner knows no feature: each plugin that has something to say about a run (the files its
writes made, its part of the JSON report, what makes the run fail) answers ``report_run`` with
a :class:`RunReport`, and the runner puts the answers together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FileReport:
    """A file the run wrote, as its last write left it (a file written several times is one
    entry, in the order of its last write)."""

    path: str
    bytes: int
    sha256: str


@dataclass(frozen=True)
class RunReport:
    """One plugin's part of a run's report.

    ``sections`` are keys of ``orion run --json``'s object and their JSON-safe values (the
    write sessions fill ``sessions``, plan mode ``plan``); ``files`` the files written, each
    once, in the order of their last write; ``problems`` what failed, one sentence each: any problem fails the
    run (exit code 1), and the sentences are its ``errors``."""

    sections: Mapping[str, Any] = field(default_factory=dict)
    files: Sequence[FileReport] = ()
    problems: Sequence[str] = ()
