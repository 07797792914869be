"""The fast lane follows measurements: a test measured at SLOW_S or more (tests/durations.json)
is left out of ``make test-fast``, and ``make durations`` measures the tests again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYOUT = "tests/test_layout.py"
HEAVY = f"{LAYOUT}::test_every_package_is_in_the_distribution"
LIGHT = f"{LAYOUT}::test_only_the_public_face_and_the_leaves_are_top_level_modules"


def pytest_in_checkout(durations: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["ORION_TEST_DURATIONS"] = str(durations)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_a_test_measured_slow_is_left_out_of_the_fast_lane(tmp_path: Path) -> None:
    durations = tmp_path / "durations.json"
    durations.write_text(json.dumps({HEAVY: 5.0, LIGHT: 0.01}), encoding="utf-8")
    done = pytest_in_checkout(durations, "--collect-only", "-q", "-m", "not slow", LAYOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert LIGHT in done.stdout and HEAVY not in done.stdout, done.stdout
    done = pytest_in_checkout(durations, "--collect-only", "-q", "-m", "slow", LAYOUT)
    assert HEAVY in done.stdout and LIGHT not in done.stdout, done.stdout


@pytest.mark.slow
def test_store_durations_measures_what_ran_and_keeps_the_rest(tmp_path: Path) -> None:
    durations = tmp_path / "durations.json"
    other = "tests/test_migrate.py::test_not_run_here"
    durations.write_text(json.dumps({HEAVY: 5.0, other: 1.5}), encoding="utf-8")
    done = pytest_in_checkout(durations, "-q", "--store-durations", LAYOUT)
    assert done.returncode == 0, done.stdout + done.stderr
    kept = json.loads(durations.read_text(encoding="utf-8"))
    # The layout tests ran in far less than 50 ms: measured again, they leave the file.
    assert kept == {other: 1.5}, kept


def test_the_durations_file_is_json_of_test_ids_and_seconds() -> None:
    measured = json.loads((ROOT / "tests" / "durations.json").read_text(encoding="utf-8"))
    assert measured and all(isinstance(v, (int, float)) and v >= 0 for v in measured.values())
    assert all(k.startswith("tests/") and "::" in k for k in measured), "not pytest node ids"
