"""The command line: exit codes, output formats, and the commands of the foundation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from orion.cli import cli
from orion.statechart import builtin_statecharts

BROKEN = textwrap.dedent("""\
    statechart: broken
    initial: idle
    states:
      idle: {}
      idle: {}
      lonely: {}
    transitions:
      - trigger: go
        source: idle
        dest: nowhere
    """)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_check_without_arguments_validates_the_builtin_statecharts(runner):
    result = runner.invoke(cli, ["check", "--json"])
    assert result.exit_code == 0, result.output
    checked = {entry["statechart"]: entry["ok"] for entry in json.loads(result.stdout)}
    assert checked == {"write_session": True, "plan_mode": True}


def test_check_reports_path_line_col_and_exits_1(runner, tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text(BROKEN)
    result = runner.invoke(cli, ["check", str(bad)])
    assert result.exit_code == 1
    assert f"{bad}:5:3: duplicate key 'idle' (first defined on line 4)" in result.stdout


def test_check_reports_every_semantic_error_with_positions(runner, tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text(BROKEN.replace("  idle: {}\n  idle: {}\n", "  idle: {}\n"))
    result = runner.invoke(cli, ["check", str(bad)])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert any(line.startswith(f"{bad}:9:11: destination state 'nowhere' does not exist")
               for line in lines), lines
    assert any(line.startswith(f"{bad}:5:3: state 'lonely' is unreachable") for line in lines)


def test_check_of_a_directory_checks_each_yaml_file(runner, tmp_path):
    (tmp_path / "a.yaml").write_text(BROKEN)
    good = builtin_statecharts()[0]
    (tmp_path / "b.yaml").write_text(good.read_text())
    result = runner.invoke(cli, ["check", "--json", str(tmp_path)])
    assert result.exit_code == 1
    assert [entry["ok"] for entry in json.loads(result.stdout)] == [False, True]


def test_check_of_a_missing_file_is_a_usage_error(runner, tmp_path):
    result = runner.invoke(cli, ["check", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_schema_is_json_schema_of_the_format(runner):
    result = runner.invoke(cli, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "Orion statechart"
    chart, overlay = schema["$defs"]["Statechart"], schema["$defs"]["Overlay"]
    assert set(chart["required"]) >= {"statechart", "initial", "states"}
    assert chart["additionalProperties"] is False
    assert overlay["required"] == ["extends"] and overlay["additionalProperties"] is False
    assert schema["if"] == {"required": ["extends"]}  # a file with `extends` is an overlay


def test_the_shipped_schema_file_is_current(runner):
    shipped = next(p.parent for p in builtin_statecharts()) / "statechart.schema.json"
    current = json.loads(runner.invoke(cli, ["schema"]).stdout)
    assert json.loads(shipped.read_text()) == current, "run: orion schema > statecharts/statechart.schema.json"


def test_diagram_of_a_builtin_by_name_with_highlight(runner):
    result = runner.invoke(cli, ["diagram", "write_session", "--highlight",
                                 "session_active.finalizing"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("stateDiagram-v2\n")
    assert "idle --> session_active: begin" in out
    assert "class session_active__finalizing active" in out
    assert "class session_active active" in out


def test_diagram_with_unknown_state_is_a_usage_error(runner):
    result = runner.invoke(cli, ["diagram", "plan_mode", "--highlight", "nowhere"])
    assert result.exit_code == 2
    assert "'nowhere' is not a state of plan_mode" in result.output


def test_diagram_of_an_invalid_file_prints_findings_to_stderr_and_exits_1(runner, tmp_path):
    bad = tmp_path / "broken.yaml"
    bad.write_text(BROKEN)
    result = runner.invoke(cli, ["diagram", str(bad)])
    assert result.exit_code == 1
    assert "duplicate key 'idle'" in result.stderr
    assert result.stdout == ""  # stdout is for the diagram: `orion diagram x > x.mmd`


def test_plugins_json_lists_builtins_and_their_hooks(runner):
    result = runner.invoke(cli, ["plugins", "--json"])
    assert result.exit_code == 0
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["orion_plugins.finalization"]["kind"] == "builtin"
    assert "register_actions" in rows["orion_plugins.finalization"]["hooks"]
    assert {"register_actions", "register_guards"} <= set(
        rows["orion_plugins.write_session_protocol"]["hooks"])


def test_demo_plays_the_conversation_and_writes_the_guide(runner, tmp_path):
    result = runner.invoke(cli, ["demo", "--workspace", str(tmp_path)])
    assert result.exit_code == 0, result.output
    story = result.stderr  # people read the story on stderr; the diagram is data, on stdout
    assert "virtual" in story  # it says that it compresses the idle wait
    assert "read_file invalid_json" in story and "Tag the release on Friday" in story
    assert "part 1 saved (180 lines), continuing 1/3" in story
    assert "orion  If you're finished, reply with DONE on its own line" in story
    assert "Correction round 1 of 3" in story
    assert "Created docs/guide.md (321 lines" in story
    assert "Plan approved: plan 'Operator guide', EXECUTING, revision 1" in story
    assert "Plan work ended: plan 'Operator guide', COMPLETED, revision 1" in story
    assert result.stdout.startswith("stateDiagram-v2")
    guide = tmp_path / "conversation" / "docs" / "guide.md"
    text = guide.read_text()
    assert text.count("\n") == 321 and "20°C" in text and "\ufffd" not in text


def _orion(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "orion", *args], capture_output=True,
                          text=True, env=full_env, cwd=cwd, timeout=120)


@pytest.mark.slow
def test_python_dash_m_orion_runs_from_any_directory(tmp_path):
    proc = _orion("check", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "write_session" in proc.stderr and "plan_mode" in proc.stderr


@pytest.mark.slow
def test_a_plugin_allow_list_naming_nothing_installed_exits_2(tmp_path):
    proc = _orion("plugins", env={"ORION_LOAD_PLUGINS": "no-such-plugin"}, cwd=tmp_path)
    assert proc.returncode == 2
    assert "no-such-plugin" in proc.stderr
