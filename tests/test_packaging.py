"""The wheel ships the statecharts and built-in plugins, and works without the source tree."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest


@pytest.mark.slow
def test_wheel_contains_statecharts_plugins_and_the_console_script(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"orion_statecharts/write_session.yaml", "orion_statecharts/plan_mode.yaml",
            "orion_statecharts/statechart.schema.json",
            "orion_statecharts/pipeline.yaml", "orion_examples/demo.yaml",
            "orion_plugins/finalization.py", "orion_plugins/turn_systems.py",
            "orion/py.typed"} <= names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "orion = orion.cli:main" in text


@pytest.mark.slow
def test_orion_check_from_the_unpacked_wheel_finds_its_own_statecharts(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # -S keeps this venv's .pth files (an editable install) out: only the wheel's code and the
    # third-party dependencies are importable.
    deps = sysconfig.get_paths()["purelib"]
    proc = subprocess.run(
        [sys.executable, "-S", "-c", "import sys; from orion.cli import main; "
                                     "sys.argv = ['orion', 'check']; main()"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={"PYTHONPATH": f"{site}:{deps}", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert f"{site}/orion_statecharts/write_session.yaml" in proc.stderr.replace("\n", "")
    assert f"{site}/orion_statecharts/plan_mode.yaml" in proc.stderr.replace("\n", "")
