"""Beta's fixtures: Orion's scenario fixtures with Beta's plugin registered."""

from __future__ import annotations

import pytest

import beta_docs
from orion.plugins import make_plugin_manager


@pytest.fixture
def orion_plugins():
    return make_plugin_manager(env={}, plugins={"beta_docs": beta_docs})
