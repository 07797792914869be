"""``orion.api`` is the surface plugins import (``orion.commands`` for those that add
``orion`` commands): the built-in plugins use nothing else (their own subsystem aside), and
the host it describes is the runtime hooks receive."""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path

import pytest

import orion.api as api
from orion.clock import VirtualClock
from orion.runtime.context import ContextRequest
from orion.models.script import load_script
from orion.models.scripted import ScriptedModel
from orion.hooks.manager import builtin_modules, make_plugin_manager
from orion.runtime.runtime import Runtime

PLUGINS = Path(__file__).resolve().parent.parent / "plugins"
#: A built-in plugin that drives a subsystem of Orion may use that subsystem's package.
SUBSYSTEM = {
    "plan_mode": ("orion.plan",),
    "write_sessions": ("orion.write_session",),
    "session_commands": ("orion.write_session",),
    "plan_commands": ("orion.plan",),
    "trace_sqlite": ("orion.trace",),
    "trace_commands": ("orion.trace",),
    "otel_exporter": ("orion.trace", "orion.hooks.manager"),  # PluginUnavailable, at import
}


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "orion" or name.startswith("orion.")}


@pytest.mark.parametrize("module", [m.rsplit(".", 1)[-1] for m in builtin_modules()])
def test_built_in_plugins_import_only_the_public_api(module):
    subsystems = SUBSYSTEM.get(module, ())
    outside = sorted(name for name in imports(PLUGINS / f"{module}.py")
                     if name not in ("orion", "orion.api", "orion.commands")
                     and not any(name == s or name.startswith(s + ".") for s in subsystems))
    assert outside == [], f"plugins/{module}.py imports {outside}; use orion.api"


def test_every_name_in_all_exists():
    missing = [name for name in api.__all__ if not hasattr(api, name)]
    assert missing == []


@pytest.fixture
def runtime():
    script = load_script("s.yaml", text="conversation:\n  - model: {text: hi}\n")
    rt = Runtime(model=ScriptedModel(script.cursor()), plugins=make_plugin_manager(env={}),
                 workspace=tempfile.mkdtemp(), clock=VirtualClock())
    yield rt
    rt.close()


def test_the_runtime_is_the_host_every_hook_reaches(runtime):
    assert isinstance(runtime, api.Host)
    lifecycle = runtime.start_lifecycle("plan_mode")
    assert api.host_of(lifecycle) is runtime
    assert api.host_of(ContextRequest(host=runtime)) is runtime
    assert api.host_of(runtime.definition("plan_mode").create()) is None  # on its own
    assert api.write_sessions(runtime) == []
    assert runtime.tags() == {"plan_mode": frozenset({"plan_off"})}


def test_lifecycle_hooks_receive_the_host_by_name(runtime):
    seen = []

    class Observer:
        @api.hookimpl
        def lifecycle_started(self, lifecycle, host):
            seen.append(("started", lifecycle.name, host))

        @api.hookimpl
        def lifecycle_transition(self, lifecycle, transition, host):
            seen.append((transition.trigger, lifecycle.name, host))

    runtime.plugins.register(Observer(), "observer")
    lifecycle = runtime.start_lifecycle("plan_mode")
    lifecycle.trigger("plan_on")
    assert seen == [("started", "plan_mode", runtime), ("plan_on", "plan_mode", runtime)]
    seen.clear()
    runtime.definition("plan_mode").create().trigger("plan_on")  # on its own: no host
    assert seen == [("started", "plan_mode", None), ("plan_on", "plan_mode", None)]


def test_the_list_of_built_in_plugins_names_every_module_of_the_package():
    on_disk = {p.stem for p in PLUGINS.glob("*.py") if not p.stem.startswith("_")}
    assert {m.rsplit(".", 1)[-1] for m in builtin_modules()} == on_disk


def test_the_configuration_does_not_import_the_runtime_or_the_write_sessions():
    """``orion.config`` is read by the runtime and the write sessions, never the reverse."""
    import subprocess
    import sys

    code = ("import sys, orion.config; print(sorted(m for m in sys.modules if m.startswith("
            "('orion.runtime', 'orion.write_session'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert proc.stdout.strip() == "[]"


def test_the_write_sessions_and_plans_do_not_import_the_runtime():
    """The runtime drives the write sessions and plan mode; they reach it only through the
    host they are given, so ``orion.runtime`` <-> ``orion.write_session`` is no cycle."""
    import subprocess
    import sys

    code = ("import sys, orion.write_session.session, orion.write_session.recover, "
            "orion.write_session.startup, orion.write_session.orphan_commands, "
            "orion.plan.service; print(sorted(m for m in sys.modules "
            "if m.startswith('orion.runtime')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert proc.stdout.strip() == "[]"
