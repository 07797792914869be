"""A team's chart written for an older contract: it runs migrated for one release with a
warning that names the command, `orion migrate` rewrites it in place keeping its comments and
layout, and then it passes `orion check` and the write-session features.

The chart is real: Orion's own write_session.yaml as a team copied it whole before contracts
existed (tests/data/write_session_before_contracts.yaml, `git show 133627a:...`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

import orion_statecharts
from orion.config import load_config
from orion.hooks.manager import make_plugin_manager
from orion.statechart.io.catalog import Catalog
from write_harness import BEGIN_A_TXT

REPO = Path(__file__).resolve().parent.parent
OLD_CHART = REPO / "tests" / "data" / "write_session_before_contracts.yaml"
BUILTIN = Path(orion_statecharts.__file__).parent / "write_session.yaml"

TAGS = {"not_started": "idle", "open": "session_active",
        "receiving": "session_active.awaiting_content",
        "paused": "session_active.awaiting_done_or_more_content",
        "continuing": "session_active.continuing", "finalizing": "session_active.finalizing",
        "correcting": "session_active.needs_corrections", "written": "done",
        "abandoned": "abandoned"}


def orion(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real command line, in a process of its own."""
    env = {k: v for k, v in os.environ.items() if k != "ORION_LOAD_PLUGINS"}
    return subprocess.run([sys.executable, "-m", "orion", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


@pytest.fixture
def team(tmp_path: Path) -> Path:
    """A workspace whose orion.yaml lists the chart copied before contracts."""
    ws = tmp_path / "team"
    (ws / "lifecycles").mkdir(parents=True)
    shutil.copyfile(OLD_CHART, ws / "lifecycles" / "write_session.yaml")
    (ws / "orion.yaml").write_text("statecharts: [lifecycles/write_session.yaml]\n")
    return ws


def test_the_old_chart_runs_migrated_with_a_warning_for_each_thing_it_lacks(team):
    result = orion("check", cwd=team)
    assert result.returncode == 0, result.stdout + result.stderr
    warnings = [line for line in result.stdout.splitlines() if "warning:" in line]
    assert len(warnings) == 13  # 9 tags, 3 triggers, 1 setting
    assert all(line.endswith("[SC504]") and "`orion migrate lifecycles/write_session.yaml` "
               in line and "; this chart names no contract version, so it counts as version 1)"
               in line
               for line in warnings), warnings
    [unfinished] = [w for w in warnings if "'unfinished'" in w]
    assert "(contract version 3 of built-in write_session, Orion 0.2.0;" in unfinished
    assert "adds its 1 transition (from session_active.awaiting_content, " in unfinished
    assert all("(contract version 2 of built-in write_session, Orion 0.1.0;" in w
               for w in warnings if w != unfinished)
    # each tag is named at the state that carries it in Orion's chart, located there
    text = (team / "lifecycles" / "write_session.yaml").read_text().splitlines()
    for tag, state in TAGS.items():
        [line] = [w for w in warnings if f"has tag {tag!r}" in w]
        assert line.endswith(f"adds `tags: [{tag}]` to state {state!r} [SC504]"), line
        at = int(line.split(":")[1])
        assert text[at - 1].strip() == f"{state.rsplit('.', 1)[-1]}:", (tag, text[at - 1])
    assert any("handles trigger 'idle_exhausted'" in w and "adds its 2 transitions" in w
               for w in warnings)
    assert any("has no setting 'max_idle_prompts'" in w for w in warnings)
    assert "ok lifecycles/write_session.yaml (write_session: from lifecycles/write_session.yaml" \
           in result.stderr


def test_orion_run_runs_the_old_chart_migrated_and_says_which_command_migrates_it(team,
                                                                               tmp_path):
    script = tmp_path / "script.yaml"
    script.write_text(BEGIN_A_TXT + '  - model: {text: "one\\ntwo\\nDONE\\n"}\n'
                                    '  - model: {text: "Written."}\n')
    result = orion("run", str(script), cwd=team)
    assert result.returncode == 0, result.stderr
    assert (team / "a.txt").read_text() == "one\ntwo\n"
    assert result.stderr.count("`orion migrate lifecycles/write_session.yaml`") == 13


def test_one_command_migrates_it_in_place_keeping_every_line_and_comment(team):
    path = team / "lifecycles" / "write_session.yaml"
    before = path.read_text()
    result = orion("migrate", "lifecycles/write_session.yaml", cwd=team)
    assert result.returncode == 0, result.stdout + result.stderr
    after = path.read_text()
    assert (team / "lifecycles" / "write_session.yaml.bak").read_text() == before
    # every line of the team's file is still there, in its order: comments and layout kept
    old_lines, new_lines = before.splitlines(), iter(after.splitlines())
    assert all(any(line == new for new in new_lines) for line in old_lines)
    added = _added_lines(before, after)
    assert added.count("tags: written") == 1 and len([a for a in added if "tags:" in a]) == 9
    assert "contract:" in added and "version: 3" in added
    assert "- trigger: user_message" in added and added.count("- trigger: idle_exhausted") == 2
    assert "- id: ask_unfinished" in added and "trigger: unfinished" in added
    assert "max_idle_prompts:" in added
    # each change is listed, at its line
    assert "migrated lifecycles/write_session.yaml to contract version 3: 15 change(s)" in \
        result.stderr
    assert "lifecycles/write_session.yaml:93: tag 'written' added to state 'done'" in \
        result.stderr
    assert result.stderr.rstrip().endswith("ok lifecycles/write_session.yaml")
    # the chart now is Orion's, where Orion's contract asks
    migrated = yaml.safe_load(after)
    builtin = yaml.safe_load(BUILTIN.read_text())
    assert migrated["contract"] == {"version": 3}
    for state in TAGS.values():
        assert _state(migrated, state).get("tags") == _state(builtin, state)["tags"]
    assert [t for t in migrated["transitions"]
            if t["trigger"] in ("user_message", "idle_exhausted", "unfinished")] == \
        [{k: v for k, v in t.items()} for t in builtin["transitions"]
         if t["trigger"] in ("user_message", "idle_exhausted", "unfinished")]
    assert migrated["settings"]["max_idle_prompts"] == builtin["settings"]["max_idle_prompts"]
    # then `orion check` passes, without a warning
    check = orion("check", cwd=team)
    assert check.returncode == 0 and "warning" not in check.stdout + check.stderr, check.stdout
    again = orion("migrate", "lifecycles/write_session.yaml", cwd=team)
    assert again.returncode == 0 and "needs no migration" in again.stderr


def test_the_migrated_chart_passes_the_write_session_features(team, tmp_path):
    """The team's project runs Orion's write-session features with its chart: first as it was
    (it runs migrated, with the warnings), then after `orion migrate`."""
    project = tmp_path / "project"
    project.mkdir()
    chart = team / "lifecycles" / "write_session.yaml"
    (project / "conftest.py").write_text(textwrap.dedent(f"""\
        import pytest


        @pytest.fixture
        def orion_yaml():
            return "statecharts: [{chart}]\\n"
        """))
    features = ["write_session_controller.feature", "content_integrity.feature",
                "auto_continue.feature"]
    (project / "test_features.py").write_text(
        "from pytest_bdd import scenarios\n\n"
        + "".join(f"scenarios({str(REPO / 'features' / f)!r})\n" for f in features))
    (project / "pytest.ini").write_text(
        "[pytest]\nfilterwarnings = ignore::pytest.PytestUnknownMarkWarning\n")

    def run() -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "ORION_LOAD_PLUGINS"}
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-W", "always::orion.testing.plugin.OrionCheckWarning"],
                              capture_output=True, text=True, env=env, cwd=project,
                              timeout=900)

    as_copied = run()
    assert as_copied.returncode == 0, as_copied.stdout[-3000:]
    assert "OrionCheckWarning" in as_copied.stdout and "orion migrate" in as_copied.stdout
    passed = re.search(r"(\d+) passed", as_copied.stdout)
    assert passed and int(passed[1]) > 50
    assert orion("migrate", str(chart), cwd=team).returncode == 0
    migrated = run()
    assert migrated.returncode == 0, migrated.stdout[-3000:]
    assert f"{passed[1]} passed" in migrated.stdout
    assert "OrionCheckWarning" not in migrated.stdout


def test_check_fix_migrates_every_chart_that_needs_it(team):
    result = orion("check", "--fix", cwd=team)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "migrated " in result.stderr and "warning" not in result.stdout
    assert yaml.safe_load((team / "lifecycles" / "write_session.yaml").read_text())[
        "contract"] == {"version": 3}


def test_a_dry_run_prints_the_diff_and_writes_nothing(team):
    path = team / "lifecycles" / "write_session.yaml"
    before = path.read_text()
    result = orion("migrate", "lifecycles/write_session.yaml", "--dry-run", cwd=team)
    assert result.returncode == 0
    assert path.read_text() == before and not path.with_name(path.name + ".bak").exists()
    assert "+    tags: written\n" in result.stdout
    assert result.stdout.startswith("--- lifecycles/write_session.yaml\n")
    assert "would migrate lifecycles/write_session.yaml" in result.stderr


def test_the_diagram_draws_the_old_chart_with_its_findings_beside_the_states(team):
    result = orion("diagram", "write_session", cwd=team)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("stateDiagram-v2\n")
    assert "    note right of done : no state of 'write_session' has tag 'written'" in \
        result.stdout
    assert "idle --> session_active: begin" in result.stdout
    assert result.stderr.count("warning:") == 13


def test_a_picture_of_the_old_chart_has_the_findings_under_its_title(team):
    pytest.importorskip("graphviz", reason="the picture needs the diagrams extra")
    if shutil.which("dot") is None:
        pytest.skip("the picture needs Graphviz's dot program")
    result = orion("diagram", "write_session", "--format", "svg", "-o", "chart.svg", cwd=team)
    assert result.returncode == 0, result.stderr
    svg = (team / "chart.svg").read_text()
    assert "done: no state of &#39;write_session&#39; has tag &#39;written&#39;" in svg


def test_a_chart_that_breaks_its_contract_is_drawn_with_the_findings(tmp_path):
    """A chart written for the current contract that dropped a tag is an error (no migration
    adds what the chart took away), named at the state that has it in Orion's chart; the
    diagram is drawn all the same."""
    ws = tmp_path / "ws"
    (ws / "lifecycles").mkdir(parents=True)
    text = BUILTIN.read_text().replace("    tags: written\n", "")
    (ws / "lifecycles" / "write_session.yaml").write_text(text)
    (ws / "orion.yaml").write_text("statecharts: [lifecycles/write_session.yaml]\n")
    check = orion("check", cwd=ws)
    assert check.returncode == 1
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row == "  done:")
    assert (f"lifecycles/write_session.yaml:{line}:3: no state of 'write_session' has tag "
            "'written', which the runtime asks about (contract of built-in write_session); "
            "add `tags: [written]` to the state that plays that part: 'done' has it in "
            "built-in write_session [SC503]") in check.stdout
    migrate = orion("migrate", "lifecycles/write_session.yaml", cwd=ws)
    assert migrate.returncode == 1 and "has errors no migration adds" in migrate.stderr
    diagram = orion("diagram", "write_session", cwd=ws)
    assert diagram.returncode == 0
    assert "note right of done : no state of 'write_session' has tag 'written'" in diagram.stdout


def test_a_renamed_state_is_found_by_the_triggers_that_lead_to_it(tmp_path):
    ws = tmp_path / "ws"
    (ws / "lifecycles").mkdir(parents=True)
    text = BUILTIN.read_text().replace("    tags: written\n", "").replace(
        "  done:\n", "  finished:\n").replace("dest: done\n", "dest: finished\n")
    (ws / "lifecycles" / "write_session.yaml").write_text(text)
    (ws / "orion.yaml").write_text("statecharts: [lifecycles/write_session.yaml]\n")
    check = orion("check", cwd=ws)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row == "  finished:")
    assert (f"lifecycles/write_session.yaml:{line}:3: no state of 'write_session' has tag "
            "'written', which the runtime asks about (contract of built-in write_session); add "
            "`tags: [written]` to the state that plays that part: 'done' has it in built-in "
            "write_session (state 'finished'?) [SC503]") in check.stdout


def test_other_layouts_are_edited_in_place_too(tmp_path):
    """Flow mappings, block and flow tag lists, an existing contract block, transitions in
    flow style with comments: each edited where it is, nothing else changed."""
    ws = tmp_path / "ws"
    (ws / "lifecycles").mkdir(parents=True)
    builtin = yaml.safe_load(BUILTIN.read_text())
    states = {"idle": "{}", "done": "{final: true}", "abandoned": "{tags: [gone], final: true}"}
    body = "\n".join(f"  {name}: {value}" for name, value in states.items())
    transitions = "\n".join(
        f"  # {t['trigger']}\n  - {yaml.safe_dump(t, default_flow_style=True, width=10**6).strip()}"
        for t in builtin["transitions"] if t["trigger"] not in ("user_message", "idle_exhausted"))
    session = textwrap.indent(yaml.safe_dump({"session_active": {
        k: v for k, v in builtin["states"]["session_active"].items() if k != "tags"}},
        sort_keys=False), "  ")
    session = session.replace("        tags: receiving\n", "        tags:\n        - mine\n")
    text = ("statechart: write_session\ncontract:\n  tags: [gone]  # the team's own\n"
            "settings:\n" + textwrap.indent(yaml.safe_dump(builtin["settings"],
                                                             sort_keys=False), "  ")
            + "initial: idle\nstates:\n" + body + "\n" + session
            + "transitions:\n" + transitions + "\n")
    path = ws / "lifecycles" / "write_session.yaml"
    path.write_text(text)
    (ws / "orion.yaml").write_text("statecharts: [lifecycles/write_session.yaml]\n")
    catalog = Catalog(make_plugin_manager(env={}), load_config(ws, env={}))
    resolved = catalog.resolve(catalog.winner("write_session"))
    assert resolved.diagnostics == [] and resolved.migration is not None
    migration = catalog.migration(resolved)
    migrated = migration.migrated
    added = _added_lines(text, migrated)
    assert "  idle: {tags: not_started}" in migrated
    assert "  done: {tags: written, final: true}" in migrated
    assert "  abandoned: {tags: [gone, abandoned], final: true}" in migrated
    assert "        - mine\n        - receiving\n" in migrated
    assert "contract:\n  version: 3\n  tags: [gone]  # the team's own\n" in migrated
    assert any(line.startswith("- {trigger: user_message,") for line in added), added
    # after `circular`, as in Orion's chart, and before the comment that belongs to `done`
    assert migrated.index("# circular\n") < migrated.index("- {trigger: user_message,") \
        < migrated.index("- {trigger: idle_exhausted,") < migrated.index("# done\n")
    migration.write()
    again = Catalog(make_plugin_manager(env={}), load_config(ws, env={}))
    after = again.resolve(again.winner("write_session"))
    assert after.diagnostics == [] and after.warnings == []


def test_a_layout_the_migration_cannot_edit_is_refused_and_nothing_is_written(team):
    path = team / "lifecycles" / "write_session.yaml"
    data = yaml.safe_load(path.read_text())
    text = path.read_text()
    flow = "transitions: " + yaml.safe_dump(data["transitions"], default_flow_style=True,
                                           width=10**6)
    text = text[:text.index("transitions:\n")] + flow
    path.write_text(text)
    result = orion("migrate", "lifecycles/write_session.yaml", cwd=team)
    assert result.returncode == 1
    assert "error: " in result.stderr and "nothing was written" in result.stderr
    assert path.read_text() == text and not path.with_name(path.name + ".bak").exists()
    check = orion("check", cwd=team)  # it cannot run migrated either: an error, located
    assert check.returncode == 1 and "cannot migrate this chart" in check.stdout


def test_an_overlay_that_replaced_tags_before_they_grew_is_migrated_in_the_overlay(tmp_path):
    ws = tmp_path / "ws"
    (ws / "lifecycles").mkdir(parents=True)
    overlay = ws / "lifecycles" / "finished.yaml"
    overlay.write_text("extends: write_session\nstates:\n  done:\n    tags: [finished]  # ours\n")
    (ws / "orion.yaml").write_text("statecharts: [lifecycles/finished.yaml]\n")
    check = orion("check", cwd=ws)
    assert check.returncode == 0
    assert ("lifecycles/finished.yaml:4:11: warning: no state of 'write_session' has tag "
            "'written'") in check.stdout
    assert orion("migrate", "lifecycles/finished.yaml", cwd=ws).returncode == 0
    assert overlay.read_text() == (
        "extends: write_session\n"
        "# The version of the contract of the chart this one replaces that it keeps\n"
        "# (`orion check` names what later versions add; `orion migrate` adds it).\n"
        "contract:\n  version: 3\n\n"
        "states:\n  done:\n    tags: [finished, written]  # ours\n")
    assert "warning" not in orion("check", cwd=ws).stdout


def _added_lines(before: str, after: str) -> list[str]:
    import difflib

    return [line[1:].strip() for line in difflib.ndiff(before.splitlines(), after.splitlines())
            if line.startswith("+ ")]


def _state(chart: dict, path: str) -> dict:
    node = {"states": chart["states"]}
    for name in path.split("."):
        node = node["states"][name]
    return node


OLD_0_1_0 = REPO / "tests" / "data" / "write_session_0_1_0.yaml"

#: A message that stops in the middle of a line (the `unfinished` trigger), the line sent again.
CUT_MID_LINE = BEGIN_A_TXT + """\
  - model: {text: "one\\ntw"}
  - expect: "Your message stopped in the middle of line 2"
  - model: {text: "two\\nDONE\\n"}
  - model: {text: "Written."}
"""


def _route_of(t: dict) -> tuple:
    return t.get("id"), t["trigger"], t["source"], t.get("dest"), t.get("actions")


def test_a_chart_copied_from_0_1_0_runs_a_cut_line_before_and_after_its_migration(tmp_path):
    """0.1.0's chart has tags and a contract, but no `unfinished`: one warning, naming contract
    version 3; it runs migrated, and `orion migrate` adds `ask_unfinished` where Orion's chart
    has it."""
    ws = tmp_path / "team"
    (ws / "lifecycles").mkdir(parents=True)
    chart = ws / "lifecycles" / "write_session.yaml"
    shutil.copyfile(OLD_0_1_0, chart)
    (ws / "orion.yaml").write_text("statecharts: [lifecycles/write_session.yaml]\n")
    script = tmp_path / "script.yaml"
    script.write_text(CUT_MID_LINE)
    check = orion("check", cwd=ws)
    assert check.returncode == 0, check.stdout + check.stderr
    [warning] = [line for line in check.stdout.splitlines() if "warning:" in line]
    assert "handles trigger 'unfinished' (contract version 3 of built-in write_session, Orion " \
           "0.2.0; this chart names no contract version, so it counts as version 1)" in warning
    ran = orion("run", str(script), cwd=ws)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (ws / "a.txt").read_text() == "one\ntwo\n"
    assert "`orion migrate lifecycles/write_session.yaml`" in ran.stderr
    before = chart.read_text()
    assert orion("migrate", "lifecycles/write_session.yaml", cwd=ws).returncode == 0
    assert _added_lines(before, chart.read_text())[:2] == ["version: 3", "- id: ask_unfinished"]
    migrated, builtin = (yaml.safe_load(p.read_text()) for p in (chart, BUILTIN))
    assert [_route_of(t) for t in migrated["transitions"]] == \
        [_route_of(t) for t in builtin["transitions"]]
    check = orion("check", cwd=ws)
    assert check.returncode == 0 and "warning" not in check.stdout + check.stderr
    (ws / "a.txt").unlink()
    ran = orion("run", str(script), cwd=ws)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (ws / "a.txt").read_text() == "one\ntwo\n" and "orion migrate" not in ran.stderr


def test_a_chart_that_names_its_version_is_told_what_came_after_it(tmp_path):
    ws = tmp_path / "ws"
    (ws / "lifecycles").mkdir(parents=True)
    text = BUILTIN.read_text()
    start = text.index("  - id: ask_unfinished\n")
    text = text[:start] + text[text.index("  - trigger: content\n", start):]
    text = text.replace("contract:\n  version: 3\n", "contract:\n  version: 2\n")
    (ws / "lifecycles" / "write_session.yaml").write_text(text)
    (ws / "orion.yaml").write_text("statecharts: [lifecycles/write_session.yaml]\n")
    check = orion("check", cwd=ws)
    assert check.returncode == 0, check.stdout + check.stderr
    [warning] = [line for line in check.stdout.splitlines() if "warning:" in line]
    assert "trigger 'unfinished' (contract version 3 of built-in write_session, Orion 0.2.0; " \
           "this chart was written for version 2): it runs migrated" in warning
