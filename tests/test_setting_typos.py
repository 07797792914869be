"""A setting's name misspelled is an error naming the setting meant, wherever it is written: in
an overlay (``idle_msec:`` for ``idle_ms``, with or without the ``type`` a new setting would
need: nothing would read it and the timeout would silently stay 2000 ms) and in orion.yaml's
``settings:``. A new setting with a name of its own is still an overlay's to add."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MEANT = "'write_session' has no setting 'idle_msec'; did you mean 'idle_ms'?"


def check(workspace: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ORION_LOAD_PLUGINS"}
    return subprocess.run([sys.executable, "-m", "orion", "check"], capture_output=True,
                          text=True, cwd=workspace, env=env, timeout=120)


def overlay(tmp_path: Path, settings: str) -> Path:
    (tmp_path / "lc").mkdir()
    (tmp_path / "orion.yaml").write_text("statecharts: [lc/ws.yaml]\n")
    (tmp_path / "lc" / "ws.yaml").write_text(f"extends: write_session\nsettings:\n{settings}")
    return tmp_path


@pytest.mark.parametrize("fields", ["    default: 500\n", "    type: int\n    default: 500\n"],
                         ids=["as-written", "with-type-added"])
def test_a_misspelled_setting_in_an_overlay_names_the_setting_meant(tmp_path: Path,
                                                                    fields: str) -> None:
    result = check(overlay(tmp_path, "  idle_msec:\n" + fields))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert f"lc/ws.yaml:3:3: settings.idle_msec: {MEANT}" in output
    assert "missing required field" not in output and "ok lc/ws.yaml" not in output


def test_a_new_setting_with_a_name_of_its_own_is_added(tmp_path: Path) -> None:
    result = check(overlay(tmp_path, "  review_timeout_ms:\n    type: int\n    default: 500\n"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok lc/ws.yaml" in result.stdout + result.stderr


def test_a_misspelled_setting_in_orion_yaml_names_the_setting_meant(tmp_path: Path) -> None:
    (tmp_path / "orion.yaml").write_text("settings:\n  write_session:\n    idle_msec: 500\n")
    result = check(tmp_path)
    assert result.returncode == 1
    assert f"orion.yaml:3:5: statechart {MEANT}" in result.stdout + result.stderr
