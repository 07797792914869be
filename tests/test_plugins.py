"""The plugin manager: loading (built-ins, entry points, ORION_LOAD_PLUGINS), load errors,
registration errors and the isolation of failing observers. No mocks: real distributions on
``sys.path``, real statecharts and real lifecycles."""

from __future__ import annotations

import importlib
import logging
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
from pydantic import BaseModel

from orion import hookimpl
from orion.errors import GuardError, PluginError, PluginFailed
from orion.hooks.manager import (
    PluginManager,
    builtin_modules,
    canonical_distribution_name,
    entry_points_may_exist,
    make_plugin_manager,
    parse_allow_list,
)
from orion.hooks.registry import NAME
from orion.statechart import load_definition
from orion.statechart.model.schema import PLUGIN_NAME
from orion.tools.spec import ToolSpec

BUILTINS = {
    "orion_plugins.compaction",
    "orion_plugins.conversation_commands",
    "orion_plugins.finalization",
    "orion_plugins.plan_commands",
    "orion_plugins.plan_mode",
    "orion_plugins.session_commands",
    "orion_plugins.trace_commands",
    "orion_plugins.trace_sqlite",
    "orion_plugins.tracing",
    "orion_plugins.turn_systems",
    "orion_plugins.unwrap_fence",
    "orion_plugins.validate_placeholders",
    "orion_plugins.validate_syntax",
    "orion_plugins.validate_utf8",
    "orion_plugins.workspace_tools",
    "orion_plugins.write_session_protocol",
    "orion_plugins.write_sessions",
}
#: Built-ins skipped when their optional dependency is missing.
OPTIONAL_BUILTINS = {"orion_plugins.otel_exporter"}

DOOR = """\
statechart: door
initial: closed
states:
  closed: {}
  open: {}
  gone:
    final: true
transitions:
  - trigger: open
    source: closed
    dest: open
  - trigger: leave
    source: open
    dest: gone
"""

GUARDED = """\
statechart: vault
initial: locked
states:
  locked: {}
  unlocked:
    final: true
transitions:
  - trigger: unlock
    source: locked
    dest: unlocked
    guards: may_unlock
    actions: note_unlock
"""


# -- helpers ----------------------------------------------------------------------------------


class Site:
    """A directory on ``sys.path`` that holds real (unpacked) distributions."""

    def __init__(self, root: Path):
        self.root = root
        self.modules: list[str] = []

    def add(self, name: str = "fakeplug", source: str = "", *, module: str | None = None,
            entry_point: str | None = None, version: str = "1.0") -> str:
        module = module or f"{name.replace('-', '_').lower()}_mod"
        dist = self.root / f"{name.replace('-', '_')}-{version}.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (dist / "entry_points.txt").write_text(f"[orion]\n{entry_point or name} = {module}\n")
        (self.root / f"{module}.py").write_text(textwrap.dedent(source))
        self.modules.append(module)
        importlib.invalidate_caches()
        return module


def test_the_quick_look_for_plugins_sees_an_orion_section_and_nothing_else(tmp_path,
                                                                         monkeypatch):
    # `orion --help` skips reading every distribution's metadata when no distribution on the
    # path declares an [orion] entry point; anything it cannot judge cheaply counts as one.
    root = tmp_path / "site"
    other = root / "other-1.0.dist-info"
    other.mkdir(parents=True)
    (other / "entry_points.txt").write_text("[console_scripts]\norion = orion.cli:main\n")
    monkeypatch.setattr(sys, "path", [str(root), str(tmp_path / "missing")])
    assert entry_points_may_exist() is False
    plug = root / "plug-1.0.dist-info"
    plug.mkdir()
    (plug / "entry_points.txt").write_text("[console_scripts]\nx = y\n\n [ orion ] \nplug = m\n")
    assert entry_points_may_exist() is True
    (plug / "entry_points.txt").unlink()
    assert entry_points_may_exist() is False
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("m.py", "")
    monkeypatch.setattr(sys, "path", [str(root), str(archive)])
    assert entry_points_may_exist() is True


@pytest.fixture
def site(tmp_path, monkeypatch):
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    s = Site(root)
    yield s
    for module in s.modules:
        sys.modules.pop(module, None)


def chart(tmp_path: Path, text: str = DOOR, name: str = "door.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


RECORDER = """\
from orion import hookimpl

seen = []

@hookimpl
def lifecycle_transition(lifecycle, transition):
    seen.append((transition.source, transition.dest))
"""


# -- built-ins --------------------------------------------------------------------------------


def test_builtins_load():
    pm = make_plugin_manager(entrypoints=False)
    assert BUILTINS <= {name for name, _ in pm.list_name_plugin()}
    assert set(builtin_modules()) == BUILTINS | OPTIONAL_BUILTINS
    for name in BUILTINS:
        assert pm.origins[name].kind == "builtin"
        assert pm.origins[name].module == name
    registry = pm.registry
    assert "finalize" in registry.actions
    assert registry.actions["finalize"].plugin == "orion_plugins.finalization"
    assert {"has_content", "continuations_left", "corrections_left"} <= set(registry.guards)
    assert {name: registry.system_plugins[name] for name in ("context", "model", "tools")} == {
        name: "orion_plugins.turn_systems" for name in ("context", "model", "tools")}
    assert registry.system_plugins["trace"] == "orion_plugins.tracing"
    assert {name: registry.tool_plugins[name] for name in ("read_file", "list_files")} == {
        name: "orion_plugins.workspace_tools" for name in ("read_file", "list_files")}
    assert {name: registry.commands[name].plugin for name in ("help", "reset", "quit")} == {
        name: "orion_plugins.conversation_commands" for name in ("help", "reset", "quit")}
    [compaction] = [impl.plugin_name for impl in pm.hook.compact_conversation.get_hookimpls()]
    assert compaction == "orion_plugins.compaction"


def test_builtin_can_be_blocked():
    pm = make_plugin_manager(entrypoints=False, blocked=["finalization"])
    assert not pm.has_plugin("orion_plugins.finalization")
    assert "finalize" not in pm.registry.actions
    assert pm.has_plugin("orion_plugins.write_session_protocol")


def test_builtins_load_even_when_the_allow_list_is_empty():
    pm = make_plugin_manager(env={"ORION_LOAD_PLUGINS": ""})
    assert BUILTINS <= {name for name, _ in pm.list_name_plugin()}


def test_builtin_statechart_compiles_against_builtins():
    from orion.statechart import builtin_statecharts

    pm = make_plugin_manager(entrypoints=False)
    for path in builtin_statecharts():
        assert load_definition(path, plugins=pm).name == path.stem


# -- entry points ------------------------------------------------------------------------------


def test_entrypoint_plugin_is_discovered_from_a_real_distribution(site, tmp_path):
    module = site.add("fakeplug", RECORDER)
    pm = make_plugin_manager(env={})
    assert pm.has_plugin("fakeplug")
    origin = pm.origins["fakeplug"]
    assert (origin.kind, origin.module, origin.distribution, origin.version) == (
        "entrypoint", "fakeplug_mod", "fakeplug", "1.0")
    assert pm.get_plugin("fakeplug") is sys.modules[module]

    lifecycle = load_definition(chart(tmp_path), plugins=pm).create()
    lifecycle.trigger("open")
    assert sys.modules[module].seen == [("closed", "open")]


@pytest.fixture
def two_plugins(site):
    site.add("fakeplug", RECORDER)
    site.add("other-dist", RECORDER, module="otherplug_mod", entry_point="otherplug")
    return site


def loaded_entrypoints(pm: PluginManager) -> set[str]:
    return {name for name, origin in pm.origins.items() if origin.kind == "entrypoint"}


def test_unset_allow_list_loads_every_plugin(two_plugins):
    assert loaded_entrypoints(make_plugin_manager(env={})) >= {"fakeplug", "otherplug"}


def test_allow_list_by_entry_point_name(two_plugins):
    pm = make_plugin_manager(env={"ORION_LOAD_PLUGINS": "fakeplug"})
    assert loaded_entrypoints(pm) == {"fakeplug"}


def test_allow_list_by_distribution_name(two_plugins):
    pm = make_plugin_manager(env={"ORION_LOAD_PLUGINS": "other-dist"})
    assert loaded_entrypoints(pm) == {"otherplug"}
    assert pm.origins["otherplug"].distribution == "other-dist"


@pytest.mark.parametrize("spelling", ["Other_Dist", "other.dist", "OTHER-DIST"])
def test_allow_list_accepts_any_spelling_of_a_distribution_name(two_plugins, spelling):
    pm = make_plugin_manager(env={"ORION_LOAD_PLUGINS": spelling})
    assert loaded_entrypoints(pm) == {"otherplug"}


def test_allow_list_with_several_names_and_spaces(two_plugins):
    pm = make_plugin_manager(env={"ORION_LOAD_PLUGINS": " fakeplug , otherplug ,"})
    assert loaded_entrypoints(pm) == {"fakeplug", "otherplug"}


def test_empty_allow_list_loads_no_plugin(two_plugins):
    pm = make_plugin_manager(env={"ORION_LOAD_PLUGINS": ""})
    assert loaded_entrypoints(pm) == set()
    assert "fakeplug_mod" not in sys.modules


def test_unknown_name_in_allow_list_is_an_error(two_plugins):
    with pytest.raises(PluginError) as info:
        make_plugin_manager(env={"ORION_LOAD_PLUGINS": "fakeplug,nosuchplug"})
    message = str(info.value)
    assert "'nosuchplug'" in message and "ORION_LOAD_PLUGINS" in message
    assert "fakeplug" in message and "otherplug" in message  # what is installed


def test_allow_list_keeps_a_broken_plugin_from_being_imported(site):
    site.add("fakeplug", RECORDER)
    site.add("brokenplug", "raise RuntimeError('must not be imported')")
    pm = make_plugin_manager(env={"ORION_LOAD_PLUGINS": "fakeplug"})
    assert loaded_entrypoints(pm) == {"fakeplug"}


def test_parse_allow_list():
    assert parse_allow_list(None) is None
    assert parse_allow_list("") == set()
    assert parse_allow_list(" , ") == set()
    assert parse_allow_list("a, b,,c ") == {"a", "b", "c"}
    assert canonical_distribution_name("My_Cool.Plugin") == "my-cool-plugin"


def test_blocked_entrypoint_is_not_loaded(site):
    site.add("fakeplug", "raise RuntimeError('must not be imported')")
    pm = make_plugin_manager(env={}, blocked=["fakeplug"])
    assert not pm.has_plugin("fakeplug")


# -- load errors --------------------------------------------------------------------------------


def test_import_error_names_the_plugin_and_its_distribution(site):
    site.add("fakeplug", "import orion\nraise ImportError('needs libfoo')\n")
    with pytest.raises(PluginError) as info:
        make_plugin_manager(env={})
    message = str(info.value)
    assert "'fakeplug'" in message
    assert "fakeplug_mod" in message
    assert "distribution fakeplug" in message
    assert "ImportError: needs libfoo" in message
    assert isinstance(info.value.__cause__, ImportError)


def test_syntax_error_in_a_plugin_names_it(site):
    site.add("fakeplug", "def broken(:\n")
    with pytest.raises(PluginError, match=r"'fakeplug'.*SyntaxError"):
        make_plugin_manager(env={})


def test_typo_in_a_hook_name_fails_check_and_names_the_plugin(site):
    site.add("fakeplug", """\
        from orion import hookimpl

        @hookimpl
        def lifecycle_transtion(lifecycle, transition):
            pass
        """)
    with pytest.raises(PluginError) as info:
        make_plugin_manager(env={})
    message = str(info.value)
    assert "'fakeplug'" in message and "distribution fakeplug" in message
    assert "'lifecycle_transtion'" in message
    assert "did you mean 'lifecycle_transition'?" in message


def test_check_on_a_registered_plugin_with_a_typo():
    class Typo:
        @hookimpl
        def gate_tool(self, tools, request):
            return None

    pm = make_plugin_manager(entrypoints=False)
    pm.register(Typo(), "typo")  # unknown hooks are only found by check()
    with pytest.raises(PluginError, match=r"plugin 'typo' implements unknown hook 'gate_tool'; "
                                          r"did you mean 'gate_tools'\?"):
        pm.check()


def test_optional_unknown_hooks_pass_check():
    class Optional:
        @hookimpl(optionalhook=True)
        def some_future_hook(self):
            pass

    pm = make_plugin_manager(entrypoints=False)
    pm.register(Optional(), "optional")
    pm.check()


def test_wrong_argument_name_fails_at_register(site):
    site.add("fakeplug", """\
        from orion import hookimpl

        @hookimpl
        def lifecycle_transition(lifecycle, transiton):
            pass
        """)
    with pytest.raises(PluginError) as info:
        make_plugin_manager(env={})
    message = str(info.value)
    assert "'fakeplug'" in message and "distribution fakeplug" in message
    assert "transiton" in message


def test_wrong_argument_name_leaves_the_manager_untouched():
    class Bad:
        @hookimpl
        def lifecycle_started(self, lifecycle):
            pass

        @hookimpl
        def store_traces(self, event):
            pass

    pm = make_plugin_manager(entrypoints=False)
    with pytest.raises(PluginError,
                       match=r"plugin 'bad': store_traces\(\) takes no argument named 'event' "
                             r"\(did you mean 'events'\?\); the hook's arguments are: events, "
                             r"blobs, state_dir"):
        pm.register(Bad(), "bad")
    assert not pm.has_plugin("bad")
    assert "bad" not in pm.origins
    assert pm.hook.lifecycle_started.get_hookimpls() == []


def test_a_wrong_argument_name_is_reported_at_the_plugins_own_file_and_line(tmp_path, monkeypatch):
    plugin = tmp_path / "licence_plugin.py"
    plugin.write_text(textwrap.dedent("""\
        import orion


        @orion.hookimpl
        def build_context(requst):
            return []
        """), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("licence_plugin")
    pm = make_plugin_manager(entrypoints=False)
    with pytest.raises(PluginError) as info:
        pm.register(module)
    message = str(info.value)
    assert message.startswith(f"{plugin}:5: ")
    assert "build_context() takes no argument named 'requst' (did you mean 'request'?)" in message
    assert "the hook's arguments are: request" in message


def test_registering_a_name_twice_is_an_error():
    pm = make_plugin_manager(entrypoints=False)

    class A:
        pass

    pm.register(A(), "same")
    with pytest.raises(PluginError, match="'same' cannot be registered"):
        pm.register(A(), "same")


def test_unregister_forgets_the_plugin_and_its_registrations():
    class Guards:
        @hookimpl
        def register_guards(self, register):
            register("always", lambda lifecycle, transition: True)

    pm = make_plugin_manager(entrypoints=False)
    plugin = Guards()
    pm.register(plugin, "guards")
    assert "always" in pm.registry.guards
    pm.unregister(plugin)  # by object, not by name
    assert "guards" not in pm.origins
    assert "always" not in pm.registry.guards


# -- duplicate and invalid registrations ---------------------------------------------------------


class Args(BaseModel):
    path: str


def _registering(hook: str, *names: str):
    class Plugin:
        pass

    def impl(self, register):
        for name in names:
            if hook == "register_tools":
                register(ToolSpec(name, "a tool", Args))
            else:
                register(name, lambda lifecycle, transition: True)

    impl.__name__ = hook
    setattr(Plugin, hook, hookimpl(impl))
    return Plugin()


@pytest.mark.parametrize("hook,kind", [("register_guards", "guard"),
                                       ("register_actions", "action"),
                                       ("register_tools", "tool")])
def test_duplicate_names_across_two_plugins_name_both(hook, kind):
    pm = make_plugin_manager(entrypoints=False)
    pm.register(_registering(hook, "shared"), "first_plugin")
    pm.register(_registering(hook, "shared"), "second_plugin")
    with pytest.raises(PluginError) as info:
        pm.registry
    message = str(info.value)
    assert f"{kind} 'shared' is registered twice" in message
    assert "'first_plugin'" in message and "'second_plugin'" in message


def test_duplicate_with_a_builtin_names_the_builtin():
    pm = make_plugin_manager(entrypoints=False)
    pm.register(_registering("register_actions", "finalize"), "mine")
    with pytest.raises(PluginError, match=r"orion_plugins.finalization.*'mine'|'mine'.*"
                                          r"orion_plugins.finalization"):
        pm.registry


@pytest.mark.parametrize("bad", ["", "has space", "1starts_with_digit", 42])
def test_guard_names_must_be_usable_in_a_statechart(bad):
    pm = make_plugin_manager(entrypoints=False)
    pm.register(_registering("register_guards", bad), "badnames")
    with pytest.raises(PluginError, match=r"plugin 'badnames' registered guard"):
        pm.registry


def test_registry_name_rule_matches_the_statechart_schema():
    assert f"^{NAME.pattern}$" == PLUGIN_NAME


def test_registering_something_not_callable_or_not_a_toolspec():
    class NotCallable:
        @hookimpl
        def register_actions(self, register):
            register("act", "not a function")

    class NotATool:
        @hookimpl
        def register_tools(self, register):
            register({"name": "read"})

    for plugin, name, match in ((NotCallable(), "nc", "not callable"),
                                (NotATool(), "nt", "not a ToolSpec")):
        pm = make_plugin_manager(entrypoints=False)
        pm.register(plugin, name)
        with pytest.raises(PluginError, match=f"plugin '{name}'.*{match}"):
            pm.registry


def test_a_register_hook_that_raises_names_the_plugin():
    class Raises:
        @hookimpl
        def register_tools(self, register):
            register(ToolSpec("bad name!", "x", Args))  # ToolSpec rejects the name

    pm = make_plugin_manager(entrypoints=False)
    pm.register(Raises(), "raises")
    with pytest.raises(PluginError, match=r"plugin 'raises' failed in register_tools: "
                                          r"ValueError: tool name 'bad name!'"):
        pm.registry


def test_register_hooks_may_declare_defaults():
    class Defaults:
        @hookimpl
        def register_guards(self, register=None):
            register("with_default", lambda lifecycle, transition: True)

    pm = make_plugin_manager(entrypoints=False)
    pm.register(Defaults(), "defaults")
    assert pm.registry.guards["with_default"].plugin == "defaults"


def test_register_hooks_cannot_be_wrappers():
    class Wrapper:
        @hookimpl(wrapper=True)
        def register_guards(self, register):
            register("never", lambda lifecycle, transition: True)
            return (yield)

    pm = make_plugin_manager(entrypoints=False)
    pm.register(Wrapper(), "wrapper")
    with pytest.raises(PluginError, match=r"'wrapper': register_guards cannot be a wrapper"):
        pm.registry


# -- failure isolation ---------------------------------------------------------------------------


class Recorder:
    def __init__(self):
        self.events: list[tuple] = []

    @hookimpl
    def lifecycle_started(self, lifecycle):
        self.events.append(("started", lifecycle.state))

    @hookimpl
    def lifecycle_transition(self, lifecycle, transition):
        self.events.append(("transition", transition.source, transition.dest))

    @hookimpl
    def lifecycle_finished(self, lifecycle):
        self.events.append(("finished", lifecycle.state))


class FailsPlain:
    @hookimpl
    def lifecycle_started(self, lifecycle):
        raise RuntimeError("started broke")

    @hookimpl
    def lifecycle_transition(self, lifecycle, transition):
        raise RuntimeError("plain broke")

    @hookimpl
    def lifecycle_finished(self, lifecycle):
        raise RuntimeError("finished broke")


class FailsBeforeYield:
    @hookimpl(wrapper=True)
    def lifecycle_transition(self, lifecycle, transition):
        raise ValueError("before yield")
        yield  # pragma: no cover


class FailsAfterYield:
    def __init__(self):
        self.saw: list = []

    @hookimpl(wrapper=True)
    def lifecycle_transition(self, lifecycle, transition):
        result = yield
        self.saw.append(result)
        raise KeyError("after yield")


class FailsOldStyle:
    @hookimpl(hookwrapper=True)
    def lifecycle_transition(self, lifecycle, transition):
        outcome = yield
        outcome.get_result()
        raise LookupError("old-style after yield")


def test_failing_observers_are_isolated_and_reported(tmp_path, caplog):
    pm = make_plugin_manager(entrypoints=False)
    recorder, after = Recorder(), FailsAfterYield()
    pm.register(FailsPlain(), "plain")
    pm.register(recorder, "recorder")
    pm.register(FailsBeforeYield(), "before")
    pm.register(after, "after")
    pm.register(FailsOldStyle(), "oldstyle")
    definition = load_definition(chart(tmp_path), plugins=pm)

    with caplog.at_level(logging.WARNING, logger="orion.plugins"):
        lifecycle = definition.create()
        assert lifecycle.trigger("open")
        assert lifecycle.trigger("leave")

    assert lifecycle.state == "gone" and lifecycle.finished
    assert recorder.events == [("started", "closed"), ("transition", "closed", "open"),
                               ("transition", "open", "gone"), ("finished", "gone")]
    assert after.saw == [[], []]  # the other observers' results, on every transition

    failures = [(f.plugin, f.hook, f.error) for f in pm.failures]
    assert failures.count(("plain", "lifecycle_started", "RuntimeError: started broke")) == 1
    assert failures.count(("plain", "lifecycle_transition", "RuntimeError: plain broke")) == 2
    assert failures.count(("before", "lifecycle_transition", "ValueError: before yield")) == 2
    assert failures.count(("after", "lifecycle_transition", "KeyError: 'after yield'")) == 2
    assert failures.count(("oldstyle", "lifecycle_transition",
                           "LookupError: old-style after yield")) == 2
    assert failures.count(("plain", "lifecycle_finished", "RuntimeError: finished broke")) == 1
    assert len(failures) == 10
    assert all("Traceback" in f.traceback for f in pm.failures)

    logged = [r.getMessage() for r in caplog.records if r.name == "orion.plugins"]
    assert len(logged) == 10
    # each log line names the line of the plugin's code that raised
    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1)
                if 'raise ValueError("before yield")' in text)
    assert (f"plugin before failed in lifecycle_transition: ValueError: before yield (at "
            f"{__file__}:{line})") in logged


def test_store_traces_failure_is_isolated(tmp_path):
    from orion.trace.events import TraceEvent

    stored = []

    class Fails:
        @hookimpl
        def store_traces(self, events):
            raise OSError("disk full")

    class Stores:
        @hookimpl
        def store_traces(self, events):
            stored.extend(events)

    pm = make_plugin_manager(entrypoints=False)
    pm.register(Fails(), "fails")
    pm.register(Stores(), "stores")
    event = TraceEvent("lifecycle", "transition", 1.0)
    pm.hook.store_traces(events=[event], blobs={}, state_dir=tmp_path)
    assert stored == [event]
    assert [(f.plugin, f.hook) for f in pm.failures] == [("fails", "store_traces")]


def test_observers_with_default_arguments_are_isolated(tmp_path):
    """pluggy passes arguments that have defaults as keywords."""
    seen = []

    class Defaults:
        @hookimpl
        def lifecycle_transition(self, lifecycle, transition=None):
            seen.append(transition.trigger)
            raise RuntimeError("with a default")

        @hookimpl(wrapper=True)
        def lifecycle_finished(self, lifecycle=None):
            seen.append("finished")
            return (yield)

    pm = make_plugin_manager(entrypoints=False)
    pm.register(Defaults(), "defaults")
    lifecycle = load_definition(chart(tmp_path), plugins=pm).create()
    lifecycle.trigger("open")
    lifecycle.trigger("leave")
    assert seen == ["open", "leave", "finished"]
    assert [f.hook for f in pm.failures] == ["lifecycle_transition"] * 2


def test_a_wrapper_that_does_not_yield_is_reported(tmp_path):
    class NoYield:
        @hookimpl(wrapper=True)
        def lifecycle_transition(self, lifecycle, transition):
            if False:  # pragma: no cover
                yield
            return None

    pm = make_plugin_manager(entrypoints=False)
    pm.register(NoYield(), "noyield")
    lifecycle = load_definition(chart(tmp_path), plugins=pm).create()
    assert lifecycle.trigger("open")
    assert [(f.plugin, f.error) for f in pm.failures] == [
        ("noyield", "RuntimeError: wrapper returned without yielding")]


def test_a_wrapper_observer_times_the_other_observers(tmp_path):
    timings: list[tuple[str, float, list]] = []

    class Slow:
        @hookimpl
        def lifecycle_transition(self, lifecycle, transition):
            time.sleep(0.02)

    class Timer:
        @hookimpl(wrapper=True)
        def lifecycle_transition(self, lifecycle, transition):
            started = time.perf_counter()
            result = yield
            timings.append((transition.trigger, (time.perf_counter() - started) * 1000, result))
            return result

    pm = make_plugin_manager(entrypoints=False)
    pm.register(Slow(), "slow")
    pm.register(Timer(), "timer")
    lifecycle = load_definition(chart(tmp_path), plugins=pm).create()
    lifecycle.trigger("open")
    [(trigger, elapsed_ms, result)] = timings
    assert trigger == "open"
    assert elapsed_ms >= 20
    assert result == []
    assert pm.failures == []


def test_a_failing_guard_fails_closed_and_is_reported(tmp_path):
    class Vault:
        def __init__(self):
            self.notes = []

        @hookimpl
        def register_guards(self, register):
            def may_unlock(lifecycle, transition):
                raise PermissionError("key server down")
            register("may_unlock", may_unlock)

        @hookimpl
        def register_actions(self, register):
            register("note_unlock", lambda lifecycle, transition: self.notes.append(1))

    pm = make_plugin_manager(entrypoints=False)
    vault = Vault()
    pm.register(vault, "vault")
    lifecycle = load_definition(chart(tmp_path, GUARDED, "vault.yaml"), plugins=pm).create()
    with pytest.raises(GuardError, match=r"plugin 'vault' failed in guard 'may_unlock' "
                                         r"\(.*test_plugins.py:\d+\) deciding 'unlock'"):
        lifecycle.trigger("unlock")
    assert lifecycle.state == "locked"
    assert vault.notes == []
    assert [(f.plugin, f.hook, f.error) for f in pm.failures] == [
        ("vault", "guard may_unlock", "PermissionError: key server down")]


def test_non_observer_hooks_are_not_isolated():
    """A failing validator (not an observer) raises to the caller, as a PluginFailed that
    names the plugin and the line of its code; the plugin's error is its cause."""
    from orion.validation import ValidationRequest, collect_issues

    class Fails:
        @hookimpl
        def validate_content(self, request):
            raise RuntimeError("no rules")

    pm = make_plugin_manager(entrypoints=False)
    pm.register(Fails(), "fails")
    line = Fails.validate_content.__code__.co_firstlineno + 2  # the decorator, the def, the raise
    with pytest.raises(PluginFailed) as raised:
        collect_issues(pm, ValidationRequest("a.md", b"text\n"))
    assert str(raised.value) == (f"plugin 'fails' failed in validate_content ({__file__}:{line}): "
                                 "RuntimeError: no rules")
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert [(f.plugin, f.hook) for f in pm.failures] == [("fails", "validate_content")]


def test_a_failing_context_block_of_a_plugin_is_left_out_and_reported():
    """A team's build_context that raises leaves the request without its block (the others
    stay); the failure is reported with the line of its code."""
    from orion.runtime.context import ContextBlock, ContextRequest, build_context

    class Fails:
        @hookimpl
        def build_context(self, request):
            raise RuntimeError("no context")

    class Works:
        @hookimpl
        def build_context(self, request):
            return ContextBlock("works", "the team's rules")

    pm = make_plugin_manager(entrypoints=False)
    pm.register(Fails(), "fails")
    pm.register(Works(), "works")
    blocks = build_context(pm, ContextRequest())
    assert "works" in [block.name for block in blocks]
    [failure] = pm.failures
    assert (failure.plugin, failure.hook, failure.error) == ("fails", "build_context",
                                                             "RuntimeError: no context")
    assert failure.where == f"{__file__}:{Fails.build_context.__code__.co_firstlineno + 2}"
