"""A team's plugin that raises in each kind of hook, in `orion chat` on a real terminal (tmux):
one line names the plugin, the line of its code and what it was doing; no traceback; the chat
goes on and answers the next message; a write the failure touched is kept, not written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sse_server import SSEServer, begin_write, finish_chunk, stream, text_chunk, text_stream
from test_plugin_failures import CONTENT, DOING, HOOKS, HOOKS_OVERLAY, HOLDS_THE_WRITE, line_of, \
    make_package
from tmux_terminal import chat_in_terminal, flowed, needs_tmux, started

pytestmark = [needs_tmux, pytest.mark.slow]

@pytest.fixture
def site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    make_package(root, "beta_hooks", HOOKS, {"write_session.yaml": HOOKS_OVERLAY})
    return root


@pytest.mark.parametrize("kind", list(DOING))
def test_a_plugin_that_raises_leaves_the_chat_running_with_one_line_naming_it(tmp_path, site,
                                                                             kind):
    plugin = site / "beta_hooks" / "plugin.py"
    where = f"{plugin}:{line_of(plugin, f'FAILS {kind}')}"
    workspace = tmp_path / "w"
    workspace.mkdir()
    writes = kind not in ("context", "command")
    replies = ([begin_write("notes.md"),
                stream([text_chunk(CONTENT + "DONE\n"), finish_chunk("stop")]),
                stream(text_stream("Noted."))] if writes else [])
    if kind == "context":  # the request goes without the block that failed
        replies.append(stream(text_stream("Hello to you.")))
    replies.append(stream(text_stream("Yes, still here.")))
    first = {"context": "Hello.", "command": "/audit"}.get(kind, "Write the notes.")
    with SSEServer(replies) as server:
        with chat_in_terminal(server, workspace, f"plugin-{kind}", width=400,
                              env={"PYTHONPATH": str(site), "BETA_FAIL": kind}) as terminal:
            started(terminal)
            terminal.send(first)
            failed = terminal.wait_for(where)
            terminal.send("Still there?")
            rows = terminal.wait_for_prompt("Yes, still here.")
    screen = "\n".join(rows)
    assert "Traceback" not in screen, screen
    # the user's line (a write's is also what the model is told, shown as Orion's prompt)
    line = next(row for row in rows if where in row)
    assert "beta_hooks" in line and DOING[kind] in line, line
    assert not line.startswith("you>"), line  # a line of its own, not across the prompt
    assert rows.index(line) < rows.index("Yes, still here."), failed
    if kind in HOLDS_THE_WRITE:
        assert not (workspace / "notes.md").exists()
        [kept] = list((workspace / ".orion" / "write_sessions").glob("*/content.txt"))
        assert kept.read_text() == CONTENT
        assert re.search(r"orion sessions recover \w{8} --finalize", flowed(rows)), screen
    elif writes:
        assert (workspace / "notes.md").read_text() == CONTENT
