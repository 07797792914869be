"""Every loop and every third-party call is bounded (FS-20..FS-17, docs/design/faults.md):
the unfinished-line question, a ``marker_regex``, the diff of a write, the chat history and
an absurd ``--older-than``. A hang is bounded by the subprocess's timeout, so a test that would
hang fails instead; nothing here asserts how fast anything is."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

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
