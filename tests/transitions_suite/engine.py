"""A pytest plugin for ``transitions``' own hierarchical tests (from the sdist of the installed
version): it sets the library's nested-state separator to ``.`` (Orion's paths) and, when
``ORION_SUITE_ENGINE=orion``, puts Orion's :class:`LifecycleMachine` where the test modules
name ``HierarchicalMachine`` (the library's own module keeps its class: its methods call
``super(HierarchicalMachine, self)``)."""

from __future__ import annotations

import os
from typing import Any

import transitions.extensions.nesting as nesting

nesting.NestedState.separator = "."


def pytest_collection_modifyitems(items: list[Any]) -> None:
    if os.environ.get("ORION_SUITE_ENGINE") != "orion":
        return
    from orion.statechart.interpreter.semantics import LifecycleMachine

    for module in {item.module for item in items if getattr(item, "module", None)}:
        if getattr(module, "HierarchicalMachine", None) is nesting.HierarchicalMachine:
            module.HierarchicalMachine = LifecycleMachine
