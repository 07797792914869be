"""How the chat cuts a streamed reply into Markdown blocks and renders them, and what the
preview of a write keeps: the same blocks however the stream was chunked, nothing lost,
nothing cut inside code."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from orion.runtime.blocks import MarkdownBlocks
from orion.terminal.render import PREVIEW_KEEP_CHARS, Renderer, WriteTail

PIECES = ["Some text", " more", "\n", "\n\n", "```python\n", "```\n", "~~~\n", "    code\n",
          "# Title\n", "- item\n", "| a | b |\n", "`inline`", " ", "\t", "é"]
texts = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


def cut(text: str, sizes: list[int]) -> list[str]:
    chunks, at = [], 0
    for size in sizes:
        if at >= len(text):
            break
        chunks.append(text[at:at + size])
        at += size
    return chunks + [text[at:]] if at < len(text) else chunks


def blocks_of(chunks: list[str]) -> tuple[list[str], str]:
    blocks = MarkdownBlocks()
    found = [block for chunk in chunks for block in blocks.feed(chunk)]
    return found, blocks.end()


@settings(max_examples=400, deadline=None)
@given(texts, st.lists(st.integers(min_value=1, max_value=12), max_size=60))
def test_the_blocks_are_the_text_and_do_not_depend_on_the_chunks(text, sizes):
    whole, rest = blocks_of([text])
    found, chunked_rest = blocks_of(cut(text, sizes))
    assert (found, chunked_rest) == (whole, rest)
    assert "".join(found) + rest == text
    for block in found:
        assert block.strip()  # a block has something to show


def test_a_blank_line_in_a_fence_is_code_and_the_closing_fence_ends_the_block():
    text = "Intro:\n```python\ndef f():\n\n    return 1\n```\nAfter.\n\nLast."
    found, rest = blocks_of([text])
    assert found == ["Intro:\n```python\ndef f():\n\n    return 1\n```\n", "After.\n\n"]
    assert rest == "Last."


def test_a_heading_is_a_block_of_its_own():
    found, rest = blocks_of(["# Title\nText under it.\n"])
    assert found == ["# Title\n"] and rest == "Text under it.\n"


def test_the_preview_of_a_long_fence_keeps_the_line_that_opened_it():
    blocks = MarkdownBlocks()
    blocks.feed("```python\n" + "".join(f"x = {n}\n" for n in range(100)))
    tail = blocks.tail(5)
    assert tail.splitlines() == ["```python", *(f"x = {n}" for n in range(95, 100))]


def test_rendered_markdown_keeps_the_model_s_line_breaks_and_wraps_between_words():
    renderer = Renderer(None)
    text = renderer.markdown("first line\nsecond **line**\n\n" + "word " * 30, 40)
    lines = text.splitlines()
    assert lines[:2] == ["first line", "second line"]
    assert all(len(line) <= 40 for line in lines)
    assert " ".join(lines[2:]).split() == ["word"] * 30


def test_the_write_preview_keeps_the_last_lines_and_little_else():
    tail = WriteTail()
    for n in range(100_000):
        tail.add(f"line {n}\n")
    assert tail.lines() == ["line 99997", "line 99998", "line 99999"]
    tail.add("\x1b[31mred\tand tab")
    assert tail.lines() == ["line 99998", "line 99999", "?[31mred    and tab"]
    assert sum(len(piece) for piece in tail._pieces) <= PREVIEW_KEEP_CHARS
