"""The pytest plugin (entry point ``pytest11``: ``orion``): fixtures for scenarios, and the
Gherkin step library (docs/testing.md).

Installing Orion registers this plugin with pytest, so a project's own ``.feature`` files can
use the fixtures ``orion_world``, ``orion_plugins``, ``orion_yaml`` and ``orion_env`` and every
step of ``orion.testing.steps`` (common and write-session steps),
``orion.testing.plan_steps`` (plan mode), ``orion.testing.system_steps`` (the ``orion``
command, links, disks, logs) and ``orion.testing.chart_steps`` (a chart written in the
scenario). The steps need pytest-bdd (the ``test`` extra:
``pip install './orion[test]'`` from a clone); without it only the fixtures are loaded.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

from orion.errors import OrionError
from orion.hooks.manager import PluginManager, make_plugin_manager
from orion.testing.world import World

#: The step libraries, loaded as pytest plugins when pytest-bdd is installed.
STEP_MODULES = ["orion.testing.steps", "orion.testing.plan_steps",
                "orion.testing.system_steps"]

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


class OrionCheckWarning(UserWarning):
    """What ``orion check`` warns about the scenarios' charts (a chart that runs migrated)."""


#: What the check found for each configuration of the scenarios, by its fingerprint: the
#: nodeid of the scenario that reported it and its findings (``None``: it passed).
CHECKED = pytest.StashKey[dict[tuple, tuple[str, str | None]]]()


@pytest.fixture
def orion_world(request: pytest.FixtureRequest, tmp_path: Path, orion_yaml: str | None,
                orion_env: dict[str, str]) -> Iterator[World]:
    checked = request.config.stash.setdefault(CHECKED, {})
    plugins = _plugins(request, checked)
    key = (orion_yaml, tuple(sorted(orion_env.items())),
           tuple(sorted(name for name, _ in plugins.list_name_plugin())),
           tuple((str(path), by) for path, by in plugins.registry.statecharts))
    if key in checked and checked[key][1] is not None:  # reported by an earlier scenario
        _report(request, checked, key, checked[key][1])
    world = World(tmp_path, plugins=plugins, env=orion_env)
    world.data["plugin_failures_from"] = len(plugins.failures)
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
    if key not in checked:
        world.before_start.append(lambda started: _report(request, checked, key,
                                                          _findings(request, started)))
    request.node.stash[WORLD] = world
    yield world
    world.close()


def _plugins(request: pytest.FixtureRequest,
             checked: dict[tuple, tuple[str, str | None]]) -> PluginManager:
    """The scenario's plugins; one that cannot be loaded fails the first scenario with the
    reason, as every ``orion`` command gives it, and skips the others."""
    try:
        plugins: PluginManager = request.getfixturevalue("orion_plugins")
    except OrionError as exc:
        failed: OrionError | None = exc
    else:
        failed = None
    if failed is not None:  # reported outside the handler: the failure is the whole story
        _report(request, checked, ("plugins", str(failed)), f"error: {failed}")
    return plugins


def _findings(request: pytest.FixtureRequest, world: World) -> str | None:
    """What ``orion check`` finds in the scenario's workspace, as the runtime is about to
    start in it: its errors, one per line (``None``: none); its warnings become pytest
    warnings."""
    from orion.commands.check import check_workspace
    from orion.config import load_config
    from orion.statechart.io.catalog import Catalog

    plugins = world.plugins
    assert plugins is not None
    try:
        config = load_config(world.workspace, env=world.env)
        report = check_workspace(config, plugins, Catalog(plugins, config), env=world.env)
    except OrionError as exc:
        return f"error: {exc}"
    for finding in report.findings:
        if finding.severity == "warning":
            request.node.warn(OrionCheckWarning(finding.text))
    errors = [f.text for f in report.findings if f.severity != "warning"]
    return "\n".join(errors) if errors else None


def _report(request: pytest.FixtureRequest, checked: dict[tuple, tuple[str, str | None]],
            key: tuple, findings: str | None) -> None:
    """Record what the check found for ``key``; fail the scenario that found it, skip the
    later ones of the same configuration."""
    first = checked.setdefault(key, (request.node.nodeid, findings))[0]
    if findings is None:
        return
    if first != request.node.nodeid:
        pytest.skip(f"Orion's charts or plugins have errors (reported once, at {first})")
    pytest.fail("Orion's charts or plugins have errors; no scenario of theirs can run "
                f"(orion check):\n{findings}", pytrace=False)


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A scenario that fails after a plugin of the project failed shows that failure first:
    the plugin's exception and its traceback, down to the line of the team's own code (a
    ``has_tag`` or ``fire`` with a typo), not only the symptom a later step ran into."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    world = item.stash.get(WORLD, None)
    said = plugin_failures(world) if world is not None else None
    if said:
        report.sections.insert(0, ("Orion: a plugin of the project failed first", said))


def plugin_failures(world: World) -> str | None:
    """The failures of the scenario's plugins that are not built in, the first with its
    traceback, or ``None``."""
    plugins = world.plugins
    if plugins is None:
        return None
    failures = [f for f in plugins.failures[world.data.get("plugin_failures_from", 0):]
                if getattr(plugins.origins.get(f.plugin), "kind", None) != "builtin"]
    if not failures:
        return None
    first, later = failures[0], failures[1:]
    text = (f"plugin {first.plugin!r} failed in {first.hook} at {first.where}: {first.error}\n\n"
            f"{first.traceback}")
    if later:
        text += f"\nand {len(later)} more time(s): " + "; ".join(
            f"{f.plugin} in {f.hook} at {f.where}: {f.error}" for f in later[:5])
    return text
