"""The scripted-conversation format: loading, every error with its exact position, the shared
cursor, the examples and the examples in docs/scripts.md."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from orion.errors import ConfigError
from orion.models.base import ScriptError
from orion.models.script import (
    ExpectEntry,
    ModelEntry,
    ModelReply,
    Script,
    ScriptCursor,
    UserEntry,
    WaitEntry,
    load_script,
    read_chunks,
    split_chunks,
)

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "scripts.md"
EXAMPLES = ROOT / "examples"


def load(text: str, name: str = "s.yaml") -> Script:
    return load_script(name, text=textwrap.dedent(text))


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load(text)
    return str(info.value).splitlines()


# -- loading valid scripts -----------------------------------------------------------------


def test_every_entry_kind_loads_with_index_line_and_defaults():
    script = load("""\
        description: all kinds
        conversation:
          - user: "/plan on"
          - model:
              text: "hello"
          - expect: continue
          - wait_ms: 2500
        """)
    assert script.description == "all kinds"
    assert script.source == "s.yaml"
    assert len(script) == 4
    user, model, expect, wait = script.entries
    assert isinstance(user, UserEntry) and user.user == "/plan on"
    assert isinstance(model, ModelEntry) and model.model.text == "hello"
    assert isinstance(expect, ExpectEntry) and expect.expect == "continue"
    assert isinstance(wait, WaitEntry) and wait.wait_ms == 2500
    assert [(e.index, e.line, e.kind) for e in script.entries] == [
        (1, 3, "user"), (2, 4, "model"), (3, 6, "expect"), (4, 7, "wait_ms")]
    assert wait.where == "entry 4 (line 7)"
    reply = model.model
    assert (reply.chunk_size, reply.chunk_delay_ms, reply.tool_calls, reply.usage,
            reply.reasoning, reply.chunks) == (16, 0, [], None, None, None)
    assert reply.raw_finish_reason() == "stop"
    assert script.settings == {} and script.files == {}


def test_model_entry_with_every_key():
    script = load("""\
        conversation:
          - model:
              reasoning: "think"
              text: "# Guide"
              chunk_size: 3
              chunk_delay_ms: 5
              tool_calls:
                - name: WritePlanTool_begin
                  arguments: {intent: "operator guide", target_file: docs/guide.md, operation: create}
                  id: call_x
                - name: echo
                  arguments: '{"text": "unterminated'
              usage: {prompt_tokens: 10, completion_tokens: 2}
              finish_reason: length
        """)
    reply = script.entries[0].model
    assert reply.reasoning == "think" and reply.chunk_size == 3 and reply.chunk_delay_ms == 5
    first, second = reply.tool_calls
    assert first.arguments == {"intent": "operator guide", "target_file": "docs/guide.md",
                               "operation": "create"}
    assert first.id == "call_x"
    assert second.arguments_text() == '{"text": "unterminated'
    assert second.id is None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total) \
        == (10, 2, 12)
    assert reply.raw_finish_reason() == "length"


def test_finish_reason_defaults_and_explicit_null():
    script = load("""\
        conversation:
          - model: {text: a}
          - model: {tool_calls: [{name: t}]}
          - model: {text: a, finish_reason: null}
          - model: {text: a, finish_reason: something_new}
        """)
    assert [e.model.raw_finish_reason() for e in script.entries] == [
        "stop", "tool_calls", None, "something_new"]
    assert script.entries[1].model.tool_calls[0].arguments_text() == "{}"


def test_settings_files_and_description():
    script = load("""\
        description: seeded
        settings:
          write_session: {idle_ms: 500}
        files:
          docs/notes.md: "notes\\n"
          README.md: |
            # Project
        conversation:
          - user: hi
        """)
    assert script.settings == {"write_session": {"idle_ms": 500}}
    assert script.files == {"docs/notes.md": "notes\n", "README.md": "# Project\n"}


def test_unicode_and_multiline_text_are_kept_exactly():
    script = load("""\
        conversation:
          - model:
              text: "héllo 👋 世界\\n"
          - model:
              text: |
                line one
                line two
        """)
    assert script.entries[0].model.text == "héllo 👋 世界\n"
    assert script.entries[1].model.text == "line one\nline two\n"


def test_escaped_astral_characters_load_with_the_long_escape():
    script = load("""\
        conversation:
          - model: {text: "hi \\U0001F44B"}
        """)
    assert script.entries[0].model.text == "hi \U0001F44B"


def test_load_from_a_file_on_disk(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("conversation:\n  - user: hi\n", encoding="utf-8")
    script = load_script(path)
    assert script.source == str(path)
    assert script.entries[0].user == "hi"


# -- errors, each at its exact position ----------------------------------------------------

ERRORS = {
    "unknown top-level key": (
        """\
        conversation:
          - user: hi
        descripton: x
        """,
        "s.yaml:3:1: unknown top-level key 'descripton' (a script has: conversation, "
        "description, settings, files)"),
    "unknown key in a model entry": (
        """\
        conversation:
          - model:
              text: hi
              chunk_sise: 3
        """,
        "s.yaml:4:7: entry 1: model: unknown key 'chunk_sise' (allowed: text, text_file, "
        "chunks, chunk_size, chunk_delay_ms, reasoning, tool_calls, usage, finish_reason)"),
    "unknown key in a tool call": (
        """\
        conversation:
          - model:
              tool_calls:
                - name: echo
                  args: {}
        """,
        "s.yaml:5:11: entry 1: model.tool_calls[0]: unknown key 'args' (allowed: name, "
        "arguments, id)"),
    "an entry with two keys": (
        """\
        conversation:
          - user: hi
            model: {text: a}
        """,
        "s.yaml:3:5: entry 1: has both 'user' and 'model'; an entry has exactly one key, so put "
        "each in its own list item ('- ')"),
    "an entry with an unknown key": (
        """\
        conversation:
          - user: hi
          - usr: hi
        """,
        "s.yaml:3:5: entry 2: unknown key 'usr' (an entry has exactly one of: user, model, "
        "expect, wait_ms)"),
    "a reply key beside model instead of under it": (
        """\
        conversation:
          - model:
            text: hi
        """,
        "s.yaml:3:5: entry 1: unknown key 'text'; indent it under 'model:' (it is a key of the "
        "reply)"),
    "model without a reply": (
        """\
        conversation:
          - model:
        """,
        "s.yaml:2:5: entry 1: model needs a mapping with text, text_file, chunks or "
        "tool_calls"),
    "text and chunks together": (
        """\
        conversation:
          - model:
              text: a
              chunks: [a]
        """,
        "s.yaml:4:7: entry 1: model: text and chunks are mutually exclusive; give one of them"),
    "chunk_size with chunks": (
        """\
        conversation:
          - model:
              chunks: [a]
              chunk_size: 4
        """,
        "s.yaml:4:7: entry 1: model: chunk_size applies to text (and reasoning), not to "
        "explicit chunks"),
    "empty chunks": (
        """\
        conversation:
          - model: {chunks: []}
        """,
        "s.yaml:2:13: entry 1: model: chunks is empty; give at least one chunk or leave it out"),
    "a reply with nothing to say": (
        """\
        conversation:
          - model: {reasoning: hmm}
        """,
        "s.yaml:2:12: entry 1: model: a model reply needs at least one of text, text_file, "
        "chunks or tool_calls"),
    "negative wait_ms": (
        """\
        conversation:
          - wait_ms: -5
        """,
        "s.yaml:2:14: entry 1: wait_ms must be at least 0 (got -5)"),
    "wait_ms as a string": (
        """\
        conversation:
          - wait_ms: "100"
        """,
        "s.yaml:2:14: entry 1: wait_ms must be a number, not a string ('100')"),
    "infinite wait_ms": (
        """\
        conversation:
          - wait_ms: .inf
        """,
        "s.yaml:2:14: entry 1: wait_ms must be a finite number (got inf)"),
    "chunk_size < 1": (
        """\
        conversation:
          - model:
              text: abc
              chunk_size: 0
        """,
        "s.yaml:4:19: entry 1: model.chunk_size must be at least 1 (got 0)"),
    "negative chunk_delay_ms": (
        """\
        conversation:
          - model: {text: a, chunk_delay_ms: -1}
        """,
        "s.yaml:2:38: entry 1: model.chunk_delay_ms must be at least 0 (got -1)"),
    "chunk_size as a boolean": (
        """\
        conversation:
          - model: {text: a, chunk_size: true}
        """,
        "s.yaml:2:34: entry 1: model.chunk_size must be a whole number, not a boolean (true)"),
    "empty expect": (
        """\
        conversation:
          - expect: ""
        """,
        "s.yaml:2:13: entry 1: expect must not be empty"),
    "user line that is not text": (
        """\
        conversation:
          - user: 5
        """,
        "s.yaml:2:11: entry 1: user must be text, not a number (5)"),
    "a bare string entry": (
        """\
        conversation:
          - hello
        """,
        "s.yaml:2:5: entry 1: an entry is a mapping with one of user, model, expect, wait_ms, "
        "not a string ('hello') (for a user line write '- user: ...')"),
    "an empty entry": (
        """\
        conversation:
          - {}
        """,
        "s.yaml:2:5: entry 1: an entry is a mapping with one of user, model, expect, wait_ms, "
        "not an empty mapping"),
    "tool call without a name": (
        """\
        conversation:
          - model:
              tool_calls:
                - arguments: {}
        """,
        "s.yaml:4:11: entry 1: model.tool_calls[0]: 'name' is required"),
    "tool arguments that are a list": (
        """\
        conversation:
          - model:
              tool_calls:
                - {name: t, arguments: [1, 2]}
        """,
        "s.yaml:4:32: entry 1: model.tool_calls[0].arguments must be a mapping (sent as JSON) "
        "or a string (sent verbatim), not a list"),
    "tool arguments that are not JSON": (
        """\
        conversation:
          - model:
              tool_calls:
                - {name: t, arguments: {when: 2024-01-01}}
        """,
        "s.yaml:4:32: entry 1: model.tool_calls[0].arguments cannot be sent as JSON (Object of "
        "type date is not JSON serializable); quote the value, or write the arguments as a "
        "string"),
    "negative usage": (
        """\
        conversation:
          - model: {text: a, usage: {prompt_tokens: -1}}
        """,
        "s.yaml:2:45: entry 1: model.usage.prompt_tokens must be at least 0 (got -1)"),
    "finish_reason that is not text": (
        """\
        conversation:
          - model: {text: a, finish_reason: 3}
        """,
        "s.yaml:2:37: entry 1: model.finish_reason must be text, not a number (3)"),
    "no conversation": (
        """\
        description: nothing
        """,
        "s.yaml:1:1: the script has no 'conversation' list"),
    "empty conversation": (
        """\
        conversation: []
        """,
        "s.yaml:1:15: conversation is empty; a script needs at least one entry"),
    "conversation that is not a list": (
        """\
        conversation: {user: hi}
        """,
        "s.yaml:1:15: conversation must be a list of entries, not a mapping"),
    "absolute file path": (
        """\
        files:
          /etc/passwd: x
        conversation: [{user: hi}]
        """,
        "s.yaml:2:3: files: '/etc/passwd' must be relative to the workspace"),
    "file path leaving the workspace": (
        """\
        files:
          docs/../../x: x
        conversation: [{user: hi}]
        """,
        "s.yaml:2:3: files: 'docs/../../x' must stay inside the workspace (no '..')"),
    "file content that is not text": (
        """\
        files:
          a.txt: 5
        conversation: [{user: hi}]
        """,
        "s.yaml:2:10: files.a.txt must be text (use a quoted or block string), not a number (5)"),
    "settings that are not a mapping": (
        """\
        settings:
          write_session: 3
        conversation: [{user: hi}]
        """,
        "s.yaml:2:18: settings.write_session must map setting names to values, not a number (3)"),
    "description that is not text": (
        """\
        description: [a]
        conversation: [{user: hi}]
        """,
        "s.yaml:1:14: description must be text, not a list"),
    "a script that is not a mapping": (
        """\
        - user: hi
        """,
        "s.yaml:1:1: a script is a mapping with a 'conversation' list, not a list"),
    "escaped surrogate pair (YAML does not join them)": (
        """\
        conversation:
          - model: {text: "hi \\ud83d\\udc4b"}
        """,
        "s.yaml:2:19: entry 1: model.text: contains a UTF-16 surrogate, which cannot be sent as "
        "text (YAML does not join \\u escape pairs); write the character itself, or "
        "\\U0001F44B instead of \\ud83d\\udc4b"),
    "lone surrogate in a file": (
        """\
        files:
          a.txt: "\\udc4b"
        conversation: [{user: hi}]
        """,
        "s.yaml:2:10: files.a.txt: contains a UTF-16 surrogate"),
    "malformed YAML": (
        """\
        conversation: [unclosed
        """,
        "s.yaml:2:1: malformed YAML"),
    "duplicate key": (
        """\
        conversation:
          - model:
              text: a
              text: b
        """,
        "s.yaml:4:7: duplicate key 'text' (first defined on line 3); YAML would silently keep "
        "only the last one"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_error_is_reported_at_its_position(case):
    text, expected = ERRORS[case]
    found = problems(text)
    assert len(found) == 1, found
    assert found[0].startswith(expected), f"{found[0]!r}\ndoes not start with\n{expected!r}"


def test_every_problem_is_reported_at_once_in_line_order():
    found = problems("""\
        files:
          ../x: "a"
        conversation:
          - wait_ms: -1
          - user: hi
            expect: x
          - model: {text: a, chunks: [b], chunk_size: 0}
        oops: 1
        """)
    assert [line.split(": ")[0] for line in found] == [
        "s.yaml:2:3", "s.yaml:4:14", "s.yaml:6:5", "s.yaml:7:47", "s.yaml:8:1"]


def test_a_reply_read_from_a_file_streams_it_in_chunks_as_it_is_read(tmp_path):
    (tmp_path / "replies").mkdir()
    (tmp_path / "replies" / "guide.md").write_bytes("# Guide\r\ncafé — done\n".encode())
    script = load_script(tmp_path / "s.yaml", text=textwrap.dedent("""\
        conversation:
          - model: {text_file: replies/guide.md, chunk_size: 5}
        """))
    reply = script.entries[0].model
    assert reply.text_file == str((tmp_path / "replies" / "guide.md").resolve())
    chunks = reply.text_chunks()
    assert next(chunks) == "# Gui"  # read as it streams, line breaks as in the file
    assert list(chunks) == ["de\r\nc", "afé —", " done", "\n"]


@pytest.mark.parametrize("content, message", [
    (None, "cannot read it: No such file or directory"),
    (b"ok\nstill ok\nbad \xff\n", "not valid UTF-8: byte 0xff at offset 16 (line 3); save "
                                   "the file as UTF-8"),
    ("cut €".encode()[:-1], "not valid UTF-8: the file ends in the middle of a character"),
])
def test_a_reply_file_that_cannot_be_read_as_utf8_is_reported_with_the_script(
        tmp_path, content, message):
    if content is not None:
        (tmp_path / "reply.md").write_bytes(content)
    with pytest.raises(ConfigError) as info:
        load_script(tmp_path / "s.yaml", text=textwrap.dedent("""\
            conversation:
              - user: go
              - model:
                  text_file: reply.md
            """))
    assert str(info.value) == (f"{tmp_path / 's.yaml'}:4:18: entry 2: model.text_file "
                               f"'reply.md' ({tmp_path / 'reply.md'}): {message}")


def test_text_and_text_file_are_mutually_exclusive():
    assert problems("""\
        conversation:
          - model: {text: a, text_file: a.md}
        """) == ["s.yaml:2:22: entry 1: model: text and text_file are mutually exclusive; give "
                 "one of them"]


def test_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"missing\.yaml:1:1: cannot read file"):
        load_script(tmp_path / "missing.yaml")


def test_reply_rules_also_hold_when_built_in_code():
    with pytest.raises(ValidationError, match="mutually exclusive"):
        ModelReply(text="a", chunks=["a"])
    with pytest.raises(ValidationError, match="at least one of text, text_file, chunks or tool_calls"):
        ModelReply()
    with pytest.raises(ValidationError):
        ModelReply(text="a", chunk_size=0)
    with pytest.raises(ValidationError):
        WaitEntry(wait_ms=-1)


def test_split_chunks():
    assert list(split_chunks("abcdefghij", 4)) == ["abcd", "efgh", "ij"]
    assert list(split_chunks("abcdefgh", 4)) == ["abcd", "efgh"]
    assert list(split_chunks("", 4)) == []
    assert list(split_chunks("ab", 100)) == ["ab"]
    with pytest.raises(ValueError):
        split_chunks("ab", 0)


@pytest.mark.parametrize("size", [1, 7, 16, 4096, 65_537, 300_000])
def test_a_text_file_streams_the_same_chunks_as_the_same_text(tmp_path, size):
    # Read a block at a time, cut into chunks: the chunks are the text's, character for
    # character (not byte for byte), whatever the chunk size, line breaks as they are.
    text = "".join(f"line {n}: é€😀 \r\n{'x' * (n % 50)}\r" for n in range(6_000))
    path = tmp_path / "reply.md"
    path.write_bytes(text.encode("utf-8"))
    assert list(read_chunks(path, size)) == list(split_chunks(text, size))


# -- the cursor ----------------------------------------------------------------------------

FOUR = """\
    conversation:
      - user: one
      - model: {text: two}
      - expect: three
      - wait_ms: 4
    """


def test_peek_does_not_consume_and_next_does():
    script = load(FOUR)
    cursor = script.cursor()
    assert isinstance(cursor, ScriptCursor)
    assert cursor.position == 0 and not cursor.done
    assert cursor.peek() is script.entries[0]
    assert cursor.peek() is script.entries[0]
    assert cursor.next() is script.entries[0]
    assert cursor.position == 1
    assert cursor.peek() is script.entries[1]
    assert cursor.consumed == script.entries[:1]
    assert cursor.remaining == script.entries[1:]


def test_next_at_the_end_raises_and_peek_gives_none():
    cursor = load("conversation: [{user: a}]\n").cursor()
    cursor.next()
    assert cursor.done and cursor.peek() is None and cursor.position == 1
    with pytest.raises(ScriptError, match="no entries left"):
        cursor.next()
    assert cursor.position == 1


def test_runner_and_model_share_one_position():
    """Two consumers of one cursor see each other's progress: each entry is consumed once."""
    script = load(FOUR)
    shared = script.cursor()
    runner_took = [shared.next()]            # the runner: the user line
    model_took = [shared.next(), shared.next()]  # the model: the reply and the expectation
    assert shared.peek().kind == "wait_ms"  # the runner's turn again
    runner_took.append(shared.next())
    assert [e.kind for e in runner_took] == ["user", "wait_ms"]
    assert [e.kind for e in model_took] == ["model", "expect"]
    assert shared.done


def test_iteration_is_lazy_so_others_can_consume_in_between():
    script = load(FOUR)
    cursor = script.cursor()
    seen = []
    for entry in cursor:
        seen.append(entry.index)
        if entry.index == 1:
            cursor.next()  # someone else takes entry 2 meanwhile
    assert seen == [1, 3, 4]


def test_each_cursor_is_fresh():
    script = load(FOUR)
    first = script.cursor()
    first.next()
    assert script.cursor().position == 0
    assert "1/4" in repr(first)


# -- the examples and docs/scripts.md -----------------------------------------------------


def test_examples_load():
    hello = load_script(EXAMPLES / "hello.yaml")
    assert [e.kind for e in hello.entries] == ["user", "model"]
    assert hello.entries[1].model.text
    tools = load_script(EXAMPLES / "tools.yaml")
    assert [e.kind for e in tools.entries] == ["user", "model", "expect", "model"]
    (call,) = tools.entries[1].model.tool_calls
    assert (call.name, call.arguments_text()) == ("read_file", '{"path": "notes.md"}')
    assert tools.entries[2].expect == "The release is on Friday"
    assert tools.files == {"notes.md": "The release is on Friday.\n"}
    assert tools.entries[3].model.text


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_loads(path):
    assert load_script(path).entries


def _doc_blocks(lang: str) -> list[tuple[int, str]]:
    text = DOCS.read_text(encoding="utf-8")
    return [(text[: m.start()].count("\n") + 1, m.group(1))
            for m in re.finditer(rf"```{lang}\n(.*?)```", text, re.S)]


def test_docs_script_examples_load_and_the_error_example_is_exact(tmp_path):
    scripts = [(line, block) for line, block in _doc_blocks("yaml")
               if block.startswith(("conversation:", "description:"))]
    assert len(scripts) >= 5
    bad = [(line, block) for line, block in scripts if "chunk_size: 0" in block]
    assert len(bad) == 1
    for line, block in scripts:
        if (line, block) in bad:
            continue
        try:
            load_script(f"docs/scripts.md@{line}", text=block)
        except ConfigError as exc:  # pragma: no cover - the message is the point
            pytest.fail(f"the example at docs/scripts.md:{line} does not load:\n{exc}")
    (shown,) = [block for _, block in _doc_blocks("text") if block.startswith("guide.yaml:")]
    with pytest.raises(ConfigError) as info:
        load_script("guide.yaml", text=bad[0][1])
    assert str(info.value) == shown.rstrip("\n")


def test_docs_examples_match_the_example_files():
    blocks = [block for _, block in _doc_blocks("yaml")]
    for name in ("hello.yaml", "tools.yaml"):
        body = "\n".join(line for line in (EXAMPLES / name).read_text().splitlines()
                         if not line.startswith("#")) + "\n"
        assert body in blocks, f"docs/scripts.md does not show examples/{name} as it is"
