"""`orion check --fix` rewrites only charts inside the workspace (FS-17): a chart a plugin on
PYTHONPATH ships from outside it is named, never rewritten, and gets no `.bak` beside it.
`orion migrate FILE` rewrites the file the user named, wherever it is."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OLD_CHART = REPO / "tests" / "data" / "write_session_before_contracts.yaml"

SHIPS_OLD_CHART = """\
    from pathlib import Path
    from orion import hookimpl

    @hookimpl
    def register_statecharts(register):
        register(Path(__file__).with_name("write_session.yaml"))
    """


def _site(root: Path) -> Path:
    """A real unpacked distribution that ships a chart written before contracts."""
    info = root / "acme_orion-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-orion\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[orion]\nacme_orion = acme_orion\n")
    (root / "acme_orion.py").write_text(textwrap.dedent(SHIPS_OLD_CHART))
    shutil.copyfile(OLD_CHART, root / "write_session.yaml")
    return root


def _orion(*args: str, site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site), os.environ.get("PYTHONPATH", "")])}
    env.pop("ORION_LOAD_PLUGINS", None)
    return subprocess.run([sys.executable, "-m", "orion", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


def test_check_fix_never_rewrites_a_chart_a_plugin_ships_from_outside(tmp_path):
    site = _site(tmp_path / "site")
    chart = site / "write_session.yaml"
    before = chart.read_bytes()
    workspace = tmp_path / "empty"
    workspace.mkdir()
    result = _orion("check", "--fix", site=site, cwd=workspace)
    assert chart.read_bytes() == before
    assert not chart.with_name("write_session.yaml.bak").exists()
    said = " ".join(result.stderr.split())
    assert f"{chart} is not in the workspace" in said, said
    assert list(workspace.iterdir()) == []


def test_migrate_rewrites_the_chart_the_user_names_wherever_it_is(tmp_path):
    site = _site(tmp_path / "site")
    chart = site / "write_session.yaml"
    workspace = tmp_path / "empty"
    workspace.mkdir()
    result = _orion("migrate", str(chart), site=site, cwd=workspace)
    assert result.returncode == 0, result.stderr
    assert "contract:\n  version: 3" in chart.read_text() or "version: 3" in chart.read_text()
