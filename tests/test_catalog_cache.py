"""What a catalog remembers lives in its cache: its own unless it is given one, so nothing is
kept for the whole process; catalogs given one cache share the charts one of them compiled."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from orion.config import load_config
from orion.hooks.manager import make_plugin_manager
from orion.statechart.io.catalog import Catalog, ChartCache

OVERLAY = """\
extends: write_session
settings:
  idle_ms: {default: 500}
"""


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "lifecycles").mkdir(parents=True)
    (ws / "lifecycles" / "mine.yaml").write_text(OVERLAY, encoding="utf-8")
    (ws / "orion.yaml").write_text("statecharts: [lifecycles/mine.yaml]\n", encoding="utf-8")
    return ws


def test_catalogs_given_one_cache_share_the_compiled_overlay(tmp_path: Path):
    ws, pm, cache = workspace(tmp_path), make_plugin_manager(env={}), ChartCache()
    first = Catalog(pm, load_config(ws, env={}), cache=cache).definition("write_session", env={})
    second = Catalog(pm, load_config(ws, env={}), cache=cache).definition("write_session",
                                                                          env={})
    assert first is second and first.settings["idle_ms"] == 500


def test_a_catalog_keeps_nothing_once_it_is_gone(tmp_path: Path):
    ws, pm = workspace(tmp_path), make_plugin_manager(env={})
    catalog = Catalog(pm, load_config(ws, env={}))
    definition = catalog.definition("write_session", env={})
    assert definition.settings["idle_ms"] == 500
    assert str(ws / "lifecycles" / "mine.yaml") in catalog.cache.documents
    # Another catalog, given no cache, compiles its own: nothing is shared through the process.
    other = Catalog(pm, load_config(ws, env={})).definition("write_session", env={})
    assert other is not definition
    gone = weakref.ref(definition)
    del definition, catalog
    gc.collect()
    assert gone() is None
