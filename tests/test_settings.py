"""Typed settings: defaults, overrides from orion.yaml and the environment, and their errors.

Precedence, lowest first: the statechart's default, orion.yaml, the setting's own ``env``
variable, then ``ORION_<STATECHART>_<SETTING>``.
"""

from __future__ import annotations

import textwrap
from types import MappingProxyType

import pytest

from orion.errors import ConfigError
from orion.hooks.manager import make_plugin_manager
from orion.statechart import builtin_statecharts, checks, load_definition
from orion.statechart.model.schema import SettingSpec, StatechartSpec
from orion.statechart.interpreter.settings import coerce, env_names, resolve
from orion.config.yamlsource import load_yaml

ALIAS = "WRITE_SESSION_IDLE_MS"
OWN = "ORION_WRITE_SESSION_IDLE_MS"


@pytest.fixture(scope="module")
def write_session() -> StatechartSpec:
    [path] = [p for p in builtin_statecharts() if p.stem == "write_session"]
    spec, diagnostics = checks.check(load_yaml(path))
    assert diagnostics == [] and spec is not None
    return spec


@pytest.fixture()
def typed(tmp_path) -> StatechartSpec:
    """A statechart with one setting of each type."""
    path = tmp_path / "typed.yaml"
    path.write_text(textwrap.dedent("""
        statechart: typed
        initial: idle
        settings:
          count: {type: int, default: 3, min: 0, max: 10}
          ratio: {type: float, default: 0.5, min: 0, max: 1}
          strict: {type: bool, default: false}
          label: {type: str, default: plain}
        states:
          idle: {final: true}
        """), encoding="utf-8")
    spec, diagnostics = checks.check(load_yaml(path))
    assert diagnostics == [] and spec is not None
    return spec


def config_error(spec, overrides=None, env=None, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        resolve(spec, overrides, env, **kwargs)
    return str(info.value)


# -- defaults and precedence ----------------------------------------------------------------


def test_defaults_without_overrides(write_session):
    assert dict(resolve(write_session)) == {
        "idle_ms": 2000, "max_idle_prompts": 3, "max_continuations": 3, "max_corrections": 3,
        "flush_lines": 50, "flush_interval_ms": 5000, "strict_done": False,
        "orphan_ttl_ms": 3600000, "keep_backups": 100}


def test_resolved_settings_are_read_only(write_session):
    settings = resolve(write_session, env={})
    assert isinstance(settings, MappingProxyType)
    with pytest.raises(TypeError):
        settings["idle_ms"] = 1  # type: ignore[index]


def test_env_names_weakest_first(write_session):
    assert env_names(write_session, "idle_ms") == [ALIAS, OWN]
    assert env_names(write_session, "strict_done") == ["ORION_WRITE_SESSION_STRICT_DONE"]


@pytest.mark.parametrize(("overrides", "env", "expected"), [
    ({}, {}, 2000),
    ({"idle_ms": 700}, {}, 700),
    ({"idle_ms": 700}, {ALIAS: "800"}, 800),
    ({"idle_ms": 700}, {ALIAS: "800", OWN: "900"}, 900),
    ({}, {OWN: "900"}, 900),
    ({}, {ALIAS: "800", OWN: "900"}, 900),
], ids=["default", "orion.yaml", "alias-beats-orion.yaml", "own-beats-all", "own-only",
        "own-beats-alias"])
def test_precedence(write_session, overrides, env, expected):
    settings = resolve(write_session, overrides, env, origin="orion.yaml")
    assert settings["idle_ms"] == expected
    assert settings["max_corrections"] == 3  # the others keep their defaults


def test_setting_without_an_alias_is_overridden_by_its_orion_variable(write_session):
    env = {"ORION_WRITE_SESSION_MAX_CONTINUATIONS": "5", "MAX_CONTINUATIONS": "9",
           "ORION_PLAN_MODE_MAX_CONTINUATIONS": "7"}
    assert resolve(write_session, env=env)["max_continuations"] == 5


def test_environment_is_not_read_unless_given(write_session, monkeypatch):
    monkeypatch.setenv(ALIAS, "1234")
    assert resolve(write_session)["idle_ms"] == 2000
    assert resolve(write_session, env={ALIAS: "1234"})["idle_ms"] == 1234


# -- text from the environment --------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("1", True), ("true", True), (" Yes ", True), ("ON", True),
    ("0", False), ("False", False), ("no", False), ("off", False),
])
def test_bool_from_the_environment(write_session, text, expected):
    env = {"ORION_WRITE_SESSION_STRICT_DONE": text}
    assert resolve(write_session, env=env)["strict_done"] is expected


def test_numbers_and_text_from_the_environment(typed):
    env = {"ORION_TYPED_COUNT": " 7 ", "ORION_TYPED_RATIO": "1e-1", "ORION_TYPED_LABEL": " x "}
    assert dict(resolve(typed, env=env)) == {"count": 7, "ratio": 0.1, "strict": False,
                                             "label": " x "}


@pytest.mark.parametrize(("var", "text", "message"), [
    (ALIAS, "fast", "expected int, got 'fast'"),
    (ALIAS, "2.5", "expected int, got '2.5'"),
    (ALIAS, "", "expected int, got ''"),
    (OWN, "0", "0 is below the minimum 1"),
    ("ORION_WRITE_SESSION_STRICT_DONE", "maybe", "expected bool, got 'maybe'"),
])
def test_invalid_environment_value_names_the_variable(write_session, var, text, message):
    assert config_error(write_session, env={var: text}) == \
        f"environment variable {var}: {message}"


@pytest.mark.parametrize(("var", "text", "message"), [
    ("ORION_TYPED_RATIO", "nan", "expected float, got 'nan'"),
    ("ORION_TYPED_RATIO", "inf", "expected float, got 'inf'"),
    ("ORION_TYPED_RATIO", "1.5", "1.5 is above the maximum 1"),
    ("ORION_TYPED_COUNT", "11", "11 is above the maximum 10"),
    ("ORION_TYPED_COUNT", "-1", "-1 is below the minimum 0"),
])
def test_numbers_out_of_range_or_not_finite(typed, var, text, message):
    # nan compares false with every bound, so it must be refused on its own.
    assert config_error(typed, env={var: text}) == f"environment variable {var}: {message}"


# -- values from orion.yaml -----------------------------------------------------------------


@pytest.mark.parametrize(("name", "value", "message"), [
    ("idle_ms", "fast", "expected int, got 'fast'"),
    ("idle_ms", True, "expected int, got True"),
    ("idle_ms", 1.5, "expected int, got 1.5"),
    ("idle_ms", 0, "0 is below the minimum 1"),
    ("max_continuations", -1, "-1 is below the minimum 0"),
    ("strict_done", 1, "expected bool, got 1"),
])
def test_invalid_orion_yaml_value_names_the_file_and_setting(write_session, name, value, message):
    assert config_error(write_session, {name: value}, {}, origin="orion.yaml") == \
        f"orion.yaml: write_session.{name}: {message}"


def test_orion_yaml_values_of_each_type(typed):
    overrides = {"count": 10, "ratio": 1, "strict": True, "label": "fancy"}
    assert dict(resolve(typed, overrides, {})) == overrides
    assert config_error(typed, {"label": 5}) == "overrides: typed.label: expected str, got 5"


def test_a_bad_value_is_reported_even_when_a_stronger_source_overrides_it(write_session):
    # Otherwise the broken orion.yaml would only fail once the variable is unset.
    assert config_error(write_session, {"idle_ms": "fast"}, {OWN: "500"},
                        origin="orion.yaml") == \
        "orion.yaml: write_session.idle_ms: expected int, got 'fast'"
    assert config_error(write_session, {}, {ALIAS: "x", OWN: "500"}) == \
        f"environment variable {ALIAS}: expected int, got 'x'"


def test_unknown_override_names(write_session):
    assert config_error(write_session, {"idle": 1, "flush": 2}, {}, origin="orion.yaml") == (
        "orion.yaml: statechart 'write_session' has no setting 'flush', 'idle' (it has: "
        "idle_ms, max_idle_prompts, max_continuations, max_corrections, flush_lines, "
        "flush_interval_ms, strict_done, orphan_ttl_ms, keep_backups)")


def test_unknown_override_for_a_statechart_without_settings():
    spec = StatechartSpec.model_validate(
        {"statechart": "bare", "initial": "a", "states": {"a": {"final": True}}})
    assert dict(resolve(spec, {}, {})) == {}
    assert config_error(spec, {"x": 1}) == \
        "overrides: statechart 'bare' has no setting 'x' (it has: none)"


# -- coerce ---------------------------------------------------------------------------------


def test_coerce_parses_text_unless_strict():
    setting = SettingSpec(type="int", default=1)
    assert coerce(setting, "42", "somewhere") == 42
    with pytest.raises(ValueError, match=r"^somewhere: expected int, got '42'$"):
        coerce(setting, "42", "somewhere", strict=True)
    text = SettingSpec(type="str", default="a")
    assert coerce(text, "42", "somewhere", strict=True) == "42"


# -- through load_definition ----------------------------------------------------------------


@pytest.fixture(scope="module")
def pm():
    return make_plugin_manager(entrypoints=False)


def test_load_definition_applies_overrides_and_environment(pm):
    [path] = [p for p in builtin_statecharts() if p.stem == "write_session"]
    definition = load_definition(path, plugins=pm, overrides={"idle_ms": 700, "flush_lines": 9},
                                 env={OWN: "900"})
    assert definition.settings["idle_ms"] == 900
    assert definition.settings["flush_lines"] == 9
    assert definition.timers["session_active.awaiting_done_or_more_content"] == (
        ("idle_timeout", 900.0),)


def test_load_definition_raises_config_error_for_bad_values(pm):
    [path] = [p for p in builtin_statecharts() if p.stem == "write_session"]
    with pytest.raises(ConfigError, match=rf"^environment variable {ALIAS}: expected int, "
                                          r"got 'soon'$"):
        load_definition(path, plugins=pm, env={ALIAS: "soon"})
    with pytest.raises(ConfigError, match=r"^orion.yaml: write_session.flush_lines: "
                                          r"0 is below the minimum 1$"):
        load_definition(path, plugins=pm, overrides={"flush_lines": 0}, env={})
