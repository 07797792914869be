"""Line checks (the ``validate_lines`` hook) run while a write session's content streams, and
find exactly what they find in the whole content.

The property tests cut real content (the UTF-8 stress test, placeholders, every line break)
into pieces at random points, as a journal grows, and compare with one check of the whole. The
session tests stream a long document through the real runtime with a team's line check
registered, and look at when it ran and what the model was asked to correct.
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orion import hookimpl
from orion.errors import PluginFailed
from orion.models.script import load_script
from orion.hooks.manager import make_plugin_manager
from orion.runtime.report import Reporter
from orion.runtime.runner import play
from orion.validation import (Issue, StreamedLines, ValidationRequest, collect_issues,
                              line_breaks)

CORPUS = Path(__file__).resolve().parent / "data" / "UTF-8-test.txt"

#: Lines the built-in line checks report, and lines they must not.
LINES = [
    b"plain text",
    b"",
    b"   indented code",
    b"// ... existing code ...",
    b"# rest of the file unchanged",
    b"[Trimmed input: 2,000 lines]",
    b"  <!-- 12 more lines omitted -->",
    b"## 12. More lines",
    b"caf\xc3\xa9 \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac",
    b"bad \xc3\x28 byte",
    b"lone surrogate \xed\xa0\x80 here",
    b"nul \x00 and bell \x07",
    b"replacement \xef\xbf\xbd char",
    b"truncated \xe2\x82",
    b"\xff\xfe",
]
BREAKS = [b"\n", b"\r\n", b"\r"]


@pytest.fixture(scope="module")
def pm():
    return make_plugin_manager(entrypoints=False, env={})


def line_issues(pm, content: bytes, path: str = "notes.md") -> list[Issue]:
    """What ``validate_lines`` finds in the whole content at once."""
    found = pm.hook.validate_lines(request=ValidationRequest(path, content))
    return sorted((i for issues in found if issues for i in issues),
                  key=lambda i: (i.line, i.column, i.code))


def streamed_issues(pm, content: bytes, growth: list[int], piece_bytes: int,
                    path: str = "notes.md") -> tuple[list[Issue], StreamedLines]:
    """The same, with the content arriving in parts of the given sizes and checked in pieces
    as a write session does."""
    streamed = StreamedLines(pm, path, {}, piece_bytes=piece_bytes)
    size = 0
    for part in growth:
        size = min(len(content), size + part)
        if streamed.due(size):
            streamed.check(content[streamed.checked:size])
    issues = streamed.issues_of(ValidationRequest(path, content))
    return sorted(issues, key=lambda i: (i.line, i.column, i.code)), streamed


@st.composite
def contents(draw) -> bytes:
    lines = draw(st.lists(st.sampled_from(LINES), max_size=60))
    breaks = draw(st.lists(st.sampled_from(BREAKS), min_size=len(lines),
                           max_size=len(lines)))
    body = b"".join(line + brk for line, brk in zip(lines, breaks, strict=True))
    return body + draw(st.sampled_from([b"", b"last line without a break", b"\xe2\x80"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=contents(), growth=st.lists(st.integers(1, 200), min_size=1, max_size=40),
       piece_bytes=st.integers(1, 300))
def test_checking_in_pieces_finds_what_checking_the_whole_finds(pm, content, growth,
                                                                piece_bytes):
    streamed, _ = streamed_issues(pm, content, growth, piece_bytes)
    assert streamed == line_issues(pm, content)


def test_the_utf8_stress_test_checked_in_pieces_gives_every_issue_on_its_line(pm):
    content = CORPUS.read_bytes()
    whole = line_issues(pm, content, "UTF-8-test.txt")
    assert len(whole) > 100
    for piece_bytes in (1, 97, 1024, 4096):
        found, streamed = streamed_issues(pm, content, [61] * (len(content) // 61 + 1),
                                          piece_bytes, "UTF-8-test.txt")
        assert streamed.checked > 0
        assert found == whole


def test_pieces_end_at_line_ends_and_lines_are_counted_like_validators_count_them(pm):
    content = b"a\r\nb\rc\nd"
    streamed = StreamedLines(pm, "x.txt", {}, piece_bytes=1)
    streamed.check(content[:4])  # "a\r\nb": one whole line
    assert streamed.checked == 3
    streamed.check(content[3:])  # "b\rc\nd": two more; "d" waits for its line break
    assert streamed.checked == 7
    assert line_breaks(content) == 3
    assert [line_breaks(content, 0, end) for end in range(len(content) + 1)] == \
        [0, 0, 1, 1, 1, 2, 2, 3, 3]  # "\r" then "\n" of one "\r\n" count once
    assert line_breaks(b"x\ny\n", 1, 3) == 1


def test_a_line_check_that_fails_on_a_piece_fails_where_it_would_have_failed(pm):
    class Brittle:
        calls = 0

        @hookimpl
        def validate_lines(self, request):
            Brittle.calls += 1
            if b"boom" in request.content:
                raise RuntimeError("the check broke")

    pm2 = make_plugin_manager(entrypoints=False, env={})
    pm2.register(Brittle(), name="brittle")
    content = b"fine\n" * 10 + b"boom\n" + b"fine\n" * 10
    streamed = StreamedLines(pm2, "x.txt", {}, piece_bytes=8)
    for end in range(8, len(content), 8):
        if streamed.due(end):
            streamed.check(content[streamed.checked:end])
    assert streamed.failed  # the stream went on; nothing more was checked in pieces
    calls = Brittle.calls
    with pytest.raises(PluginFailed, match="plugin 'brittle' failed in validate_lines "
                                           r"\(.*: RuntimeError: the check broke"):
        collect_issues(pm2, ValidationRequest("x.txt", content), streamed=streamed)
    assert Brittle.calls == calls + 1  # once, on the whole content


# -- through a real write session --------------------------------------------------------------


class Fixme:
    """A team's line check: a line with FIXME is not finished. It remembers each piece it was
    given and how many came before the session's ``done`` transition."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.before_done: int | None = None

    @hookimpl
    def validate_lines(self, request):
        self.pieces.append(request.content)
        issues = []
        for number, line in enumerate(request.content.split(b"\n"), start=1):
            if b"FIXME" in line:
                issues.append(Issue(number, line.index(b"FIXME") + 1, "fixme",
                                    "unfinished line", line.decode()))
        return issues

    @hookimpl
    def lifecycle_transition(self, lifecycle, transition):
        if lifecycle.name == "write_session" and transition.trigger == "done":
            self.before_done = len(self.pieces)


class Quiet(Reporter):
    def __init__(self) -> None:
        self.prompts: list[str] = []

    def prompt(self, text: str) -> None:
        self.prompts.append(text)


def long_document(lines: int, fixme_at: int) -> str:
    out = []
    for n in range(1, lines + 1):
        text = f"- Step {n}: check the result of step {n} and note what changed."
        out.append(text + " FIXME" if n == fixme_at else text)
    return "\n".join(out) + "\n"


def play_write(tmp_path: Path, conversation: list, plugin: object):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump({"conversation": conversation}, sort_keys=False,
                                     width=1 << 20), encoding="utf-8")
    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(plugin, name="fixme")
    reporter = Quiet()
    result = asyncio.run(play(load_script(script), workspace=workspace, reporter=reporter,
                              plugins=pm))
    return result, workspace, reporter


def test_a_long_create_is_line_checked_while_it_streams_and_the_issue_keeps_its_line(tmp_path):
    document = long_document(12_000, fixme_at=11_001)  # about 800 KB: several pieces
    fixed = document.replace(" FIXME", "")
    plugin = Fixme()
    result, workspace, reporter = play_write(tmp_path, [
        {"user": "Write the runbook."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "runbook", "target_file": "runbook.md", "operation": "create"}}]}},
        {"model": {"text": document + "DONE\n", "chunk_size": 4096}},
        {"expect": "L11001"},
        {"model": {"text": "L11001: - Step 11001: check the result of step 11001 and note "
                           "what changed.\n"}},
        {"expect": "Created runbook.md (12000 lines"},
        {"model": {"text": "Written."}},
    ], plugin)
    assert result.ok, result.errors
    assert (workspace / "runbook.md").read_text() == fixed
    # Checked in pieces of whole lines before DONE arrived, not all at once after it.
    assert plugin.before_done is not None and plugin.before_done >= 2
    streamed = plugin.pieces[:plugin.before_done]
    assert all(piece.endswith(b"\n") for piece in streamed)
    assert b"".join(plugin.pieces[:plugin.before_done + 1]) == document.encode()
    [prompt] = [p for p in reporter.prompts if "L11001" in p]
    assert "unfinished line" in prompt


def test_an_edit_is_line_checked_as_the_file_after_the_edit(tmp_path):
    """An insert's content is a fragment: the checks see the file as it will be, once."""
    workspace_file = "notes.md"
    plugin = Fixme()
    conversation = [
        {"user": "Add a line."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "note", "target_file": workspace_file, "operation": "append"}}]}},
        {"model": {"text": "third FIXME\nDONE\n"}},
        {"expect": "L1:"},
        {"model": {"text": "L1: third\n"}},
        {"expect": "Appended 1 line"},
        {"model": {"text": "Done."}},
    ]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / workspace_file).write_text("first\nsecond\n")
    script = tmp_path / "script.yaml"
    script.write_text(textwrap.dedent(yaml.safe_dump({"conversation": conversation})))
    pm = make_plugin_manager(entrypoints=False, env={})
    pm.register(plugin, name="fixme")
    result = asyncio.run(play(load_script(script), workspace=workspace, reporter=Quiet(),
                              plugins=pm))
    assert result.ok, result.errors
    assert (workspace / workspace_file).read_text() == "first\nsecond\nthird\n"
    assert plugin.before_done == 0  # nothing checked while streaming
    assert plugin.pieces[0] == b"first\nsecond\nthird FIXME\n"  # the whole file after the edit
