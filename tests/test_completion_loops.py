"""A loop of completion events never spins a process: `orion check` refuses the loops it can
see (SC303), and the engine stops any other (a guard that stays true) after a bounded number of
queued events, with the write session's content kept.

The `orion run` test runs a real process against the loop; without the engine's limit it would
spin at 100 % CPU until the test's timeout kills it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from orion.statechart import checks
from orion.config.yamlsource import load_yaml

ORION = str(Path(sys.executable).parent / "orion")


def _findings(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "chart.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    _, diagnostics = checks.check(load_yaml(path), None)
    return [f"{d.line}:{d.code}: {d.message}" for d in diagnostics]


LOOP = """
    statechart: demo
    initial: job
    states:
      job:
        initial: work
        states:
          work: {}
          over: {final: true}
      other:
        initial: fin
        states:
          fin: {final: true}
      end: {final: true}
    transitions:
      - {trigger: finish, source: job.work, dest: job.over}
      - {trigger: stop, source: [job, other], dest: end}
      - {trigger: go, source: job.work, dest: other}
"""


def test_a_completion_that_enters_its_own_final_state_again_is_refused(tmp_path):
    found = _findings(tmp_path, LOOP + "      - {trigger: done.state.job, source: job, "
                                       "dest: job.over}\n")
    assert found == ["18:SC303: 'done.state.job' re-enters 'job.over', which raises "
                     "'done.state.job' again at once: the lifecycle would never come to rest "
                     "(lead the completion event elsewhere, or give the transition a guard)"]


def test_a_completion_that_reenters_a_state_whose_initial_child_is_final_is_refused(tmp_path):
    found = _findings(tmp_path, LOOP + "      - {trigger: done.state.other, source: other, "
                                       "dest: other}\n")
    assert [f.split(":")[1] for f in found] == ["SC303"], found
    assert "'done.state.other' re-enters 'other.fin'" in found[0], found


@pytest.mark.parametrize("transition", [
    "{trigger: done.state.job, source: job, dest: end}",       # leaves: the usual case
    "{trigger: done.state.job, source: job, dest: job.work}",  # starts over, waits for finish
    "{trigger: done.state.job, source: job, dest: job.over, guards: [again]}",  # may stop
], ids=["leaves", "starts-over", "guarded"])
def test_completions_that_wait_or_may_stop_are_not_loops(tmp_path, transition):
    assert _findings(tmp_path, LOOP + f"      - {transition}\n") == []


#: An overlay of the write session whose loop `orion check` cannot rule out: the completion's
#: guard (`unless: model_asked`) stays true.
GUARDED_LOOP = {
    "extends": "write_session",
    "states": {"session_active": {"states": {"spin": {
        "tags": ["open", "receiving"], "initial": "f", "states": {"f": {"final": True}}}}}},
    "transitions": {"insert": [
        {"id": "to_spin", "trigger": "message_end", "before": "pause",
         "source": "session_active.awaiting_content", "dest": "session_active.spin"},
        {"trigger": "done.state.session_active.spin", "source": "session_active.spin",
         "dest": "session_active.spin", "unless": "model_asked"}]},
}


def _workspace(tmp_path: Path, chart: dict) -> Path:
    (tmp_path / "charts").mkdir()
    (tmp_path / "charts" / "spin.yaml").write_text(yaml.safe_dump(chart), encoding="utf-8")
    (tmp_path / "orion.yaml").write_text("statecharts: [charts/spin.yaml]\n", encoding="utf-8")
    (tmp_path / "script.yaml").write_text(yaml.safe_dump({"conversation": [
        {"user": "Write the notes."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "notes", "target_file": "notes.md", "operation": "create"}}]}},
        {"model": {"text": "first line\nsecond line\n"}},  # no DONE: the message ends
    ]}), encoding="utf-8")
    return tmp_path


def _orion(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORION_")}
    return subprocess.run([ORION, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def test_orion_run_refuses_a_chart_with_a_completion_loop(tmp_path):
    chart = yaml.safe_load(yaml.safe_dump(GUARDED_LOOP))
    del chart["transitions"]["insert"][1]["unless"]
    workspace = _workspace(tmp_path, chart)
    checked = _orion("check", cwd=workspace)
    assert checked.returncode == 1
    assert "spin.yaml" in checked.stdout + checked.stderr
    assert "[SC303]" in checked.stdout + checked.stderr
    ran = _orion("run", "script.yaml", cwd=workspace)
    assert ran.returncode == 2, ran.stderr
    assert "'done.state.session_active.spin' re-enters 'session_active.spin.f'" in ran.stderr
    assert not (workspace / ".orion" / "write_sessions").exists()


def test_a_loop_no_check_can_see_ends_with_the_content_kept(tmp_path):
    workspace = _workspace(tmp_path, GUARDED_LOOP)
    assert _orion("check", cwd=workspace).returncode == 0
    ran = _orion("run", "script.yaml", cwd=workspace)  # spins without the engine's limit
    assert ran.returncode == 1, ran.stderr
    assert "did not come to rest within 10,000 microsteps" in ran.stderr
    assert "still queued: done.state.session_active.spin" in ran.stderr
    assert "Traceback" not in ran.stderr
    (session,) = (workspace / ".orion" / "write_sessions").iterdir()
    assert (session / "content.txt").read_text(encoding="utf-8") == "first line\nsecond line\n"
    assert f"orion sessions recover {session.name[:8]}" in ran.stderr
