"""What catalogs remember between them lives in a cache a catalog is given (or the shared
default): a runtime per conversation reuses the charts the last one compiled, and a tool that
must not keep charts alive gives its catalog a cache of its own."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from orion.config import load_config
from orion.hooks.manager import make_plugin_manager
from orion.statechart.io.catalog import DEFAULT_CACHE, Catalog, ChartCache

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


def test_catalogs_of_one_workspace_share_the_compiled_overlay(tmp_path: Path):
    ws, pm = workspace(tmp_path), make_plugin_manager(env={})
    first = Catalog(pm, load_config(ws, env={})).definition("write_session", env={})
    second = Catalog(pm, load_config(ws, env={})).definition("write_session", env={})
    assert first is second and first.settings["idle_ms"] == 500


def test_a_catalog_with_its_own_cache_keeps_nothing_once_it_is_gone(tmp_path: Path):
    ws, pm = workspace(tmp_path), make_plugin_manager(env={})
    cache = ChartCache()
    definition = Catalog(pm, load_config(ws, env={}), cache=cache).definition(
        "write_session", env={})
    assert definition.settings["idle_ms"] == 500
    overlay = str(ws / "lifecycles" / "mine.yaml")
    assert overlay in cache.documents and overlay not in DEFAULT_CACHE.documents
    # Another catalog on the shared cache compiles its own: nothing leaked into it.
    shared = Catalog(pm, load_config(ws, env={})).definition("write_session", env={})
    assert shared is not definition
    gone = weakref.ref(definition)
    del definition, cache
    gc.collect()
    assert gone() is None
