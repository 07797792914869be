"""The features bite: run against deliberately broken variants of Orion, the scenarios that state
the broken rule fail, and the same features pass against Orion as it is.

Each run is pytest in a subprocess, in a temporary directory that holds copies of the feature
files, a test module that binds them with ``scenarios(...)`` and a ``conftest.py`` that injects
the variant through the public fixtures of Orion's pytest plugin (``orion_plugins``,
``orion_yaml``), exactly as a team would customize Orion. The conftest also records each
scenario's title and outcome in ``outcomes.json``, which the assertions read.

The variants:

* ``ungated_plan_tools``: the built-in plan-mode plugin is blocked, and a copy without its
  ``gate_tools`` and ``authorize_tool_call`` hooks takes its place: plan tools are advertised
  and run while plan work is inactive (ADR "work by plan", invariants 1 and 2).
* ``idle_200_ms``: the write session's idle timeout is 200 ms instead of 2000 ms
  (ADR-2026-01-04: "500 ms is too short and causes false positives").
* ``eager_write_session``: a write-session controller that takes a truncated message (finish
  reason ``length``) for DONE and finalizes, instead of asking the model to continue
  (auto-continue).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("pytest_bdd")

ROOT = Path(__file__).resolve().parent.parent
FEATURES = ROOT / "features"
TIMEOUT_S = 300

TEST_MODULE = '''\
from pytest_bdd import scenarios

scenarios("features")
'''

#: Appended to every conftest: each scenario's title and outcome, in outcomes.json.
RECORDER = '''

# -- what the bite test reads ----------------------------------------------------------------
import json as _json
from pathlib import Path as _Path

_OUTCOMES = {}
_TITLE = pytest.StashKey[str]()


def pytest_bdd_before_scenario(request, feature, scenario):
    request.node.stash[_TITLE] = scenario.name


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    title = item.stash.get(_TITLE, item.nodeid)
    if report.failed:
        _OUTCOMES[item.nodeid] = {"title": title, "outcome": "failed"}
    elif report.when == "call" and item.nodeid not in _OUTCOMES:
        _OUTCOMES[item.nodeid] = {"title": title, "outcome": report.outcome}


def pytest_sessionfinish(session):
    _Path(__file__).with_name("outcomes.json").write_text(
        _json.dumps(list(_OUTCOMES.values()), indent=1), encoding="utf-8")
'''

UNBROKEN = '''\
import pytest
'''

UNGATED_PLAN_TOOLS = '''\
"""Plan mode without its gating: the built-in plugin is blocked and a copy of it, without
gate_tools and authorize_tool_call, is registered in its place."""
import types

import pytest

import orion_plugins.plan_mode as plan_mode
from orion.plugins import make_plugin_manager

UNGATED = types.SimpleNamespace(**{
    name: getattr(plan_mode, name)
    for name in ("finalize", "register_actions", "register_tools", "build_context",
                 "register_slash_commands", "conversation_reset")})


@pytest.fixture
def orion_plugins():
    pm = make_plugin_manager(env={}, blocked=["orion_plugins.plan_mode"])
    pm.register(UNGATED, "ungated_plan_mode")
    pm.check()
    return pm
'''

IDLE_200_MS = '''\
"""The write session asks for DONE after 200 ms of silence instead of 2000 ms."""
import pytest


@pytest.fixture
def orion_yaml():
    return "settings:\\n  write_session:\\n    idle_ms: 200\\n"
'''

EAGER_WRITE_SESSION = '''\
"""A write-session controller that finalizes on a truncated message (finish reason length):
it takes the cut-off for DONE instead of asking the model to continue."""
import pytest

from orion import hookimpl
from orion.models.events import Finish
from orion.plugins import make_plugin_manager
from orion.write_session.manager import manager_for


class EagerWriteSession:
    name = "eager_write_session"

    async def run(self, turn):
        session = manager_for(turn.runtime).active
        if session is None or turn.finish is None:
            return
        messages = turn.runtime.conversation.messages
        message = messages[-1] if messages and messages[-1].role == "assistant" else None
        finish = turn.finish
        if finish.truncated:  # the bug: a cut-off message is taken as finished
            session.feed("\\nDONE\\n")
            finish = Finish("stop", "stop")
        session.end_message(finish, message, tool_calls=bool(turn.tool_calls))


class EagerPlugin:
    @hookimpl
    def register_systems(self, register):
        register(EagerWriteSession())


@pytest.fixture
def orion_plugins():
    pm = make_plugin_manager(env={})
    pm.register(EagerPlugin(), "eager_write_session")
    pm.check()
    return pm


@pytest.fixture
def orion_yaml():
    return "pipeline:\\n  replace: {write_session: eager_write_session}\\n"
'''


@dataclass(frozen=True)
class Variant:
    conftest: str
    features: tuple[str, ...]
    #: Scenario titles that must fail (every example of an outline).
    must_fail: tuple[str, ...]


PLAN = "plan_mode.feature"
CONTROLLER = "write_session_controller.feature"
AUTO_CONTINUE = "auto_continue.feature"

VARIANTS = {
    "ungated_plan_tools": Variant(UNGATED_PLAN_TOOLS, (PLAN,), (
        "Invariant 1: plan tools are advertised only while plan work is active",
        "Invariant 1: plan tools are advertised again only after a new /plan on",
        "Invariant 2: a plan tool called while plan work is inactive is denied and changes "
        "nothing",
        "Invariant 2: a plan tool advertised before another session ended plan work is denied "
        "by policy, traced, and changes nothing",
    )),
    "idle_200_ms": Variant(IDLE_200_MS, (CONTROLLER,), (
        "Protocol 4: a message without DONE gets the idle prompt after 2000 ms and not before",
        "Protocol 4 and 2E: every pause starts the idle timer again",
    )),
    "eager_write_session": Variant(EAGER_WRITE_SESSION, (AUTO_CONTINUE,), (
        "Flow 2-3: output cut off without DONE is saved, and truncation is detected at once",
        "Flow 4b: the continuation is appended to the same file without a new begin",
        "Flow 5 and integration: several continuations complete a long document",
    )),
}


@dataclass
class Run:
    returncode: int
    output: str
    outcomes: list[dict[str, str]]

    def titles(self, outcome: str) -> set[str]:
        return {o["title"] for o in self.outcomes if o["outcome"] == outcome}

    def outcomes_of(self, title: str) -> list[str]:
        return [o["outcome"] for o in self.outcomes if o["title"] == title]

    def summary(self) -> str:
        return "\n".join(self.output.splitlines()[-40:])


def run_features(directory: Path, features: tuple[str, ...], conftest: str, *,
                 source_dir: Path = FEATURES) -> Run:
    """pytest in a subprocess on copies of ``features`` with ``conftest``."""
    (directory / "features").mkdir(parents=True)
    for name in features:
        source = source_dir / name
        if not source.exists():
            pytest.fail(f"features/{name} is missing")
        shutil.copy(source, directory / "features" / name)
    (directory / "test_bite.py").write_text(TEST_MODULE, encoding="utf-8")
    (directory / "conftest.py").write_text(conftest + RECORDER, encoding="utf-8")
    (directory / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "ORION_", "WRITE_SESSION_"))}
    process = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf",
         "--rootdir", str(directory), "-c", str(directory / "pytest.ini"),
         "-W", "ignore::pytest.PytestUnknownMarkWarning", str(directory)],
        cwd=directory, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    output = process.stdout + process.stderr
    record = directory / "outcomes.json"
    outcomes = json.loads(record.read_text(encoding="utf-8")) if record.exists() else []
    return Run(process.returncode, output, outcomes)


def test_the_features_pass_unbroken(tmp_path):
    features = tuple(sorted({name for v in VARIANTS.values() for name in v.features}))
    run = run_features(tmp_path, features, UNBROKEN)
    assert run.returncode == 0, run.summary()
    assert run.outcomes and run.titles("failed") == set(), run.summary()
    for variant in VARIANTS.values():
        for title in variant.must_fail:
            assert run.outcomes_of(title), f"no scenario {title!r} in {variant.features}"
            assert set(run.outcomes_of(title)) == {"passed"}, (title, run.summary())


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_broken_variant_fails_the_scenarios_of_its_rule(tmp_path, name):
    variant = VARIANTS[name]
    run = run_features(tmp_path, variant.features, variant.conftest)
    assert run.returncode == 1, run.summary()  # tests failed (not a usage or internal error)
    for title in variant.must_fail:
        outcomes = run.outcomes_of(title)
        assert outcomes, f"no scenario {title!r}:\n{run.summary()}"
        assert set(outcomes) == {"failed"}, f"{title!r} did not fail:\n{run.summary()}"
    failed_lines = [line for line in run.output.splitlines() if line.startswith("FAILED ")]
    assert len(failed_lines) >= len(variant.must_fail), run.summary()


def test_the_recorder_sees_scenario_titles(tmp_path):
    """The harness itself: a scenario title with a colon and quotes is recorded as written."""
    (tmp_path / "src").mkdir()
    feature = tmp_path / "src" / "check.feature"
    feature.write_text(textwrap.dedent('''\
        Feature: harness
          Scenario: Rule 1: "quoted" and: colons
            Then the command answers "nothing"
        '''), encoding="utf-8")
    run = run_features(tmp_path / "run", ("check.feature",), UNBROKEN,
                       source_dir=tmp_path / "src")
    assert run.returncode == 1, run.summary()
    assert run.outcomes == [{"title": 'Rule 1: "quoted" and: colons', "outcome": "failed"}]
