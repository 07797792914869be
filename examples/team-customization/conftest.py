"""The team's fixtures: Orion's scenario fixtures (from Orion's pytest plugin, loaded
automatically) with the team's plugin registered; the plugin ships its statechart. Nothing
needs to be installed but Orion: this directory is on ``sys.path`` while the tests run, and
when the project is installed its entry point has loaded the plugin already.
"""

from __future__ import annotations

import pytest

import team_review.plugin
from orion.hooks.manager import PluginManager, make_plugin_manager


@pytest.fixture
def orion_plugins() -> PluginManager:
    return make_plugin_manager(env={}, plugins={"team_review": team_review.plugin})
