"""`/sessions recover|discard|undo ID` in `orion chat`: a session a crash left behind is
written, deleted or undone from the chat itself, with the same refusals as `orion sessions`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sse_server import SSEServer
from test_recovery import make_orphan

from orion.hooks.manager import make_plugin_manager

ORION = str(Path(sys.executable).parent / "orion")


def chat(workspace: Path, lines: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    with SSEServer([]) as server:  # slash commands never reach the model
        return subprocess.run(
            [ORION, "chat", "--base-url", server.base_url, "--model", "test-model",
             "--workspace", str(workspace)],
            input=lines, capture_output=True, text=True, timeout=120,
            env={**clean, "OPENAI_API_KEY": "test-key"})


@pytest.mark.slow
def test_a_crashed_session_is_recovered_then_undone_from_the_chat(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    orphan = make_orphan(tmp_path, workspace, make_plugin_manager(entrypoints=False, env={}))
    target = workspace / "docs" / "guide.md"
    assert not target.exists()
    proc = chat(workspace, f"/sessions\n/sessions recover {orphan.short}\n/quit\n")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in said, said
    assert "/sessions recover ID writes one" in said  # the listing says how
    assert target.read_text() == "# Guide\n\nline one\nline two\n"
    assert f"undo it with: /sessions undo {orphan.short}" in said
    proc = chat(workspace, f"/sessions undo {orphan.short}\n/quit\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "undone" in proc.stdout + proc.stderr
    assert not target.exists()


@pytest.mark.slow
def test_discard_and_refusals_in_the_chat(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    orphan = make_orphan(tmp_path, workspace, make_plugin_manager(entrypoints=False, env={}))
    proc = chat(workspace, f"/sessions discard {orphan.short}\n/sessions undo nothing\n"
                           "/sessions recover\n/quit\n")
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in said, said
    assert f"discarded write session {orphan.short}" in said
    assert not orphan.directory.exists()
    assert "/sessions undo: " in said  # refused, as one line
    assert "Unknown or incomplete /sessions command" in said
