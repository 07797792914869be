"""The team's fixtures: Orion's scenario fixtures (from Orion's pytest plugin, loaded
automatically) with the team's plugin registered and the team's statechart in ``orion.yaml``.
Nothing needs to be installed but Orion: this directory is on ``sys.path`` while the tests run.
"""

from __future__ import annotations

import json

import pytest

import team_review
import team_review.plugin
from orion.plugins import PluginManager, make_plugin_manager


@pytest.fixture
def orion_plugins() -> PluginManager:
    pm = make_plugin_manager(env={})
    if not pm.is_registered(team_review.plugin):  # installed, it is loaded already
        pm.register(team_review.plugin, "team_review")
        pm.check()
    return pm


@pytest.fixture
def orion_yaml() -> str:
    # orion.yaml's statecharts are relative to the workspace; an absolute path works too.
    return f"statecharts: [{json.dumps(str(team_review.WRITE_SESSION))}]\n"
