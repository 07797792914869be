"""Customizing a lifecycle without a fork: overlays, contracts and tags, charts shipped by
plugins, and the errors a team meets on the way, each located, before anything runs."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import orion_statecharts
from orion.cli import cli
from orion.config import load_config
from orion.errors import StatechartError, UnknownTag
from orion.hooks.manager import make_plugin_manager
from orion.statechart.io.catalog import Catalog
from write_harness import BEGIN_A_TXT

REPO = Path(__file__).resolve().parent.parent
BUILTIN_WRITE_SESSION = Path(orion_statecharts.__file__).parent / "write_session.yaml"

REVIEW_OVERLAY = """\
extends: write_session
contract:
  tags: [review]
states:
  review:
    tags: review
transitions:
  replace:
    valid: {dest: review, actions: []}  # the fields given replace; `finalize` would stay
    discard:
      source: [idle, session_active, review]
  insert:
    - {trigger: approve_write, source: review, dest: done, actions: finalize, before: discard}
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def workspace(tmp_path: Path, charts: dict[str, str], extra: str = "") -> Path:
    ws = tmp_path / "ws"
    for name, text in charts.items():
        write(ws / "lifecycles" / name, text)
    listed = ", ".join(f"lifecycles/{name}" for name in charts)
    write(ws / "orion.yaml", f"statecharts: [{listed}]\n{extra}")
    return ws


def check(ws: Path, *args: str):
    return CliRunner().invoke(cli, ["check", "--workspace", str(ws), *args])


def orion(*args: str, site: Path | None = None, cwd: Path | None = None):
    """The real command line in a process of its own, with ``site`` on its path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site)] * (site is not None) + [os.environ.get("PYTHONPATH", "")])}
    env.pop("ORION_LOAD_PLUGINS", None)
    return subprocess.run([sys.executable, "-m", "orion", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


# -- overlays ---------------------------------------------------------------------------------


def test_an_overlay_adds_a_state_and_edits_transitions_by_id(tmp_path):
    ws = workspace(tmp_path, {"review.yaml": REVIEW_OVERLAY})
    catalog = Catalog(make_plugin_manager(env={}), load_config(ws, env={}))
    resolved = catalog.resolve(catalog.winner("write_session"))
    assert resolved.diagnostics == []
    spec = resolved.spec
    assert "review" in spec.states and spec.states["review"].tags == ["review"]
    by_trigger = {t.trigger: t for t in spec.transitions}
    assert by_trigger["valid"].dest == "review"
    assert by_trigger["valid"].source == ["session_active.finalizing"]  # kept: not given
    # inserted before `discard`, which is still last
    assert [t.trigger for t in spec.transitions][-2:] == ["approve_write", "discard"]
    assert by_trigger["discard"].source == ["idle", "session_active", "review"]
    # the rest is Orion's chart, unchanged, settings and contract included
    assert spec.settings["idle_ms"].default == 2000
    assert "valid" in spec.contract.triggers and "review" in spec.contract.tags


def test_an_overlay_changes_settings_context_initial_and_removes_transitions(tmp_path):
    ws = workspace(tmp_path, {"mine.yaml": """\
        extends: write_session
        settings:
          idle_ms: {default: 500}
          review_required: {type: bool, default: true}
        context: {reviewed: false}
        """})
    catalog = Catalog(make_plugin_manager(env={}), load_config(ws, env={}))
    definition = catalog.definition("write_session", env={})
    assert definition.settings["idle_ms"] == 500
    assert definition.spec.settings["idle_ms"].min == 1  # the other fields are kept
    assert definition.settings["review_required"] is True
    assert definition.initial_context["reviewed"] is False
    assert definition.initial_context["continuations"] == 0
    # `circular` is in the contract: removing its only transition breaks it, located
    with pytest.raises(StatechartError) as caught:
        Catalog(make_plugin_manager(env={}), load_config(workspace(tmp_path / "2", {
            "mine.yaml": "extends: write_session\ntransitions:\n  remove: [circular]\n"}),
            env={})).definition("write_session", env={})
    assert "handles trigger 'circular', which the runtime sends" in str(caught.value)


def test_inserts_anchored_on_ids_keep_their_order_and_may_name_each_other(tmp_path):
    """`before: x` twice puts both before x in the order written; `after: x` twice puts the
    second right after x, so before the first; an insert may anchor on an earlier insert, and
    `remove` comes first, so a removed id is no anchor."""
    ws = workspace(tmp_path, {"o.yaml": """\
        extends: write_session
        transitions:
          remove: [truncated_empty]
          insert:
            - {trigger: b1, source: idle, dest: done, before: discard}
            - {trigger: b2, source: idle, dest: done, before: discard}
            - {trigger: a1, source: idle, dest: done, after: valid}
            - {trigger: a2, source: idle, dest: done, after: valid}
            - {id: c1, trigger: b1, source: session_active, dest: done, after: a2}
        """})
    catalog = Catalog(make_plugin_manager(env={}), load_config(ws, env={}))
    resolved = catalog.resolve(catalog.winner("write_session"))
    assert resolved.diagnostics == []
    ids = [t.id or t.trigger for t in resolved.spec.transitions]
    assert ids[ids.index("corrections_used_up"):] == [
        "corrections_used_up", "corrections_received", "valid", "a2", "c1", "a1", "b1", "b2",
        "discard"]
    assert "truncated_empty" not in ids
    path = ws / "lifecycles" / "o.yaml"
    # every inserted transition is located where the overlay wrote it
    assert str(resolved.doc.diagnostic(("transitions", ids.index("c1"), "dest"), "x")) == \
        f"{path}:9:59: x"


def test_an_overlay_is_counted_against_the_state_limit_before_it_is_merged(tmp_path,
                                                                           monkeypatch):
    """The limit is 50,000 states; a chart that size takes seconds to write, so the test lowers
    it to 20, with Orion's 9 states plus an overlay that adds 12."""
    from orion.statechart.checks import document
    from orion.statechart.io import overlay

    for module in (document, overlay):
        monkeypatch.setattr(module, "MAX_STATES", 20)
    merged = []
    monkeypatch.setattr(overlay._Builder, "__init__", lambda *a: merged.append(a))
    states = "".join(f"  s{i}: {{}}\n" for i in range(12))
    ws = workspace(tmp_path, {"big.yaml": f"extends: write_session\nstates:\n{states}"})
    result = check(ws)
    path = ws / "lifecycles" / "big.yaml"
    assert result.exit_code == 1
    assert (f"{path}:2:1: the overlay adds 12 states to the 9 of the chart it extends: more "
            "than 20 [SC003]") in result.output
    assert merged == []  # nothing was merged
    many = "".join(f"  s{i}: {{}}\n" for i in range(21))
    (ws / "lifecycles" / "big.yaml").write_text(f"extends: write_session\nstates:\n{many}")
    result = check(ws)
    assert f"{path}:23:3: the chart has more than 20 states [SC003]" in result.output
    assert merged == []


def test_overlay_mistakes_are_located_in_the_overlay_with_a_hint(tmp_path):
    overlay = """\
        extends: write_session
        transitions:
          replace:
            vaild: {dest: done}
          insert:
            - {trigger: x, source: idle, dest: done, after: nowhere}
        """
    ws = workspace(tmp_path, {"o.yaml": overlay})
    result = check(ws)
    assert result.exit_code == 1
    path = ws / "lifecycles" / "o.yaml"
    assert f"{path}:4:5: 'vaild' is not the id of a transition" in result.output
    assert "did you mean 'valid'?" in result.output
    assert f"{path}:6:53: 'nowhere' is not the id of a transition" in result.output


def test_a_merged_chart_error_points_at_the_overlay_line_that_caused_it(tmp_path):
    ws = workspace(tmp_path, {"o.yaml": """\
        extends: write_session
        states:
          review: {}
        transitions:
          insert:
            - trigger: approve_write
              source: review
              dest: dnoe
        """})
    result = check(ws)
    assert result.exit_code == 1
    path = ws / "lifecycles" / "o.yaml"
    assert f"{path}:8:13: destination state 'dnoe' does not exist; did you mean 'done'?" in \
        result.output


def test_extends_of_an_unknown_chart_says_which_it_meant(tmp_path):
    ws = workspace(tmp_path, {"o.yaml": "extends: write_sesion\n"})
    result = check(ws)
    assert result.exit_code == 1
    path = ws / "lifecycles" / "o.yaml"
    assert f"{path}:1:10: 'extends' names 'write_sesion', which is no statechart of Orion or " \
           "of a plugin" in result.output
    assert "did you mean 'write_session'?" in result.output


def test_statechart_show_resolved_and_diagram_use_the_workspace_overlay(tmp_path):
    ws = workspace(tmp_path, {"review.yaml": REVIEW_OVERLAY})
    runner = CliRunner()
    shown = runner.invoke(cli, ["statechart", "show", "write_session", "--resolved",
                                "--workspace", str(ws)])
    assert shown.exit_code == 0, shown.output
    assert "  review:\n    tags:\n    - review\n" in shown.stdout
    assert "trigger: approve_write" in shown.stdout
    raw = runner.invoke(cli, ["statechart", "show", "write_session", "--workspace", str(ws)])
    assert raw.stdout == (ws / "lifecycles" / "review.yaml").read_text()
    diagram = runner.invoke(cli, ["diagram", "write_session", "--workspace", str(ws)])
    assert diagram.exit_code == 0, diagram.output
    assert "session_active__finalizing --> review: valid\n" in diagram.stdout
    assert "review --> done: approve_write / finalize\n" in diagram.stdout
    plain = runner.invoke(cli, ["diagram", "write_session"])
    assert "review" not in plain.stdout


@pytest.mark.slow
def test_the_runtime_runs_the_overlay(tmp_path):
    """The overlay is what a real run uses: DONE leads to `review`, and nothing is written."""
    ws = workspace(tmp_path, {"review.yaml": REVIEW_OVERLAY})
    script = write(tmp_path / "script.yaml",
                   BEGIN_A_TXT + '  - model: {text: "one\\ntwo\\nDONE\\n"}\n')
    result = orion("run", str(script), "--workspace", str(ws), "--json")
    assert not (ws / "a.txt").exists(), result.stdout + result.stderr
    sessions = orion("sessions", "list", "--workspace", str(ws), "--json")
    [session] = json.loads(sessions.stdout)
    assert session["state"] == "review"


# -- contracts --------------------------------------------------------------------------------


def copy_of_write_session(replace: dict[str, str]) -> str:
    text = BUILTIN_WRITE_SESSION.read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


def test_a_misspelled_statechart_name_is_a_located_error(tmp_path):
    ws = workspace(tmp_path, {"review.yaml": copy_of_write_session(
        {"statechart: write_session": "statechart: write_sesion"})})
    result = check(ws)
    assert result.exit_code == 1
    path = ws / "lifecycles" / "review.yaml"
    at = line_of(path, "statechart: write_sesion")
    assert (f"{path}:{at}:13: statechart 'write_sesion' is not a lifecycle Orion or a plugin "
            "runs") in result.output
    assert "did you mean 'write_session'?" in result.output


def test_a_renamed_trigger_is_a_located_error(tmp_path):
    ws = workspace(tmp_path, {"review.yaml": copy_of_write_session(
        {"  - trigger: valid\n": "  - trigger: validated\n"})})
    result = check(ws)
    assert result.exit_code == 1
    path = ws / "lifecycles" / "review.yaml"
    at = line_of(path, "trigger: validated")
    assert (f"{path}:{at}:14: no transition of 'write_session' handles trigger 'valid', which "
            "the runtime sends (contract of built-in write_session); was 'validated' renamed "
            "from it?") in result.output


def test_a_renamed_state_that_lost_its_tag_is_a_located_error(tmp_path):
    text = copy_of_write_session({"      finalizing:\n": "      checking:\n",
                                  "        tags: finalizing\n": "",
                                  "session_active.finalizing": "session_active.checking"})
    ws = workspace(tmp_path, {"review.yaml": text})
    result = check(ws)
    assert result.exit_code == 1
    path = ws / "lifecycles" / "review.yaml"
    assert (f"{path}:{line_of(path, 'checking:')}:7: no state of 'write_session' has tag "
            "'finalizing'") in result.output


def test_a_renamed_state_that_keeps_its_tag_runs(tmp_path):
    text = copy_of_write_session({"      finalizing:\n": "      checking:\n",
                                  "session_active.finalizing": "session_active.checking"})
    ws = workspace(tmp_path, {"review.yaml": text})
    result = check(ws)
    assert result.exit_code == 0, result.output
    assert "(write_session: from" in result.stderr and "(overrides built-in)" in result.stderr


@pytest.mark.slow
def test_orion_run_refuses_a_chart_that_breaks_the_contract_before_anything_runs(tmp_path):
    ws = workspace(tmp_path, {"review.yaml": copy_of_write_session(
        {"  - trigger: valid\n": "  - trigger: validated\n"})})
    script = write(tmp_path / "script.yaml",
                   "conversation:\n  - user: hi\n  - model: {text: hello}\n")
    result = orion("run", str(script), "--workspace", str(ws))
    assert result.returncode == 2  # a misconfigured workspace, as docs/cli.md says
    assert "handles trigger 'valid'" in result.stderr
    assert result.stderr.rstrip().endswith(
        "error: the workspace's statecharts have errors; nothing was run")
    assert result.stdout == ""
    assert not (ws / ".orion").exists()
    as_json = orion("run", str(script), "--workspace", str(ws), "--json")
    assert as_json.returncode == 2
    data = json.loads(as_json.stdout)  # --json is JSON whatever happens
    assert data["ok"] is False and data["files"] == [] and data["prompts"] == []
    assert any("handles trigger 'valid'" in line for line in data["errors"])
    assert data["errors"][-1] == "the workspace's statecharts have errors; nothing was run"


def test_has_tag_sees_the_tags_of_the_state_and_its_ancestors():
    pm = make_plugin_manager(env={})
    definition = Catalog(pm).definition("write_session", env={})
    lifecycle = definition.create()
    assert not lifecycle.has_tag("open")
    lifecycle.trigger("begin")
    assert lifecycle.has_tag("open") and lifecycle.has_tag("receiving")
    assert not lifecycle.has_tag("finalizing")
    assert definition.state_tagged("finalizing") == "session_active.finalizing"


def test_has_tag_of_a_tag_no_state_has_raises_with_the_tags_the_chart_has():
    lifecycle = Catalog(make_plugin_manager(env={})).definition("write_session", env={}).create()
    with pytest.raises(UnknownTag) as info:
        lifecycle.has_tag("finalising")
    message = str(info.value)
    assert message.startswith("write_session: unknown tag 'finalising' (the statechart's "
                              "states have: abandoned, continuing, correcting, finalizing, ")
    assert message.endswith("; did you mean 'finalizing'?")
    assert info.value.tag == "finalising" and "written" in info.value.tags
    assert lifecycle.has_tag("not_started") and not lifecycle.has_tag("written")


def _asked_tags(paths: list[Path]) -> set[str]:
    """Every tag the code asks as a literal: ``has_tag("x")``, ``state_tagged("x")``."""
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("has_tag", "state_tagged") and node.args and \
                    isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


def test_every_tag_orion_asks_about_is_in_the_contract_so_has_tag_never_raises_on_it():
    """has_tag raises for a tag the chart lacks; the contract makes every chart that replaces
    Orion's have the tags Orion's code, its plan service and its step library ask about."""
    from orion.plan.service import TAG_OF
    from orion.testing.steps import STATE_WORDS

    catalog = Catalog(make_plugin_manager(env={}))
    contract = {name: set(catalog.definition(name, env={}).spec.contract.tags)
                for name in ("write_session", "plan_mode")}
    code = [p for root in ("orion", "plugins") for p in (REPO / root).rglob("*.py")]
    asked = _asked_tags(code) | set(STATE_WORDS.values())
    assert asked and asked <= contract["write_session"] | contract["plan_mode"], asked
    assert set(STATE_WORDS.values()) <= contract["write_session"]
    assert set(TAG_OF.values()) | {"plan_off"} <= contract["plan_mode"]


def _sent_triggers(paths: list[Path]) -> set[str]:
    """Every trigger the code sends as a literal: ``trigger("x")``, ``_trigger("x")``,
    ``fire("x")``."""
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("trigger", "_trigger", "fire") and node.args and \
                    isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                found.add(node.args[0].value)
    return found


@pytest.mark.parametrize("chart,code", [
    ("write_session", ["orion/write_session/session.py", "orion/write_session/manager.py"]),
    ("plan_mode", ["orion/plan/service.py"]),
])
def test_the_contract_lists_every_trigger_the_code_sends(chart, code):
    spec = Catalog(make_plugin_manager(env={})).definition(chart, env={}).spec
    sent = _sent_triggers([REPO / p for p in code])
    assert sent and sent <= set(spec.contract.triggers), sent - set(spec.contract.triggers)


def test_no_module_outside_the_statechart_layer_compares_state_names():
    pattern = ("lifecycle.state ==", "lifecycle.state !=", ".is_in(", "STATE_OF")
    offenders = [f"{p.relative_to(REPO)}: {line.strip()}"
                 for root in ("orion", "plugins") for p in (REPO / root).rglob("*.py")
                 if "statechart" not in p.parts and "testing" not in p.parts
                 for line in p.read_text().splitlines() if any(s in line for s in pattern)]
    assert offenders == []


# -- charts shipped by plugins ----------------------------------------------------------------


def make_site(root: Path, dists: dict[str, str]) -> Path:
    """Real unpacked distributions: ``{distribution: plugin source}``; each ships the
    ``review.yaml`` next to its module."""
    root.mkdir(parents=True, exist_ok=True)
    for dist, source in dists.items():
        module = dist.replace("-", "_")
        info = root / f"{module}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[orion]\n{module} = {module}\n")
        (root / f"{module}.py").write_text(textwrap.dedent(source))
    return root


SHIPS_REVIEW = """\
    from pathlib import Path
    from orion import hookimpl

    CHART = Path(__file__).with_name("review.yaml")

    @hookimpl
    def register_statecharts(register):
        register(CHART)
    """


@pytest.mark.slow
def test_a_plugin_ships_a_chart_and_check_says_where_each_comes_from(tmp_path):
    site = make_site(tmp_path / "site", {"acme-orion": SHIPS_REVIEW})
    write(site / "review.yaml", REVIEW_OVERLAY)
    result = orion("check", site=site, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(write_session: from acme-orion 1.0 (extends built-in))" in result.stderr
    # a workspace chart of the same name wins over the plugin's
    ws = workspace(tmp_path, {"mine.yaml": "extends: write_session\ndescription: ours\n"})
    result = orion("check", "--workspace", str(ws), site=site)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(write_session: from " in result.stderr and \
        "(extends acme-orion 1.0)" in result.stderr
    shown = orion("statechart", "show", "write_session", "--resolved", "--workspace", str(ws),
                  site=site)
    assert "description: ours" in shown.stdout and "approve_write" in shown.stdout
    listed = json.loads(orion("plugins", "--json", site=site, cwd=tmp_path).stdout)
    [acme] = [row for row in listed if row["name"] == "acme_orion"]
    assert acme["statecharts"] == [str(site / "review.yaml")]
    assert acme["distribution"] == "acme-orion" and "register_statecharts" in acme["hooks"]


@pytest.mark.slow
def test_two_plugins_shipping_one_chart_is_exit_2_naming_both(tmp_path):
    site = make_site(tmp_path / "site", {"acme-orion": SHIPS_REVIEW, "other-orion": SHIPS_REVIEW})
    write(site / "review.yaml", REVIEW_OVERLAY)
    for args in (["check"], ["diagram", "write_session"], ["plugins"]):
        result = orion(*args, site=site, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "statechart 'write_session' is shipped twice: by acme-orion 1.0" in result.stderr
        assert "other-orion 1.0" in result.stderr
        assert "Traceback" not in result.stderr and "Usage:" not in result.stderr


REGISTERS_SHARED = """\
    from orion import hookimpl

    @hookimpl
    def register_actions(register):
        register("shared", lambda lifecycle, transition: None)
    """


@pytest.mark.slow
def test_two_plugins_registering_one_action_is_exit_2_naming_both(tmp_path):
    site = make_site(tmp_path / "site", {"one-orion": REGISTERS_SHARED,
                                         "two-orion": REGISTERS_SHARED})
    script = write(tmp_path / "s.yaml", "conversation:\n  - user: hi\n  - model: {text: hi}\n")
    for args in (["check"], ["diagram", "write_session"], ["plugins"], ["run", str(script)]):
        result = orion(*args, site=site, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "error: action 'shared' is registered twice: by plugin" in result.stderr
        assert "'one_orion'" in result.stderr and "'two_orion'" in result.stderr
        assert "Traceback" not in result.stderr and "Usage:" not in result.stderr


def test_the_testing_conftest_works_when_the_plugin_is_installed_by_entry_point(tmp_path,
                                                                                monkeypatch):
    """docs/testing.md's ``orion_plugins`` fixture, with the plugin also installed."""
    site = make_site(tmp_path / "site", {"acme-orion": SHIPS_REVIEW})
    write(site / "review.yaml", REVIEW_OVERLAY)
    monkeypatch.syspath_prepend(str(site))
    import importlib

    importlib.invalidate_caches()
    try:
        acme = importlib.import_module("acme_orion")
        pm = make_plugin_manager(env={}, plugins={"acme_orion": acme})
        assert pm.get_plugin("acme_orion") is acme  # loaded once, by its entry point
        assert pm.origins["acme_orion"].distribution == "acme-orion"
    finally:
        sys.modules.pop("acme_orion", None)


# -- orion.yaml mistakes ----------------------------------------------------------------------


def test_a_plugins_disable_typo_is_a_located_error_with_a_hint(tmp_path):
    ws = tmp_path / "ws"
    write(ws / "orion.yaml", "plugins:\n  disable: [orion_plugins.otel_exporter, plan_mdoe]\n")
    for args in (["check"], ["plugins"]):
        result = CliRunner().invoke(cli, [*args, "--workspace", str(ws)])
        assert result.exit_code == 2, result.output
        assert (f"error: {ws / 'orion.yaml'}:2:42: plugins.disable names 'plan_mdoe', which is "
                "no installed plugin; did you mean 'plan_mode'?") in result.output
        assert "Usage:" not in result.output


def test_an_unknown_orion_yaml_field_is_located_with_a_hint_not_a_usage_error(tmp_path):
    ws = tmp_path / "ws"
    write(ws / "orion.yaml", "pipline: [context, model]\n")
    result = CliRunner().invoke(cli, ["check", "--workspace", str(ws)])
    assert result.exit_code == 2
    assert f"error: {ws / 'orion.yaml'}:1:1: unknown field 'pipline'; did you mean " \
           "'pipeline'?" in result.output
    assert "Usage:" not in result.output


def test_settings_for_a_misspelled_statechart_are_reported(tmp_path):
    ws = tmp_path / "ws"
    write(ws / "orion.yaml", "settings:\n  write_sesion: {idle_ms: 10}\n")
    result = CliRunner().invoke(cli, ["check", "--workspace", str(ws)])
    assert result.exit_code == 1
    assert (f"{ws / 'orion.yaml'}:2:3: settings for 'write_sesion', which is no statechart "
            "(plan_mode, write_session); did you mean 'write_session'?") in result.output


@pytest.mark.slow
def test_the_testing_docs_conftest_runs_with_the_team_plugin_installed_by_entry_point(tmp_path):
    """docs/testing.md's conftest.py, as written, in a project where the team's package is
    installed (an entry point of the group ``orion``) and so loaded before the fixture runs."""
    text = (REPO / "docs" / "testing.md").read_text()
    start = text.index("   ```python\n   # conftest.py\n")
    snippet = textwrap.dedent(text[start:text.index("   ```\n", start + 10)])
    snippet = snippet.split("\n", 1)[1]
    site = tmp_path / "site"
    info = site / "team_customization-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: team-customization\n"
                                   "Version: 0.1.0\n")
    (info / "entry_points.txt").write_text("[orion]\nteam_review = team_review.plugin\n")
    project = tmp_path / "project"
    write(project / "conftest.py", snippet)
    write(project / "test_loaded.py", """\
        from orion.statechart.io.catalog import Catalog


        def test_the_plugin_is_loaded_once_with_its_chart(orion_plugins, orion_yaml):
            assert orion_plugins.origins["team_review"].distribution == "team-customization"
            source = Catalog(orion_plugins).winner("write_session")
            assert source.origin == "team-customization 0.1.0"
        """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site), str(REPO / "examples" / "team-customization")])}
    env.pop("ORION_LOAD_PLUGINS", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(project)], capture_output=True, text=True, env=env,
                          cwd=project, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_recovery_knows_a_renamed_finalizing_state_by_its_tag(tmp_path):
    """A session left in the team's renamed `checking` state (tag `finalizing`) had its content
    complete: recovery reads that from the tags the journal saved, not the state's name."""
    from orion.models.script import load_script
    from orion.models.scripted import ScriptedModel
    from orion.runtime.runtime import Runtime
    from orion.write_session.manager import manager_for
    from orion.write_session.plan import WritePlan
    from orion.write_session.orphans import scan

    ws = workspace(tmp_path, {"review.yaml": copy_of_write_session(
        {"      finalizing:\n": "      checking:\n",
         "session_active.finalizing": "session_active.checking"})})
    script = load_script("s.yaml", text="conversation:\n  - user: hi\n")
    runtime = Runtime(model=ScriptedModel(script.cursor()), plugins=make_plugin_manager(env={}),
                      workspace=ws, env={})
    manager_for(runtime).begin(WritePlan(target_file="a.md", operation="create",
                                         intent="a file"))
    [session] = manager_for(runtime).sessions
    session.feed("one\ntwo\n")
    session.lifecycle.trigger("done")  # as DONE does, and then the process dies
    session.checkpoint()
    assert session.lifecycle.state == "session_active.checking"
    runtime.close()
    [orphan] = scan(ws / ".orion")
    assert orphan.state == "session_active.checking"
    assert orphan.complete


def test_workspace_overlays_stack_in_the_order_orion_yaml_lists_them(tmp_path):
    ws = workspace(tmp_path, {
        "a.yaml": "extends: write_session\ndescription: first\nsettings:\n"
                  "  idle_ms: {default: 700}\n",
        "b.yaml": "extends: write_session\ndescription: second\n"})
    catalog = Catalog(make_plugin_manager(env={}), load_config(ws, env={}))
    source = catalog.winner("write_session")
    assert catalog.describe(source) == (f"write_session: from {ws / 'lifecycles' / 'b.yaml'} "
                                        f"(extends {ws / 'lifecycles' / 'a.yaml'})")
    definition = catalog.definition("write_session", env={})
    assert definition.spec.description == "second" and definition.settings["idle_ms"] == 700


def test_an_overlay_that_lists_transitions_is_told_how_to_edit_them(tmp_path):
    ws = workspace(tmp_path, {"o.yaml": "extends: write_session\ntransitions:\n"
                                        "  - {trigger: x, source: idle, dest: done}\n"})
    result = check(ws)
    assert result.exit_code == 1
    assert (f"{ws / 'lifecycles' / 'o.yaml'}:3:3: transitions: Input should be a valid "
            "dictionary") in result.output
    assert "`remove: [id, ...]`, `replace: {id: fields}`, `insert: [transition, ...]`" in \
        result.output


def test_overlays_that_extend_each_other_are_a_cycle(tmp_path):
    ws = workspace(tmp_path, {"a.yaml": "statechart: a\nextends: b\n",
                              "b.yaml": "statechart: b\nextends: a\n"})
    result = check(ws)
    assert result.exit_code == 1
    assert "'extends' makes a cycle" in result.output


# -- findings at the author's own line ----------------------------------------------------------


def test_a_misspelled_tag_in_a_plugins_overlay_is_reported_at_the_plugins_line(tmp_path):
    """It was reported in Orion's installed chart (orion_statecharts/write_session.yaml:85:1),
    where the team can do nothing about it."""
    site = make_site(tmp_path / "site", {"acme-orion": SHIPS_REVIEW})
    write(site / "review.yaml", REVIEW_OVERLAY.replace("    tags: review\n",
                                                       "    tags: reveiw\n"))
    result = orion("check", site=site, cwd=tmp_path)
    assert result.returncode == 1
    [finding] = [line for line in result.stdout.splitlines() if "[SC" in line]
    assert finding == (f"{site / 'review.yaml'}:6:11: no state of 'write_session' has tag "
                       "'review', which the runtime asks about (contract of acme-orion 1.0 "
                       "write_session); state 'review' has 'reveiw': did you mean 'review'? "
                       "[SC503]")


def test_every_finding_about_an_overlay_is_in_the_overlay(tmp_path):
    """What an overlay breaks in what it extends is reported at the overlay's own line (its
    edit, else the nearest part it wrote, else its `extends`), naming the base line."""
    overlay = """\
        extends: write_session
        contract:
          version: 2
        states:
          done:
            tags: [finished]
          spin:
            initial: end
            states:
              end: {final: true}
        transitions:
          remove: [discard, request_corrections]
          insert:
            - {trigger: done.state.spin, source: spin, dest: spin}
            - {trigger: go, source: idle, dest: spin}
        """
    ws = workspace(tmp_path, {"o.yaml": overlay})
    result = check(ws)
    assert result.exit_code == 1
    path = ws / "lifecycles" / "o.yaml"
    findings = [line for line in result.stdout.splitlines() if "[SC" in line]
    assert len(findings) == 4 and all(line.startswith(f"{path}:") for line in findings), \
        findings
    builtin = BUILTIN_WRITE_SESSION
    assert (f"{path}:6:11: no state of 'write_session' has tag 'written', which the runtime "
            "asks about (contract of built-in write_session); add `tags: [written]` to the "
            "state that plays that part: 'done' has it in built-in write_session [SC503]") in \
        findings
    assert (f"{path}:12:12: no transition of 'write_session' handles trigger 'discard', which "
            "the runtime sends (contract of built-in write_session); this overlay removes or "
            "replaces the transitions that handled it [SC502]") in findings
    at = line_of(builtin, "      needs_corrections:")
    assert (f"{path}:12:21: state 'session_active.needs_corrections' is unreachable from the "
            f"initial state 'idle' (at {builtin}:{at}:7, in the chart it extends) [SC301]") in \
        findings
    assert (f"{path}:14:17: 'done.state.spin' re-enters 'spin.end', which raises "
            "'done.state.spin' again at once") in "\n".join(findings)


def test_a_finding_the_overlay_wrote_nothing_near_is_at_its_extends_naming_the_base_line(
        tmp_path):
    ws = workspace(tmp_path, {"o.yaml": "extends: write_session\ninitial: abandoned\n"})
    result = check(ws)
    path = ws / "lifecycles" / "o.yaml"
    idle = line_of(BUILTIN_WRITE_SESSION, "  idle:")
    assert (f"{path}:1:1: state 'idle' is unreachable from the initial state 'abandoned' (at "
            f"{BUILTIN_WRITE_SESSION}:{idle}:3, in the chart it extends) [SC301]") in result.stdout


# -- failures up front ------------------------------------------------------------------------


def team_project(tmp_path: Path, edit: dict[str, tuple[str, str]]) -> Path:
    """A copy of the team-customization example with ``{file: (old, new)}`` edits."""
    import shutil

    project = tmp_path / "team"
    shutil.copytree(REPO / "examples" / "team-customization", project,
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name, (old, new) in edit.items():
        path = project / name
        assert old in path.read_text(), old
        path.write_text(path.read_text().replace(old, new))
    return project


def run_features(project: Path, tests: str = "tests/test_review.py"
                 ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ORION_LOAD_PLUGINS"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           tests], capture_output=True, text=True, env=env, cwd=project,
                          timeout=300)


def _failures(result: subprocess.CompletedProcess[str]) -> str:
    """The failures pytest reported, without its short summary (which repeats each failure's
    message, whole when the CI variable is set)."""
    return result.stdout.split("short test summary info")[0]


def test_a_broken_overlay_fails_the_feature_run_once_with_orion_checks_findings(tmp_path):
    project = team_project(tmp_path, {"team_review/statecharts/write_session.yaml": (
        "    valid:\n", "    vaild:\n")})
    result = run_features(project)
    assert result.returncode == 1
    chart = project / "team_review" / "statecharts" / "write_session.yaml"
    finding = (f"{chart}:19:5: 'vaild' is not the id of a transition of 'write_session' (ids: "
               "begin, pause, pause_after_continuation, ")
    assert _failures(result).count(finding) == 1, result.stdout
    assert "did you mean 'valid'? [SC602]\n" in result.stdout
    assert "1 failed, 6 skipped" in result.stdout
    assert "Orion's charts or plugins have errors; no scenario of theirs can run (orion " \
           "check):\n" in result.stdout
    assert "Traceback" not in result.stdout and "StatechartError" not in result.stdout
    assert "\\n" not in result.stdout  # no finding inside an escaped string


def test_a_broken_plugin_fails_the_feature_run_once_naming_its_file_and_line(tmp_path):
    project = team_project(tmp_path, {"team_review/plugin.py": (
        "def build_context(request):\n    host = request.host",
        "def build_context(requst):\n    host = requst.host")})
    result = run_features(project)
    assert result.returncode == 1
    plugin = project / "team_review" / "plugin.py"
    line = line_of(plugin, "def build_context(requst)")
    assert _failures(result).count(f"error: {plugin}:{line}: plugin 'team_review': build_context() "
                                   "takes no argument named 'requst' (did you mean 'request'?)"
                                   ) == 1, result.stdout
    assert "1 failed, 6 skipped" in result.stdout
    assert "Traceback" not in result.stdout and "The above exception" not in result.stdout


def test_a_team_chart_that_runs_migrated_passes_its_features_with_a_warning(tmp_path):
    """The team's overlay replaced the tags of `done` before the contract asked for `written`:
    its features pass (the chart runs migrated), and the run warns, naming the command."""
    project = team_project(tmp_path, {"team_review/statecharts/write_session.yaml": (
        "states:\n", "states:\n  done:\n    tags: [finished]\n")})
    result = run_features(project)
    assert result.returncode == 0, result.stdout
    assert "7 passed" in result.stdout and "OrionCheckWarning" in result.stdout
    assert "`orion migrate " in result.stdout


def test_orion_run_refuses_an_overlay_whose_completion_event_spins(tmp_path):
    """It spun `orion run` at 100 % CPU; now the check refuses it before anything runs."""
    ws = workspace(tmp_path, {"spin.yaml": """\
        extends: write_session
        states:
          spin:
            initial: end
            states:
              end: {final: true}
        transitions:
          insert:
            - {trigger: begin, source: idle, dest: spin, before: begin}
            - {trigger: done.state.spin, source: spin, dest: spin}
            - {trigger: done, source: spin, dest: abandoned}
        """})
    script = write(tmp_path / "script.yaml", BEGIN_A_TXT)
    result = orion("run", str(script), "--workspace", str(ws))
    assert result.returncode == 2
    path = ws / "lifecycles" / "spin.yaml"
    assert (f"{path}:10:17: 'done.state.spin' re-enters 'spin.end', which raises "
            "'done.state.spin' again at once") in result.stderr


def test_a_chart_a_step_writes_into_the_workspace_is_checked_as_the_runtime_starts(tmp_path):
    """The check runs where and when the scenario's runtime starts: a chart `orion_yaml` lists
    and a Given step writes is there by then (a broken one fails that scenario, readably)."""
    project = tmp_path / "project"
    write(project / "conftest.py", """\
        import pytest


        @pytest.fixture
        def orion_yaml():
            return "statecharts: [lifecycles/mine.yaml]\\n"
        """)
    write(project / "features" / "mine.feature", '''\
        Feature: a chart the scenario writes
          Scenario: it is there when Orion starts
            Given the workspace has a file "lifecycles/mine.yaml" containing:
              """
              extends: write_session
              description: {description}
              """
            When the model streams 3 lines to "a.txt" and DONE
            Then "a.txt" holds the generated lines 1 to 3
        ''')
    write(project / "test_mine.py", 'from pytest_bdd import scenarios\n\n'
                                    'scenarios("features/mine.feature")\n')
    feature = project / "features" / "mine.feature"
    text = feature.read_text()
    feature.write_text(text.replace("{description}", "ours"))
    assert run_features(project, "test_mine.py").returncode == 0
    feature.write_text(text.replace("{description}", "ours\n      initial: nowhere"))
    result = run_features(project, "test_mine.py")
    assert result.returncode == 1 and "1 failed" in result.stdout
    assert "initial state 'nowhere' is not a top-level state" in result.stdout
