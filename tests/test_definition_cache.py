"""The compiled charts a process keeps: the most recent, not one per plugin manager ever made.

A server or a test suite makes a plugin manager per conversation; each loads the built-in
charts. Real plugin managers, the real chart files.
"""

from __future__ import annotations

import gc
import importlib
import weakref

from orion.hooks.manager import make_plugin_manager
from orion.statechart.io.builtin import builtin_statechart

# The module (the package's ``definition`` attribute is something else).
definition = importlib.import_module("orion.statechart.interpreter.definition")


def test_a_process_that_makes_many_plugin_managers_keeps_only_the_recent_charts():
    chart = builtin_statechart("write_session")
    first = make_plugin_manager(entrypoints=False, env={})
    gone = weakref.ref(first)
    loaded = definition.load_definition(chart, plugins=first, env={})
    assert definition.load_definition(chart, plugins=first, env={}) is loaded  # cached
    del first, loaded
    for _ in range(definition.CACHED + 10):
        definition.load_definition(chart, plugins=make_plugin_manager(entrypoints=False, env={}),
                                   env={})
    gc.collect()
    assert len(definition._specs) <= definition.CACHED
    assert len(definition._definitions) <= definition.CACHED
    assert gone() is None  # the first manager, and what its chart held, were let go


def test_a_chart_in_use_stays_cached_while_others_come_and_go():
    chart = builtin_statechart("write_session")
    kept = make_plugin_manager(entrypoints=False, env={})
    loaded = definition.load_definition(chart, plugins=kept, env={})
    for _ in range(definition.CACHED + 10):
        definition.load_definition(chart, plugins=kept, env={})  # used again: most recent
        definition.load_definition(chart, plugins=make_plugin_manager(entrypoints=False, env={}),
                                   env={})
    assert definition.load_definition(chart, plugins=kept, env={}) is loaded
