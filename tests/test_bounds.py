"""Every loop and every third-party call is bounded (FS-20..FS-24, docs/design/faults.md):
the unfinished-line question, a ``marker_regex``, the diff of a write, the chat history and
an absurd ``--older-than``. A hang is bounded by the subprocess's timeout, so a test that would
hang fails instead; nothing here asserts how fast anything is."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from sse_server import SSEServer, begin_write, stream, text_stream

from orion.clock import VirtualClock
from orion.hooks.manager import make_plugin_manager
from orion.models.openai_compat import OpenAICompatibleModel
from orion.runtime.runtime import Runtime
from write_harness import Capture

UNFINISHED = "Your message stopped in the middle of line"


def _clean_env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    return {**clean, **extra}


def _orion(*args: str, cwd: Path, timeout: float = 120,
           stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orion", *args], cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=timeout, env=_clean_env())


# -- FS-20: the unfinished-line question counts like an idle prompt ----------------------------


def test_a_model_that_keeps_stopping_mid_line_is_asked_a_bounded_number_of_times(tmp_path):
    # Every reply stops in the middle of a line again, never with DONE: each answer takes the
    # place of the line asked about, and is asked about in turn.
    replies = [stream(text_stream(f"version {n}")) for n in range(40)]
    reporter = Capture()
    with SSEServer([begin_write("VERSION"), *replies]) as server:
        model = OpenAICompatibleModel(model="test-model", base_url=server.base_url,
                                      api_key="k", max_retries=0)
        runtime = Runtime(model=model, plugins=make_plugin_manager(entrypoints=False, env={}),
                          workspace=tmp_path, clock=VirtualClock(), reporter=reporter)
        asyncio.run(runtime.handle("Write VERSION."))
        runtime.close()
        bodies = [r.body for r in server.requests]
    questions = [b for b in bodies if UNFINISHED in b["messages"][-1]["content"]]
    # max_idle_prompts (3) questions, then the file is written as the idle rule says
    assert len(questions) == 3
    # the user's message, begin's result, 3 questions, the write's report
    assert len(bodies) == 6, len(bodies)
    assert "(incomplete: line 1 still unfinished after 3 prompts)" in \
        bodies[-1]["messages"][-1]["content"]
    assert (tmp_path / "VERSION").read_text() == "version 3"
    assert any("line 1 still unfinished after 3 prompts: writing VERSION as incomplete"
               in notice for notice in reporter.notices), reporter.notices


# -- FS-21: a marker_regex is searched with a time limit ----------------------------------------


def _insert_script(workspace: Path, marker: str, told: str = "") -> Path:
    script = workspace / "insert.yaml"
    script.write_text(textwrap.dedent(f"""\
        conversation:
          - user: Add a line after the marker.
          - model:
              tool_calls:
                - name: WritePlanTool_begin
                  arguments: {{intent: a line, target_file: data.txt, operation: insert,
                              location_marker: '{marker}', marker_regex: true,
                              position: after}}
          - expect: "{told or 'WritePlanTool_begin'}"
          - model: {{text: "I will pick another marker."}}
        """))
    return script


@pytest.mark.parametrize("marker,line,told", [
    # the pattern: Python's engine never returns; regex's sees it fails at once
    ("(a+)+$", "a" * 30 + "!", "occurs 0 times in data.txt"),
    # one that backtracks in regex's engine too: stopped by the time limit
    ("(a|aa)+$", "a" * 40 + "!", "took more than 1 s to search data.txt and was stopped at "
                                  "line 1"),
])
def test_a_pathological_marker_regex_is_refused_at_begin_never_a_hang(tmp_path, marker, line,
                                                                       told):
    (tmp_path / "data.txt").write_text(f"{line}\nlast line\n")
    script = _insert_script(tmp_path, marker, told)
    done = _orion("run", str(script), cwd=tmp_path, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout + done.stderr  # the model was told, as expected
    assert (tmp_path / "data.txt").read_text() == f"{line}\nlast line\n"


def test_sigterm_ends_a_run_that_searches_a_pathological_marker_regex(tmp_path):
    # Many lines that each backtrack: before the time limit, a search for ever that SIGTERM
    # could not interrupt (Python's engine holds the interpreter).
    (tmp_path / "data.txt").write_text(("a" * 40 + "!\n") * 200)
    script = _insert_script(tmp_path, "(a|aa)+$")
    proc = subprocess.Popen([sys.executable, "-m", "orion", "run", str(script)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_clean_env())
    try:
        for _ in range(600):  # Orion has started once its state directory is there
            if (tmp_path / ".orion").exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        time.sleep(0.3)  # into the search (it would never end without its time limit)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # ended: by Orion's handler (143), by the signal itself, or done and refused before it
    assert proc.returncode in (0, 1, 143, -signal.SIGTERM), (proc.returncode, err)
    assert "Traceback" not in err, err
    assert (tmp_path / "data.txt").read_text() == ("a" * 40 + "!\n") * 200
