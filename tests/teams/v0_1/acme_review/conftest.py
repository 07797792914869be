"""ACME's fixtures: Orion's scenario fixtures with ACME's plugin registered (this directory is
on ``sys.path`` while the tests run; installed, the entry point loads the plugin)."""

from __future__ import annotations

import pytest

import acme_review
from orion.plugins import PluginManager, make_plugin_manager


@pytest.fixture
def orion_plugins() -> PluginManager:
    return make_plugin_manager(env={}, plugins={"acme_review": acme_review})
