"""README.md's snippets work after ``pip install``, outside the checkout.

A new virtual environment is made in a temporary directory, Orion's wheel (what
``pip install <checkout>`` builds and installs) is installed into it, and every command of the
README's ``sh`` blocks and every ``python`` block runs with that environment's ``orion`` and
``python``, from a directory of its own: no checkout on the path, no ``examples/`` or
``statecharts/`` beside it. The snippets are read from README.md, so a snippet added there is
tested, and one that needs the checkout fails.

What the test does instead of a snippet, and why:

- ``make ...`` (the checkout's own targets) and ``git clone`` are not run: they are about the
  checkout, not an installed Orion.
- ``pip install ...`` is the wheel's installation above. It is offline: the third-party
  dependencies come from the test's own environment (linked in through a ``.pth`` file,
  without any ``orion*`` package of that environment).
- ``orion chat --base-url URL`` talks to a loopback OpenAI-compatible server
  (``tests/sse_server.py``) in place of the URL, with ``hello`` and ``/quit`` as the user's
  lines.
- ``my_lifecycle.yaml``, "yours" in the README, is a small valid statechart written here.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import sysconfig
import textwrap
import venv
from dataclasses import dataclass
from pathlib import Path

import pytest
from sse_server import SSEServer, stream, text_stream

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
NOT_RUN = ("make ", "git clone ")
INSTALL = "pip install "

MY_LIFECYCLE = """\
statechart: my_lifecycle
version: 1
description: A task that is started and then finished.
initial: idle
states:
  idle:
    description: Not started.
  working:
    description: Started.
  done:
    final: true
transitions:
  - trigger: start
    source: idle
    dest: working
  - trigger: finish
    source: working
    dest: done
"""


@dataclass(frozen=True)
class Snippet:
    lang: str  # "sh": one command line; "python": a whole block
    code: str

    @property
    def id(self) -> str:
        first = self.code.strip().splitlines()[0]
        return f"{self.lang}: {first[:60]}"


def readme_blocks() -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in BLOCK.findall(README.read_text(encoding="utf-8"))]


def snippets() -> list[Snippet]:
    found = []
    for lang, body in readme_blocks():
        if lang == "python":
            found.append(Snippet("python", body))
        elif lang == "sh":
            for line in body.splitlines():
                command = line.split(" #", 1)[0].strip() if not line.startswith("#") else ""
                if command and not command.startswith(NOT_RUN):
                    found.append(Snippet("sh", command))
    return found


SNIPPETS = snippets()


def test_the_readme_has_snippets_to_run():
    # The guard of the parametrized test below: a README whose blocks the regular expression
    # no longer finds would otherwise pass with nothing run.
    langs = [s.lang for s in SNIPPETS]
    assert langs.count("python") >= 1 and langs.count("sh") >= 5
    assert any(s.code.startswith(INSTALL) for s in SNIPPETS)
    assert any(s.code.startswith("orion run ") for s in SNIPPETS)


# -- the environment -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Installed:
    root: Path
    bin: Path
    work: Path  # where the snippets run
    env: dict[str, str]

    def run(self, args: list[str] | str, *, input: str | None = None,
            shell: bool = False, extra_env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess:
        return subprocess.run(args, shell=shell, executable="/bin/bash" if shell else None,
                              cwd=self.work, env={**self.env, **(extra_env or {})},
                              input=input, capture_output=True, text=True, timeout=300)


def _dependencies_dir(into: Path) -> Path:
    """This environment's third-party packages, as links, without Orion's own."""
    into.mkdir()
    purelib = Path(sysconfig.get_paths()["purelib"])
    for entry in purelib.iterdir():
        name = entry.name.lower()
        if name.startswith(("orion", "_orion", "__editable__", "team_review", "__pycache__")) \
                or name.endswith(".pth"):
            continue
        (into / entry.name).symlink_to(entry)
    return into


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Installed:
    root = tmp_path_factory.mktemp("readme")
    assert not root.resolve().is_relative_to(ROOT)
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root / "venv")
    python = root / "venv" / "bin" / "python"
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--quiet", "--no-deps", "--no-index", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = subprocess.run([str(python), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    deps = _dependencies_dir(root / "deps")
    (Path(site) / "_readme_test_dependencies.pth").write_text(f"{deps}\n")
    work = root / "work"
    work.mkdir()
    (work / "my_lifecycle.yaml").write_text(MY_LIFECYCLE)
    keep = {k: v for k, v in os.environ.items()
            if k in ("LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")}
    env = {**keep, "PATH": f"{root / 'venv' / 'bin'}:/usr/bin:/bin", "HOME": str(root),
           "PYTHONDONTWRITEBYTECODE": "1"}
    return Installed(root, root / "venv" / "bin", work, env)


@pytest.mark.slow
def test_orion_comes_from_the_new_environment_not_the_checkout(installed):
    proc = installed.run(["python", "-c", "import orion, orion_plugins, orion_statecharts, "
                                          "orion_examples, sys; print(orion.__file__); "
                                          "print(orion_examples.__file__)"])
    assert proc.returncode == 0, proc.stderr
    for path in proc.stdout.split():
        assert Path(path).is_relative_to(installed.root / "venv"), path
        assert not Path(path).resolve().is_relative_to(ROOT), path
    which = installed.run("command -v orion", shell=True)
    assert which.stdout.strip() == str(installed.bin / "orion")


# -- the snippets -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.id for s in SNIPPETS])
def test_readme_snippet_runs_after_pip_install(installed, snippet):
    if snippet.lang == "python":
        proc = installed.run(["python", "-c", snippet.code])
        assert proc.returncode == 0, proc.stderr
        assert "session_active.awaiting_done_or_more_content" in proc.stdout
        return
    command = snippet.code
    if command.startswith(INSTALL):
        # Done by the fixture; what the README installs must be what is there.
        proc = installed.run(["python", "-c", "import importlib.metadata as m; "
                                              "print(m.version('orion-statecharts'))"])
        assert proc.returncode == 0, proc.stderr
        assert "orion-statecharts" in command or "./orion" in command
        return
    if command.startswith("orion chat "):
        run_chat(installed, command)
        return
    proc = installed.run(command, shell=True)
    assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    words = shlex.split(command)
    if words[:2] == ["orion", "check"]:
        assert "failed" not in proc.stderr
        assert proc.stderr.count("ok ") >= (1 if len(words) > 2 else 2)
        if len(words) == 2:  # the built-ins, from the installed package
            assert str(installed.root / "venv") in proc.stderr.replace("\n", "")
    elif words[:2] == ["orion", "diagram"]:
        assert proc.stdout.startswith("stateDiagram-v2")
    elif words[:2] == ["orion", "run"]:
        assert proc.stderr.rstrip().endswith("ok")
    elif words[:2] == ["orion", "demo"]:
        assert proc.stdout.startswith("stateDiagram-v2")


def run_chat(installed: Installed, command: str) -> None:
    url = re.search(r"--base-url (\S+)", command)
    assert url, command
    with SSEServer([stream(text_stream("Hello from the endpoint."))]) as server:
        proc = installed.run(command.replace(url.group(1), server.base_url), shell=True,
                             input="hello\n/quit\n", extra_env={"OPENAI_API_KEY": "test-key"})
    assert proc.returncode == 0, proc.stderr
    assert "Hello from the endpoint." in proc.stdout
    assert server.requests[0].body["messages"][-1] == {"role": "user", "content": "hello"}


@pytest.mark.slow
def test_the_snippets_fail_where_the_checkout_is_needed(installed):
    # What the README used to say, before it loaded charts by name and ran shipped examples:
    # outside a checkout both fail, which is what the test above would catch.
    old = installed.run('orion run examples/tools.yaml --workspace "$(mktemp -d)"', shell=True)
    assert old.returncode == 2 and "neither a file nor a shipped example" in old.stderr
    code = textwrap.dedent("""\
        from orion.statechart import load_definition
        load_definition("statecharts/write_session.yaml")
        """)
    proc = installed.run(["python", "-c", code])
    assert proc.returncode == 1 and "StatechartError" in proc.stderr


def test_the_readme_names_the_system_packages_make_test_installs() -> None:
    """Every package the Makefile's ``apt-get install``s is named in the README."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    packages = set(re.findall(r"apt-get install -y -qq ([\w-]+)", makefile))
    readme = README.read_text(encoding="utf-8")
    assert packages == {"tmux", "faketime", "graphviz"}
    assert [name for name in sorted(packages) if f"`{name}`" not in readme] == []
