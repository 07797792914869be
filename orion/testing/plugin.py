"""The pytest plugin (entry point ``pytest11``: ``orion``): fixtures for scenarios, and the
Gherkin step library (docs/testing.md).

Installing Orion registers this plugin with pytest, so a project's own ``.feature`` files can
use the fixtures ``orion_world``, ``orion_plugins``, ``orion_yaml`` and ``orion_env`` and every
step of ``orion.testing.steps`` (common and write-session steps) and
``orion.testing.plan_steps`` (plan mode), ``orion.testing.system_steps`` (the ``orion``
command, links, disks, logs) and ``orion.testing.process_steps`` (signals, a stepped clock,
resource limits). The steps need pytest-bdd (the ``test`` extra:
``pip install './orion[test]'`` from a clone); without it only the fixtures are loaded.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from orion.plugins import PluginManager, make_plugin_manager
from orion.testing.world import World

#: The step libraries, loaded as pytest plugins when pytest-bdd is installed.
STEP_MODULES = ["orion.testing.steps", "orion.testing.plan_steps",
                "orion.testing.system_steps", "orion.testing.process_steps"]

pytest_plugins = STEP_MODULES if importlib.util.find_spec("pytest_bdd") is not None else []


@pytest.fixture
def orion_plugins() -> PluginManager:
    """The plugin manager of a scenario: built-ins and installed plugins. Override it in a
    ``conftest.py`` to register your own plugins."""
    return make_plugin_manager(env={})


@pytest.fixture
def orion_yaml() -> str | None:
    """The ``orion.yaml`` of a scenario's workspace (``None``: none). Override it to point at
    your statecharts, change settings or edit the pipeline."""
    return None


@pytest.fixture
def orion_env() -> dict[str, str]:
    """The environment Orion sees in a scenario (never the test process's own): e.g.
    ``{"WRITE_SESSION_IDLE_MS": "500"}``. Override it to set variables for every scenario."""
    return {}


@pytest.fixture
def orion_world(request: pytest.FixtureRequest, tmp_path: Path, orion_plugins: PluginManager,
                orion_yaml: str | None, orion_env: dict[str, str]) -> Iterator[World]:
    world = World(tmp_path, plugins=orion_plugins, env=orion_env)
    # What Orion prints during the scenario, for `nothing Orion logged or printed ...`: file
    # descriptor capture from the start (a scenario that uses capsys itself goes without).
    try:
        world.data["capfd"] = request.getfixturevalue("capfd")
    except pytest.FixtureLookupError:  # pragma: no cover - capture plugin disabled
        world.data["capfd"] = None
    except pytest.UsageError:  # capsys or capfd already in use by the scenario
        world.data["capfd"] = None
    if orion_yaml is not None:
        (world.workspace / "orion.yaml").write_text(orion_yaml, encoding="utf-8")
    request.node.stash[WORLD] = world
    yield world
    world.close()


WORLD = pytest.StashKey[World]()


@pytest.hookimpl(optionalhook=True)
def pytest_bdd_step_error(request: pytest.FixtureRequest) -> None:
    request.node.stash[STEP_FAILED] = True


@pytest.hookimpl(optionalhook=True)
def pytest_bdd_after_scenario(request: pytest.FixtureRequest) -> None:
    """A scenario whose steps all passed still fails when Orion reported an error that no step
    expected (``Then Orion reports an error containing "..."``)."""
    world = request.node.stash.get(WORLD, None)
    if world is None or request.node.stash.get(STEP_FAILED, False):
        return
    from orion.testing.steps import unexpected_errors

    errors = unexpected_errors(world)
    if errors:
        listed = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
        pytest.fail(f"Orion reported errors that no step expected: {listed}", pytrace=False)


STEP_FAILED = pytest.StashKey[bool]()
