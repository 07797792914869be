"""`orion chat` in a real terminal (tmux), typed as a person types: what shows on the screen,
and what the endpoint receives (the request bodies of the loopback server)."""

from __future__ import annotations

import pytest
from sse_server import Pause, SSEServer, finish_chunk, stream, text_chunk, text_stream
from tmux_terminal import PROMPT, chat_in_terminal, count, needs_tmux, started

pytestmark = needs_tmux


def user_messages(server: SSEServer, request: int) -> list[str]:
    """The user messages of request ``request`` (0-based), in order."""
    return [m["content"] for m in server.requests[request].body["messages"]
            if m["role"] == "user"]


@pytest.mark.slow
def test_a_message_shows_once_and_up_recalls_it_from_the_workspace_history(tmp_path):
    with SSEServer([stream(text_stream("Hi.")), stream(text_stream("Again.")),
                    stream(text_stream("Found it."))]) as server:
        with chat_in_terminal(server, tmp_path, "echo") as terminal:
            started(terminal)
            terminal.send("Hello there")
            rows = terminal.wait_for_prompt("Hi.")
            assert count(rows, r".*Hello there") == 1, rows  # no second echo of it
            assert "you> Hello there" in rows, rows
            terminal.keys("Up")
            terminal.wait_for_prompt(typed="Hello there")  # recalled, editable
            terminal.keys("C-a")
            terminal.send("Say: ")
            terminal.wait_for_prompt("Again.")
        assert user_messages(server, 0) == ["Hello there"]
        assert user_messages(server, 1) == ["Hello there", "Say: Hello there"]
        history = tmp_path / ".orion" / "chat_history"
        assert history.stat().st_mode & 0o777 == 0o600
        # A new chat in the same workspace: Ctrl-R finds an older message by a word in it.
        with chat_in_terminal(server, tmp_path, "echo-again") as terminal:
            started(terminal)
            terminal.keys("C-r")
            terminal.type("Say")
            terminal.wait_for("Say: Hello there")
            terminal.keys("Enter")  # takes the found message into the line
            terminal.wait_for_prompt(typed="Say: Hello there")
            terminal.keys("Enter")
            terminal.wait_for_prompt("Found it.")
    assert user_messages(server, 2) == ["Say: Hello there"]


@pytest.mark.slow
def test_alt_enter_and_a_paste_make_one_message_of_several_lines(tmp_path):
    with SSEServer([stream(text_stream("Two lines.")),
                    stream(text_stream("Three lines."))]) as server:
        with chat_in_terminal(server, tmp_path, "multiline") as terminal:
            started(terminal)
            terminal.type("first line")
            terminal.keys("M-Enter")
            terminal.type("second line")
            rows = terminal.wait_until("the second line under the first", lambda rows: rows[-2:]
                                       == ["you> first line", "     second line"])
            assert len(server.requests) == 0  # Alt+Enter sent nothing
            terminal.keys("Enter")
            terminal.wait_for_prompt("Two lines.")
            terminal.paste("alpha\nbeta\ngamma")
            terminal.wait_until("the pasted lines in the prompt", lambda rows: rows[-3:] == [
                "you> alpha", "     beta", "     gamma"])
            assert len(server.requests) == 1  # a paste is not sent line by line
            terminal.keys("Enter")
            terminal.wait_for_prompt("Three lines.")
    assert user_messages(server, 0) == ["first line\nsecond line"]
    assert user_messages(server, 1)[-1] == "alpha\nbeta\ngamma"
    assert len(server.requests) == 2


@pytest.mark.slow
def test_tab_completes_commands_and_workspace_paths(tmp_path):
    (tmp_path / "notes-2024.md").write_text("notes\n")
    with SSEServer([stream(text_stream("Read it."))]) as server:
        with chat_in_terminal(server, tmp_path, "complete") as terminal:
            started(terminal)
            terminal.type("/hel")
            terminal.keys("Tab")
            terminal.wait_for_prompt(typed="/help")
            terminal.keys("Enter")
            terminal.wait_for_prompt("/reset")  # the help lists the commands
            terminal.type("summarize notes-2")
            terminal.keys("Tab")
            terminal.wait_for_prompt(typed="summarize notes-2024.md")
            terminal.keys("Enter")
            terminal.wait_for_prompt("Read it.")
    assert user_messages(server, 0) == ["summarize notes-2024.md"]


@pytest.mark.slow
def test_ctrl_c_at_the_prompt_clears_the_line_and_twice_on_an_empty_line_ends_the_chat(
        tmp_path):
    with SSEServer([stream(text_stream("Still here."))]) as server:
        with chat_in_terminal(server, tmp_path, "ctrl-c") as terminal:
            started(terminal)
            terminal.type("a draft I do not want")
            terminal.wait_for_prompt(typed="a draft I do not want")
            terminal.keys("C-c")
            terminal.wait_for_prompt(typed="")  # cleared; the chat goes on
            terminal.keys("C-c")  # on the empty line: it says what a second one does
            terminal.wait_for_prompt("Ctrl-C again (or Ctrl-D) ends the chat")
            terminal.send("ping")  # typing in between: the next Ctrl-C starts over
            terminal.wait_for_prompt("Still here.")
            terminal.keys("C-c")
            terminal.wait_until("a second hint", lambda rows: count(
                rows, "Ctrl-C again") == 2 and rows[-1] == PROMPT)
            assert not terminal.status_file.exists()
            terminal.keys("C-c")
            status = terminal.exit_status()
            rows = terminal.rows()
    assert status == "0", rows
    assert user_messages(server, 0) == ["ping"]
    assert rows[-1] == "shell$", rows  # the shell's prompt starts a line of its own
    assert "draft" not in "\n".join(rows)
    assert "Traceback" not in "\n".join(rows)


@pytest.mark.slow
def test_ctrl_d_ends_the_chat_cleanly(tmp_path):
    with SSEServer([]) as server:
        with chat_in_terminal(server, tmp_path, "ctrl-d") as terminal:
            started(terminal)
            terminal.keys("C-d")
            status = terminal.exit_status()
            rows = terminal.rows()
    assert status == "0", rows
    assert rows[-2:] == [PROMPT, "shell$"], rows
    assert "Traceback" not in "\n".join(rows)


@pytest.mark.slow
def test_ctrl_c_stops_a_reply_which_stays_in_the_model_s_view(tmp_path):
    slow = stream([text_chunk("The answer has two parts.\n\nFirst, the"), Pause(30),
                   text_chunk(" never shown"), finish_chunk("stop")])
    with SSEServer([slow, stream(text_stream("Go on then."))]) as server:
        with chat_in_terminal(server, tmp_path, "stop-reply") as terminal:
            started(terminal)
            terminal.send("Explain it.")
            terminal.wait_for("First, the")
            terminal.keys("C-c")
            rows = terminal.wait_for_prompt("reply stopped")
            assert count(rows, "First, the$") == 1, rows  # shown once, and it stays
            assert not terminal.status_file.exists()
            terminal.send("Only the first part.")
            terminal.wait_for_prompt("Go on then.")
    messages = server.requests[1].body["messages"]
    assert [m["role"] for m in messages[-3:]] == ["user", "assistant", "user"]
    assert messages[-3]["content"] == "Explain it."
    assert messages[-2]["content"] == ("The answer has two parts.\n\nFirst, the\n\n"
                                       "[The user interrupted this reply here.]")
    assert messages[-1]["content"] == "Only the first part."


@pytest.mark.slow
def test_text_typed_while_a_reply_streams_stays_on_its_line_and_is_sent_after_it(tmp_path):
    lines = [f"Reply line {n} of the long answer." for n in range(1, 9)]
    slow = stream([item for line in lines for item in (text_chunk(line + "\n"), Pause(0.3))]
                  + [finish_chunk("stop")])
    with SSEServer([slow, stream(text_stream("Second answer."))]) as server:
        with chat_in_terminal(server, tmp_path, "type-ahead") as terminal:
            started(terminal)
            terminal.send("First question")
            terminal.wait_for("Reply line 2")
            terminal.type("Next question")
            rows = terminal.wait_for("Reply line 4")
            assert rows[-1] == "you> Next question", rows  # its own line, under the reply
            assert count(rows, ".*Next question") == 1, rows
            terminal.keys("Enter")  # while the reply streams: sent once it has ended
            terminal.wait_for_prompt("Second answer.")
            rows = terminal.rows()
    assert len(server.requests) == 2
    messages = server.requests[1].body["messages"]
    assert messages[-2]["content"] == "".join(f"{line}\n" for line in lines)  # whole
    assert messages[-1] == {"role": "user", "content": "Next question"}
    shown = [row for row in rows if row.startswith("Reply line")]
    assert shown == lines, rows  # each line once, none glued to what was typed
    assert rows.index("you> Next question") > rows.index(lines[-1]), rows


@pytest.mark.slow
def test_replies_are_rendered_as_markdown_and_wrapped_between_words(tmp_path):
    words = ("Orion keeps every line the model streams, journals it to disk, checks it, and "
             "writes the file once, atomically, after the model says it is done.").split()
    reply = ("# Notes\n\nThis is **important** and `code`.\n\n" + " ".join(words * 3) +
             "\n\n- first\n- second\n")
    with SSEServer([stream(text_stream(*[reply[i:i + 7] for i in range(0, len(reply), 7)]))]) \
            as server:
        with chat_in_terminal(server, tmp_path, "markdown", width=60) as terminal:
            started(terminal)
            terminal.send("Show me.")
            rows = terminal.wait_for_prompt("second")
    text = "\n".join(rows)
    assert "This is important and code." in rows, rows
    assert "**" not in text and "# Notes" not in text and "- first" not in text
    assert any(row.strip() == "Notes" for row in rows), rows
    assert " • first" in rows and " • second" in rows, rows
    paragraph = [row for row in rows if row and row.split()[0] in words]
    assert len(paragraph) > 3, rows  # wrapped at the terminal's width...
    assert all(len(row) <= 60 for row in paragraph), rows
    assert [w for row in paragraph for w in row.split()] == words * 3  # ...between words
    assert server.requests[0].body["messages"][-1]["content"] == "Show me."


@pytest.mark.slow
def test_the_prompt_comes_back_after_the_idle_prompt_and_its_answer(tmp_path):
    # The message ends without DONE: the chat hands the prompt back; 2 s later Orion's idle
    # prompt asks the model, which answers DONE in the background. Its output goes above the
    # prompt, which stays ready for the next line.
    from sse_server import begin_write
    content = stream([text_chunk("# Notes\n\nAll of them.\n"), finish_chunk("stop")])
    answer = stream([text_chunk("DONE\n"), finish_chunk("stop")])
    with SSEServer([begin_write("notes.md"), content, answer,
                    stream(text_stream("Anything else?")),
                    stream(text_stream("Glad to help."))]) as server:
        with chat_in_terminal(server, tmp_path, "idle") as terminal:
            started(terminal)
            terminal.send("Write the notes.")
            terminal.wait_for_prompt("Anything else?")
            terminal.send("Thanks.")
            rows = terminal.wait_for_prompt("Glad to help.")
    assert (tmp_path / "notes.md").read_text() == "# Notes\n\nAll of them.\n"
    prompts = [row for row in rows if row.startswith(PROMPT)]
    assert prompts == ["you> Write the notes.", "you> Thanks.", PROMPT], rows
    said = rows.index("you> Write the notes.")
    idle = next(i for i, row in enumerate(rows) if row.startswith("orion  If you're finished"))
    assert said < idle < rows.index("Anything else?") < rows.index("you> Thanks."), rows
    assert user_messages(server, 4)[-1] == "Thanks."
