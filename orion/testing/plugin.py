"""The pytest plugin (entry point ``pytest11``: ``orion``): fixtures for scenarios."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orion.plugins import PluginManager, make_plugin_manager
from orion.testing.world import World


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
def orion_world(tmp_path: Path, orion_plugins: PluginManager,
                orion_yaml: str | None) -> Iterator[World]:
    world = World(tmp_path, plugins=orion_plugins)
    if orion_yaml is not None:
        (world.workspace / "orion.yaml").write_text(orion_yaml, encoding="utf-8")
    yield world
    world.close()
