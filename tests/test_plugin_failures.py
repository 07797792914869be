"""A team's plugin that fails: guards hold what they guard (CU-5), and a plugin's exception in
any hook is one line naming the plugin, its file and line, and what it was doing; the
conversation and the write it touched go on (the content kept)."""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from orion.errors import PluginFailed
from orion.hooks.manager import make_plugin_manager
from orion.testing.world import World

OVERLAY = """\
extends: write_session
description: Security documents wait for a review before they are written.
states:
  security_review:
    description: A document under security/ waits for the security team.
    tags: security_review
transitions:
  insert:
    - trigger: valid
      before: valid
      description: A document under security/ is reviewed before it is written.
      source: session_active.finalizing
      dest: security_review
      guards: needs_security_review
    - trigger: approve_security
      source: security_review
      dest: done
      actions: finalize
"""

PLUGIN = '''\
from pathlib import Path

from orion.api import hookimpl, write_session_of

HERE = Path(__file__).resolve().parent


@hookimpl
def register_statecharts(register):
    register(HERE / "write_session.yaml")


def needs_security_review(lifecycle, transition):
    session = write_session_of(lifecycle)
    return session.plan.target_file.startswith("security/")  # GUARD LINE


@hookimpl
def register_guards(register):
    register("needs_security_review", needs_security_review)
'''


#: One plugin with a hook of each kind; ``BETA_FAIL`` names the one that raises, the first
#: time it runs (a following message then goes through).
HOOKS = '''\
import os
import re
import signal
from pathlib import Path

from orion.api import hookimpl

HERE = Path(__file__).resolve().parent
FAIL = os.environ.get("BETA_FAIL", "")
FAILED = set()


def once(kind):
    if FAIL == kind and kind not in FAILED:
        FAILED.add(kind)
        return True
    return False


@hookimpl
def register_statecharts(register):
    register(HERE / "write_session.yaml")


@hookimpl
def build_context(request):
    if once("context"):
        return request.review_notes  # FAILS context
    return None


def audit(runtime, args):
    return runtime.audit_log.path  # FAILS command


@hookimpl
def register_slash_commands(register):
    register("audit", audit, "where the audit log is")


def audit_write(lifecycle, transition):
    if once("action"):
        raise PermissionError("the audit log is read-only")  # FAILS action


@hookimpl
def register_actions(register):
    register("audit_write", audit_write)


def may_write(lifecycle, transition):
    if once("guard"):
        return transition.payload.path.startswith("security/")  # FAILS guard
    return True


@hookimpl
def register_guards(register):
    register("may_write", may_write)


@hookimpl
def validate_content(request):
    if once("validator"):
        raise KeyError("licence")  # FAILS validator
    return None


@hookimpl
def lifecycle_transition(lifecycle, transition):
    if once("observer"):
        raise ValueError("the dashboard is down")  # FAILS observer
'''

HOOKS_OVERLAY = """\
extends: write_session
transitions:
  replace:
    valid:
      guards: may_write
      actions: [audit_write, finalize]
"""

#: What the line says each kind was doing.
DOING = {
    "context": "failed in build_context",
    "command": "failed in slash command /audit",
    "action": "action 'audit_write' failed on 'valid'",
    "guard": "failed in guard 'may_write'",
    "validator": "failed in validate_content",
    "observer": "failed in lifecycle_transition",
}
#: The kinds that fail while a write is finished: the write is kept, not written.
HOLDS_THE_WRITE = {"action", "guard", "validator"}
CONTENT = "first line of the notes\nsecond line of the notes\n"


def make_package(root: Path, name: str, plugin: str, files: dict[str, str] | None = None) -> Path:
    """A team's plugin package, installed in ``root``: a distribution with an entry point of
    the group ``orion``, as ``pip install`` leaves it."""
    info = root / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[orion]\n{name} = {name}.plugin\n")
    package = root / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "plugin.py").write_text(textwrap.dedent(plugin))
    for relative, text in (files or {}).items():
        (package / relative).write_text(text)
    return package


def line_of(path: Path, marker: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if marker in line)


def orion(site: Path, *args: str, env_more: dict[str, str] | None = None,
          **kwargs) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site),
                                                        os.environ.get("PYTHONPATH", "")]),
           "COLUMNS": "400", **(env_more or {})}
    env.pop("ORION_LOAD_PLUGINS", None)
    return subprocess.run([sys.executable, "-m", "orion", *args], capture_output=True,
                          text=True, env=env, timeout=120, **kwargs)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    make_package(root, "beta_docs", PLUGIN, {"write_session.yaml": OVERLAY})
    return root


@pytest.fixture
def world(tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(site))
    for name in [m for m in sys.modules if m.startswith("beta_docs")]:
        del sys.modules[name]
    plugin = importlib.import_module("beta_docs.plugin")
    world = World(tmp_path / "w", plugins=make_plugin_manager(
        env={}, entrypoints=False, plugins={"beta_docs": plugin}))
    yield world
    if not world.loop.is_closed():
        world.close()


def write(world: World, target: str, text: str) -> None:
    world.say(f"Write {target}.")
    world.reply(tool_calls=[{"name": "WritePlanTool_begin", "arguments": {
        "intent": "a document", "target_file": target, "operation": "create"}}])
    world.reply(text=text + "DONE\n")


def test_a_guard_that_raises_holds_the_write_and_names_the_plugin(world, site):
    write(world, "security/keys.md", "# Keys\nRotate them monthly.\n")
    target = world.workspace / "security" / "keys.md"
    assert not target.exists()  # never written without the review the chart requires
    where = f"{site / 'beta_docs' / 'plugin.py'}:{line_of(site / 'beta_docs' / 'plugin.py', 'GUARD LINE')}"
    [told] = [n for n in world.reporter.notices if "is held, not written" in n]
    assert told.startswith("security/keys.md is held, not written: write_session: plugin "
                           f"'beta_docs' failed in guard 'needs_security_review' ({where}) "
                           "deciding 'valid' in state 'session_active.finalizing': "
                           "AttributeError: ")
    assert "no transition was taken" in told
    assert "`orion sessions recover" in told  # and how to get it back
    world.reply(text="Understood.")
    assert told in "\n".join(str(m.get("content") or "")  # the model was told the same
                             for m in world.model.requests[-1].messages)
    # the conversation goes on: the next message is answered
    world.say("Thanks.")
    world.reply(text="You are welcome.")
    world.close()
    listed = orion(site, "sessions", "list", "--json", "--workspace", str(world.workspace))
    [session] = json.loads(listed.stdout)
    assert session["target_file"] == "security/keys.md" and not session["live"]
    assert (Path(session["directory"]) / "content.txt").read_text() == \
        "# Keys\nRotate them monthly.\n"
    assert not target.exists()


@pytest.fixture
def hooks_site(tmp_path: Path) -> Path:
    root = tmp_path / "hooks-site"
    make_package(root, "beta_hooks", HOOKS, {"write_session.yaml": HOOKS_OVERLAY})
    return root


RUN_SCRIPT = """\
conversation:
  - user: {first}
{write}{answer}  - user: Still there?
  - model: {{text: "Yes, still here."}}
"""
WRITE = """\
  - model:
      tool_calls:
        - name: WritePlanTool_begin
          arguments: {intent: notes, target_file: notes.md, operation: create}
  - model: {text: "first line of the notes\\nsecond line of the notes\\nDONE\\n"}
  - model: {text: Noted.}
"""


@pytest.mark.parametrize("kind", list(DOING))
def test_orion_run_says_a_plugin_failure_in_one_line_without_a_traceback(tmp_path, hooks_site,
                                                                          kind):
    plugin = hooks_site / "beta_hooks" / "plugin.py"
    where = f"{plugin}:{line_of(plugin, f'FAILS {kind}')}"
    workspace = tmp_path / "w"
    workspace.mkdir()
    writes = kind not in ("context", "command")
    script = tmp_path / "script.yaml"
    first = {"context": "Hello.", "command": "/audit"}.get(kind, "Write the notes.")
    script.write_text(RUN_SCRIPT.format(first=first, write=WRITE if writes else "",
                                        answer="  - model: {text: Hello to you.}\n"
                                        if kind == "context" else ""))
    ran = orion(hooks_site, "run", str(script), "--workspace", str(workspace),
                env_more={"BETA_FAIL": kind})
    said = ran.stdout + ran.stderr
    assert "Traceback" not in said, said
    named = [line for line in said.splitlines() if where in line]
    assert named and "beta_hooks" in named[0] and DOING[kind] in named[0], said
    if kind in HOLDS_THE_WRITE:
        assert not (workspace / "notes.md").exists()
        [kept] = list((workspace / ".orion" / "write_sessions").glob("*/content.txt"))
        assert kept.read_text() == CONTENT
    elif writes:
        assert (workspace / "notes.md").read_text() == CONTENT
    if kind == "command":  # the run stopped there: exit 1, said in one line
        assert ran.returncode == 1, said
        assert named[0].startswith("error: "), said
    if kind == "context":  # the request went without the block that failed, and was answered
        assert ran.returncode == 0, said


BLOCKED_STATUS = '''\
from orion.api import hookimpl, write_sessions
from orion.validation import Issue

HEADER = "<!-- licence -->"


@hookimpl
def validate_content(request):
    if not request.content.startswith(HEADER.encode()):
        return Issue(1, 1, "licence-header", f"the first line must be {HEADER}", blocking=True)
    return None


@hookimpl
def build_context(request):
    # as docs/customize.md's waiting() does: the status of every write session
    statuses = [session.status for session in write_sessions(request.host)]  # READS STATUS
    return None
'''


def test_a_blocked_write_whose_status_a_plugin_reads_never_ends_the_conversation(tmp_path,
                                                                                 monkeypatch):
    root = tmp_path / "site"
    make_package(root, "gamma_status", BLOCKED_STATUS)
    monkeypatch.syspath_prepend(str(root))
    plugin = importlib.import_module("gamma_status.plugin")
    world = World(tmp_path / "w", plugins=make_plugin_manager(
        env={}, entrypoints=False, plugins={"gamma_status": plugin}))
    try:
        write(world, "docs/guide.md", "# Guide\n")
        for _ in range(3):  # the model never adds the header: the write is blocked
            world.reply(text="L1: # Guide\n")
        world.reply(text="Understood.")
        assert not (world.workspace / "docs" / "guide.md").exists()
        world.say("What now?")
        world.reply(text="Add the header and write it again.")
        # the conversation went on: the last message was answered (whatever the status
        # reads as, an error there names the plugin and is not the end of the conversation)
        assert world.model.requests[-1].messages[-1]["content"] == "What now?"
        assert not world.errors, world.errors
    finally:
        world.close()


# -- validators that raise or hang: orion run, orion sessions recover, SIGTERM ------------------

HANGS = '''\
import os
import re
import signal
import threading
from pathlib import Path

from orion.api import hookimpl


@hookimpl
def validate_content(request):
    Path(os.environ["DELTA_STARTED"]).write_text("validating")
    threading.Event().wait()  # HANGS: a lock never released
'''

WRITE_SCRIPT = """\
conversation:
  - user: Write the notes.
""" + WRITE


def run_in_background(site: Path, script: Path, workspace: Path,
                      env_more: dict[str, str]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site),
                                                        os.environ.get("PYTHONPATH", "")]),
           **env_more}
    env.pop("ORION_LOAD_PLUGINS", None)
    return subprocess.Popen([sys.executable, "-m", "orion", "run", str(script), "--workspace",
                             str(workspace)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def kept_content(workspace: Path) -> str:
    [kept] = list((workspace / ".orion" / "write_sessions").glob("*/content.txt"))
    return kept.read_text()


def test_recover_finalize_says_a_failing_validator_in_one_line_and_keeps_the_content(
        tmp_path, hooks_site):
    workspace = tmp_path / "w"
    workspace.mkdir()
    script = tmp_path / "script.yaml"
    script.write_text(WRITE_SCRIPT)
    ran = orion(hooks_site, "run", str(script), "--workspace", str(workspace),
                env_more={"BETA_FAIL": "validator"})
    assert "Traceback" not in ran.stdout + ran.stderr
    session = re.search(r"orion sessions recover (\w{8}) --finalize", ran.stdout + ran.stderr)
    assert session, ran.stdout + ran.stderr
    plugin = hooks_site / "beta_hooks" / "plugin.py"
    recovered = orion(hooks_site, "sessions", "recover", session.group(1), "--finalize",
                      "--workspace", str(workspace), env_more={"BETA_FAIL": "validator"})
    said = recovered.stdout + recovered.stderr
    assert recovered.returncode == 1 and "Traceback" not in said, said
    assert (f"plugin 'beta_hooks' failed in validate_content "
            f"({plugin}:{line_of(plugin, 'FAILS validator')}): KeyError: 'licence'") in said
    assert not (workspace / "notes.md").exists()
    assert kept_content(workspace) == CONTENT
    # once the validator answers, the same command writes it
    fixed = orion(hooks_site, "sessions", "recover", session.group(1), "--finalize",
                  "--workspace", str(workspace))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert (workspace / "notes.md").read_text() == CONTENT


@pytest.fixture
def hanging_site(tmp_path: Path) -> Path:
    root = tmp_path / "hanging-site"
    make_package(root, "delta_hangs", HANGS)
    return root


def test_a_validator_that_hangs_past_its_deadline_holds_the_write(tmp_path, hanging_site):
    workspace = tmp_path / "w"
    workspace.mkdir()
    script = tmp_path / "script.yaml"
    script.write_text(WRITE_SCRIPT)
    process = run_in_background(hanging_site, script, workspace, {
        "DELTA_STARTED": str(tmp_path / "started"), "ORION_RUNTIME_VALIDATOR_DEADLINE_MS": "300",
        "COLUMNS": "400"})
    out, err = process.communicate(timeout=120)  # bounds a broken run only
    said = out + err
    assert "Traceback" not in said, said
    plugin = hanging_site / "delta_hangs" / "plugin.py"
    assert (f"plugin 'delta_hangs' failed in validate_content ({plugin}:"
            f"{line_of(plugin, 'def validate_content')}): DeadlinePassed: no answer within 300 "
            "ms (runtime.validator_deadline_ms)") in " ".join(said.split()), said
    assert process.returncode == 1
    assert not (workspace / "notes.md").exists()
    assert kept_content(workspace) == CONTENT


def test_sigterm_ends_orion_run_while_a_validator_hangs_and_keeps_the_content(tmp_path,
                                                                             hanging_site):
    workspace = tmp_path / "w"
    workspace.mkdir()
    script = tmp_path / "script.yaml"
    script.write_text(WRITE_SCRIPT)
    started = tmp_path / "started"
    process = run_in_background(hanging_site, script, workspace, {
        "DELTA_STARTED": str(started), "COLUMNS": "400"})  # the default deadline: 30 s
    try:
        while not started.exists():  # the validator runs (and hangs) now
            assert process.poll() is None, process.communicate()
            time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)  # bounds a broken run only
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    said = out + err
    assert process.returncode == 128 + signal.SIGTERM, said
    assert "Traceback" not in said, said
    assert "stopped by SIGTERM" in said
    assert not (workspace / "notes.md").exists()
    assert kept_content(workspace) == CONTENT
    assert re.search(r"orion sessions recover \w{8} --finalize", " ".join(said.split())), said


# -- a team's typo, under pytest with Orion's step library --------------------------------------

REPO = Path(__file__).resolve().parents[1]


def team_project(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the team-customization example with one edit of its plugin."""
    import shutil

    project = tmp_path / "team"
    shutil.copytree(REPO / "examples" / "team-customization", project,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    plugin = project / "team_review" / "plugin.py"
    assert plugin.read_text().count(old) == 1, old
    plugin.write_text(plugin.read_text().replace(old, new))
    return project


@pytest.mark.parametrize(("old", "new", "error"), [
    ("session.lifecycle.has_tag(REVIEW)", 'session.lifecycle.has_tag("in_reveiw")',
     "UnknownTag: write_session: unknown tag 'in_reveiw'"),
    ('session.fire("approve_write")', 'session.fire("review_okay")',
     "UnknownTrigger: write_session: unknown trigger 'review_okay'"),
], ids=["has_tag", "fire"])
def test_a_typo_in_the_teams_plugin_is_the_first_thing_a_failing_scenario_shows(tmp_path, old,
                                                                               new, error):
    project = team_project(tmp_path, old, new)
    env = {k: v for k, v in os.environ.items() if k != "ORION_LOAD_PLUGINS"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "tests/test_review.py", "-k", "approvewrite_writes"],
                            capture_output=True, text=True, env=env, cwd=project, timeout=300)
    assert result.returncode == 1, result.stdout
    failure = result.stdout.split("short test summary info")[0]
    plugin = project / "team_review" / "plugin.py"
    line = line_of(plugin, new)
    # the plugin's failure comes first, with its traceback down to the team's own line
    section = failure.index("Orion: a plugin of the project failed first")
    assert f"plugin 'team_review' failed in " in failure[section:]
    assert f" at {plugin}:{line}: {error}" in failure[section:], failure
    assert f'File "{plugin}", line {line}' in failure[section:], failure
