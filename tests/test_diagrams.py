"""Diagrams are drawn by ``transitions``' diagrams extension: Mermaid text with nothing extra,
and a Graphviz picture with the current state highlighted with the ``diagrams`` extra."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
from transitions.extensions.diagrams import HierarchicalGraphMachine

from orion.cli import cli
from orion.statechart import load_builtin
from orion.statechart.io.diagrams import diagram_machine, mermaid
from orion.statechart.model.schema import StatechartSpec
from orion.config.yamlsource import load_yaml

CHART = """
statechart: doors
description: A door.
initial: closed
states:
  closed: {}
  open:
    initial: wide
    after: [{ms: 100, trigger: drift, dest: open.narrow, actions: creak}]
    states:
      wide: {}
      narrow: {}
  gone: {final: true}
transitions:
  - {trigger: push, source: closed, dest: open, guards: unlocked, unless: jammed}
  - {trigger: 'knock.*', source: open.wide, actions: [listen, answer]}
  - {trigger: leave, source: '*', dest: gone}
"""


def spec_of(tmp_path: Path, text: str) -> StatechartSpec:
    path = tmp_path / "chart.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return StatechartSpec.model_validate(load_yaml(path).data)


def test_the_mermaid_text_comes_from_a_transitions_graph_machine(tmp_path):
    spec = spec_of(tmp_path, CHART)
    machine = diagram_machine(spec)
    assert isinstance(machine, HierarchicalGraphMachine)
    assert [t.source for t in machine.get_transitions("leave")] == ["closed", "open", "gone"]
    assert mermaid(spec, highlight="open.narrow") == textwrap.dedent("""\
        stateDiagram-v2
            %% doors: A door.
            [*] --> closed
            state "closed" as closed
            state "open" as open {
                [*] --> open__wide
                state "wide" as open__wide
                state "narrow" as open__narrow
            }
            state "gone" as gone
            gone --> [*]
            closed --> open: push [unlocked and not jammed]
            open__wide --> open__wide: knock.* / listen, answer
            closed --> gone: leave
            open --> gone: leave
            gone --> gone: leave
            open --> open__narrow: after 100 ms drift / creak
            classDef active fill:#ffd54f,stroke:#e65100,stroke-width:3px
            class open active
            class open__narrow active
        """)


def _needs_graphviz() -> None:
    pytest.importorskip("graphviz", reason="the picture needs the diagrams extra: "
                                           "pip install 'orion-statecharts[diagrams]'")
    if shutil.which("dot") is None:
        pytest.skip("the picture needs Graphviz's dot program (Debian: apt-get install "
                    "graphviz; `make test` installs it where it can)")


def test_orion_diagram_draws_an_svg_with_the_current_state_highlighted(tmp_path):
    _needs_graphviz()
    out = tmp_path / "write_session.svg"
    result = CliRunner().invoke(cli, ["diagram", "write_session", "--highlight",
                                      "session_active.finalizing", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {out} (svg" in result.stderr
    svg = ET.parse(out).getroot()
    ns = {"svg": "http://www.w3.org/2000/svg"}
    nodes = {}
    for group in svg.iterfind(".//svg:g", ns):
        title = group.find("svg:title", ns)
        if title is not None and group.get("class") in ("node", "cluster"):
            nodes[title.text] = group
    assert {"idle", "session_active.finalizing", "done", "abandoned"} <= set(nodes)

    def fills(name: str) -> set[str]:
        return {shape.get("fill") for shape in nodes[name].iter() if shape.get("fill")}

    assert "darksalmon" in fills("session_active.finalizing")  # the current state
    assert "darksalmon" not in fills("session_active.continuing")
    assert "gainsboro" in fills("done")  # a final state
    texts = " ".join(t.text or "" for t in svg.iter("{http://www.w3.org/2000/svg}text"))
    assert "valid / finalize" in texts and "finalizing [finalizing]" in texts


def test_orion_diagram_writes_a_png(tmp_path):
    _needs_graphviz()
    result = CliRunner().invoke(cli, ["diagram", "plan_mode", "--format", "png"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout_bytes.startswith(b"\x89PNG\r\n\x1a\n")


def test_a_picture_without_graphviz_is_a_clear_error_and_no_file(tmp_path):
    pytest.importorskip("graphviz", reason="without the extra the error is the extra's")
    out = tmp_path / "plan.svg"
    env = {**os.environ, "PATH": str(tmp_path)}  # no dot program on this PATH
    proc = subprocess.run([sys.executable, "-m", "orion", "diagram", "plan_mode", "-o",
                           str(out)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    assert "Graphviz could not draw the svg picture" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_mermaid_text_needs_no_extra():
    """The default is text, drawn without graphviz (the package may be absent)."""
    code = ("import sys; sys.modules['graphviz'] = None\n"
            "from orion.statechart import load_builtin\n"
            "from orion.statechart.io.diagrams import mermaid\n"
            "print(mermaid(load_builtin('plan_mode', env={}).spec), end='')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    definition = load_builtin("plan_mode", env={})
    assert proc.stdout == mermaid(definition.spec)
    assert proc.stdout.startswith("stateDiagram-v2\n")
