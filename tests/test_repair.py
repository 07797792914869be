"""The repair half of the 2-3-10 loop: the batched correction prompt, the model's ``L<line>:``
corrections, and the safe replacement after the last round (checked on Markus Kuhn's UTF-8
stress test, ``tests/data/UTF-8-test.txt``, as stored and with its malformed sequences
restored; see ``test_validators.py``)."""

from __future__ import annotations

import re

import pytest

from orion.hooks.manager import make_plugin_manager
from orion.validation import Issue, ValidationRequest, collect_issues
from orion.write_session.repair import (Replaced, apply_corrections, correction_prompt,
                                        find_problems, parse_corrections, position,
                                        safe_replacement)
from test_validators import corpus_bytes, reference_subparts, restore_corpus

DISALLOWED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd]")


@pytest.fixture(scope="module")
def pm():
    return make_plugin_manager(entrypoints=False)


# -- parse_corrections --------------------------------------------------------------------------


def test_corrections_are_read_from_l_lines():
    reply = "L3: café au lait\nL12:\nL7:    indented = 1\nL8:x\n\nL9:  two spaces\n"
    corrections, problems = parse_corrections(reply)
    assert corrections == {3: "café au lait", 12: "", 7: "   indented = 1", 8: "x",
                           9: " two spaces"}
    assert problems == []


def test_a_fenced_crlf_reply_with_chatter():
    reply = ("Sure, here are the fixes:\r\n```text\r\nL1: x = 1\r\nL2: \r\n```\r\nDONE\r\n"
             "  L5: y = 2  \r\nL0: nothing\r\n")
    corrections, problems = parse_corrections(reply)
    assert corrections == {1: "x = 1", 2: "", 5: "y = 2  "}
    assert problems == [
        "not a correction (expected L<line>: <the whole corrected line>): "
        "'Sure, here are the fixes:'",
        "L0: line numbers start at 1"]


def test_a_repeated_line_number_gives_several_lines():
    corrections, problems = parse_corrections("L4: first\nL2: b\nL4: second\n")
    assert corrections == {4: "first\nsecond", 2: "b"}
    assert problems == []


def test_lowercase_or_malformed_numbers_are_problems():
    corrections, problems = parse_corrections("l3: x\nLine 4: y\nL-1: z\nL5 x\n")
    assert corrections == {}
    assert len(problems) == 4


# -- apply_corrections --------------------------------------------------------------------------


def test_corrections_keep_each_lines_ending():
    content = b"one\r\ntwo\xff\r\nthree\nfour"
    result = apply_corrections(content, {2: "two", 3: "3", 4: "4!"})
    assert result.content == b"one\r\ntwo\r\n3\n4!"
    assert (result.applied, result.out_of_range) == ([2, 3, 4], [])


def test_out_of_range_lines_are_reported_not_applied():
    content = b"a\nb\n"
    result = apply_corrections(content, {0: "x", 2: "B", 3: "c", 99: "z"})
    assert result.content == b"a\nB\n"
    assert (result.applied, result.out_of_range) == ([2], [0, 3, 99])
    assert apply_corrections(b"", {1: "x"}).out_of_range == [1]


def test_a_correction_of_several_lines_uses_the_lines_break():
    content = b"a\r\n# ... existing code ...\r\nz\r\n"
    result = apply_corrections(content, {2: "b\nc"})
    assert result.content == b"a\r\nb\r\nc\r\nz\r\n"
    assert apply_corrections(b"a\r\nb", {2: "b\nc"}).content == b"a\r\nb\r\nc"


def test_lone_cr_lines_and_unchanged_bytes():
    content = b"a\rb\xc3\rc\n"
    assert apply_corrections(content, {2: "bé"}).content == "a\rbé\rc\n".encode()
    assert apply_corrections(content, {}).content is content


# -- correction_prompt --------------------------------------------------------------------------


def test_the_prompt_lists_each_line_escaped_with_its_reasons(pm):
    content = b"caf\xc3 au lait\nok\n\x00x = 1 \xef\xbf\xbd\xef\xbf\xbd\n"
    issues = collect_issues(pm, ValidationRequest("menu.txt", content))
    issues.append(Issue(2, 1, "custom", "a team's own check"))
    prompt = correction_prompt(issues, content, 1, 3, path="menu.txt")
    assert prompt == (
        "Correction round 1 of 3: the content you wrote for menu.txt has 5 problems on 3 "
        "lines.\n"
        "Bytes that are not valid UTF-8, U+FFFD replacement characters and control characters "
        "are shown as escapes (\\xed, \\ufffd, \\x00). The escapes show what is wrong; they are "
        "not text to keep.\n"
        "\n"
        "L1: caf\\xc3 au lait\n"
        "  - column 4: invalid UTF-8 bytes, shown as \\x escapes [utf8-invalid]\n"
        "L2: ok\n"
        "  - column 1: a team's own check [custom]\n"
        "L3: \\x00x = 1 \\ufffd\\ufffd\n"
        "  - column 1: control character, shown as a \\x escape [control-char]\n"
        "  - columns 8-9: U+FFFD replacement character: the character that was meant was lost "
        "[utf8-replacement-char]\n"
        "\n"
        "Reply with the corrected lines and nothing else, one per line:\n"
        "L<line>: <the whole corrected line>\n"
        "Write each line in full, with the characters you meant in place of the escapes (or "
        "without them). `L<line>:` with nothing after it makes the line empty. To put several "
        "lines in place of one, repeat its number (`L7: first`, `L7: second`). Lines you do not "
        "list stay as they are; line numbers are those of the content as shown above.\n")


def test_the_last_round_says_so_and_other_issues_keep_their_message(pm):
    content = b"a = 1\nb = (\n"
    issues = collect_issues(pm, ValidationRequest("x.py", content))
    prompt = correction_prompt(issues, content, 3, 3)
    assert prompt.startswith("Correction round 3 of 3: the content you wrote has 1 problem on "
                             "1 line.\n\nL2: b = (\n  - column 5: Python: '(' was never closed "
                             "[syntax]\n")
    assert "\\x" not in prompt.split("\n\n")[1]
    assert prompt.endswith("This is the last round: whatever is still invalid afterwards is "
                           "removed automatically.\n")


def test_the_prompt_cuts_very_long_lines_and_names_lines_past_the_end():
    content = b"x" * 2000 + b"\xff" + b"y" * 10 + b"\n"
    issues = [Issue(1, 2001, "utf8-invalid", "invalid"), Issue(5, 1, "syntax", "at the end")]
    prompt = correction_prompt(issues, content, 1, 3)
    assert ("L1: (a line of 2011 characters; shown around each problem)\n"
            "  - column 2001: invalid UTF-8 bytes, shown as \\x escapes [utf8-invalid]\n"
            f"    …{'x' * 89}\\xff{'y' * 10}\n") in prompt  # the window fills 100 columns
    assert "L5: (past the end of the content, which has 1 line)\n  - column 1: at the end" in prompt


def test_a_round_trip_through_the_prompt_fixes_the_content(pm):
    content = b"name = \"caf\xc3\"\r\nvalue = 1\x07\r\n"
    issues = collect_issues(pm, ValidationRequest("x.toml", content))
    assert [i.line for i in issues] == [1, 2]
    prompt = correction_prompt(issues, content, 1, 3)
    lines = prompt.splitlines()
    assert 'L1: name = "caf\\xc3"' in lines and "L2: value = 1\\x07" in lines
    corrections, problems = parse_corrections("```\nL1: name = \"café\"\nL2: value = 1\n```")
    fixed = apply_corrections(content, corrections).content
    assert fixed == 'name = "café"\r\nvalue = 1\r\n'.encode()
    assert collect_issues(pm, ValidationRequest("x.toml", fixed)) == []


# -- safe_replacement ---------------------------------------------------------------------------


def test_safe_replacement_drops_problems_and_reports_them():
    content = b"ok line\r\ncaf\xc3 \xed\xa0\x80!\x00\r\nlost \xef\xbf\xbd\n\xff"
    result, replaced = safe_replacement(content)
    assert result == b"ok line\r\ncaf !\r\nlost \n"
    assert replaced == [
        Replaced(2, 4, "\\xc3", "", "utf8-invalid"),
        Replaced(2, 6, "\\xed", "", "utf8-invalid"),
        Replaced(2, 7, "\\xa0", "", "utf8-invalid"),
        Replaced(2, 8, "\\x80", "", "utf8-invalid"),
        Replaced(2, 10, "\\x00", "", "control-char"),
        Replaced(3, 6, "\\ufffd", "", "utf8-replacement-char"),
        Replaced(4, 1, "\\xff", "", "utf8-invalid"),
    ]


def test_safe_replacement_with_a_replacement_text():
    result, replaced = safe_replacement(b"a\xffb\x1bc\n", "?")
    assert result == b"a?b?c\n"
    assert [r.replacement for r in replaced] == ["?", "?"]
    for bad in ("\ufffd", "\x00", "\n", "x\r"):
        with pytest.raises(ValueError, match="safe replacement"):
            safe_replacement(b"\xff", bad)


def test_clean_content_is_returned_as_it_is():
    content = "tab\there\r\nκόσμε \x85 \ufeff\n".encode()
    assert safe_replacement(content) == (content, [])


def lines_with_issues(pm, content: bytes) -> set[int]:
    return {i.line for i in collect_issues(pm, ValidationRequest("UTF-8-test.txt", content))}


def check_safe_replacement(pm, original: bytes) -> None:
    result, replaced = safe_replacement(original)
    text = result.decode("utf-8")  # valid UTF-8 ...
    assert not DISALLOWED.search(text.replace("\t", "")), "U+FFFD or a control is left"
    assert find_problems(result) == []
    assert collect_issues(pm, ValidationRequest("UTF-8-test.txt", result)) == []
    bad = lines_with_issues(pm, original)
    assert {r.line for r in replaced} == bad
    before, after = original.split(b"\n"), result.split(b"\n")
    assert len(before) == len(after)
    for number, (old, new) in enumerate(zip(before, after, strict=True), start=1):
        if number not in bad:
            assert new == old, f"line {number} changed"  # ... valid lines byte for byte
        else:
            # A bad line loses exactly its bad bytes: the reference's invalid subparts, U+FFFD
            # and the controls; every other byte of it is kept, in order.
            kept = bytearray()
            pos = 0
            for start, end in reference_subparts(old):
                kept += old[pos:start]
                pos = end
            kept += old[pos:]
            expected = re.sub(rb"\xef\xbf\xbd|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", b"", bytes(kept))
            assert new == expected, f"line {number}"


def test_safe_replacement_of_the_stored_corpus(pm):
    data = corpus_bytes()
    check_safe_replacement(pm, data)
    _, replaced = safe_replacement(data)
    assert len(replaced) == 335


def test_safe_replacement_of_the_restored_corpus(pm):
    data, restored = restore_corpus(corpus_bytes())
    check_safe_replacement(pm, data)
    result, _ = safe_replacement(data)
    # The one real U+FFFD (2.3.3) is dropped too, and the restored lines lose their malformed
    # bytes: "3.1.1  First continuation byte 0x80: "\x80"" keeps its quotes.
    lines = result.decode().split("\n")
    assert lines[101].startswith('3.1.1  First continuation byte 0x80: ""')
    assert lines[restored[0] - 1].startswith('2.1.5  5 bytes (U-00200000):        ""')


def test_the_corpus_survives_the_whole_loop_without_help(pm):
    """No usable corrections for three rounds, then the safe replacement: the content that is
    written is valid and keeps every good line."""
    content, _ = restore_corpus(corpus_bytes())
    for round_ in (1, 2, 3):
        issues = collect_issues(pm, ValidationRequest("UTF-8-test.txt", content))
        prompt = correction_prompt(issues, content, round_, 3)
        assert f"Correction round {round_} of 3" in prompt
        corrections, problems = parse_corrections("I cannot tell what these bytes were.")
        content = apply_corrections(content, corrections).content
        assert problems and not corrections
    check_safe_replacement(pm, content)


# -- positions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "index", "expected"), [
    ("abc", 0, (1, 1)), ("abc", 3, (1, 4)), ("a\nb", 2, (2, 1)), ("a\r\nb", 1, (1, 2)),
    ("a\r\nb", 2, (1, 3)), ("a\r\nb", 3, (2, 1)), ("a\rb", 2, (2, 1)), ("é\n\nx", 3, (3, 1)),
])
def test_positions_count_lines_and_characters(text, index, expected):
    assert position(text, index) == expected
