"""The DONE protocol's end marker: what is content, what ends it, what comes after.

Unit tests pin each rule; property tests check that any split of the stream into chunks (of
text, or of bytes through the UTF-8 stream decoder) gives exactly what feeding it whole gives,
and that both agree with a plain line-by-line reference written with regular expressions.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orion.write_session.journal import ENCODING_ERRORS
from orion.write_session.protocol import EndMarker, Utf8StreamDecoder


def run(chunks, terminator="DONE"):
    """Feed one message in ``chunks``; return (content, done, commentary, in_fence)."""
    m = EndMarker(terminator)
    out = [m.feed(c) for c in chunks]
    out.append(m.end_message())
    return "".join(out), m.done, m.commentary, m.in_fence


def whole(text, terminator="DONE"):
    return run([text], terminator)


# -- the terminator line ----------------------------------------------------------------------


def test_content_before_the_terminator_keeps_its_last_newline():
    assert whole("a\nb\nDONE\n") == ("a\nb\n", True, "", False)


def test_text_after_the_terminator_is_commentary():
    m = EndMarker()
    assert m.feed("line\nDONE\nThat was the file.") == "line\n"
    assert m.done and m.commentary == "That was the file."
    assert m.feed(" More talk.\n") == ""
    assert m.end_message() == ""
    assert m.commentary == "That was the file. More talk.\n"
    m.new_message()
    assert m.commentary == "" and m.done


@pytest.mark.parametrize("line", ["DONE", "DONE ", "DONE\t", "DONE\r", "DONE \t\r",
                                  "DONE\r \t"])
def test_trailing_whitespace_is_allowed(line):
    assert whole(f"x\n{line}\nafter") == ("x\n", True, "after", False)


@pytest.mark.parametrize("line", [" DONE", "\tDONE", "    DONE", "  DONE \t\r", " DONE "])
def test_an_indented_done_is_content(line):
    # The terminator starts at the line's first character: an enum's last member, a line of
    # an indented code block or of a docstring is content.
    text = f"enum State {{\n    RUNNING,\n{line}\n}}\n"
    assert whole(text) == (text, False, "", False)


@pytest.mark.parametrize("line", ["DONE.", "DONE!", "NOT DONE", "DONEDONE", "DON", "done",
                                  "D ONE", "\rDONE", "DONE\rx", "> DONE", "- DONE", "`DONE`"])
def test_anything_else_is_content(line):
    text = f"x\n{line}\ny\n"
    assert whole(text) == (text, False, "", False)


def test_the_first_terminator_line_wins():
    assert whole("a\nDONE\nb\nDONE\n") == ("a\n", True, "b\nDONE\n", False)


def test_terminator_at_message_end_without_newline():
    m = EndMarker()
    assert m.feed("a\nb\nDONE") == "a\nb\n"
    assert not m.done
    assert m.end_message() == ""
    assert m.done and m.commentary == ""


def test_a_held_partial_line_is_content_at_message_end():
    m = EndMarker()
    assert m.feed("a\nDO") == "a\n"
    assert m.end_message() == "DO"
    assert not m.done


def test_strict_terminator():
    m = EndMarker("DONE 1a2b3c4d")
    text = ("x\nDONE\nDONE 1a2b\nDONE  1a2b3c4d\nDONE 1a2b3c4dx\n DONE 1a2b3c4d\n"
            "DONE 1a2b3c4d \r\ntail")
    assert m.feed(text) == ("x\nDONE\nDONE 1a2b\nDONE  1a2b3c4d\nDONE 1a2b3c4dx\n"
                            " DONE 1a2b3c4d\n")
    assert m.done and m.commentary == "tail"


@pytest.mark.parametrize("bad", ["", "   ", "DONE\nX", "A\rB"])
def test_the_terminator_must_be_one_line(bad):
    with pytest.raises(ValueError):
        EndMarker(bad)


def test_the_terminator_is_stripped():
    assert EndMarker("  DONE ").terminator == "DONE"


# -- fenced code blocks -----------------------------------------------------------------------


def test_done_inside_a_fenced_block_is_content():
    text = "Use it like this:\n```\nwrite the file\nDONE\n```\nThat's it.\nDONE\nbye"
    assert whole(text) == ("Use it like this:\n```\nwrite the file\nDONE\n```\nThat's it.\n",
                           True, "bye", False)


@pytest.mark.parametrize(("opening", "closing"), [
    ("```", "```"), ("```python", "```"), ("~~~", "~~~"), ("~~~ js `x`", "~~~~"),
    ("````", "`````"), ("   ```", "```"), ("```", "   ```  \r"), ("```", "```\t"),
])
def test_fences_open_and_close(opening, closing):
    m = EndMarker()
    m.feed(f"{opening}\n")
    assert m.in_fence
    assert m.feed("DONE\n") == "DONE\n"
    m.feed(f"{closing}\n")
    assert not m.in_fence
    assert m.feed("DONE\n") == "" and m.done


@pytest.mark.parametrize("line", ["    ```", "\t```", "``", "~~", "``` `x`", "x```", "`` `"])
def test_lines_that_do_not_open_a_fence(line):
    assert whole(f"{line}\nDONE\n") == (f"{line}\n", True, "", False)


@pytest.mark.parametrize(("opening", "line"), [
    ("```", "~~~"), ("~~~", "```"), ("````", "```"), ("```", "    ```"), ("```", "``` x"),
    ("```", "```python"), ("~~~", "~~~ x"), ("```", "\t```"),
])
def test_lines_that_do_not_close_a_fence(opening, line):
    m = EndMarker()
    text = f"{opening}\n{line}\nDONE\n"
    assert m.feed(text) == text
    assert m.in_fence and not m.done


def test_fences_nest_in_a_markdown_block():
    # A Markdown file wrapped in ```markdown, its own code blocks inside with the same fences,
    # a DONE line that is part of the document, then the real end and commentary.
    document = ("```markdown\n# Guide\n```sh\nrun it\n```\nEnd the content with a line:\n"
                "~~~\nDONE\n~~~\nDONE\nthat line is part of the guide\n```\n")
    assert whole(document + "DONE\nI wrote the guide.") == (
        document, True, "I wrote the guide.", False)


@pytest.mark.parametrize(("opening", "inner", "closing", "outer_closing"), [
    ("```markdown", "```sh", "```", "```"), ("```md", "~~~", "~~~", "```"),
    ("~~~ Markdown", "```", "```", "~~~"), ("````mdx title", "```python", "````", "````"),
    ("```md", "````js", "`````", "```"),
])
def test_in_a_markdown_block_an_inner_block_needs_its_own_closing_fence(
        opening, inner, closing, outer_closing):
    m = EndMarker()
    assert m.feed(f"{opening}\n{inner}\nDONE\n{closing}\nDONE\n") == \
        f"{opening}\n{inner}\nDONE\n{closing}\nDONE\n"
    assert m.in_fence and not m.done  # the inner block closed; the Markdown block is open
    assert m.feed(f"{outer_closing}\nDONE\n") == f"{outer_closing}\n"
    assert m.done and not m.in_fence


def test_a_shorter_bare_fence_in_a_markdown_block_is_content():
    assert whole("````md\n```\nDONE\n````\nDONE\n") == (
        "````md\n```\nDONE\n````\n", True, "", False)


@pytest.mark.parametrize("opening", ["```python", "```", "``` text", "``` markdownish"])
def test_other_blocks_keep_commonmark_rules(opening):
    # An info string inside them is content, and the next bare fence closes the block.
    assert whole(f"{opening}\n```sh\n```\nDONE\nafter") == (
        f"{opening}\n```sh\n```\n", True, "after", False)


def test_an_unclosed_fence_lasts_to_the_end():
    text = "```\nDONE\n"
    assert whole(text) == (text, False, "", True)


def test_fence_state_persists_across_messages():
    m = EndMarker()
    assert m.feed("```md\nfirst part\n") == "```md\nfirst part\n"
    assert m.end_message() == ""
    m.new_message()
    assert m.in_fence
    assert m.feed("DONE\n```\n") == "DONE\n```\n"
    assert m.end_message() == ""
    m.new_message()
    assert m.feed("DONE") == ""
    assert m.end_message() == "" and m.done


def test_a_message_boundary_is_a_line_boundary():
    # The content's last line had no newline; the reply to the idle prompt is a bare DONE.
    m = EndMarker()
    assert m.feed("last line") == "last line"
    assert m.end_message() == ""
    m.new_message()
    assert m.feed("DONE") == ""
    assert m.end_message() == "" and m.done


def test_a_fence_line_at_message_end_counts():
    m = EndMarker()
    m.feed("intro\n```")
    assert m.end_message() == ""
    assert m.in_fence


# -- eager emission ---------------------------------------------------------------------------


def test_plain_text_is_emitted_at_once():
    m = EndMarker()
    assert m.feed("Hello wor") == "Hello wor"
    assert m.feed("ld, and more") == "ld, and more"
    assert m.feed(" and DONE soon\n") == " and DONE soon\n"


@pytest.mark.parametrize(("chunk", "emitted"), [
    ("  DO", "  DO"), ("D", ""), ("DONE", ""), ("DONE  ", ""), ("DONE\r", ""),
    ("\t ", "\t "), ("Dx", "Dx"), ("DONE x", "DONE x"), ("  Hello", "  Hello"),
    ("```", "```"), ("~~~", "~~~"), ("    ", "    "),
])
def test_only_a_possible_terminator_line_is_held(chunk, emitted):
    m = EndMarker()
    assert m.feed("line\n" + chunk) == "line\n" + emitted


def test_held_text_is_released_when_the_line_turns_out_not_to_be_the_terminator():
    m = EndMarker()
    assert m.feed("DO") == ""
    assert m.feed("NE") == ""
    assert m.feed(" now") == "DONE now"
    assert m.feed("\n") == "\n"


def test_fenced_lines_are_never_held():
    m = EndMarker()
    m.feed("```\n")
    assert m.feed("DO") == "DO"
    assert m.feed("NE") == "NE"


def test_after_done_nothing_is_content():
    m = EndMarker()
    m.feed("DONE\n")
    assert m.feed("more\n") == "" and m.end_message() == ""
    assert m.commentary == "more\n"


# -- bytes ------------------------------------------------------------------------------------


def test_decoder_never_splits_a_character():
    data = "é€😀".encode()
    d = Utf8StreamDecoder()
    out = [d.feed(data[i:i + 1]) for i in range(len(data))]
    assert "".join(out) + d.final() == "é€😀"
    assert out[0] == "" and out[1] == "é"


def test_decoder_escapes_invalid_bytes_for_the_journal():
    data = b"ok \xff \xe2\x82"  # an invalid byte, then a truncated euro sign
    d = Utf8StreamDecoder()
    text = d.feed(data) + d.final()
    assert text == "ok \udcff \udce2\udc82"
    assert text.encode("utf-8", ENCODING_ERRORS) == data


# -- properties -------------------------------------------------------------------------------

VOCABULARY = [
    "DONE", " DONE ", "DONE\r", "\tDONE", "    DONE", "DONE!", "DON", "NOT DONE", "DONE x",
    "DONE 1a2b3c4d", " DONE 1a2b3c4d\r", "DONE 1a2b", "```", "```python", "``` `x`", "~~~",
    "~~~~", "~~~ md", "````", "    ```", "   ```", "  ~~~", "\t```", "``", "x ``` y", "",
    "```markdown", "````md title", "~~~ MD", "```mdx\r", "```sh", "~~~python", "```` ",
    " ", "\r", "text", "a\r", "é€😀", "# Title", "- item", "  indented line", "`code`",
    "D", "~", "`",
]

TERMINATORS = ["DONE", "DONE 1a2b3c4d"]


def fence_line(line):
    """``(character, run, info)`` of a fence line, or None (the backtick rule applied)."""
    match = re.fullmatch(r" {0,3}(`{3,}|~{3,})(.*)", line, re.S)
    if match is None or (match[1][0] == "`" and "`" in match[2]):
        return None
    return match[1][0], len(match[1]), match[2]


def reference(messages, terminator="DONE"):
    """Line-by-line reference: (content, done, commentary of the last message, in_fence).
    Fenced blocks as CommonMark reads them, except that fences nest in a Markdown block."""
    term = re.compile(re.escape(terminator) + r"[ \t\r]*")
    fence = None  # the outer block's (character, run)
    nest = None  # in a Markdown block: its inner blocks' (character, run)
    content, done, commentary = [], False, ""
    for message in messages:
        commentary = ""
        if done:
            commentary = message
            continue
        lines = message.split("\n")
        for i, line in enumerate(lines):
            complete = i < len(lines) - 1
            if not complete and not line:
                break
            if fence is None and term.fullmatch(line):
                done = True
                commentary = "\n".join(lines[i + 1:])
                break
            content.append(line + "\n" if complete else line)
            found = fence_line(line)
            if found is None:
                continue
            char, run, info = found
            bare = not info.strip(" \t\r")
            if fence is None:
                fence = char, run
                word = info[:64].split(maxsplit=1)
                nest = [] if word and word[0].lower() in ("markdown", "md", "mdx") else None
            elif nest:
                if bare and char == nest[-1][0] and run >= nest[-1][1]:
                    nest.pop()
            elif nest is not None and (not bare or char != fence[0]):
                nest.append((char, run))
            elif bare and char == fence[0] and run >= fence[1]:
                fence = nest = None
    return "".join(content), done, commentary, fence is not None


@st.composite
def messages(draw, max_messages=3):
    out = []
    for _ in range(draw(st.integers(1, max_messages))):
        lines = draw(st.lists(st.sampled_from(VOCABULARY), max_size=12))
        text = "\n".join(lines)
        if draw(st.booleans()):
            text += draw(st.sampled_from(["\n", "\r\n", ""]))
        out.append(text)
    return out


@st.composite
def splits(draw, seq):
    """``seq`` (str or bytes) cut at arbitrary points, empty pieces included."""
    cuts = sorted(draw(st.lists(st.integers(0, len(seq)), max_size=12)))
    bounds = [0, *cuts, len(seq)]
    return [seq[a:b] for a, b in zip(bounds, bounds[1:])]


def feed_messages(marker, chunked):
    """Feed each message's chunks and end it; return the content."""
    out = []
    for chunks in chunked:
        marker.new_message()
        out.extend(marker.feed(c) for c in chunks)
        out.append(marker.end_message())
    return "".join(out)


SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@SETTINGS
@given(data=st.data(), terminator=st.sampled_from(TERMINATORS))
def test_any_split_of_the_text_gives_what_feeding_it_whole_gives(data, terminator):
    msgs = data.draw(messages())
    chunked = [data.draw(splits(m)) for m in msgs]
    a, b = EndMarker(terminator), EndMarker(terminator)
    whole_content = feed_messages(a, [[m] for m in msgs])
    split_content = feed_messages(b, chunked)
    assert (split_content, b.done, b.commentary, b.in_fence) == \
        (whole_content, a.done, a.commentary, a.in_fence)
    assert (whole_content, a.done, a.commentary, a.in_fence) == reference(msgs, terminator)


@SETTINGS
@given(data=st.data())
def test_character_by_character_gives_the_same(data):
    msgs = data.draw(messages(max_messages=2))
    m = EndMarker()
    content = feed_messages(m, [list(msg) for msg in msgs])
    assert (content, m.done, m.commentary, m.in_fence) == reference(msgs)


@pytest.mark.slow
@SETTINGS
@given(data=st.data(), garbage=st.lists(st.sampled_from(
    [b"\xff", b"\xe2\x82", b"\xed\xa0\x80", b"\xc3", b"\x80"]), max_size=3))
def test_any_split_of_the_bytes_gives_what_feeding_them_whole_gives(data, garbage):
    msgs = data.draw(messages())
    raw = [m.encode("utf-8") + b"".join(garbage) for m in msgs]
    chunked = []
    for payload in raw:
        d = Utf8StreamDecoder()
        pieces = [d.feed(c) for c in data.draw(splits(payload))]
        pieces.append(d.final())
        chunked.append(pieces)
    decoded = [m.decode("utf-8", "surrogateescape") for m in raw]
    a, b = EndMarker(), EndMarker()
    whole_content = feed_messages(a, [[m] for m in decoded])
    split_content = feed_messages(b, chunked)
    assert (split_content, b.done, b.commentary) == (whole_content, a.done, a.commentary)
    assert (whole_content, a.done, a.commentary, a.in_fence) == reference(decoded)
    if not a.done:  # everything was content: the journal gets the very bytes that arrived
        assert split_content.encode("utf-8", ENCODING_ERRORS) == b"".join(raw)


def test_a_controller_can_mark_the_end_itself():
    m = EndMarker()
    m.feed("content\n")
    m.end_message()
    m.new_message()
    m.done = True  # e.g. the reply to the idle prompt was only "DONE"; it was never fed
    assert m.done and m.feed("thanks\n") == "" and m.commentary == "thanks\n"
    m.done = True
    with pytest.raises(ValueError):
        m.done = False
