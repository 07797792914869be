"""orion.yaml: setting overrides, extra statecharts and disabled plugins, checked by `orion check`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import orion_statecharts
from orion.cli import cli
from orion.config import load_config
from orion.errors import ConfigError
from orion.hooks.manager import make_plugin_manager
from orion.statechart import builtin_statecharts, load_definition


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_missing_orion_yaml_means_defaults(tmp_path):
    config = load_config(tmp_path)
    assert config.overrides("write_session") == {}
    assert config.statechart_paths() == []


def test_overrides_from_orion_yaml_change_the_compiled_settings(tmp_path):
    write(tmp_path / "orion.yaml", """\
        settings:
          write_session:
            idle_ms: 3000
        """)
    config = load_config(tmp_path)
    chart = next(p for p in builtin_statecharts() if p.stem == "write_session")
    definition = load_definition(chart, plugins=make_plugin_manager(entrypoints=False),
                                 overrides=config.overrides("write_session"), env={})
    assert definition.settings["idle_ms"] == 3000
    session = definition.create()
    session.trigger("begin")
    session.trigger("message_end")
    assert session.pending_timers()[0][2] == 3000


def test_unknown_field_in_orion_yaml_names_line_and_column(tmp_path):
    write(tmp_path / "orion.yaml", """\
        statecharts: []
        setings:
          write_session: {idle_ms: 1}
        """)
    with pytest.raises(ConfigError, match=r"orion\.yaml:2:1: unknown field 'setings'"):
        load_config(tmp_path)


def test_malformed_orion_yaml_names_line_and_column(tmp_path):
    write(tmp_path / "orion.yaml", "settings: [unclosed\n")
    with pytest.raises(ConfigError, match=r"orion\.yaml:2:1: malformed YAML"):
        load_config(tmp_path)


def test_check_reports_a_bad_override_with_its_position_and_exits_1(tmp_path):
    write(tmp_path / "orion.yaml", """\
        settings:
          write_session:
            idle_ms: soon
        """)
    result = CliRunner().invoke(cli, ["check", "--workspace", str(tmp_path)])
    assert result.exit_code == 1
    assert f"{tmp_path}/orion.yaml:3:5: write_session.idle_ms: expected int, got 'soon'" \
        in result.stdout


def test_check_reports_a_bad_environment_override(tmp_path):
    result = CliRunner().invoke(cli, ["check", "--workspace", str(tmp_path)],
                                env={"WRITE_SESSION_IDLE_MS": "0"})
    assert result.exit_code == 1
    assert "environment variable WRITE_SESSION_IDLE_MS: 0 is below the minimum 1" in result.stdout


def test_check_includes_the_workspace_statecharts(tmp_path):
    """A workspace chart is checked in its place: one that replaces a lifecycle Orion runs is
    reported as such; one whose name no code starts would never be used, so it is an error."""
    write(tmp_path / "orion.yaml", "statecharts: [lifecycles/mine.yaml, lifecycles/plan.yaml]\n")
    write(tmp_path / "lifecycles" / "mine.yaml", """\
        statechart: mine
        initial: a
        states:
          a: {}
          b: {final: true}
        transitions:
          - {trigger: go, source: a, dest: b}
        """)
    (tmp_path / "lifecycles" / "plan.yaml").write_text(
        (Path(orion_statecharts.__file__).parent / "plan_mode.yaml").read_text())
    result = CliRunner().invoke(cli, ["check", "--json", "--workspace", str(tmp_path)])
    assert result.exit_code == 1, result.output
    entries = {(e["statechart"], e["path"].rsplit("/", 1)[-1]): e for e in json.loads(result.stdout)}
    assert set(entries) == {("write_session", "write_session.yaml"),
                            ("plan_mode", "plan_mode.yaml"), ("plan_mode", "plan.yaml"),
                            ("mine", "mine.yaml")}
    assert entries["plan_mode", "plan.yaml"]["ok"]
    assert entries["plan_mode", "plan.yaml"]["origin"].endswith("(overrides built-in)")
    [error] = entries["mine", "mine.yaml"]["errors"]
    assert error["line"] == 1 and "'mine' is not a lifecycle Orion or a plugin runs" in \
        error["message"]


def test_disabling_a_plugin_makes_its_names_unknown_to_check(tmp_path):
    write(tmp_path / "orion.yaml", """\
        plugins:
          disable: [orion_plugins.write_session_protocol]
        """)
    result = CliRunner().invoke(cli, ["check", "--workspace", str(tmp_path)])
    assert result.exit_code == 1
    assert "guard 'has_content' is not provided by any loaded plugin" in result.stdout
