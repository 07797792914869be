"""An overlay is held to the chart limits before it is merged, and merging costs about the
size of the overlay (bench/bench_statechart_load.py measures it; tests never time).

A 50,001-state overlay is refused on its own, at its own line: the merge (whose cost grows
with the overlay) never starts, and the finding counts the overlay's states, not the merged
chart's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from orion.statechart.checks import MAX_STATES

ORION = str(Path(sys.executable).parent / "orion")


def _overlay(states: int) -> str:
    lines = ["extends: write_session", "states:", "  session_active:", "    states:"]
    lines += [f"      s{i}: {{tags: [open]}}" for i in range(states)]
    return "\n".join(lines) + "\n"


def _check(workspace: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORION_")}
    return subprocess.run([ORION, "check", "--json"], cwd=workspace, env=env,
                          capture_output=True, text=True, timeout=600)


def test_an_overlay_past_the_state_limit_is_refused_before_it_is_merged(tmp_path):
    (tmp_path / "big.yaml").write_text(_overlay(MAX_STATES + 1), encoding="utf-8")
    (tmp_path / "orion.yaml").write_text("statecharts: [big.yaml]\n", encoding="utf-8")
    checked = _check(tmp_path)
    assert checked.returncode == 1, checked.stderr
    assert "Traceback" not in checked.stderr
    (entry,) = [e for e in json.loads(checked.stdout) if e["path"] == "big.yaml"]
    (error,) = entry["errors"]
    assert error["code"] == "SC003"
    assert error["message"] == f"the chart has more than {MAX_STATES} states"
    # The overlay's own 50,001st state (session_active, then s0 ... s49999 on line 50004),
    # not the merged chart's, whose count starts with the write session's own states.
    assert (error["line"], error["column"]) == (50004, 7), error


def test_an_overlay_within_the_limits_still_merges_and_passes(tmp_path):
    (tmp_path / "small.yaml").write_text(
        _overlay(3) + "transitions:\n  insert:\n" + "".join(
            f"    - {{trigger: go{i}, source: session_active.awaiting_content, "
            f"dest: session_active.s{i}}}\n" for i in range(3)), encoding="utf-8")
    (tmp_path / "orion.yaml").write_text("statecharts: [small.yaml]\n", encoding="utf-8")
    checked = _check(tmp_path)
    assert checked.returncode == 0, checked.stdout
