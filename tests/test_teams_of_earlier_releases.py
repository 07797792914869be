"""Team projects written against an earlier release run unchanged: each is a pytest project of
its own under ``tests/teams/`` (its rootdir, conftest, plugin, chart and features), run in a
pytest process of its own. Every scenario passes; the old names it uses warn (shown, never
errors), each warning naming the new name and the release that removes the old one."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

TEAMS = Path(__file__).resolve().parent / "teams"

#: Each project, its scenarios, and the deprecations it must be told about.
PROJECTS = {
    "v0_1/acme_review": (10, ["Lifecycle.owner is now .host (renamed in 0.1.0); .owner goes in "
                              "0.3.0",
                              "WriteSessionView.plan is now .file (renamed in 0.2.0)",
                              "WriteSessionView.result is now .written",
                              "ContextRequest.runtime is now .host",
                              "'runtime' is now called 'host'",
                              "orion.plugins moved to orion.hooks.manager"]),
    "v0_1/beta_docs": (5, ["WriteSessionView.plan is now .file (renamed in 0.2.0); .plan goes "
                           "in 0.3.0"]),
}


def run_project(directory: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTEST_ADDOPTS", "ORION_LOAD_PLUGINS")}
    env["PYTHONWARNINGS"] = "default::DeprecationWarning"
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(directory), f"--rootdir={directory}",
         "-p", "no:cacheprovider", "-q", "-W", "default::DeprecationWarning"],
        capture_output=True, text=True, env=env, cwd=directory, timeout=600)


def test_the_projects_are_as_their_teams_wrote_them() -> None:
    for sums in TEAMS.glob("*/SHA256SUMS"):
        for line in sums.read_text().splitlines():
            digest, name = line.split(maxsplit=1)
            path = sums.parent / name
            assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, (
                f"{path.relative_to(TEAMS)} changed: a team project of an earlier release "
                "runs as its team wrote it")


@pytest.mark.parametrize("project", sorted(PROJECTS))
def test_a_team_project_of_an_earlier_release_passes_unchanged(project: str) -> None:
    scenarios, told = PROJECTS[project]
    result = run_project(TEAMS / project)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert f"{scenarios} passed" in output, output
    missing = [warning for warning in told if warning not in output]
    assert not missing, f"the team is not told of {missing}:\n{output}"
    assert "DeprecationWarning" in output
