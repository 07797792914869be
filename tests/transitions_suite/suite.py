"""Fetch ``transitions``' own tests from the sdist of the installed version and run the
hierarchical ones against the library or against Orion's machine (see ``engine.py``).

``python -m tests.transitions_suite.suite library|orion`` prints one line per test:
``passed|failed <test id>``."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The tests of the library's hierarchical machine (test_nesting.py also imports the plain
#: machine's ``TestTransitions``, which never builds a hierarchical one: deselected).
SELECTION = ("tests/test_nesting.py", "tests/test_reuse.py",
             "tests/test_enum.py::TestNestedStateEnums",
             "--deselect", "tests/test_nesting.py::TestTransitions")
#: What pip says when it cannot reach the package index at all.
OFFLINE_SIGNS = ("NewConnectionError", "Temporary failure in name resolution",
                 "Name or service not known", "Network is unreachable", "ConnectTimeout",
                 "No address associated with hostname")


class Offline(Exception):
    """The sdist is neither given nor downloadable: there is no network."""


def sdist_tests(workdir: Path) -> Path:
    """The sdist's ``tests`` directory, extracted under ``workdir`` (its ``transitions`` package
    is left out, so the tests import the installed library). ``ORION_TRANSITIONS_SDIST`` names a
    downloaded archive; otherwise pip downloads it."""
    release = version("transitions")
    archive = os.environ.get("ORION_TRANSITIONS_SDIST")
    if not archive:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps",
             "--no-binary", ":all:", f"transitions=={release}", "-d", str(workdir)],
            capture_output=True, text=True, timeout=600)
        found = sorted(workdir.glob(f"transitions-{release}.tar.gz"))
        if done.returncode != 0 or not found:
            output = done.stdout + done.stderr
            if any(sign in output for sign in OFFLINE_SIGNS):
                raise Offline(f"pip cannot reach the package index to download "
                              f"transitions=={release}'s sdist")
            raise RuntimeError(f"pip download transitions=={release} failed:\n{output}")
        archive = str(found[0])
    root = workdir / "sdist"
    with tarfile.open(archive) as tar:
        prefix = f"transitions-{release}/"
        members = [m for m in tar.getmembers()
                   if m.name.startswith(prefix + "tests/") or m.name == prefix + "conftest.py"]
        # The "data" filter (no links out, no devices) where this Python has it (3.11.4+).
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(root, members=members, **safe)  # type: ignore[arg-type]
    return root / f"transitions-{release}"


def run(project: Path, engine: str, workdir: Path) -> dict[str, bool]:
    """Each selected test's id and whether it passed, with ``engine`` (library or orion)."""
    report = workdir / f"{engine}.xml"
    # The outer run's pytest settings (PYTEST_ADDOPTS, xdist's worker) are not the suite's.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(ORION_SUITE_ENGINE=engine,
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "engine", "-p", "no:cacheprovider",
         "-o", "addopts=", "-o", "filterwarnings=", "--rootdir", str(project),
         f"--junitxml={report}", *SELECTION],
        cwd=project, env=env, capture_output=True, text=True, timeout=1200)
    results: dict[str, bool] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        if case.find("skipped") is not None:
            continue
        name = f"{case.get('classname')}::{case.get('name')}"
        results[name] = case.find("failure") is None and case.find("error") is None
    return results


def main() -> None:
    engine = sys.argv[1] if len(sys.argv) > 1 else "orion"
    with tempfile.TemporaryDirectory() as tmp:
        project = sdist_tests(Path(tmp))
        results = run(project, engine, Path(tmp))
    for name, ok in sorted(results.items()):
        print("passed" if ok else "failed", name)
    print(f"# {sum(results.values())} of {len(results)} passed with {engine}")


if __name__ == "__main__":
    main()
