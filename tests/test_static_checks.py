"""Static checks of statechart files: schema, structure, flow, settings and plugin names.

Every test asserts the complete list of findings as ``path:line:col: message``, so a check
that disappears, moves or starts reporting extra noise fails a test.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from orion.errors import StatechartError
from orion.hooks.manager import make_plugin_manager
from orion.statechart import builtin_statecharts, checks, load_definition
from orion.statechart.interpreter.definition import parse
from orion.config.yamlsource import load_yaml

NAME = "chart.yaml"


@pytest.fixture(scope="module")
def pm():
    return make_plugin_manager(entrypoints=False)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / NAME
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def relative(tmp_path: Path, diagnostics) -> list[str]:
    """``chart.yaml:line:col: message`` for each diagnostic (the full path made relative)."""
    prefix = f"{tmp_path}/"
    assert all(d.path == str(tmp_path / NAME) for d in diagnostics)
    return [str(d).removeprefix(prefix) for d in diagnostics]


def findings(tmp_path: Path, text: str, names: checks.Names | None = None) -> list[str]:
    """The findings of the static checks (without the plugin-name check unless ``names``)."""
    doc = load_yaml(write(tmp_path, text))
    _, diagnostics = checks.check(doc, names)
    return relative(tmp_path, diagnostics)


def findings_with_plugins(tmp_path: Path, text: str, pm) -> list[str]:
    _, _, diagnostics = parse(write(tmp_path, text), pm)
    return relative(tmp_path, diagnostics)


#: A small valid statechart; tests copy it and change one thing.
VALID = textwrap.dedent("""
    statechart: demo
    initial: idle
    settings:
      idle_ms: {type: int, default: 100}
    states:
      idle: {}
      busy:
        after:
          - ms: idle_ms
            dest: done
      done:
        final: true
    transitions:
      - trigger: start
        source: idle
        dest: busy
    """).lstrip("\n")


def test_the_valid_example_has_no_findings(tmp_path):
    doc = load_yaml(write(tmp_path, VALID))
    spec, diagnostics = checks.check(doc)
    assert diagnostics == []
    assert spec is not None and spec.statechart == "demo"


# -- the document as a whole ----------------------------------------------------------------


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "~\n"])
def test_a_file_that_is_not_a_mapping(tmp_path, text):
    assert findings(tmp_path, text) == [
        "chart.yaml:1:1: a statechart file must be a mapping with 'statechart', 'initial' "
        "and 'states'"]


def test_missing_required_top_level_fields(tmp_path):
    assert findings(tmp_path, "description: nothing else\n") == [
        "chart.yaml:1:1: missing required field 'statechart'",
        "chart.yaml:1:1: missing required field 'initial'",
        "chart.yaml:1:1: missing required field 'states'",
    ]


def test_missing_required_field_in_a_transition(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle: {}
        transitions:
          - source: idle
            dest: idle
        """) == ["chart.yaml:6:5: transitions.0: missing required field 'trigger'"]


# -- unknown fields -------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("""
        statechart: demo
        initail: idle
        states:
          idle: {}
        """, ["chart.yaml:1:1: missing required field 'initial'",
              "chart.yaml:2:1: unknown field 'initail'; did you mean 'initial'?"], id="top"),
    pytest.param("""
        statechart: demo
        initial: idle
        states:
          idle:
            entyr: [a]
        """, ["chart.yaml:5:5: unknown field 'entyr'; did you mean 'entry'?"], id="state"),
    pytest.param("""
        statechart: demo
        initial: idle
        states:
          idle:
            initial: inner
            states:
              inner:
                descripton: deep
        """, ["chart.yaml:8:9: unknown field 'descripton'; did you mean 'description'?"],
        id="nested-state"),
    pytest.param("""
        statechart: demo
        initial: idle
        states:
          idle: {}
        transitions:
          - {trigger: go, source: idle, dest: idle, guard: ok}
        """, ["chart.yaml:6:45: unknown field 'guard'; did you mean 'guards'?"], id="transition"),
    pytest.param("""
        statechart: demo
        initial: idle
        states:
          idle:
            after:
              - ms: 5
                dset: idle
        """, ["chart.yaml:7:9: unknown field 'dset'; did you mean 'dest'?"], id="after"),
    pytest.param("""
        statechart: demo
        initial: idle
        settings:
          count: {type: int, defualt: 1}
        states:
          idle: {final: true}
        """, ["chart.yaml:4:10: settings.count: missing required field 'default'",
              "chart.yaml:4:22: unknown field 'defualt'; did you mean 'default'?"], id="setting"),
])
def test_unknown_field_at_every_level(tmp_path, text, expected):
    assert findings(tmp_path, text) == expected


def test_did_you_mean_only_suggests_fields_of_the_same_level(tmp_path):
    # 'initial' exists for states, not for transitions; 'colour' is close to nothing.
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle: {}
        transitions:
          - trigger: go
            source: idle
            inital: idle
            colour: red
        """) == ["chart.yaml:8:5: unknown field 'inital'",
                 "chart.yaml:9:5: unknown field 'colour'"]


def test_context_is_free_form(tmp_path):
    assert findings(tmp_path, VALID + "context: {anything: 1, nested: {ok: [1, 2]}}\n") == []


# -- field values ---------------------------------------------------------------------------


def test_state_without_a_mapping(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle:
          busy: [a]
        """) == ["chart.yaml:4:8: states.idle: expected a mapping, got nothing (null)",
                 "chart.yaml:5:9: states.busy: expected a mapping, got a list"]


def test_invalid_state_name_is_reported_at_the_name(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle: {}
          2nd: {}
        """) == ["chart.yaml:5:3: invalid name '2nd' in states: "
                 "String should match pattern '^[A-Za-z][A-Za-z0-9_-]*$'"]


def test_wrong_scalar_types(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle:
            final: "yes"
            entry: 5
        """) == ["chart.yaml:5:12: states.idle.final: Input should be a valid boolean",
                 "chart.yaml:6:12: states.idle.entry: Input should be a valid list"]


@pytest.mark.parametrize(("ms", "expected"), [
    ("yes", "bool True is not valid: input should be a valid integer, "
            "or input should be a valid string"),
    ("-5", "Input should be greater than or equal to 0"),
    ("2.0", "float 2.0 is not valid: input should be a valid integer, "
            "or input should be a valid string"),
    ("'not a name'", "String should match pattern '^[A-Za-z_][A-Za-z0-9_]*$'"),
])
def test_invalid_after_delay(tmp_path, ms, expected):
    # YAML reads `ms: yes` as true; it must not become a 1 ms timer.
    assert findings(tmp_path, f"""
        statechart: demo
        initial: idle
        states:
          idle:
            after:
              - ms: {ms}
                dest: idle
        """) == [f"chart.yaml:6:13: states.idle.after.0.ms: {expected}"]


def test_transition_with_an_empty_source_list(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle: {}
        transitions:
          - {trigger: go, source: [], dest: idle}
        """) == ["chart.yaml:6:27: transitions.0.source: "
                 "List should have at least 1 item after validation, not 0"]


def test_context_must_be_json_data(tmp_path):
    assert findings(tmp_path, VALID + "context:\n  since: 2024-01-31\n") == [
        "chart.yaml:18:3: context values must be JSON data: "
        "Object of type date is not JSON serializable"]


# -- states that do not exist ---------------------------------------------------------------


def test_transition_source_and_dest_that_do_not_exist(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle: {}
          busy: {}
          done: {final: true}
        transitions:
          - trigger: start
            source: idel
            dest: bussy
          - trigger: finish
            source: [idle, busy, nowhere]
            dest: done
        """) == [
        # 'busy' is then unreachable: the checks also see what a typo does to the flow.
        "chart.yaml:5:3: state 'busy' is unreachable from the initial state 'idle'",
        "chart.yaml:9:13: source state 'idel' does not exist; did you mean 'idle'?",
        "chart.yaml:10:11: destination state 'bussy' does not exist; did you mean 'busy'?",
        "chart.yaml:12:26: source state 'nowhere' does not exist",
    ]


def test_nested_paths_must_be_absolute(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: outer
        states:
          outer:
            initial: inner
            states:
              inner: {}
          done: {final: true}
        transitions:
          - {trigger: go, source: inner, dest: outer.inner}
          - {trigger: stop, source: "*", dest: done}
        """) == ["chart.yaml:10:27: source state 'inner' does not exist; "
                 "did you mean 'outer.inner'?"]


def test_after_with_an_unknown_dest(tmp_path):
    text = VALID.replace("dest: done\n  done:", "dest: dnoe\n  done:")
    assert findings(tmp_path, text) == [
        "chart.yaml:10:15: destination state 'dnoe' does not exist; did you mean 'done'?",
        # With the only way to 'done' broken, the checks also see it cannot be reached.
        "chart.yaml:11:3: state 'done' is unreachable from the initial state 'idle'",
    ]


def test_after_naming_a_missing_setting(tmp_path):
    text = VALID.replace("- ms: idle_ms", "- ms: idle_msec")
    assert findings(tmp_path, text) == [
        "chart.yaml:9:13: 'after' delay names setting 'idle_msec', which is not in 'settings'"]


def test_after_naming_a_setting_that_is_not_an_int(tmp_path):
    text = VALID.replace("idle_ms: {type: int, default: 100}",
                         "idle_ms: {type: float, default: 1.5}")
    assert findings(tmp_path, text) == [
        "chart.yaml:9:13: 'after' delay setting 'idle_ms' must be an int, not float"]


# -- hierarchy ------------------------------------------------------------------------------


def test_compound_state_without_initial(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: outer
        states:
          outer:
            states:
              a: {}
        """) == ["chart.yaml:4:3: compound state 'outer' needs an 'initial' child"]


def test_initial_that_is_not_a_child(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: outer
        states:
          outer:
            initial: c
            states:
              a: {}
              b: {}
          c: {}
        """) == ["chart.yaml:5:14: initial 'c' is not a child of 'outer' (children: a, b)"]


def test_leaf_with_initial(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle:
            initial: busy
          busy: {}
        transitions:
          - {trigger: go, source: idle, dest: busy}
          - {trigger: back, source: busy, dest: idle}
        """) == ["chart.yaml:5:14: state 'idle' has no child states, "
                 "so it cannot have an 'initial'"]


def test_top_level_initial_that_is_not_a_top_level_state(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idel
        states:
          idle: {}
          outer:
            initial: inner
            states:
              inner: {}
        """) == ["chart.yaml:2:10: initial state 'idel' is not a top-level state "
                 "(top-level states: idle, outer); did you mean 'idle'?"]


def test_top_level_initial_cannot_be_a_path(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: outer.inner
        states:
          outer:
            initial: inner
            states:
              inner: {}
        """) == ["chart.yaml:2:10: initial: String should match pattern "
                 "'^[A-Za-z][A-Za-z0-9_-]*$'"]


# -- flow -----------------------------------------------------------------------------------


def test_unreachable_states(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle: {}
          island: {}
          outer:
            initial: a
            states:
              a: {}
              b: {}
          done: {final: true}
        transitions:
          - {trigger: go, source: idle, dest: outer}
          - {trigger: stop, source: outer, dest: done}
          - {trigger: hop, source: island, dest: outer.b}
        """) == [
        "chart.yaml:5:3: state 'island' is unreachable from the initial state 'idle'",
        "chart.yaml:10:7: state 'outer.b' is unreachable from the initial state 'idle'",
    ]


def test_reachability_follows_initial_children_timers_and_wildcards(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: outer
        states:
          outer:
            initial: a
            states:
              a:
                after: [{ms: 10, dest: outer.b}]
              b: {}
          fallback: {}
          done: {final: true}
        transitions:
          - {trigger: reset, source: "*", dest: fallback}
          - {trigger: stop, source: fallback, dest: done}
          - {trigger: stop, source: outer, dest: done}
        """) == []


def test_non_final_leaf_without_a_way_out(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle: {}
          stuck: {}
          done: {final: true}
        transitions:
          - {trigger: go, source: idle, dest: stuck}
          - {trigger: stop, source: idle, dest: done}
        """) == ["chart.yaml:5:3: state 'stuck' is not final but has no transition or timer "
                 "that leaves it"]


def test_internal_and_self_transitions_do_not_leave_a_state(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle: {}
          spinning: {}
          outer:
            initial: only
            states:
              only: {}
          done: {final: true}
        transitions:
          - {trigger: go, source: idle, dest: spinning}
          - {trigger: in, source: idle, dest: outer}
          - {trigger: stop, source: idle, dest: done}
          - {trigger: tick, source: spinning}
          - {trigger: again, source: spinning, dest: spinning}
          - {trigger: restart, source: outer, dest: outer}
        """) == [
        "chart.yaml:5:3: state 'spinning' is not final but has no transition or timer "
        "that leaves it",
        "chart.yaml:9:7: state 'outer.only' is not final but has no transition or timer "
        "that leaves it",
    ]


def test_a_timer_or_a_parent_transition_is_a_way_out(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: outer
        states:
          outer:
            initial: waiting
            states:
              waiting:
                after: [{ms: 5, trigger: wake, dest: outer.working}]
              working: {}
          done: {final: true}
        transitions:
          - {trigger: stop, source: outer, dest: done}
        """) == []


# -- final states ---------------------------------------------------------------------------


def test_transition_from_a_final_state(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle: {}
          done: {final: true}
        transitions:
          - {trigger: stop, source: idle, dest: done}
          - {trigger: again, source: [idle, done], dest: idle}
        """) == ["chart.yaml:8:37: final state 'done' cannot have transitions out of it"]


def test_wildcard_transitions_may_include_final_states(tmp_path):
    assert findings(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle: {}
          done: {final: true}
        transitions:
          - {trigger: stop, source: idle, dest: done}
          - {trigger: reset, source: "*", dest: idle}
        """) == []


@pytest.mark.parametrize("extra", [
    "initial: inner\n    states:\n      inner: {final: true}",
    "after: [{ms: 5, dest: idle}]",
    "exit: [cleanup]",
], ids=["children", "after", "exit"])
def test_final_state_cannot_have_children_timers_or_exit_actions(tmp_path, extra):
    text = textwrap.dedent("""
        statechart: demo
        initial: idle
        states:
          idle: {}
          done:
            final: true
            EXTRA
        transitions:
          - {trigger: stop, source: idle, dest: done}
        """).replace("EXTRA", extra)
    assert findings(tmp_path, text) == [
        "chart.yaml:5:3: final state 'done' cannot have child states, 'after' timers "
        "or exit actions"]


def test_final_state_may_have_entry_actions(tmp_path):
    text = VALID.replace("final: true", "final: true\n    entry: [notify]")
    assert findings(tmp_path, text) == []


# -- settings -------------------------------------------------------------------------------


SETTINGS = textwrap.dedent("""
    statechart: demo
    initial: idle
    settings:
      SETTING
    states:
      idle: {final: true}
    """)


@pytest.mark.parametrize(("setting", "message"), [
    ("count: {type: int, default: '2000'}",
     "4:31: settings.count.default: expected int, got '2000'"),
    ("count: {type: int, default: 2.5}",
     "4:31: settings.count.default: expected int, got 2.5"),
    ("count: {type: int, default: true}",
     "4:31: settings.count.default: expected int, got True"),
    ("f: {type: float, default: false}",
     "4:29: settings.f.default: expected float, got False"),
    ("f: {type: float, default: .nan}",
     "4:29: settings.f.default: expected float, got nan"),
    ("b: {type: bool, default: 'yes'}",
     "4:28: settings.b.default: expected bool, got 'yes'"),
    ("b: {type: bool, default: 1}",
     "4:28: settings.b.default: expected bool, got 1"),
    ("s: {type: str, default: 5}",
     "4:27: settings.s.default: expected str, got 5"),
    ("count: {type: int, default: 0, min: 1}",
     "4:31: settings.count.default: 0 is below the minimum 1"),
    ("f: {type: float, default: 2.5, max: 2}",
     "4:29: settings.f.default: 2.5 is above the maximum 2"),
], ids=["int-as-text", "int-as-float", "int-as-bool", "float-as-bool", "float-nan",
        "bool-as-text", "bool-as-int", "str-as-int", "below-min", "above-max"])
def test_setting_default_with_wrong_type_or_out_of_bounds(tmp_path, setting, message):
    assert findings(tmp_path, SETTINGS.replace("SETTING", setting)) == [f"chart.yaml:{message}"]


def test_setting_defaults_of_the_right_type(tmp_path):
    text = SETTINGS.replace("SETTING", "count: {type: int, default: 3, min: 0, max: 3}\n  "
                                       "f: {type: float, default: 1}\n  "
                                       "b: {type: bool, default: no}\n  "
                                       "s: {type: str, default: ''}")
    assert findings(tmp_path, text) == []


def test_bounds_only_for_numbers_and_in_order(tmp_path):
    text = SETTINGS.replace("SETTING", "b: {type: bool, default: true, min: 0}\n  "
                                       "count: {type: int, default: 5, min: 10, max: 1}")
    assert findings(tmp_path, text) == [
        "chart.yaml:4:39: setting 'b' is a bool; only int and float settings can have a 'min'",
        "chart.yaml:5:31: settings.count.default: 5 is below the minimum 10",
        "chart.yaml:5:48: setting 'count' has max 1 below its min 10",
    ]


def test_setting_type_and_env_name_are_validated(tmp_path):
    text = SETTINGS.replace("SETTING", "count: {type: integer, default: 1, env: idle-ms}")
    assert findings(tmp_path, text) == [
        "chart.yaml:4:17: settings.count.type: Input should be 'int', 'float', 'bool' or 'str'",
        "chart.yaml:4:43: settings.count.env: String should match pattern '^[A-Z][A-Z0-9_]*$'",
    ]


# -- guard and action names -----------------------------------------------------------------


def test_names_that_no_loaded_plugin_provides(tmp_path, pm):
    assert findings_with_plugins(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle:
            entry: [finalise]
            exit: request_continuation
          busy:
            after:
              - ms: 5
                dest: done
                guards: [has_contents]
                unless: corrections_left
                actions: [prompt_for_done, teleport]
          done: {final: true}
        transitions:
          - trigger: go
            source: idle
            dest: busy
            guards: [has_content, continuation_left]
            unless: nope
            actions: mark_incomplet
        """, pm) == [
        "chart.yaml:5:13: action 'finalise' is not provided by any loaded plugin; "
        "did you mean 'finalize'?",
        "chart.yaml:11:18: guard 'has_contents' is not provided by any loaded plugin; "
        "did you mean 'has_content'?",
        "chart.yaml:13:36: action 'teleport' is not provided by any loaded plugin",
        "chart.yaml:19:27: guard 'continuation_left' is not provided by any loaded plugin; "
        "did you mean 'continuations_left'?",
        "chart.yaml:20:13: guard 'nope' is not provided by any loaded plugin",
        "chart.yaml:21:14: action 'mark_incomplet' is not provided by any loaded plugin; "
        "did you mean 'mark_incomplete'?",
    ]


def test_guards_are_not_actions(tmp_path, pm):
    assert findings_with_plugins(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle: {}
          done: {final: true}
        transitions:
          - {trigger: go, source: idle, dest: done, guards: finalize, actions: has_content}
        """, pm) == [
        "chart.yaml:7:53: guard 'finalize' is not provided by any loaded plugin",
        "chart.yaml:7:72: action 'has_content' is not provided by any loaded plugin",
    ]


def test_names_are_not_checked_without_a_plugin_list(tmp_path, pm):
    text = VALID.replace("dest: busy", "dest: busy\n    actions: [whatever]")
    assert findings(tmp_path, text) == []
    _, _, diagnostics = parse(write(tmp_path, text), pm, check_names=False)
    assert diagnostics == []


# -- the built-in statecharts ---------------------------------------------------------------


def test_there_are_two_builtin_statecharts():
    assert [p.name for p in builtin_statecharts()] == ["plan_mode.yaml", "write_session.yaml"]


@pytest.mark.parametrize("path", builtin_statecharts(), ids=lambda p: p.stem)
def test_builtin_statecharts_pass_every_check(path, pm):
    doc, spec, diagnostics = parse(path, pm)
    assert [str(d) for d in diagnostics] == []
    assert doc is not None and spec is not None and spec.statechart == path.stem


@pytest.mark.parametrize("path", builtin_statecharts(), ids=lambda p: p.stem)
def test_builtin_statecharts_need_the_builtin_plugins(path):
    bare = make_plugin_manager(builtins=False, entrypoints=False)
    _, _, diagnostics = parse(path, bare)
    assert diagnostics, "the built-in charts name guards and actions of the built-in plugins"
    assert all("is not provided by any loaded plugin" in d.message for d in diagnostics)


# -- load_definition ------------------------------------------------------------------------


def test_load_definition_raises_with_every_diagnostic(tmp_path, pm):
    path = write(tmp_path, """
        statechart: demo
        initial: idle
        states:
          idle:
            entry: nope
          lost: {}
        transitions:
          - {trigger: go, source: idle, dest: nowhere}
        """)
    with pytest.raises(StatechartError) as info:
        load_definition(path, plugins=pm, env={})
    expected = [
        f"{path}:5:12: action 'nope' is not provided by any loaded plugin",
        f"{path}:6:3: state 'lost' is unreachable from the initial state 'idle'",
        f"{path}:8:39: destination state 'nowhere' does not exist",
    ]
    assert [str(d) for d in info.value.diagnostics] == expected
    assert str(info.value) == "\n".join(expected)


def test_load_definition_reports_yaml_errors_as_diagnostics(tmp_path, pm):
    path = write(tmp_path, "statechart: demo\nstatechart: again\n")
    with pytest.raises(StatechartError) as info:
        load_definition(path, plugins=pm, env={})
    assert [str(d) for d in info.value.diagnostics] == [
        f"{path}:2:1: duplicate key 'statechart' (first defined on line 1); "
        "YAML would silently keep only the last one"]


def test_load_definition_of_an_unreadable_file(tmp_path, pm):
    path = tmp_path / "missing.yaml"
    with pytest.raises(StatechartError) as info:
        load_definition(path, plugins=pm, env={})
    assert str(info.value) == f"{path}:1:1: cannot read file: No such file or directory"


def test_load_definition_of_a_valid_file(tmp_path, pm):
    definition = load_definition(write(tmp_path, VALID), plugins=pm, env={})
    assert definition.name == "demo"
    assert dict(definition.settings) == {"idle_ms": 100}


# -- rule codes -------------------------------------------------------------------------------


def test_every_finding_carries_the_code_of_its_rule(tmp_path, pm):
    path = write(tmp_path, """
        statechart: demo
        initial: idle
        settings:
          wait: {type: str, default: soon, min: 1}
        states:
          idle:
            entry: nope
            after: [{ms: wait, trigger: tick}]
          lost: {}
          over:
            final: true
            exit: nope
        transitions:
          - {trigger: go, source: idle, dest: nowhere}
          - {trigger: done.state.idle, source: idle, dest: over}
        """)
    _, _, diagnostics = parse(path, pm)
    assert [(d.line, d.code, checks.RULES[d.code].name) for d in diagnostics] == [
        (4, "SC202", "setting-bounds"),
        (7, "SC401", "unknown-name"),
        (8, "SC201", "delay-setting"),
        (9, "SC301", "unreachable"),
        (10, "SC103", "final-state"),
        (12, "SC401", "unknown-name"),
        (14, "SC104", "unknown-state"),
        (15, "SC105", "completion-event"),
    ]
    assert all(checks.RULES[d.code].check is not None for d in diagnostics)
    _, _, yaml_errors = parse(write(tmp_path, "statechart: a\nstatechart: b\n"), pm)
    assert [d.code for d in yaml_errors] == ["SC001"]
    _, _, schema_errors = parse(write(tmp_path, "statechart: a\nintial: b\nstates: {}\n"), pm)
    assert sorted(d.code for d in schema_errors) == ["SC004", "SC005"]


def test_the_rule_codes_are_the_ones_the_docs_list(tmp_path):
    """docs/statecharts.md has a row per code, with the rule's name: a rule added, renamed or
    renumbered without its documentation fails here."""
    docs = (Path(__file__).resolve().parents[1] / "docs" / "statecharts.md").read_text()
    rows = {}
    for line in docs.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("SC") and cells[0][2:].isdigit():
            rows[cells[0]] = cells[1]
    assert rows == {code: rule.name for code, rule in checks.RULES.items()}


def test_orion_check_shows_the_code_after_each_finding(tmp_path):
    from click.testing import CliRunner

    from orion.cli import cli

    path = write(tmp_path, VALID.replace("dest: done", "dest: nowhere"))
    result = CliRunner().invoke(cli, ["check", str(path)])
    assert result.exit_code == 1
    [line] = [x for x in result.stdout.splitlines() if "nowhere" in x]
    assert line.startswith(f"{path}:") and line.endswith("does not exist [SC104]"), line
    result = CliRunner().invoke(cli, ["check", "--json", str(path)])
    [entry] = json.loads(result.stdout)
    assert [e["code"] for e in entry["errors"]] == ["SC104", "SC301"]  # "done" is now lost too
