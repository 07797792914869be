"""docs/customize.md, followed as written: from an empty directory to a passing feature run.

Every block of the tutorial runs, in order, in a fresh directory: ``# file:`` blocks are
written, ``sh`` blocks run in bash, ``text`` blocks are the output the command before them
must print (``...`` stands for any text). The project is installed for real (``pip install
-e .``, offline, into a virtual environment of its own that sees this one's packages), so its
plugin is loaded through its entry point, as a team's would be.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "customize.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)
FILE = re.compile(r"^# file: (\S+)\n")


def tutorial_blocks() -> list[tuple[str, str]]:
    text = DOCS.read_text(encoding="utf-8")
    tutorial = text[:text.index("\n## Merge rules")]
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(tutorial)]


def test_the_tutorial_has_files_commands_and_expected_output():
    kinds = [kind for kind, _ in tutorial_blocks()]
    assert kinds.count("sh") >= 3 and "text" in kinds
    written = [FILE.match(body).group(1) for kind, body in tutorial_blocks()
               if kind not in ("sh", "text")]
    assert written == ["pyproject.toml", "acme_review/write_session.yaml",
                       "acme_review/__init__.py", "features/review.feature",
                       "tests/test_review.py", ".github/workflows/orion.yml"]


def environment(tmp_path: Path) -> dict[str, str]:
    """A virtual environment of its own (where ``pip install -e .`` goes) that sees Orion and
    the test tools installed here, with ``orion`` and ``pytest`` commands."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], check=True, capture_output=True, text=True)
    # addsitedir, not a plain path: the packages there may be editable installs (.pth files)
    outer = sysconfig.get_paths()["purelib"]
    (Path(site.stdout.strip()) / "outer.pth").write_text(
        f"import site; site.addsitedir({outer!r})\n")
    for command, module in (("orion", "orion"), ("pytest", "pytest")):
        script = venv / "bin" / command
        script.write_text(f"#!{python}\nimport runpy\nrunpy.run_module({module!r}, "
                          "run_name='__main__')\n")
        script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORION_", "PYTEST_"))}
    env.update({"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
                "VIRTUAL_ENV": str(venv),
                # offline: Orion and setuptools are there already
                "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "PIP_NO_DEPS": "1",
                "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    return env


def expected_lines(sample: str) -> list[re.Pattern[str]]:
    return [re.compile(".*".join(map(re.escape, line.split("..."))))
            for line in sample.splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="the tutorial's commands are POSIX sh")
def test_the_tutorial_runs_from_an_empty_directory_to_a_passing_feature_run(tmp_path):
    env = environment(tmp_path)
    cwd = tmp_path / "work"
    cwd.mkdir()
    last = ""
    for kind, body in tutorial_blocks():
        if kind == "text":
            for pattern in expected_lines(body):
                assert any(pattern.fullmatch(line) for line in last.splitlines()), (
                    f"docs/customize.md promises a line like {pattern.pattern!r}; the command "
                    f"printed:\n{last}")
            continue
        if kind != "sh":
            match = FILE.match(body)
            assert match, f"a {kind} block of the tutorial without '# file:': {body[:60]!r}"
            target = cwd / match.group(1)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body[match.end():], encoding="utf-8")
            continue
        marker = tmp_path / "cwd"
        script = f"set -e\n{body}\npwd > {marker}\n"
        proc = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=300)
        last = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"$ {body}\n{textwrap.indent(last, '  ')}"
        cwd = Path(marker.read_text().strip())
    # The run ended with the team's feature passing, its plugin loaded by its entry point.
    assert re.search(r"\b1 passed\b", last), last
    assert (cwd / "acme_review" / "__init__.py").exists()


#: What a copy of Orion's source leaves out: state, caches and builds of this checkout.
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "reports", "*.egg-info",
                                    "__pycache__", ".pytest_cache", ".hypothesis", ".orion")


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="the CI steps are POSIX sh")
def test_the_ci_steps_pass_in_an_empty_environment(tmp_path):
    """The tutorial's CI workflow, run line by line as a fresh runner would: a new virtual
    environment with nothing but pip, Orion installed from ``ORION_SOURCE`` (a copy of this
    source tree), then the project, then ``orion check`` and the features. Orion's own
    dependencies come from the package index, as on a runner."""
    project = tmp_path / "acme-review"
    workflow = None
    for kind, body in tutorial_blocks():
        match = FILE.match(body) if kind not in ("sh", "text") else None
        if match:
            target = project / match.group(1)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body[match.end():], encoding="utf-8")
            if match.group(1).startswith(".github/workflows/"):
                workflow = yaml.safe_load(body[match.end():])
    assert workflow is not None, "docs/customize.md has no CI workflow"
    [job] = workflow["jobs"].values()
    steps = [step["run"] for step in job["steps"] if "run" in step]
    assert steps and "ORION_SOURCE" in job["env"]
    source = tmp_path / "orion-source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    venv = tmp_path / "runner"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ORION_", "PYTEST_", "PIP_", "VIRTUAL_ENV", "PYTHON"))}
    env.update({"PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
                "ORION_SOURCE": source.as_uri(), "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    output = ""
    for run in steps:
        proc = subprocess.run(["bash", "-e", "-c", run], cwd=project, env=env,
                              capture_output=True, text=True, timeout=600)
        output = proc.stdout + proc.stderr
        assert proc.returncode == 0, f"$ {run}\n{textwrap.indent(output, '  ')}"
    assert re.search(r"\b1 passed\b", output), output
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "list"], env=env,
                               capture_output=True, text=True, check=True).stdout
    assert "orion-statecharts" in installed and "acme-review" in installed
