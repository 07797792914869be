"""The built-in validators and the fence-unwrapping normalizer.

The UTF-8 validator is checked against Markus Kuhn's "UTF-8 decoder capability and stress test"
(``tests/data/UTF-8-test.txt``, CC BY 4.0, attribution in ``tests/data/README.md``): as stored
there (its malformed sequences were already replaced by U+FFFD, one per maximal subpart, on the
way to us) and restored, with every malformed sequence put back from what the file itself says
about it. Two references that do not
share code with Orion decide what must be found: Python's ``errors="replace"`` decoding, line by
line, and a byte-level scan written from the Unicode Standard's table of well-formed UTF-8
(Table 3-7) and its definition of maximal subparts.
"""

from __future__ import annotations

import re
import sys
import textwrap
import types
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import orion_plugins.unwrap_fence as unwrap_fence
import orion_plugins.validate_placeholders as validate_placeholders
import orion_plugins.validate_utf8 as validate_utf8
from orion.config import load_config
from orion.hooks.manager import make_plugin_manager
from orion.validation import Issue, ValidationRequest, collect_issues
from orion.write_session.repair import LineView, find_problems, text_lines
from orion_plugins.validate_placeholders import placeholder

CORPUS = Path(__file__).resolve().parent / "data" / "UTF-8-test.txt"
UTF8_CODES = {"utf8-invalid", "utf8-replacement-char", "control-char"}
BUILTIN_VALIDATORS = ["orion_plugins.validate_utf8", "orion_plugins.validate_syntax",
                      "orion_plugins.validate_placeholders", "orion_plugins.unwrap_fence"]


@pytest.fixture(scope="module")
def pm():
    return make_plugin_manager(entrypoints=False)


def issues(pm, path: str, content: bytes | str) -> list[Issue]:
    if isinstance(content, str):
        content = content.encode()
    return collect_issues(pm, ValidationRequest(path, content))


def found(pm, path: str, content: bytes | str, codes=None) -> list[tuple[int, int, str]]:
    return [(i.line, i.column, i.code) for i in issues(pm, path, content)
            if codes is None or i.code in codes]


# -- the corpus ---------------------------------------------------------------------------------


def corpus_bytes() -> bytes:
    if not CORPUS.is_file():
        pytest.fail(f"the real-world corpus is missing: {CORPUS} (Markus Kuhn's UTF-8-test.txt; "
                    "see tests/data/README.md). It is part of the repository and these tests "
                    "must not be skipped.")
    return CORPUS.read_bytes()


def legacy_utf8(code_point: int, size: int) -> bytes:
    """``code_point`` in the original UTF-8 of RFC 2279 (up to 6 bytes), in ``size`` bytes:
    overlong when fewer would do, as the stress test uses it."""
    if size == 1:
        return bytes([code_point])
    tail = []
    for _ in range(size - 1):
        tail.append(0x80 | code_point & 0x3F)
        code_point >>= 6
    lead = (0xFF << (8 - size)) & 0xFF
    assert code_point < (1 << (7 - size)), "does not fit"
    return bytes([lead | code_point, *reversed(tail)])


def restore_corpus(data: bytes) -> tuple[bytes, list[int]]:
    """Put the malformed sequences back into the stored corpus, where it shows U+FFFD instead.

    Each test line says what it contains: its bytes in hex (``U+002F = c0 af = "..."``), a
    code point and a length (``5 bytes (U-00200000)``: the RFC 2279 encoding; ``with last byte
    missing``: the same without its last byte), or a description (``First continuation byte
    0x80``, ``N continuation bytes`` alternating 80 and bf, and the blocks of 3.1.9, 3.2 and 3.4).
    Returns the restored bytes and the numbers of the lines that changed.
    """
    lines = data.split(b"\n")
    out, changed = [], []
    block: list[bytes] = []      # one byte per U+FFFD, for the quoted blocks of 3.1.9 and 3.2
    truncated: list[bytes] = []  # the sequences of 3.3, for 3.4
    concatenation = False
    for number, raw in enumerate(lines, start=1):
        text = raw.decode("utf-8")
        if heading := re.search(r"all 64 possible continuation bytes \(0x80-0xbf\)", text):
            block = [bytes([b]) for b in range(0x80, 0xC0)]
        elif heading := re.search(r"first bytes of \d-byte sequences \(0x(..)-0x(..)\)", text):
            block = [bytes([b]) for b in range(int(heading[1], 16), int(heading[2], 16) + 1)]
        elif "Concatenation of incomplete sequences" in text:
            concatenation = True
        if "\ufffd" not in text:
            out.append(raw)
            continue
        whole: bytes | None = None
        if match := re.search(r"(?<![0-9A-Za-z])((?:[0-9a-f]{2} )+) *= \"", text):
            whole = bytes.fromhex(match[1])
        elif match := re.search(r"(\d)-byte sequence with last byte missing \(U[+-]([0-9A-F]+)\)",
                                text):
            whole = legacy_utf8(int(match[2], 16), int(match[1]))[:-1]
            truncated.append(whole)
        elif match := re.search(r"(\d) bytes? +\(U-([0-9A-F]{8})\)", text):
            whole = legacy_utf8(int(match[2], 16), int(match[1]))
        elif match := re.search(r"continuation byte 0x([0-9a-f]{2})", text):
            whole = bytes.fromhex(match[1])
        elif match := re.search(r"(\d) continuation bytes", text):
            whole = bytes((0x80, 0xBF) * 4)[:int(match[1])]
        elif concatenation:
            whole = b"".join(truncated)
        if whole is not None:
            assert text.count('"') == 2 and len(re.findall("\ufffd+", text)) == 1, text
            restored = re.sub("\ufffd+", "\0", text).encode().replace(b"\0", whole)
        else:
            assert block, f"line {number}: no rule restores {text!r}"
            pieces = text.split("\ufffd")
            restored = pieces[0].encode() + b"".join(
                block.pop(0) + piece.encode() for piece in pieces[1:])
        # The restored line reads as the stored one, up to how many U+FFFD a malformed
        # sequence gives (the stored copy was made by a decoder that treats a surrogate as one).
        squeeze = lambda s: re.sub("\ufffd+", "\ufffd", s)  # noqa: E731
        assert squeeze(restored.decode("utf-8", "replace")) == squeeze(text), number
        out.append(restored)
        if restored != raw:
            changed.append(number)
    assert not block, "bytes of a block were not used"
    return b"\n".join(out), changed


def reference_subparts(line: bytes) -> list[tuple[int, int]]:
    """The maximal invalid subparts of ``line``: a scan written from Table 3-7 (well-formed
    UTF-8 byte sequences) of the Unicode Standard, independent of Python's codec."""
    second = {**{b: (0x80, 0xBF) for b in range(0xC2, 0xF5)},
              0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F), 0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}
    spans, i = [], 0
    while i < len(line):
        lead = line[i]
        if lead < 0x80:
            i += 1
            continue
        if lead not in second:
            spans.append((i, i + 1))
            i += 1
            continue
        need = 1 if lead < 0xE0 else 2 if lead < 0xF0 else 3
        j, low, high = i + 1, *second[lead]
        while j - i - 1 < need and j < len(line) and low <= line[j] <= high:
            j, low, high = j + 1, 0x80, 0xBF
        if j - i - 1 < need:
            spans.append((i, j))
        i = j
    return spans


def reference_controls(text: str) -> list[int]:
    """0-based character positions of the controls that must be reported."""
    return [i for i, ch in enumerate(text)
            if unicodedata.category(ch) == "Cc" and ord(ch) < 0x80 and ch not in "\t\n\r"]


def check_against_references(pm, content: bytes) -> list[Issue]:
    """Every issue the UTF-8 validator must find is found, at the right line, column and byte,
    and nothing else; returns the issues."""
    found_issues = [i for i in issues(pm, "UTF-8-test.txt", content) if i.code in UTF8_CODES]
    problems = find_problems(content)
    assert [(p.line, p.column, p.code) for p in problems] == [
        (i.line, i.column, i.code) for i in found_issues]
    expected_issues, expected_spans = [], []
    offset = 0
    for number, line in enumerate(content.split(b"\n"), start=1):
        replaced = line.decode("utf-8", "replace")
        spans = reference_subparts(line)
        # Python's errors="replace" agrees with the Table 3-7 scan on where U+FFFD goes ...
        assert [i for i, ch in enumerate(replaced) if ch == "\ufffd"] == sorted(
            [len(line[:s].decode("utf-8", "replace")) for s, _ in spans]
            + [len(line[:m.start()].decode("utf-8", "replace"))
               for m in re.finditer(b"\xef\xbf\xbd", line)])
        invalid_columns = {len(line[:s].decode("utf-8", "replace")) + 1 for s, _ in spans}
        for index, ch in enumerate(replaced):
            if ch == "\ufffd":
                code = ("utf8-invalid" if index + 1 in invalid_columns
                        else "utf8-replacement-char")
                expected_issues.append((number, index + 1, code))
        for index in reference_controls(replaced):
            expected_issues.append((number, index + 1, "control-char"))
        expected_spans += [(offset + s, offset + e) for s, e in spans]
        offset += len(line) + 1
    # ... and the validator reports exactly those places, with the reference's byte spans.
    assert sorted(expected_issues) == [(i.line, i.column, i.code) for i in found_issues]
    assert [(p.start, p.end) for p in problems if p.code == "utf8-invalid"] == expected_spans
    for issue, problem in zip(found_issues, problems, strict=True):
        assert issue.message.endswith(f"(byte {problem.byte_column} of the line)")
        assert problem.escaped in issue.context
    return found_issues


def test_the_stored_corpus_has_its_replacement_characters_and_controls_found(pm):
    data = corpus_bytes()
    data.decode("utf-8")  # the stored copy is valid UTF-8: its malformed bytes became U+FFFD
    found_issues = check_against_references(pm, data)
    codes = [i.code for i in found_issues]
    assert codes.count("utf8-replacement-char") == data.count("\ufffd".encode()) == 333
    assert [(i.line, i.column, i.context) for i in found_issues if i.code == "control-char"] == [
        (71, 38, '2.1.1  1 byte  (U-00000000):        "\\x00"'),
        (80, 38, '2.2.1  1 byte  (U-0000007F):        "\\x7f"')]
    # Only U+FFFD and the two controls: the rest of the file, prose included, is fine.
    assert set(codes) == {"utf8-replacement-char", "control-char"}
    assert len(issues(pm, "UTF-8-test.txt", data)) == len(found_issues)


def test_the_restored_corpus_has_every_malformed_sequence_found(pm):
    data, restored_lines = restore_corpus(corpus_bytes())
    assert len(restored_lines) == 68  # every line with U+FFFD but 2.3.3, a real U+FFFD
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    found_issues = check_against_references(pm, data)
    by_line: dict[int, list[Issue]] = {}
    for issue in found_issues:
        by_line.setdefault(issue.line, []).append(issue)
    invalid_lines = {i.line for i in found_issues if i.code == "utf8-invalid"}
    assert invalid_lines == set(restored_lines)  # every restored line, and only those
    # The one U+FFFD that is a real character (2.3.3) is the one replacement-char issue left.
    assert [(i.line, i.code) for i in found_issues if i.code == "utf8-replacement-char"] == [
        (91, "utf8-replacement-char")]

    def line_of(label: str) -> int:
        [number] = [n for n, line in enumerate(data.split(b"\n"), 1)
                    if line.startswith(label.encode() + b" ")]
        return number

    def reasons(label: str) -> list[str]:
        return [i.message for i in by_line[line_of(label)]]

    # 3.1.9: the 64 continuation bytes, one issue each, over four lines.
    first = line_of("3.1.9") + 2
    assert [len(by_line[n]) for n in range(first, first + 4)] == [16, 16, 16, 16]
    assert all("unexpected continuation byte" in i.message
               for n in range(first, first + 4) for i in by_line[n])
    assert len(reasons("3.1.8")) == 7
    assert [m.split(" (byte")[0] for m in reasons("3.5.3")] == [
        "invalid UTF-8: the byte \\xfe never occurs in UTF-8"] * 2 + [
        "invalid UTF-8: the byte \\xff never occurs in UTF-8"] * 2
    # Overlong forms, surrogates and code points above U+10FFFF are named as such.
    assert "overlong encoding" in reasons("4.1.1")[0]
    assert "overlong encoding" in reasons("4.2.2")[0]
    assert "surrogate" in reasons("5.1.1")[0]
    assert len(reasons("5.1.1")) == 3  # ED, then A0 and 80 as stray continuation bytes
    assert "above U+10FFFF" in reasons("2.3.5")[0]
    assert "5-byte sequence" in reasons("2.1.5")[0]
    assert "truncated 3-byte sequence \\xef\\xbf (2 of 3 bytes" in reasons("3.3.7")[0]
    # 2.1.1, 2.2.1: the controls; 2.3.4 U+10FFFF and 5.3 noncharacters are valid, not reported.
    assert [i.code for i in by_line[line_of("2.1.1")]] == ["control-char"]
    for label in ("2.1.2", "2.2.3", "2.3.4", "5.3.1", "5.3.2", "5.3.3"):
        assert line_of(label) not in by_line


def test_corpus_is_not_unwrapped_and_has_no_placeholders(pm):
    data = corpus_bytes()
    assert pm.hook.normalize_content(path="UTF-8-test.txt", content=data) is None
    assert found(pm, "UTF-8-test.txt", data, {"placeholder", "syntax"}) == []


# -- validate_utf8 ------------------------------------------------------------------------------


def test_utf8_columns_count_characters_and_messages_give_the_byte(pm):
    [issue] = issues(pm, "a.txt", b"caf\xc3\xa9 \xc3 x\n")
    assert (issue.line, issue.column, issue.code) == (1, 6, "utf8-invalid")
    assert issue.message == ("invalid UTF-8: truncated 2-byte sequence \\xc3 (1 of 2 bytes, "
                             "then a byte that does not continue it) (byte 7 of the line)")
    assert issue.context == "café \\xc3 x"


def test_utf8_invalid_reasons(pm):
    def reason(content: bytes) -> list[str]:
        return [i.message.split(" (byte")[0].removeprefix("invalid UTF-8: ")
                for i in issues(pm, "a.txt", content)]

    assert reason(b"a\x80") == ["unexpected continuation byte \\x80 (no lead byte before it)"]
    assert reason(b"\xc0\xaf") == [
        "\\xc0 starts an overlong encoding (C0 and C1 lead bytes only encode ASCII characters, "
        "which must be single bytes)", "unexpected continuation byte \\xaf (no lead byte before it)"]
    assert reason(b"\xe0\x80\xaf")[0] == ("\\xe0 starts an overlong encoding (a shorter encoding "
                                          "exists)")
    assert reason(b"\xf0\x8f\xbf\xbf")[0].startswith("\\xf0 starts an overlong encoding")
    assert reason(b"\xed\xa0\x80")[0] == (
        "\\xed starts a UTF-16 surrogate code point (U+D800..U+DFFF cannot be encoded in UTF-8)")
    assert reason(b"\xf4\x90\x80\x80")[0] == "\\xf4 starts a code point above U+10FFFF"
    assert reason(b"\xf5\x80")[0] == "\\xf5 starts a code point above U+10FFFF"
    assert reason(b"\xfc\x84\x80\x80\x80\x80")[0].startswith("\\xfc starts a 6-byte sequence")
    assert reason(b"\xff") == ["the byte \\xff never occurs in UTF-8"]
    assert reason(b"\xe2\x82") == [
        "truncated 3-byte sequence \\xe2\\x82 (2 of 3 bytes, then end of the content)"]
    assert reason(b"\xf0\x9f\x98x") == [
        "truncated 4-byte sequence \\xf0\\x9f\\x98 (3 of 4 bytes, then a byte that does not "
        "continue it)"]


def test_utf8_lines_end_at_lf_crlf_and_cr(pm):
    content = b"a\r\nb\xff\rc\nd\x00"
    assert found(pm, "a.txt", content) == [(2, 2, "utf8-invalid"), (4, 2, "control-char")]


def test_replacement_char_and_controls(pm):
    content = "ok\tfine\r\nlost \ufffd char\nbell\x07 esc\x1b del\x7f\n".encode()
    got = issues(pm, "a.txt", content)
    assert [(i.line, i.column, i.code) for i in got] == [
        (2, 6, "utf8-replacement-char"), (3, 5, "control-char"), (3, 10, "control-char"),
        (3, 15, "control-char")]
    assert got[0].context == "lost \\ufffd char"
    assert got[1].message == "control character U+0007 (BEL, \\x07) (byte 5 of the line)"
    assert got[3].message == "control character U+007F (DEL, \\x7f) (byte 15 of the line)"
    assert got[1].context == got[2].context == "bell\\x07 esc\\x1b del\\x7f"


def test_valid_text_is_fine_including_c1_controls_noncharacters_and_bom(pm):
    text = "\ufeffkosme κόσμε \x80\x9f \ufffe\uffff \U0010ffff \u2028 tab\there\r\n"
    assert issues(pm, "a.txt", text) == []


def test_long_lines_are_cut_around_the_problem(pm):
    content = b"a" * 300 + b"\xff" + b"b" * 300 + b"\n"
    [issue] = issues(pm, "a.txt", content)
    assert issue.column == 301
    assert issue.context == "…" + "a" * 40 + "\\xff" + "b" * 59 + "…"
    [start] = issues(pm, "a.txt", b"\x00" + b"b" * 300)
    assert start.context == "\\x00" + "b" * 99 + "…"


# -- validate_syntax ----------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "content", "expected"), [
    ("data.json", '{\n  "é": 1\n  "b": 2\n}\n', (3, 3, "JSON: Expecting ',' delimiter")),
    ("data.json", '{"a": [1, 2,]}', (1, 13, "JSON: Expecting value")),
    ("data.json", "", (1, 1, "JSON: Expecting value")),
    ("data.json", "[1,\n", (1, 4, "JSON: Expecting value")),
    ("data.json", "\ufeff{}", (1, 1, "JSON: Unexpected UTF-8 BOM (decode using utf-8-sig)")),
    ("data.json", '{"a": 1}\r\n{"b": 2}\r\n', (2, 1, "JSON: Extra data")),
    ("conf.yaml", "a: 1\nb: c: d\n", (2, 5, "YAML: mapping values are not allowed here")),
    ("conf.yml", "a:\n\t- b\n",
     (2, 1, "YAML: found character '\\t' that cannot start any token "
            "(while scanning for the next token)")),
    ("conf.yaml", "a: 1\n---\nb: [1, 2\n",
     (3, 9, "YAML: expected ',' or ']', but got '<stream end>' (while parsing a flow sequence)")),
    ("conf.yaml", "é: 1\r\nb: 'x\r\n",
     (2, 6, "YAML: found unexpected end of stream (while scanning a quoted scalar)")),
    ("conf.yaml", "a: \x01\n",
     (1, 4, "YAML: character U+0001 is not allowed (special characters are not allowed)")),
    ("pyproject.toml", "[project]\nname = \nversion = 1\n", (2, 8, "TOML: Invalid value")),
    ("pyproject.toml", "a = 1\r\na = 2\r\n", (2, 6, "TOML: Cannot overwrite a value")),
    ("pyproject.toml", "é = 'x' 'y'\n", (1, 1, "TOML: Invalid statement")),
    ("pyproject.toml", "a = [1,\n", (1, 8, "TOML: Invalid value")),
    ("pyproject.toml", "\ufeffa = 1\n",
     (1, 1, "TOML: Invalid statement (the content starts with a byte order mark, U+FEFF)")),
    ("app.py", "def f():\n    return = 1\n", (2, 12, "Python: invalid syntax")),
    ("app.py", "é = 'x' +\n", (1, 10, "Python: invalid syntax")),
    ("app.py", "x = 1\r\ny = (1,\r\n", (2, 5, "Python: '(' was never closed")),
    ("app.py", "return 1\n", (1, 1, "Python: 'return' outside function")),
    ("app.py", "if x:\n\ty\n        z\n",
     (3, 1, "Python: inconsistent use of tabs and spaces in indentation")),
    ("app.py", "\ufeffx = = 1\n", (1, 6, "Python: invalid syntax")),
    ("APP.PY", "x = 'abc\n", (1, 5, "Python: unterminated string literal (detected at line 1)")),
    ("types.pyi", "def f() -> int: ...\nclass C(\n", (2, 8, "Python: '(' was never closed")),
])
def test_syntax_errors_are_reported_at_their_position(pm, path, content, expected):
    got = [i for i in issues(pm, path, content) if i.code == "syntax"]
    assert [(i.line, i.column, i.message) for i in got] == [expected]
    lines = re.split(r"\r\n|\n|\r", content)
    assert got[0].context == lines[expected[0] - 1].replace("\x01", "\\x01")


def test_python_null_bytes_are_a_syntax_error_at_the_byte(pm):
    assert found(pm, "app.py", b"x = 1\ny = \x002\n") == [
        (2, 5, "control-char"), (2, 5, "syntax")]


@pytest.mark.parametrize(("path", "content"), [
    ("data.json", '{"a": [1, 2], "b": {"c": null}}\n'),
    ("conf.yaml", "a: 1\n---\nb: [1, 2]\n"),
    ("template.yaml", "Resources:\n  X: !Ref Y\n  Z: !GetAtt [A, B]\n"),  # app tags are YAML
    ("conf.yml", "\ufeffa: 1\n"),
    ("pyproject.toml", "[project]\nname = 'x'\n"),
    ("app.py", "\ufeffimport os\n\ndef f():\n    return os.sep\n"),
    ("app.py", "s = '\\d'  # an invalid escape is a warning, not an error\n"),
    ("notes.txt", "{ not json\n"),
    ("README.md", "a: b: c\n"),
    ("app.py", ""),
])
def test_valid_files_and_other_types_have_no_syntax_issues(pm, path, content):
    assert found(pm, path, content) == []


def test_syntax_is_not_checked_when_the_content_is_not_utf8(pm):
    assert found(pm, "data.json", b'{"a": "\xff"') == [(1, 8, "utf8-invalid")]


# -- validate_placeholders ----------------------------------------------------------------------

PLACEHOLDERS = [
    "// ... existing code ...",
    "    # ... existing code ...",
    "{/* ...existing code... */}",
    "# rest of the file unchanged",
    "// Rest of the file unchanged",
    "Rest of the file unchanged",
    "# The rest of the code remains unchanged.",
    "// ... rest of the code ...",
    "/* ... rest of the implementation ... */",
    "<!-- rest of the file unchanged -->",
    "# (rest of the class unchanged)",
    "-- rest of the script unchanged",
    "# Insert the rest of the code here",
    "// keep existing code",
    "# ... other methods ...",
    "    # ... remaining methods unchanged ...",
    "// ... previous code remains the same ...",
    "(content truncated)",
    "[truncated]",
    "... (truncated)",
    "# output truncated for brevity",
    "[Trimmed input: 3000 characters]",
    "[Output truncated: 1234 characters]",
    "[... 50 lines omitted ...]",
    "// ... 120 more lines",
    "// ... 1,000 more lines ...",
    "# 1.5k more lines omitted",
    "(and 12 more lines)",
    "# 12 more lines",
    "# Implementation omitted for brevity",
    "(omitted for brevity)",
    "# Same as before",
    "# ... unchanged ...",
    "// --- snip ---",
]

NOT_PLACEHOLDERS = [
    "The rest of the file is unchanged by this command.",
    "Note: existing code keeps working.",
    "# Existing routes",
    "## Existing code",
    "// other settings",
    "# the rest",
    "truncated = text[:10]",
    "if truncated:",
    "// Output is truncated to 80 columns",
    "...",
    "# ...",
    "<!-- ... -->",
    "/* ... */",
    "def f(): ...",
    "[Trimmed mean](https://en.wikipedia.org/wiki/Truncated_mean)",
    "print('[truncated]')",
    "x = 'rest of the file unchanged'",
    "- truncated",
    "Omitted for brevity is a phrase that reviewers dislike.",
    "# Use short names for brevity",
    "# intentionally omitted for simplicity",
    "rest = lines[1:]",
    "# 10 tests",
    "# more tests",
    "// TODO: your code here",
    "(unchanged)",
    "# cut the string at the first space",
    "THE END",
    # numbered section titles: a number that ends in "." or "," is not a count
    "## 12. More lines",
    "### 3. More options",
    "## 4. More tests",
    "# 1.2. More lines",
    "## 12. More lines omitted",
    "// 7, more lines",
]


@pytest.mark.parametrize("line", PLACEHOLDERS)
def test_placeholders_are_found(pm, line):
    [issue] = issues(pm, "src/app.txt", f"first line\n{line}\nlast line\n")
    assert (issue.line, issue.column, issue.code) == (2, len(line) - len(line.lstrip()) + 1,
                                                      "placeholder")
    assert issue.message.startswith(f"placeholder instead of content: {line.strip()!r} (")
    assert issue.context == line


@pytest.mark.parametrize("line", NOT_PLACEHOLDERS)
def test_ordinary_lines_are_not_placeholders(line):
    assert placeholder(line) is None


def test_numbered_section_titles_in_markdown_are_not_counts_of_omitted_lines(pm):
    content = ("# Guide\n\n## 12. More lines\n\ntext\n\n### 3. More tests omitted\n\n"
               "## 1.5. Other fields\n\n// ... 1,000 more lines ...\n")
    assert found(pm, "guide.md", content) == [(11, 1, "placeholder")]


def test_placeholder_message_says_what_was_found(pm):
    [issue] = issues(pm, "a.py", "def f():\n    # ... existing code ...\n    return 1\n")
    assert str(issue) == ("2:5: placeholder: placeholder instead of content: "
                          "'# ... existing code ...' (existing code elided); write the actual "
                          "lines")


def test_orions_own_sources_and_docs_have_no_placeholders():
    root = Path(__file__).resolve().parents[1]
    files = [p for p in [*root.glob("orion/**/*.py"), *root.glob("docs/*.md"),
                         root / "README.md"] if p.name != "validation.md"]
    assert len(files) > 20
    flagged = [(p.name, line) for p in files
               for line in p.read_text(encoding="utf-8").splitlines() if placeholder(line)]
    assert flagged == []


# -- unwrap_fence -------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "content", "expected"), [
    ("app.py", b"```python\nx = 1\ny = 2\n```\n", b"x = 1\ny = 2\n"),
    ("app.py", b"\n\n```python\r\nx = 1\r\n```\r\n\n", b"x = 1\r\n"),
    ("app.py", b"```\nx\n```", b"x\n"),
    ("app.py", b"~~~~ py title=x\nx\n~~~~~  \n", b"x\n"),
    ("app.py", b"  ```py\n  x = 1\n   ```\n", b"  x = 1\n"),
    ("app.py", b"```\n```\n", b""),
    ("data.json", b'```json\n{"a": "\xff"}\n```\n', b'{"a": "\xff"}\n'),
    ("README.md", b"```markdown\n# T\n\n```python\nx\n```\n\nend\n```\n",
     b"# T\n\n```python\nx\n```\n\nend\n"),
    ("README.md", b"````md\n# T\n```\nx\n```\n````\n", b"# T\n```\nx\n```\n"),
    ("notes.txt", b"```text\nhello\n~~~\nworld\n~~~\n```\n", b"hello\n~~~\nworld\n~~~\n"),
    ("app.py", b"\r\r```python\rx = 1\r```\r\r", b"x = 1\r"),              # CR line breaks
    ("app.py", b"```py\rx\r``` \t\r\n", b"x\r"),
    ("app.py", b"```\r```", b""),
    ("app.py", b"```py\r\nx\r\n\r\n```", b"x\r\n\r\n"),
    ("app.py", b" \t\r\n" * 3000 + b"```\nx\n```" + b"\r\n \t" * 3000, b"x\n"),  # long blanks
    ("app.py", b"\n" * 100_000 + b"```\r\nx\r\n```\r\n" + b" " * 100_000, b"x\r\n"),
])
def test_a_file_wrapped_in_one_fence_is_unwrapped(pm, path, content, expected):
    assert pm.hook.normalize_content(path=path, content=content) == expected


@pytest.mark.parametrize(("path", "content"), [
    ("app.py", b"x = 1\n"),
    ("app.py", b"```python\na = 1\n```\n\n```python\nb = 2\n```\n"),   # two blocks
    ("app.py", b"Here is the file:\n```python\na = 1\n```\n"),         # prose before
    ("app.py", b"```python\na = 1\n```\nThat's it.\n"),                 # prose after
    ("app.py", b"```python\na = 1\n"),                                  # not closed
    ("app.py", b"```python\na = 1\n``` x\n"),                           # not a closing fence
    ("app.py", b"```python\na = 1\n~~~\n"),                             # other character
    ("app.py", b"````python\na = 1\n```\n"),                            # shorter
    ("app.py", b"```py`x\na\n```\n"),                                   # not a fence
    ("app.py", b"    ```python\na = 1\n    ```\n"),                     # indented code
    ("app.py", b"```\n"),
    ("README.md", b"```bash\nls\n```\n"),                               # a real Markdown file
    ("README.md", b"```\nls\n```\n"),
    ("README.md", b"```markdown\n# T\n```\nx\n```\n```\n"),             # closes early
    ("README.md", b"```markdown\n# T\n```python\nx\n```\n"),            # outer not closed
    ("app.py", b""),
    ("app.py", b" \t\r\n" * 3000),                                         # all blank
    ("app.py", b"\n" * 10_000 + b"```\n" + b"\r" * 10_000),                 # one fence
    ("app.py", b"\r\n" * 5000 + b"```py\r\nx\r\n``` x\r\n" + b"\t" * 5000),
])
def test_content_that_is_not_one_wrapped_block_is_left_alone(pm, path, content):
    assert pm.hook.normalize_content(path=path, content=content) is None


def edge_lines_reference(content: bytes, edge: int) -> tuple[bytes, bytes]:
    """The first and the last line of the content without its blanks, ``edge`` bytes at most."""
    stripped = content.strip(b" \t\r\n")
    return (re.split(rb"\r\n|\r|\n", stripped[:edge], maxsplit=1)[0],
            re.split(rb"\r\n|\r|\n", stripped[-edge:])[-1])


@pytest.mark.parametrize("content", [
    b"", b" ", b"\r", b"\r\n", b" \t\r\n" * 5000, b"x", b"\n\nx\n\n", b"a\rb\rc", b"a\r\nb",
    b" \n" * 5000 + b" ```py \r\nx\r\n``` " + b"\r\n\t" * 5000,
    b"\r" * 9000 + b"a\rb" + b"\r" * 9000, b"\t" * 5000 + b"x" + b"\n" * 5000,
    b"x" * 10_000, b"\n" + b"x" * 10_000 + b"\ny" * 3000 + b"\n"])
def test_the_edge_lines_are_the_first_and_last_lines_of_the_stripped_content(content):
    assert unwrap_fence._edge_lines(content) == edge_lines_reference(content, unwrap_fence._EDGE)


@settings(max_examples=500, deadline=None)
@given(parts=st.lists(st.sampled_from([b" ", b"\t", b"\r", b"\n", b"\r\n", b"```", b"x",
                                       b" \r\n" * 7]), max_size=30),
       edge=st.sampled_from([1, 2, 3, 5, 4096]))
def test_the_edge_lines_agree_with_stripping_the_whole_content(parts, edge):
    content = b"".join(parts)
    saved = unwrap_fence._EDGE
    unwrap_fence._EDGE = edge  # tiny ends: blank runs longer than several of them
    try:
        assert unwrap_fence._edge_lines(content) == edge_lines_reference(content, edge)
    finally:
        unwrap_fence._EDGE = saved


# -- the quick paths of large content -----------------------------------------------------------
#
# validate_utf8 first decodes in chunks and looks for the suspect bytes with one translate; the
# exact scan runs only when that finds something. validate_placeholders looks, at every line
# break, for lines that start or end like a placeholder, then for keywords in those lines only.
# Both must find exactly what the exact scans find.

QUICK = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CLEAN_LINE = "Plain text with café, 日本語, “quotes” — and an emoji 😀 at the end.\n"


def big(size: int = 600_000) -> bytes:
    """Clean Markdown-ish content of about ``size`` bytes: several chunks of the UTF-8 check."""
    block = ("# A heading with other words (7)\n\n" + CLEAN_LINE * 5 + "- more items here\n"
             "    // a comment in code\n| a | b |\n\n").encode()
    return block * (size // len(block) + 1)


@pytest.mark.parametrize("tail", [b"\xff", b"\xe2\x82", b"\xf0\x9f\x98", b"\x80", b"\x00",
                                  b"\x7f", b"\x1b", "\ufffd".encode(), b"\xed\xa0\x80"])
@pytest.mark.parametrize("where", ["end", "start", "chunk boundary"])
def test_a_utf8_problem_anywhere_in_a_large_file_is_found(pm, tail, where):
    data = big()
    if where == "end":
        content = data + tail
    elif where == "start":
        content = tail + data
    else:  # right where the quick check cuts its first chunk
        cut = validate_utf8.CHUNK
        content = data[:cut - 1] + tail + data[cut - 1:]
    assert validate_utf8.is_clean(content) is False
    got = found(pm, "big.md", content, UTF8_CODES)
    assert got and got == [(p.line, p.column, p.code) for p in find_problems(content)]


def test_a_large_clean_file_has_no_utf8_issues_whatever_falls_on_the_chunk_boundaries(pm):
    data = big()
    assert validate_utf8.is_clean(data)
    for shift in range(5):  # a 4-byte character (the emoji) across each cut, at each offset
        content = b"x" * shift + data
        assert validate_utf8.is_clean(content)
        assert found(pm, "big.md", content, UTF8_CODES) == []


def test_bytes_ef_without_a_replacement_character_are_clean(pm):
    content = "fullwidth Ａ, private use \uf8ff, noncharacter \ufffe\n".encode() * 1000
    assert content.count(b"\xef") == 3000
    assert validate_utf8.is_clean(content)
    assert issues(pm, "a.txt", content) == []


@QUICK
@given(parts=st.lists(st.sampled_from(
    [b"a", b"\n", b"\r", b"\t", "é".encode(), "€".encode(), "😀".encode(), "\ufffd".encode(),
     "Ａ".encode(), b"\x00", b"\x7f", b"\x1b", b"\x80", b"\xbf", b"\xc3", b"\xe2\x82",
     b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xc0\xaf", b"\xff", b"\xf4\x90\x80\x80"]), max_size=40),
    chunk=st.integers(1, 9))
def test_the_quick_utf8_check_agrees_with_the_exact_scan(parts, chunk):
    content = b"".join(parts)
    saved = validate_utf8.CHUNK
    validate_utf8.CHUNK = chunk  # tiny chunks: every cut lands somewhere interesting
    try:
        assert validate_utf8.is_clean(content) == (not find_problems(content))
    finally:
        validate_utf8.CHUNK = saved


def placeholder_reference(content: bytes) -> list[Issue]:
    """Every line through placeholder(), positions and contexts as the validators give them."""
    view = LineView(content)
    out = []
    for number, line in enumerate(text_lines(content), 1):
        what = placeholder(line)
        if what is not None:
            column = len(line) - len(line.lstrip()) + 1
            out.append(Issue(number, column, "placeholder",
                             f"placeholder instead of content: {line.strip()!r} ({what}); write "
                             "the actual lines", view.context(number, column)))
    return out


@pytest.mark.parametrize("line", PLACEHOLDERS + [
    "existing code ...", "rest of the file unchanged -->", "Rest of the file is unchanged",
    "THE   REST OF THE FILE UNCHANGED", "the\u00a0rest of the file unchanged",
    "\u3000// ... existing code ...\u3000", "\t\x0b# ... existing code ...\x0c ",
    "5 more lines omitted --", "other methods …", "existing code . . .", "(… truncated)",
    "Remainder of the file unchanged", "the\u2003rest of the file unchanged",
    "# 5 lines s\u212aipped"])  # U+212A (Kelvin sign) lowercases to "k": "skipped"
@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_a_placeholder_anywhere_in_a_large_file_is_found(pm, line, newline):
    data = big(20_000).replace(b"\n", newline)  # no chunks here: the size does not matter
    raw = line.encode()
    lines = data.count(newline)
    for content, number in [(data + raw, lines + 1), (data + raw + newline, lines + 1),
                            (raw + newline + data, 1),
                            (data[:10_000] + newline + raw + newline + data[10_000:],
                             data.count(newline, 0, 10_000) + 2)]:
        [issue] = [i for i in issues(pm, "big.md", content) if i.code == "placeholder"]
        assert issue.line == number
        assert issue.column == len(line) - len(line.lstrip()) + 1
        assert issue.message.startswith(f"placeholder instead of content: {line.strip()!r}")
        assert issue.context == LineView(raw).context(1, issue.column)
    assert [issue] == placeholder_reference(content)


def test_a_placeholder_with_bad_bytes_has_them_escaped_in_its_context(pm):
    content = big(20_000) + b"\x0b// ... existing code ...\x1c\r\nlast"  # \x0b, \x1c: spaces
    [issue] = [i for i in issues(pm, "a.txt", content) if i.code == "placeholder"]
    assert (issue.column, issue.context) == (2, "\\x0b// ... existing code ...\\x1c")
    assert [issue] == placeholder_reference(content)


def test_the_wide_spaces_are_the_non_ascii_whitespace():
    assert validate_placeholders.WIDE_SPACES == tuple(
        chr(c) for c in range(128, 0x110000) if chr(c).isspace())


LINE_PIECES = ["//", "#", "/*", "*/", "<!--", "-->", "{/*", "*/}", "{#", "#}", "--", ";", "%",
               "*", "...", "…", ". . .", " . . .", "----", "==", "~~", "[", "]", "(", ")", "<",
               ">", "{", "}", " ", "\t", "\x0b", "\x1c", "\x85", "\xa0", "\u2003", "\u3000",
               "rest", "Rest", "remainder", "the", "The", "of the file", "unchanged", "code",
               "existing", "other", "more", "lines", "12", "omitted", "for brevity", "truncated",
               "content", "same as before", "snip", "cut", "8<", "✂", "s\u212aipped", "İ", "keep",
               "\ufffd", "\x00", ".", "!", "x", "é", "Σ", "\ufeff", "methods", "here", "no changes",
               "trimmed input"]


@pytest.mark.slow
@QUICK
@given(lines=st.lists(st.lists(st.one_of(st.sampled_from(LINE_PIECES).map(str.encode),
                                         st.sampled_from([b"\xff", b"\xe2\x80", b"\x80"])),
                               max_size=8).map(b"".join), min_size=1, max_size=8),
       newlines=st.lists(st.sampled_from([b"\n", b"\r\n", b"\r"]), min_size=8, max_size=8),
       final=st.booleans())
def test_the_placeholders_found_are_the_lines_placeholder_accepts(pm, lines, newlines, final):
    content = b"".join(line + newline for line, newline in zip(lines, newlines))
    if not final:
        content = content.rstrip(b"\r\n")
    got = [i for i in issues(pm, "a.txt", content) if i.code == "placeholder"]
    assert got == placeholder_reference(content)



# Lines made from the patterns themselves: decorated, recased, with runs of whitespace for their
# spaces and U+212A (Kelvin sign) for "k". The quick paths must keep each one placeholder()
# accepts (most of them) and drop the others.

PATTERN_OPENINGS = ["", "// ", "#", "# ", "## ", "<!-- ", "/* ", "{/* ", "{# ", "-- ", "; ", "% ",
                    "* ", "... ", "…", ". . . ", "--- ", "== ", "~~", "(", "[", "<", "{", "// (",
                    "# ... ", "\u3000", " \t", "\xa0// ", "- "]
PATTERN_CLOSINGS = ["", " -->", " */", "*/}", " #}", " ...", "…", " . . .", " ---", "==", ")",
                    "]", ">", "}", ".", "!", ":", " \u2003", " ", "... -->", " -- ", " (12)"]
PATTERN_SPACES = [" ", "  ", "\t", "\x0b\x0c", "\x1c", "\xa0", "\u2003", "\u3000 ", "\u205f"]
PREFIX_ENDINGS = ["", "]", ": 3000 characters]", " (12 lines)", "!", " 日本語"]


@st.composite
def pattern_lines(draw) -> str:
    pattern = draw(st.sampled_from(validate_placeholders.PATTERNS
                                   + validate_placeholders.PREFIXES))
    core = draw(st.from_regex(pattern.regex, fullmatch=True).filter(
        lambda text: "\n" not in text and "\r" not in text))
    if pattern in validate_placeholders.PREFIXES:
        core += draw(st.sampled_from(PREFIX_ENDINGS))
    core = draw(st.sampled_from([str, str.upper, str.title, str.capitalize]))(core)
    core = re.sub(" ", lambda _: draw(st.sampled_from(PATTERN_SPACES)), core)
    if draw(st.booleans()):
        core = core.replace("k", "\u212a").replace("K", "\u212a")
    return draw(st.sampled_from(PATTERN_OPENINGS)) + core + draw(st.sampled_from(PATTERN_CLOSINGS))


@pytest.mark.slow
@QUICK
@given(line=pattern_lines(), before=st.sampled_from(["", "text\n", "## Words (12)\n", "* a\n"]),
       after=st.sampled_from(["", "\n", "\n# next\n", "\nrest\n"]))
def test_lines_made_from_the_patterns_are_found_as_placeholder_accepts_them(pm, line, before,
                                                                            after):
    content = (before + line + after).encode()
    got = [i for i in issues(pm, "a.txt", content) if i.code == "placeholder"]
    assert got == placeholder_reference(content)


@pytest.mark.parametrize("line", [
    "\u3000[Trimmed input: 3000 characters]",  # PREFIXES after a non-ASCII space
    "existing code ...", "other methods …", "rest of the file unchanged -->",
    "The\u3000rest of the file unchanged", "# xomit left  out for  space", "# 5 lines s\u212aipped",
    "…omitted for brevity", "// ... 1,000 more lines ...", "-- ✂ --"])
def test_placeholders_the_quick_paths_must_keep(pm, line):
    assert placeholder(line) is not None
    content = f"## Words (12)\n{line}\n* item\n".encode()
    got = [i for i in issues(pm, "a.md", content) if i.code == "placeholder"]
    assert [(i.line, i.code) for i in got] == [(2, "placeholder")]
    assert got == placeholder_reference(content)

# -- the built-ins and switching them off -------------------------------------------------------


def test_the_validators_are_builtin_plugins(pm):
    for name in BUILTIN_VALIDATORS:
        assert pm.origins[name].kind == "builtin"


def test_each_validator_can_be_disabled(pm):
    content = b"x = '\x01'\n# ... existing code ...\ny = (\n"
    assert found(pm, "a.py", content) == [
        (1, 6, "control-char"), (2, 1, "placeholder"), (3, 5, "syntax")]
    for name, gone in [("orion_plugins.validate_utf8", "control-char"),
                       ("orion_plugins.validate_placeholders", "placeholder"),
                       ("validate_syntax", "syntax")]:
        other = make_plugin_manager(entrypoints=False, blocked=[name])
        assert gone not in {code for _, _, code in found(other, "a.py", content)}


def test_unwrapping_is_switched_off_in_orion_yaml(tmp_path):
    (tmp_path / "orion.yaml").write_text(textwrap.dedent("""\
        plugins:
          disable: [orion_plugins.unwrap_fence]
        """), encoding="utf-8")
    config = load_config(tmp_path)
    pm = make_plugin_manager(entrypoints=False, blocked=config.model.plugins.disable)
    assert pm.hook.normalize_content(path="a.py", content=b"```\nx\n```\n") is None


# -- docs/validation.md -------------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs" / "validation.md"


def doc_examples() -> list[tuple[int, str]]:
    text = DOCS.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 2, m.group(1))
            for m in re.finditer(r"^```python\n(.*?)^```", text, re.M | re.S)]


@pytest.mark.parametrize(("line", "code"), doc_examples(),
                         ids=[f"line{line}" for line, _ in doc_examples()])
def test_the_validation_docs_examples_run(line, code, monkeypatch):
    name = f"orion_validation_docs_example_{line}"
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(code, f"{DOCS}:{line}", "exec"), module.__dict__)


def test_the_validation_docs_name_every_code_and_builtin():
    text = DOCS.read_text(encoding="utf-8")
    for name in [*UTF8_CODES, "syntax", "placeholder", *BUILTIN_VALIDATORS]:
        assert f"`{name}`" in text, name


@pytest.mark.parametrize("pad", [" ", "\t", "\u3000", "\u2028", "\x85"],
                         ids=["space", "tab", "ideographic", "line-separator", "next-line"])
@pytest.mark.parametrize("where", ["before", "after", "both"])
def test_a_placeholder_padded_past_any_bound_is_still_found(pm, pad, where):
    # Long lines are looked at only when strip() could leave a placeholder of them; one padded
    # with thousands of white-space characters (of one byte, two or three) still is.
    padding = pad * 5000
    line = ((padding if where != "after" else "") + "// ... rest of the code ..."
            + (padding if where != "before" else ""))
    content = f"first\n{line}\nlast\n"
    column = len(line) - len(line.lstrip()) + 1
    assert found(pm, "a.js", content, {"placeholder"}) == [(2, column, "placeholder")]


def test_the_white_space_a_long_line_is_stripped_of_is_what_str_strip_strips():
    from orion_plugins.validate_placeholders import WHITE_SPACE

    assert set(WHITE_SPACE) == {chr(c) for c in range(0x110000) if chr(c).isspace()} - {"\n"}


@pytest.mark.parametrize("size", [700, 1 << 20])
def test_a_long_line_is_not_a_placeholder_and_hides_none_after_it(pm, size):
    content = "x" * size + "\n// ... rest of the code ...\n" + "y " * size
    assert found(pm, "a.js", content, {"placeholder"}) == [(2, 1, "placeholder")]
