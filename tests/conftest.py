"""Shared fixtures for the engine tests: a real plugin manager, a probe plugin and YAML files.

Nothing of Orion is mocked. The probe is an ordinary plugin: it registers named actions and
guards through the ``register_*`` hooks and observes lifecycles through the observer hooks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import orion
from orion.hooks.manager import PluginManager, make_plugin_manager

ROOT = Path(__file__).resolve().parent.parent

#: Orion's own harness, beside the step library the pytest plugin loads for every team: steps
#: that produce real faults around a write (a tmpfs, killed writers, a failing endpoint) and
#: put Orion's own process under one (signals, a stepped clock).
pytest_plugins = ["fault_steps", "process_steps"]

# In CI the property tests draw the same examples on every run, so a failure there is one
# anybody can reproduce and not the luck of a draw; a local run explores new ones (and keeps
# the failures it finds in .hypothesis/).
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")
STATECHARTS = ROOT / "statecharts"

#: Team projects of earlier releases: each is a project of its own (its rootdir, conftest and
#: features), run as a separate pytest by tests/test_teams_of_earlier_releases.py.
collect_ignore = ["teams"]

#: Actions the probe provides. Each one appends its name to ``probe.log`` and then runs the
#: effect a test installed for it, if any.
PROBE_ACTIONS = (
    "enter_idle", "exit_idle",
    "enter_outer", "exit_outer",
    "enter_inner", "exit_inner",
    "enter_other", "exit_other",
    "enter_done",
    "act", "act2", "boom", "kick",
)


class Probe:
    """A test plugin that records what the engine does."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.transitions: list[tuple[str, str, str, str | None]] = []
        self.records: list[Any] = []
        self.started: list[str] = []
        self.finished: list[str] = []
        self.effects: dict[str, Callable[[Any, Any], None]] = {}
        self.guard_calls: list[str] = []

    # -- registration ----------------------------------------------------------------------

    @orion.hookimpl
    def register_actions(self, register):
        for name in PROBE_ACTIONS:
            register(name, self._action(name))

    @orion.hookimpl
    def register_guards(self, register):
        register("allow", self._guard("allow", lambda lc, tr: True))
        register("deny", self._guard("deny", lambda lc, tr: False))
        register("flag", self._guard("flag", lambda lc, tr: bool(lc.context.get("flag"))))
        register("explode", self._guard("explode", _explode))

    def _action(self, name: str) -> Callable[[Any, Any], None]:
        def action(lifecycle, transition) -> None:
            self.log.append(name)
            effect = self.effects.get(name)
            if effect is not None:
                effect(lifecycle, transition)
            if name == "boom":
                raise ValueError("kaboom")
        action.__name__ = name
        return action

    def _guard(self, name: str, fn: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
        def guard(lifecycle, transition) -> bool:
            self.guard_calls.append(name)
            return fn(lifecycle, transition)
        return guard

    # -- observers -------------------------------------------------------------------------

    @orion.hookimpl
    def lifecycle_started(self, lifecycle):
        self.started.append(lifecycle.id)

    @orion.hookimpl
    def lifecycle_transition(self, lifecycle, transition):
        self.transitions.append((lifecycle.id, transition.trigger, transition.source,
                                 transition.dest))
        self.records.append(transition)

    @orion.hookimpl
    def lifecycle_finished(self, lifecycle):
        self.finished.append(lifecycle.id)


def _explode(lifecycle, transition) -> bool:
    raise RuntimeError("guard blew up")


@pytest.fixture
def pm() -> PluginManager:
    """Built-in plugins only (no installed entry points), exactly as the CLI builds them."""
    return make_plugin_manager(entrypoints=False, env={})


@pytest.fixture
def probe(pm: PluginManager) -> Probe:
    """A registered probe. Register before loading definitions: the registry is lazy."""
    plugin = Probe()
    pm.register(plugin, "probe")
    return plugin


@pytest.fixture
def write_chart(tmp_path: Path) -> Callable[..., Path]:
    """Write a YAML statechart (dedented) to ``tmp_path`` and return its path."""
    def write(text: str, name: str = "chart.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return path
    return write


@pytest.fixture
def make_probe() -> Callable[[], Probe]:
    """The probe class, for tests that register more than one (no import of conftest)."""
    return Probe


@pytest.fixture
def statecharts() -> Path:
    """The built-in statecharts directory of the source tree."""
    return STATECHARTS


# -- the wheel ------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """Orion's wheel, built offline from a copy of the checkout: what ``pip install <checkout>``
    installs (tests/test_packaging.py, tests/test_readme.py)."""
    out = tmp_path_factory.mktemp("wheel")
    # Build from a copy: an in-tree build would leave build/ and *.egg-info in the checkout.
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE", "orion", "plugins", "statecharts",
                 "examples"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, src / name)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                           "--no-build-isolation", "--wheel-dir", str(out), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (found,) = out.glob("orion_statecharts-*.whl")
    return found


# -- the slow lane --------------------------------------------------------------------------------
# `make test-fast` leaves out the tests marked ``slow`` (``-m "not slow"``). A test is slow when
# it is marked so by hand (real subprocesses, terminals, a wheel), or when its last measured
# time (setup, call and teardown) in tests/durations.json is at least SLOW_S: the lane follows
# measurements, not guesses, and a new test is fast until measured. `make durations` measures
# the whole suite again and rewrites the file. In a run that has slow tests, each one's name and
# time is printed as it finishes, between the dots: a run that seems stuck says which test it
# is in, and where the minutes go.

DURATIONS = Path(os.environ.get("ORION_TEST_DURATIONS")
                 or Path(__file__).with_name("durations.json"))
#: Tests that took this long or longer when measured are in the slow lane.
SLOW_S = 0.1


def measured_seconds() -> dict[str, float]:
    """Each measured test's time, by node id (none before the first ``make durations``)."""
    return json.loads(DURATIONS.read_text(encoding="utf-8")) if DURATIONS.exists() else {}


def pytest_addoption(parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help="write each test's time to tests/durations.json (make durations)")


class StoreDurations:
    """Keeps each test's time for tests/durations.json: the tests this run ran are measured
    again, the others keep their times; only times of 50 ms and more are kept."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self, session) -> None:
        kept = measured_seconds()
        for nodeid in self.seconds:
            kept.pop(nodeid, None)
        kept.update({k: round(v, 3) for k, v in self.seconds.items() if v >= 0.05})
        DURATIONS.write_text(json.dumps(dict(sorted(kept.items())), indent=0) + "\n",
                             encoding="utf-8")


class SlowLane:
    def __init__(self, config) -> None:
        self.config = config
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report) -> None:
        if "slow" not in report.keywords:
            return
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if report.when == "teardown" and terminal is not None:
            if terminal._tw.width_of_current_line:  # after the dots, on a line of its own
                terminal.write("\n")
            terminal.write_line(f"slow  {self.seconds.pop(report.nodeid):5.1f} s  "
                                f"{report.nodeid}")


#: Fixtures that make a test slow whatever its body does: the wheel is built by pip.
SLOW_FIXTURES = frozenset({"wheel"})
#: Names a test module imports from tests/tmux_terminal.py when it drives ``orion`` in a real
#: terminal: a tmux server and an ``orion`` process per test.
TERMINAL_HELPERS = frozenset({"chat_in_terminal", "Terminal", "needs_tmux"})


def lane_rule(item) -> str | None:
    """Why a test belongs in the slow lane by rule (new tests get the lane without a mark), or
    None: a test that builds the wheel, or one in a module that drives a terminal in tmux.
    The others are slow by measurement (tests/durations.json) or by their mark."""
    used = SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ()))
    if used:
        return f"uses the {', '.join(sorted(used))} fixture"
    module = getattr(item, "module", None)
    if module is not None and TERMINAL_HELPERS.intersection(vars(module)):
        return "drives a terminal in tmux"
    return None


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects
def pytest_collection_modifyitems(config, items) -> None:
    measured = measured_seconds()
    for item in items:
        if item.get_closest_marker("slow") is None and (
                lane_rule(item) is not None or measured.get(item.nodeid, 0.0) >= SLOW_S):
            item.add_marker(pytest.mark.slow)


# -- the lane's workers ---------------------------------------------------------------------------
# `make test-fast` runs the tests in pytest-xdist workers, and a worker's environment has
# COLUMNS=80 and LINES=24 that the command's had not: ``orion`` processes started by the tests
# would then wrap their messages at 80 columns, as they never do when piped. Each worker gets
# the terminal size variables of the command that started it back.
TERMINAL_SIZE = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    node.workerinput["orion_terminal_size"] = {name: os.environ.get(name)
                                               for name in TERMINAL_SIZE}


def _terminal_size_of_the_command(config) -> None:
    given = getattr(config, "workerinput", {}).get("orion_terminal_size")
    for name, value in (given or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def pytest_configure(config) -> None:
    _terminal_size_of_the_command(config)
    if config.getoption("--store-durations") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(StoreDurations(), "orion-store-durations")
    if config.get_verbosity() <= 0:  # verbose runs name every test already
        config.pluginmanager.register(SlowLane(config), "orion-slow-lane")
