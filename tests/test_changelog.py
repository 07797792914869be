"""The changelog moves with the version: its newest release is the version Orion says it is,
and each release speaks to the three audiences (Keep a Changelog)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import orion

ROOT = Path(__file__).resolve().parent.parent
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", re.M)


def test_the_newest_release_is_the_version_orion_says_it_is() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert text.index("## [Unreleased]") < text.index("\n## [0"), "[Unreleased] comes first"
    releases = RELEASE.findall(text)
    assert releases, "no release heading"
    newest = releases[0][0]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert newest == project["version"] == orion.__version__
    dates = [date for _, date in releases]
    assert dates == sorted(dates, reverse=True), "releases newest first"


def test_each_release_speaks_to_chart_authors_plugin_authors_and_users() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    parts = RELEASE.split(text)
    # parts: [head, version, date, body, version, date, body, ...]; 0.1.0 is the first release.
    for version, _date, body in zip(parts[1::3], parts[2::3], parts[3::3]):
        if version == "0.1.0":
            continue
        for audience in ("For chart authors", "For plugin authors", "For users"):
            assert f"### {audience}" in body, f"{version} has no section {audience!r}"
