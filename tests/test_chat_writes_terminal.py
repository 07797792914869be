"""Writes in `orion chat` on a real terminal (tmux): a bounded preview and one live line while
the content streams, in words a user understands; one report line after it, with what an
overwrite changed; and what stays when the chat ends with a write open."""

from __future__ import annotations

import re
import subprocess

import pytest
from sse_server import (Pause, SSEServer, begin_write, finish_chunk, stream, text_chunk,
                        text_stream)
from tmux_terminal import (ORION, PROMPT, chat_in_terminal, count, flowed, needs_tmux,
                           started)

pytestmark = needs_tmux

LIVE = re.compile(r"(writing|continuing|checking|correcting|waiting) notes\.md: (\d+) lines?, ")
#: What the lifecycle's states are called: never on the screen.
STATE_NAMES = ("awaiting_content", "session_active", "receiving_content", "needs_corrections",
               "continuing_after_truncation", "finalizing")


def content_lines(n: int, start: int = 1) -> list[str]:
    return [f"line {i:03d} of the notes, with some words after the number" for i in
            range(start, start + n)]


def slow_content(lines: list[str], *, pause: float, done: bool = True) -> list:
    items: list = []
    for i, line in enumerate(lines):
        items.append(text_chunk(line + "\n"))
        if i % 10 == 9:
            items.append(Pause(pause))
    return items + [text_chunk("DONE\n")] * done


@pytest.mark.slow
def test_a_300_line_write_shows_a_bounded_preview_and_one_live_line_then_one_report(
        tmp_path):
    lines = content_lines(300)
    content = stream([*slow_content(lines, pause=0.05), finish_chunk("stop")])
    with SSEServer([begin_write("notes.md"), content,
                    stream(text_stream("The notes are written."))]) as server:
        seen: list[list[str]] = []
        with chat_in_terminal(server, tmp_path, "write-300") as terminal:
            started(terminal)
            terminal.send("Write the notes.")

            def done(rows: list[str]) -> bool:
                seen.append(rows)
                return rows[-1] == PROMPT and "The notes are written." in rows
            rows = terminal.wait_until("the write and the reply after it", done)
    assert (tmp_path / "notes.md").read_text() == "".join(f"{line}\n" for line in lines)
    during = [r for r in seen if any(LIVE.match(row) for row in r)]
    assert during, seen[-1]  # the live line showed while the content streamed
    for screen in during:
        assert count(screen, "line \\d{3} of the notes") <= 3, screen  # the preview's bound
        assert count(screen, LIVE.pattern) == 1, screen
        live = next(row for row in screen if LIVE.match(row))
        assert screen.index(live) == len(screen) - 2, screen  # just above the prompt
        assert LIVE.match(live).group(1) == "writing", live
    assert any(int(LIVE.match(row).group(2)) > 0 for r in during for row in r if LIVE.match(row))
    text = "\n".join(rows)
    assert count(rows, "line \\d{3} of the notes") == 0, rows  # the preview went
    assert not any(LIVE.match(row) for row in rows), rows  # no stale live line
    assert not any(name in "\n".join(r) for r in seen for name in STATE_NAMES)
    assert count(rows, "orion  Created notes.md \\(300 lines") == 1, rows
    assert rows.index("you> Write the notes.") < rows.index("The notes are written."), text
    # The model's view: the content it streamed, then a reference once the file is written.
    history = server.requests[2].body["messages"]
    assert any(str(m["content"]).startswith("[wrote notes.md: 300 lines") for m in history)


@pytest.mark.slow
def test_an_overwrite_reports_the_lines_it_changed_and_the_diff_command_shows_them(tmp_path):
    old = content_lines(40)
    (tmp_path / "notes.md").write_text("".join(f"{line}\n" for line in old))
    new = old[:10] + ["a new line in the middle"] + old[12:] + ["a last line"]
    content = stream([*slow_content(new, pause=0.01), finish_chunk("stop")])
    with SSEServer([begin_write("notes.md", "overwrite"), content,
                    stream(text_stream("Updated."))]) as server:
        with chat_in_terminal(server, tmp_path, "overwrite") as terminal:
            started(terminal)
            terminal.send("Update the notes.")
            rows = terminal.wait_for_prompt("Updated.")
    assert (tmp_path / "notes.md").read_text() == "".join(f"{line}\n" for line in new)
    summary = [row for row in rows if row.startswith("notes.md: +")]
    assert len(summary) == 1, rows
    found = re.fullmatch(r"notes\.md: \+2 -2 lines; `orion sessions diff ([0-9a-f]{8})` shows "
                         r"them", summary[0])
    assert found, summary
    report = next(i for i, row in enumerate(rows) if row.startswith("orion  Overwrote"))
    assert rows[report + 1] == summary[0], rows  # right under the write's report
    diff = subprocess.run([ORION, "sessions", "diff", found.group(1), "--workspace",
                           str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert diff.returncode == 0, diff.stderr
    body = diff.stdout.splitlines()
    assert [line for line in body if line.startswith("-") and not line.startswith("---")] == \
        [f"-{old[10]}", f"-{old[11]}"]
    assert [line for line in body if line.startswith("+") and not line.startswith("+++")] == \
        ["+a new line in the middle", "+a last line"]
    assert "notes.md: +2 -2 lines" in diff.stderr


@pytest.mark.slow
def test_the_live_line_says_continuing_and_correcting_in_words(tmp_path):
    first = content_lines(5)
    cut = stream([text_chunk("".join(f"{line}\n" for line in first)), finish_chunk("length")])
    # The continuation waits before it starts, then brings a placeholder line: a correction
    # round follows, whose reply waits too.
    rest = ["# ... rest of the file ..."]
    continuation = stream([Pause(1.5), text_chunk(rest[0] + "\nDONE\n"), finish_chunk("stop")])
    corrections = stream([Pause(1.5), text_chunk("L6: the sixth line\n"), finish_chunk("stop")])
    with SSEServer([begin_write("notes.md"), cut, continuation, corrections,
                    stream(text_stream("Done now."))]) as server:
        words: set[str] = set()
        with chat_in_terminal(server, tmp_path, "words") as terminal:
            started(terminal)
            terminal.send("Write the notes.")

            def done(rows: list[str]) -> bool:
                words.update(m.group(1) for row in rows if (m := LIVE.match(row)))
                assert not any(name in row for row in rows for name in STATE_NAMES), rows
                return rows[-1] == PROMPT and "Done now." in rows
            terminal.wait_until("the write and the reply after it", done)
    assert {"continuing", "correcting"} <= words, words
    assert (tmp_path / "notes.md").read_text() == "".join(
        f"{line}\n" for line in [*first, "the sixth line"])
    assert "Correction round 1" in server.requests[3].body["messages"][-1]["content"]


@pytest.mark.slow
def test_ctrl_c_in_a_write_saves_it_and_quit_says_what_stays_and_how_to_finish_it(tmp_path):
    # The model streams three lines, then keeps writing (slowly) until interrupted.
    slow = stream([text_chunk("first line\nsecond line\nthird line\n"), Pause(30),
                   text_chunk("never shown\n"), finish_chunk("stop")])
    # The model is asked whether it is finished when the user sends a message; it is slow.
    asked = stream([Pause(30), text_chunk("never shown"), finish_chunk("stop")])
    with SSEServer([begin_write("notes.md"), slow, asked]) as server:
        with chat_in_terminal(server, tmp_path, "ctrl-c-write",
                              env={"WRITE_SESSION_IDLE_MS": "600000"}) as terminal:
            started(terminal)
            terminal.send("Write the notes.")
            terminal.wait_for("third line")
            terminal.keys("C-c")
            rows = terminal.wait_for_prompt("reply stopped; write session")
            short = re.search(r"write session ([0-9a-f]{8}) saved \(3 lines\)", flowed(rows))
            assert short, rows
            assert count(rows, "(first|second|third) line") == 0, rows  # it was a preview
            # A message while the write is open is held (the model would write its answer
            # into the file).
            terminal.send("Also add a summary.")
            terminal.wait_for("your message is held")
            terminal.wait_until("Orion's question to the model", lambda rows: len(
                server.requests) == 3)
            terminal.keys("C-c")
            terminal.wait_for_prompt("your message is held with it and sent once the file is "
                                     "written")
            terminal.send("/quit")
            status = terminal.exit_status()
            rows = terminal.rows()
    assert status == "0", rows
    text = flowed(rows)
    session = short.group(1)
    assert (f"write session {session} for notes.md is still open (3 lines saved); 1 message "
            "you typed is held with it ('Also add a summary.') and sent once the file is "
            f"written: `orion sessions recover {session} --continue` lets the next orion run or "
            "orion chat finish it, `--finalize` writes what was saved") in text, rows
    assert rows[-1] == "shell$", rows
    assert "Traceback" not in text
    (directory,) = [d for d in (tmp_path / ".orion" / "write_sessions").iterdir() if d.is_dir()]
    assert directory.name.startswith(session)
    assert (directory / "content.txt").read_text() == "first line\nsecond line\nthird line\n"
    assert len(server.requests) == 3
    assert not any("Also add a summary" in str(r.body) for r in server.requests)  # held
