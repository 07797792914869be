"""The strict YAML loader: positions of values and keys, and every problem with its position."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from orion.config.yamlsource import SourceDocument, YamlSourceError, load_yaml


def write(tmp_path: Path, text: str, name: str = "chart.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def load(tmp_path: Path, text: str) -> SourceDocument:
    return load_yaml(write(tmp_path, text))


def problems(source: Path | str, **kwargs) -> list[str]:
    """The diagnostics ``load_yaml`` raises, as ``path:line:col: message``."""
    with pytest.raises(YamlSourceError) as info:
        load_yaml(source, **kwargs)
    assert str(info.value) == "\n".join(map(str, info.value.diagnostics))
    return [str(d) for d in info.value.diagnostics]


def problems_in(tmp_path: Path, text: str) -> list[str]:
    return problems(write(tmp_path, text))


# -- data and positions ---------------------------------------------------------------------


def test_data_and_positions_of_values_and_keys(tmp_path):
    doc = load(tmp_path, """
        statechart: demo
        states:
          idle:
            description: waiting
        transitions:
          - trigger: go
            source: [idle, busy]
        """)
    assert doc.data == {"statechart": "demo",
                        "states": {"idle": {"description": "waiting"}},
                        "transitions": [{"trigger": "go", "source": ["idle", "busy"]}]}
    assert doc.path == str(tmp_path / "chart.yaml")
    assert doc.position(("statechart",)) == (1, 13)
    assert doc.position(("statechart",), key=True) == (1, 1)
    assert doc.position(("states", "idle"), key=True) == (3, 3)
    assert doc.position(("states", "idle", "description")) == (4, 18)
    assert doc.position(("transitions", 0)) == (6, 5)
    assert doc.position(("transitions", 0, "source", 1)) == (7, 20)


def test_position_falls_back_to_the_nearest_ancestor(tmp_path):
    doc = load(tmp_path, """
        states:
          idle:
            description: waiting
        """)
    # A field that is not in the document (e.g. a missing one) points at its mapping.
    assert doc.position(("states", "idle", "initial")) == (3, 5)
    assert doc.position(("states", "idle", "initial"), key=True) == (2, 3)
    assert doc.position(("nowhere", "at", "all")) == (1, 1)


def test_diagnostic_carries_path_line_and_column(tmp_path):
    doc = load(tmp_path, "a:\n  b: 1\n")
    d = doc.diagnostic(("a", "b"), "bad b")
    assert (d.path, d.line, d.column, d.message) == (doc.path, 2, 6, "bad b")
    assert str(d) == f"{doc.path}:2:6: bad b"
    assert str(doc.diagnostic(("a", "b"), "bad key", key=True)) == f"{doc.path}:2:3: bad key"


def test_text_is_reported_under_the_given_source_name():
    doc = load_yaml("virtual.yaml", text="a: 1\n")
    assert doc.data == {"a": 1}
    assert problems("virtual.yaml", text="a: [1\n") == [
        "virtual.yaml:2:1: malformed YAML: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence started at line 1, column 4)"]


def test_numeric_and_null_keys_become_their_text(tmp_path):
    doc = load(tmp_path, "1: one\n2.5: two\n~: none\n")
    assert doc.data == {"1": "one", "2.5": "two", "~": "none"}


def test_yaml_11_booleans_as_values_stay_booleans(tmp_path):
    # Only keys are suspicious; `final: yes` means what it says.
    assert load(tmp_path, "final: yes\nother: off\n").data == {"final": True, "other": False}


# -- malformed YAML -------------------------------------------------------------------------


def test_unclosed_bracket_reports_line_column_and_where_it_opened(tmp_path):
    path = write(tmp_path, """
        states:
          idle:
            entry: [a, b
          busy: {}
        """)
    assert problems(path) == [
        f"{path}:4:7: malformed YAML: expected ',' or ']', but got ':' "
        "(while parsing a flow sequence started at line 3, column 12)"]


def test_bad_indentation_reports_line_and_column(tmp_path):
    path = write(tmp_path, """
        states:
          idle:
            description: x
           busy: {}
        """)
    assert problems(path) == [
        f"{path}:4:4: malformed YAML: expected <block end>, but found '<block mapping start>' "
        "(while parsing a block mapping started at line 2, column 3)"]


def test_unterminated_quote(tmp_path):
    path = write(tmp_path, 'a: "never closed\nb: 1\n')
    assert problems(path) == [
        f"{path}:3:1: malformed YAML: found unexpected end of stream "
        "(while scanning a quoted scalar started at line 1, column 4)"]


def test_tab_indentation(tmp_path):
    path = tmp_path / "tabs.yaml"
    path.write_text("states:\n\tidle: {}\n", encoding="utf-8")
    assert problems(path) == [
        f"{path}:2:1: malformed YAML: found character '\\t' that cannot start any token "
        "(while scanning for the next token)"]


def test_two_documents_in_one_file(tmp_path):
    path = write(tmp_path, "a: 1\n---\nb: 2\n")
    assert problems(path) == [
        f"{path}:2:1: malformed YAML: expected a single document in the stream, "
        "but found another document"]


def test_control_character_is_reported_at_its_position(tmp_path):
    path = tmp_path / "bell.yaml"
    path.write_text("a: 1\nb: x\x07y\n", encoding="utf-8")
    assert problems(path) == [
        f"{path}:2:5: malformed YAML: special characters are not allowed: U+0007"]


# -- empty, unreadable and undecodable files ------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n", "---\n...\n"],
                         ids=["empty", "blank-lines", "comment", "bare-document", "end-marker"])
def test_empty_file(tmp_path, text):
    path = tmp_path / "empty.yaml"
    path.write_text(text, encoding="utf-8")
    assert problems(path) == [f"{path}:1:1: the file is empty"]


def test_explicit_null_is_not_empty_but_data(tmp_path):
    # `~` is a value (and the static checks then say it is not a mapping).
    assert load(tmp_path, "~\n").data is None


def test_missing_file(tmp_path):
    path = tmp_path / "absent.yaml"
    assert problems(path) == [f"{path}:1:1: cannot read file: No such file or directory"]


def test_directory_instead_of_a_file(tmp_path):
    assert problems(tmp_path) == [f"{tmp_path}:1:1: cannot read file: it is not a regular file "
                                  "(a directory); Orion reads configuration only from regular "
                                  "files"]


def test_non_utf8_byte_is_reported_at_its_line_and_column(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("a: 1\nb: ü\nc: caf\u00e9\n".encode("utf-8")[:-3] + b"\xe9\n")
    # line 3 is "c: caf" + 0xE9: the bad byte is the 7th character of line 3.
    offset = len("a: 1\nb: ü\nc: caf".encode("utf-8"))
    assert problems(path) == [
        f"{path}:3:7: not valid UTF-8: byte 0xe9 at offset {offset} (save the file as UTF-8)"]


def test_utf16_is_refused_as_not_utf8_although_libyaml_could_read_it(tmp_path):
    # Files reach libyaml as bytes, and libyaml reads UTF-16 with a byte-order mark: Orion's
    # files are UTF-8 whichever parser reads them.
    path = tmp_path / "utf16.yaml"
    path.write_bytes("a: 1\n".encode("utf-16"))
    assert problems(path) == [
        f"{path}:1:1: not valid UTF-8: byte 0xff at offset 0 (save the file as UTF-8)"]


def test_a_file_and_the_same_text_give_the_same_data_and_positions(tmp_path):
    text = "# café\nname: “quoted” — naïve\nitems:\n  - 𝔘nicode: 1\n  - b: [x, {w: z}]\n"
    path = tmp_path / "same.yaml"
    path.write_text(text, encoding="utf-8")
    from_file, from_text = load_yaml(path), load_yaml(path, text=text)
    assert from_file.data == from_text.data
    assert from_file.positions == from_text.positions
    assert from_file.position(("items", 1, "b", 1, "w")) == (5, 16)


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert load_yaml(path).data == {"a": 1}


# -- duplicate keys -------------------------------------------------------------------------


def test_duplicate_key_is_reported_at_the_second_key(tmp_path):
    path = write(tmp_path, """
        statechart: demo
        initial: idle
        initial: busy
        """)
    assert problems(path) == [
        f"{path}:3:1: duplicate key 'initial' (first defined on line 2); "
        "YAML would silently keep only the last one"]


def test_duplicate_nested_keys_are_all_reported(tmp_path):
    path = write(tmp_path, """
        states:
          idle:
            description: a
            description: b
          busy: {}
          idle: {}
        transitions:
          - {trigger: go, trigger: stop}
        """)
    assert problems(path) == [
        f"{path}:4:5: duplicate key 'description' (first defined on line 3); "
        "YAML would silently keep only the last one",
        f"{path}:6:3: duplicate key 'idle' (first defined on line 2); "
        "YAML would silently keep only the last one",
        f"{path}:8:19: duplicate key 'trigger' (first defined on line 8); "
        "YAML would silently keep only the last one",
    ]


def test_keys_equal_after_conversion_are_duplicates(tmp_path):
    path = write(tmp_path, "1: a\n'1': b\n")
    assert problems(path) == [
        f"{path}:2:1: duplicate key '1' (first defined on line 1); "
        "YAML would silently keep only the last one"]


def test_merge_key_values_can_be_overridden(tmp_path):
    doc = load(tmp_path, """
        base: &base {trigger: go, dest: busy}
        transition:
          <<: *base
          dest: done
        """)
    assert doc.data["transition"] == {"trigger": "go", "dest": "done"}
    assert doc.position(("transition", "dest")) == (4, 9)
    assert doc.position(("transition", "trigger")) == (1, 23)  # where the merged value is


def test_duplicate_key_next_to_a_merge_is_still_reported(tmp_path):
    path = write(tmp_path, """
        base: &base {trigger: go}
        transition:
          <<: *base
          dest: busy
          dest: done
        """)
    assert problems(path) == [
        f"{path}:5:3: duplicate key 'dest' (first defined on line 4); "
        "YAML would silently keep only the last one"]


# -- YAML 1.1 booleans as keys --------------------------------------------------------------


@pytest.mark.parametrize("key", ["on", "off", "yes", "no", "y", "n", "On", "OFF", "true", "False"])
def test_unquoted_yaml11_boolean_key_is_an_error(tmp_path, key):
    path = write(tmp_path, f"""
        states:
          {key}: {{}}
        """)
    assert problems(path) == [
        f"{path}:2:3: key {key!r} is read as a boolean by YAML 1.1; "
        f"quote it ('{key}') or choose another name"]


def test_quoted_boolean_keys_are_strings(tmp_path):
    doc = load(tmp_path, """
        states:
          'on': {}
          "off": {}
        """)
    assert doc.data == {"states": {"on": {}, "off": {}}}
    assert doc.position(("states", "off"), key=True) == (3, 3)


def test_boolean_key_in_a_flow_mapping(tmp_path):
    path = write(tmp_path, "transitions:\n  - {trigger: go, on: x}\n")
    assert problems(path) == [
        f"{path}:2:19: key 'on' is read as a boolean by YAML 1.1; "
        "quote it ('on') or choose another name"]


# -- values and keys PyYAML cannot construct ------------------------------------------------


def test_impossible_timestamp_is_an_error_not_a_crash(tmp_path):
    path = write(tmp_path, "context:\n  since: 2024-13-45\n")
    assert problems(path) == [f"{path}:2:10: invalid value '2024-13-45': month must be in 1..12"]


def test_unknown_tag_on_a_value(tmp_path):
    path = write(tmp_path, "a: !secret token\n")
    assert problems(path) == [
        f"{path}:1:4: invalid value: could not determine a constructor for the tag '!secret'"]


def test_unknown_tag_on_a_key(tmp_path):
    path = write(tmp_path, "a: 1\n!secret b: 2\n")
    assert problems(path) == [
        f"{path}:2:1: invalid value: could not determine a constructor for the tag '!secret'"]


def test_python_tags_are_refused(tmp_path):
    path = write(tmp_path, "a: !!python/object/apply:os.system [echo]\n")
    assert problems(path) == [
        f"{path}:1:4: unsupported tag 'tag:yaml.org,2002:python/object/apply:os.system'"]


def test_tagged_collections_are_refused(tmp_path):
    path = write(tmp_path, "a: !!set {x, z}\nb: !!omap [x: 1]\n")
    assert problems(path) == [
        f"{path}:1:4: unsupported tag 'tag:yaml.org,2002:set'",
        f"{path}:2:4: unsupported tag 'tag:yaml.org,2002:omap'",
    ]


def test_complex_key(tmp_path):
    path = write(tmp_path, "? [a, b]\n: 1\n")
    assert problems(path) == [f"{path}:1:3: a mapping key must be a plain scalar"]


def test_recursive_alias_is_an_error_not_a_crash(tmp_path):
    path = write(tmp_path, "a: &loop\n  b: *loop\n")
    assert problems(path) == [
        f"{path}:2:3: an alias refers to a collection that contains it; "
        "recursive data is not allowed"]


def test_shared_alias_is_fine(tmp_path):
    doc = load(tmp_path, "a: &s [x, y]\nb: *s\n")
    assert doc.data == {"a": ["x", "y"], "b": ["x", "y"]}


def test_all_problems_are_reported_together(tmp_path):
    path = write(tmp_path, """
        on: 1
        a: 1
        a: 2
        """)
    assert [p.split(": ", 1)[0] for p in problems(path)] == [f"{path}:1:1", f"{path}:3:1"]


def _yaml_files():
    root = Path(__file__).resolve().parent.parent
    return sorted([*root.glob("statecharts/*.yaml"), *root.glob("examples/**/*.yaml")])


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: p.name)
def test_libyaml_and_the_python_parser_give_the_same_data_and_positions(path, monkeypatch):
    # Orion reads with libyaml when it can (scripts of several MB) and with PyYAML's Python
    # parser otherwise: a diagnostic must point at the same line and column either way.
    import orion.config.yamlsource as source

    fast = load_yaml(path)
    monkeypatch.setattr(source, "_LIBYAML_DEPTH", 0)  # every collection takes the Python path
    slow = load_yaml(path)
    assert (fast.data, fast.positions, fast.key_positions) == \
        (slow.data, slow.positions, slow.key_positions)


@pytest.mark.slow
def test_deep_nesting_never_reaches_libyamls_unbounded_composer(tmp_path):
    # libyaml composes nested collections by recursion in C: 200,000 '[' end the process with
    # a segmentation fault. Orion hands such text to the Python parser instead.
    import subprocess
    import sys

    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    proc = subprocess.run(
        [sys.executable, "-c", "import sys\nfrom orion.config.yamlsource import load_yaml\n"
         "try:\n    load_yaml(sys.argv[1])\nexcept BaseException as exc:\n"
         "    print(type(exc).__name__)\n", str(deep)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])


def test_an_alias_bomb_is_a_located_error_not_a_billion_values():
    # 342 bytes whose aliases of aliases would build 9**9 (387 million) values.
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    with pytest.raises(YamlSourceError) as info:
        load_yaml("bomb.yaml", text="\n".join(lines) + "\n")
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.path == "bomb.yaml" and diagnostic.line >= 1
    assert "aliases expand this document by more than 100,000 values" in diagnostic.message


def test_aliases_used_as_files_use_them_still_load():
    text = ("defaults: &defaults {idle_ms: 2000, flush_lines: 50}\n"
            + "".join(f"s{i}: *defaults\n" for i in range(200)))
    doc = load_yaml("ok.yaml", text=text)
    assert doc.data["s199"] == {"idle_ms": 2000, "flush_lines": 50}
