"""Parsing raw tool-call arguments: exact JSON error positions, truncation, large content, empty
and non-object arguments, and field-level schema errors. Real pydantic models throughout."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from orion.errors import OrionError
from orion.tools.arguments import (
    LARGE_CONTENT_CHARS,
    LARGE_CONTENT_NEWLINES,
    ToolArgumentError,
    parse_arguments,
)
from orion.tools.spec import ToolSpec

HINT = "WritePlanTool_begin"


class Span(BaseModel):
    model_config = ConfigDict(extra="forbid")
    line: int
    column: int = 1


class WriteArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target_file: str
    operation: Literal["create", "append"] = "create"
    content: str = ""
    spans: list[Span] = []


class Lenient(BaseModel):  # extra fields ignored (pydantic's default)
    path: str


class NoRequired(BaseModel):
    verbose: bool = False


class Aliased(BaseModel):
    model_config = ConfigDict(extra="forbid")
    file_name: str = Field(alias="fileName")


WRITE = ToolSpec("WriteFile", "Write a file.", WriteArgs)


def reject(raw: str, spec: ToolSpec = WRITE, **kw) -> ToolArgumentError:
    with pytest.raises(ToolArgumentError) as info:
        parse_arguments(raw, spec, **kw)
    return info.value


# -- valid ------------------------------------------------------------------------------------


def test_valid_arguments_give_the_model_instance():
    args = parse_arguments('{"target_file": "a.md", "operation": "append", "content": "x"}',
                           WRITE)
    assert args == WriteArgs(target_file="a.md", operation="append", content="x")


def test_the_error_is_an_orion_error_that_names_the_tool():
    error = reject("{")
    assert isinstance(error, OrionError)
    assert error.tool == "WriteFile"
    assert str(error).startswith("tool 'WriteFile': ")


# -- invalid JSON -----------------------------------------------------------------------------


def test_invalid_json_reports_line_column_and_offset_with_a_marked_excerpt():
    error = reject('{"target_file": "a.md" "operation": "create"}')
    assert error.kind == "invalid_json"
    assert not error.truncated and not error.large
    assert error.for_model == (
        "The arguments of WriteFile are not valid JSON: Expecting ',' delimiter at line 1, "
        "column 24 (character offset 23).\n"
        'Near the error (marked <<HERE>>): {"target_file": "a.md" <<HERE>>"operation": '
        '"create"}')


def test_invalid_json_on_a_later_line_reports_that_line():
    raw = '{\n  "target_file": "a.md",\n  "operation": create\n}'
    error = reject(raw)
    assert "Expecting value at line 3, column 16 (character offset 42)." in error.for_model
    assert raw[42:48] == "create"
    # Raw line breaks are shown, so the excerpt stays on one line.
    assert ('Near the error (marked <<HERE>>): ...  "target_file": "a.md",<LF>  "operation": '
            '<<HERE>>create<LF>}') in error.for_model
    assert "cut off" not in error.for_model


def test_the_excerpt_is_clipped_around_the_position():
    raw = '{"content": "' + "a" * 100 + '" "target_file": "b", "operation": "create"}'
    error = reject(raw)
    pos = 13 + 100 + 2
    assert f"(character offset {pos})" in error.for_model
    excerpt = error.for_model.split("Near the error (marked <<HERE>>): ")[1].splitlines()[0]
    assert excerpt == "..." + raw[pos - 40:pos] + "<<HERE>>" + raw[pos:pos + 40] + "..."


def test_a_trailing_comma_is_not_truncation():
    error = reject('{"target_file": "a.md",}')
    assert error.kind == "invalid_json"
    assert "Expecting property name enclosed in double quotes at line 1, column 24" in (
        error.for_model)
    assert not error.truncated and "cut off" not in error.for_model


def test_a_raw_newline_inside_a_string_is_explained():
    error = reject('{"target_file": "a.md", "content": "one\ntwo"}')
    assert ("Invalid control character at line 1, column 40 (character offset 39)."
            in error.for_model)
    assert "raw control character" in error.for_model and "\\n" in error.for_model
    assert not error.truncated


@pytest.mark.parametrize("raw, still_open", [
    ('{"target_file": "a.md"', "an object; it would need '}' to close"),
    ('{"target_file": ', "an object; it would need '}' to close"),
    ('{"target_file": "a.md", ', "an object; it would need '}' to close"),
    ('{"target_file": "a.m', "a string, an object; it would need '\"}' to close"),
    ('{"spans": [{"line": 1', "an object, an array, an object; it would need '}]}' to close"),
])
def test_cut_off_arguments_are_recognized(raw, still_open):
    error = reject(raw)
    assert error.kind == "invalid_json" and error.truncated
    assert ("The arguments look cut off: the JSON ends before it is complete (still open at "
            f"the end: {still_open}).") in error.for_model
    assert "send shorter ones" in error.for_model
    assert HINT not in error.for_model  # small arguments: no write-session hint


def test_a_truncated_large_write_mentions_truncation_and_the_write_session():
    raw = '{"target_file": "a.md", "content": "# Title\\n' + "x" * 5000
    error = reject(raw)
    assert error.kind == "invalid_json"
    assert error.truncated and error.large
    assert ("Unterminated string starting at line 1, column 36 (character offset 35)."
            in error.for_model)
    assert "The arguments look cut off" in error.for_model
    assert (f"These arguments look like large content ({len(raw)} characters). Do not put file "
            f"content in tool-call JSON: call {HINT} to start a write session, then send the "
            "content as plain text (not JSON) in your messages and end it with a line DONE."
            ) in error.for_model


def test_a_truncated_large_write_with_raw_newlines_is_also_cut_off():
    raw = '{"target_file": "a.md", "content": "# Title\n' + "x" * 5000
    error = reject(raw)
    assert "Invalid control character at line 1, column 44" in error.for_model
    assert error.truncated and error.large
    assert "look cut off" in error.for_model and HINT in error.for_model


def test_many_line_breaks_in_one_string_look_like_large_content():
    body = "line\\n" * LARGE_CONTENT_NEWLINES
    error = reject('{"target_file": "a.md", "content": "' + body + '", "operation": "x"}')
    assert error.kind == "invalid_arguments" and error.large
    assert (f"large content (a string value with {LARGE_CONTENT_NEWLINES} line breaks)"
            in error.for_model)
    assert HINT in error.for_model
    fewer = "line\\n" * (LARGE_CONTENT_NEWLINES - 1)
    error = reject('{"target_file": "a.md", "content": "' + fewer + '", "operation": "x"}')
    assert not error.large and HINT not in error.for_model


def test_line_breaks_spread_over_strings_do_not_count_as_large():
    many = ", ".join(f'"k{i}": "a\\nb"' for i in range(LARGE_CONTENT_NEWLINES + 5))
    error = reject("{" + many + "}", ToolSpec("Lenient", "", Lenient))
    assert error.kind == "invalid_arguments" and not error.large


def test_long_arguments_look_large_past_the_threshold():
    just = '{"target_file": 1, "content": "' + "x" * (LARGE_CONTENT_CHARS - 31 - 2) + '"}'
    assert len(just) == LARGE_CONTENT_CHARS
    assert not reject(just).large
    over = just.replace('"x', '"xx', 1)
    assert reject(over).large and HINT in reject(over).for_model


def test_the_hint_tool_can_be_changed_or_left_out():
    raw = '{"target_file": "a.md", "content": "' + "x" * 5000
    assert "StartWrite to start a write session" in reject(raw, hint_tool="StartWrite").for_model
    error = reject(raw, hint_tool=None)
    assert error.large and "write session" not in error.for_model
    # Never suggested for a call to the hint tool itself.
    begin = ToolSpec(HINT, "", WriteArgs)
    assert "write session" not in reject(raw, begin).for_model


def test_thresholds_are_parameters():
    error = reject('{"target_file": 1}', large_chars=10)
    assert error.large and "(18 characters)" in error.for_model


# -- empty and non-object ---------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["", "   ", "\n"])
def test_empty_arguments_are_an_error_when_fields_are_required(raw):
    error = reject(raw)
    assert error.kind == "invalid_json"
    assert error.for_model == (
        "The arguments of WriteFile are empty; expected a JSON object with the required field "
        "'target_file' and the optional fields 'operation', 'content', 'spans'.")


def test_empty_arguments_mean_an_empty_object_without_required_fields():
    spec = ToolSpec("Status", "", NoRequired)
    assert parse_arguments("", spec) == NoRequired()
    assert parse_arguments("{}", spec) == NoRequired()


@pytest.mark.parametrize("raw, got", [
    ("[1, 2]", "got an array of 2 items."),
    ('"a.md"', 'got a string ("a.md").'),
    ("null", "got null."),
    ("42", "got the number 42."),
    ("true", "got the boolean true."),
])
def test_json_that_is_not_an_object_is_rejected(raw, got):
    error = reject(raw)
    assert error.kind == "invalid_arguments"
    assert error.for_model == (
        "The arguments of WriteFile must be a JSON object with the required field "
        f"'target_file' and the optional fields 'operation', 'content', 'spans'; {got}")


def test_null_is_not_an_empty_object_even_without_required_fields():
    error = reject("null", ToolSpec("Status", "", NoRequired))
    assert "must be a JSON object with only the optional field 'verbose'; got null." in (
        error.for_model)


def test_an_object_encoded_as_a_string_is_pointed_out():
    error = reject('"{\\"target_file\\": \\"a.md\\"}"')
    assert "encoded as a JSON string: send the object itself" in error.for_model


# -- schema violations ------------------------------------------------------------------------


def test_schema_violations_are_listed_field_by_field():
    error = reject('{"operation": "delete", "content": 7}')
    assert error.kind == "invalid_arguments"
    assert error.problems == [
        "field 'target_file': Field required",
        "field 'operation': Input should be 'create' or 'append' (got \"delete\")",
        "field 'content': Input should be a valid string (got 7)",
    ]
    assert error.for_model == (
        "The arguments of WriteFile do not match its schema (3 problems):\n"
        "- field 'target_file': Field required\n"
        "- field 'operation': Input should be 'create' or 'append' (got \"delete\")\n"
        "- field 'content': Input should be a valid string (got 7)")


def test_an_unknown_field_lists_the_allowed_fields():
    error = reject('{"target_file": "a.md", "path": "b.md"}')
    assert error.problems == [
        "field 'path': Extra inputs are not permitted (allowed fields: 'target_file', "
        "'operation', 'content', 'spans')"]
    assert "(1 problem):" in error.for_model


def test_nested_locations_are_joined_with_dots():
    error = reject('{"target_file": "a.md", "spans": [{"line": 1}, {"line": "x", "col": 2}]}')
    assert error.problems == [
        "field 'spans.1.line': Input should be a valid integer, unable to parse string as an "
        "integer (got \"x\")",
        "field 'spans.1.col': Extra inputs are not permitted (allowed fields: 'line', 'column')",
    ]


def test_a_wrong_type_for_a_nested_model():
    error = reject('{"target_file": "a.md", "spans": {"line": 1}}')
    assert error.problems == [
        "field 'spans': Input should be a valid list (got {\"line\": 1})"]


def test_long_rejected_values_are_shortened():
    error = reject('{"target_file": ["' + "y" * 200 + '"]}')
    [problem] = error.problems
    assert problem == "field 'target_file': Input should be a valid string (got [\"" + (
        "y" * 58) + "...)"


def test_unknown_fields_are_ignored_when_the_model_allows_them():
    spec = ToolSpec("Lenient", "", Lenient)
    assert parse_arguments('{"path": "a", "other": 1}', spec) == Lenient(path="a")


def test_aliases_are_what_the_model_is_told():
    spec = ToolSpec("Aliased", "", Aliased)
    assert parse_arguments('{"fileName": "a"}', spec).file_name == "a"
    assert reject("", spec).for_model.endswith("the required field 'fileName'.")
    error = reject('{"fileName": "a", "file_name": "b"}', spec)
    assert error.problems == [
        "field 'file_name': Extra inputs are not permitted (allowed fields: 'fileName')"]


# -- hostile arguments: refused with a tool error, never a crash --------------------------------


def test_arguments_nested_100k_deep_are_refused_before_parsing():
    error = reject('{"target_file": "a.md", "spans": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert error.kind == "invalid_arguments"
    assert "100,001 levels deep; at most 64" in error.for_model


def test_nesting_up_to_the_limit_is_parsed():
    # 64 levels is far more than any tool's schema needs, and is still read and validated.
    error = reject('{"target_file": "a.md", "spans": ' + "[" * 63 + "]" * 63 + "}")
    assert "levels deep" not in error.for_model and error.problems


def test_an_integer_of_5000_digits_is_refused_with_a_tool_error():
    error = reject('{"target_file": "a.md", "spans": [{"line": ' + "9" * 5000 + "}]}")
    assert error.kind == "invalid_arguments"
    assert "a number that cannot be read" in error.for_model


def test_arguments_over_a_mebibyte_are_refused():
    error = reject('{"target_file": "a.md", "content": "' + "x" * (1 << 20) + '"}')
    assert error.kind == "invalid_arguments"
    assert "at most 1,048,576 are accepted" in error.for_model
