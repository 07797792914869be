"""Parse the raw arguments string of a tool call into the tool's pydantic model, or explain to
the model exactly what is wrong with it.

:func:`parse_arguments` never guesses: it returns a validated instance of the tool's argument
model or raises :class:`ToolArgumentError`, whose ``for_model`` text is written for the model
(the tool loop sends it back as the tool message) and whose ``kind`` is

* ``"invalid_json"``: the string is not JSON at all: empty (when the tool has required fields),
  malformed, or cut off. The text gives the position (line, column and character offset) and
  an excerpt of up to 40 characters on each side with the position marked ``<<HERE>>`` (raw
  line breaks and tabs in it shown as ``<LF>``, ``<CR>``, ``<TAB>``).
* ``"invalid_arguments"``: the JSON decodes but does not fit: it is not an object, or it breaks
  the schema (one line per problem, ``field 'a.b': message``).

An empty string is never read as ``{}`` silently. It means ``{}`` only for a tool whose argument
model has no required field; otherwise it is an error that lists the fields.

Truncation. The arguments "look cut off" when the JSON decoder stops at the very end of the
input (only whitespace after the error: ``Expecting value``, ``Expecting ',' delimiter``, ...)
or in a string that never ends (``Unterminated string``), and a scan of the text confirms that a
string, object or array is still open at the end. A raw newline inside a string is an error of
its own (``Invalid control character``); the text is then decoded again leniently to find out
whether it is also cut off.

Large content. Arguments "look like large content" when the raw string is longer than
:data:`LARGE_CONTENT_CHARS` characters (4096), or when one string value holds at least
:data:`LARGE_CONTENT_NEWLINES` line breaks (20; escaped ``\\n`` and raw newlines count alike,
so this works on broken JSON too). Neither is an error by itself; when the arguments are
rejected for another reason, the error also tells the model to start a write session with
``WritePlanTool_begin`` and stream the content as plain text ending with a line ``DONE``,
because file content in tool-call JSON is what gets truncated and mis-escaped.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from orion.errors import OrionError
from orion.tools.spec import ToolSpec

#: Raw arguments longer than this (in characters) look like large content.
LARGE_CONTENT_CHARS = 4096
#: A string value with at least this many line breaks looks like file content.
LARGE_CONTENT_NEWLINES = 20
#: The tool that starts a write session, where large content belongs.
LARGE_CONTENT_TOOL = "WritePlanTool_begin"
#: The deepest nesting of objects and arrays accepted in arguments (deeper is refused before
#: parsing: a parser or validator would recurse that deep).
MAX_DEPTH = 64
#: The longest raw arguments accepted, in characters.
MAX_CHARS = 1 << 20
#: How much of the arguments to show on each side of a JSON error.
EXCERPT_CHARS = 40
#: How much of a rejected value to quote in a schema error.
VALUE_CHARS = 60
#: Marks the position of a JSON error in the excerpt.
MARK = "<<HERE>>"

INVALID_JSON = "invalid_json"
INVALID_ARGUMENTS = "invalid_arguments"


class ToolArgumentError(OrionError):
    """The arguments of one tool call were rejected. ``for_model`` explains it to the model;
    ``kind`` is ``"invalid_json"`` or ``"invalid_arguments"``; ``problems`` holds one line per
    schema violation; ``truncated`` and ``large`` tell what the heuristics found."""

    def __init__(self, tool: str, kind: str, for_model: str, *,
                 problems: Sequence[str] = (), truncated: bool = False,
                 large: bool = False) -> None:
        self.tool, self.kind, self.for_model = tool, kind, for_model
        self.problems = list(problems)
        self.truncated, self.large = truncated, large
        super().__init__(f"tool {tool!r}: {for_model}")


def parse_arguments(raw: str, spec: ToolSpec, *,
                    large_chars: int = LARGE_CONTENT_CHARS,
                    large_newlines: int = LARGE_CONTENT_NEWLINES,
                    hint_tool: str | None = LARGE_CONTENT_TOOL) -> BaseModel:
    """The validated argument model of ``spec`` for the raw ``arguments`` string of a call.

    Raises :class:`ToolArgumentError`. ``hint_tool`` is the tool suggested for large content
    (``None``: no suggestion, for instance when that tool is not available); it is never
    suggested for a call to itself."""
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        raise TypeError(f"tool arguments must be a str (the raw JSON), not {type(raw).__name__}")
    scan = _scan(raw)
    large = len(raw) > large_chars or scan.max_newlines >= large_newlines
    hint = (_large_content_hint(hint_tool, len(raw) if len(raw) > large_chars else 0,
                                scan.max_newlines if scan.max_newlines >= large_newlines else 0)
            if large and hint_tool and hint_tool != spec.name else "")

    def fail(kind: str, text: str, **kw: Any) -> ToolArgumentError:
        return ToolArgumentError(spec.name, kind, text + (f"\n{hint}" if hint else ""),
                                 large=large, **kw)

    if not raw.strip():
        if not _required(spec.args_model):
            data: Any = {}
        else:
            raise fail(INVALID_JSON, f"The arguments of {spec.name} are empty; expected a JSON "
                                     f"object with {_describe_fields(spec.args_model)}.")
    elif len(raw) > MAX_CHARS:
        raise fail(INVALID_ARGUMENTS, f"The arguments of {spec.name} are {len(raw):,} "
                                      f"characters long; at most {MAX_CHARS:,} are accepted.")
    elif scan.max_depth > MAX_DEPTH:
        raise fail(INVALID_ARGUMENTS, f"The arguments of {spec.name} nest objects and arrays "
                                      f"{scan.max_depth:,} levels deep; at most {MAX_DEPTH} "
                                      "are accepted.")
    else:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            text, truncated = _explain_json_error(spec.name, raw, exc, scan, large)
            raise fail(INVALID_JSON, text, truncated=truncated) from None
        except ValueError as exc:  # an integer beyond Python's digit limit for conversion
            raise fail(INVALID_ARGUMENTS, f"The arguments of {spec.name} hold a number that "
                                          f"cannot be read ({exc}).") from None
        except RecursionError:  # not expected below MAX_DEPTH; never a crash all the same
            raise fail(INVALID_ARGUMENTS, f"The arguments of {spec.name} nest too deeply."
                       ) from None
    if not isinstance(data, dict):
        text = (f"The arguments of {spec.name} must be a JSON object with "
                f"{_describe_fields(spec.args_model)}; got {_json_type(data)}.")
        if isinstance(data, str) and data.strip().startswith("{"):
            text += (" It looks like the object was encoded as a JSON string: send the object "
                     "itself, not a string that contains it.")
        raise fail(INVALID_ARGUMENTS, text)
    try:
        return spec.args_model.model_validate(data)
    except ValidationError as exc:
        problems = [_problem(spec.args_model, error) for error in exc.errors()]
        count = f"{len(problems)} {_plural(len(problems), 'problem')}"
        text = (f"The arguments of {spec.name} do not match its schema ({count}):\n"
                + "\n".join(f"- {p}" for p in problems))
        raise fail(INVALID_ARGUMENTS, text, problems=problems) from None


# ---------------------------------------------------------------------------------------------
# JSON errors


@dataclass(frozen=True)
class _Scan:
    """What a lexical pass over the raw text found: whether it ends inside a string, which
    objects and arrays are still open at the end, and the most line breaks in one string."""

    in_string: bool
    open_brackets: str
    max_newlines: int
    max_depth: int = 0

    @property
    def unclosed(self) -> bool:
        return self.in_string or bool(self.open_brackets)

    def closers(self) -> str:
        closing = {"{": "}", "[": "]"}
        return ('"' if self.in_string else "") + "".join(
            closing[b] for b in reversed(self.open_brackets))


def _scan(raw: str) -> _Scan:
    stack: list[str] = []
    in_string = escaped = False
    newlines = most = deepest = 0
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
                if ch == "n":
                    newlines += 1
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                most, newlines = max(most, newlines), 0
            elif ch == "\n":
                newlines += 1
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append(ch)
            deepest = max(deepest, len(stack))
        elif ch in "}]" and stack:
            stack.pop()
    if in_string:
        most = max(most, newlines)
    return _Scan(in_string, "".join(stack), most, deepest)


def _is_cut_off(raw: str, exc: json.JSONDecodeError, scan: _Scan) -> bool:
    at_end = exc.msg.startswith("Unterminated string") or not raw[exc.pos:].strip()
    return at_end and scan.unclosed


def _explain_json_error(tool: str, raw: str, exc: json.JSONDecodeError, scan: _Scan,
                        large: bool) -> tuple[str, bool]:
    truncated = _is_cut_off(raw, exc, scan)
    raw_control = exc.msg.startswith("Invalid control character")
    if raw_control:
        # A raw newline (or tab) in a string: see whether that is the only problem.
        try:
            json.loads(raw, strict=False)
        except json.JSONDecodeError as lenient:
            truncated = _is_cut_off(raw, lenient, scan)
    at = "" if exc.msg.endswith(" at") else " at"  # "Unterminated string starting at", ...
    lines = [f"The arguments of {tool} are not valid JSON: {exc.msg}{at} line {exc.lineno}, "
             f"column {exc.colno} (character offset {exc.pos}).",
             f"Near the error (marked {MARK}): {_excerpt(raw, exc.pos)}"]
    if raw_control:
        lines.append("A string value contains a raw control character (such as a line break); "
                     "inside JSON strings write it escaped, as \\n or \\t.")
    if truncated:
        lines.append(f"The arguments look cut off: the JSON ends before it is complete (still "
                     f"open at the end: {_open_things(scan)}). The output limit was probably "
                     "reached while writing them" + ("." if large else "; send shorter ones."))
    return "\n".join(lines), truncated


def _open_things(scan: _Scan) -> str:
    names = {"{": "an object", "[": "an array"}
    things = (["a string"] if scan.in_string else []) + [names[b]
                                                          for b in reversed(scan.open_brackets)]
    return ", ".join(things) + f"; it would need {scan.closers()!r} to close"


def _visible(text: str) -> str:
    """Raw line breaks and tabs shown as ``<LF>``, ``<CR>`` and ``<TAB>``, so that an excerpt
    stays on one line and they cannot be mistaken for the escapes ``\\n``, ``\\r``, ``\\t``."""
    return text.replace("\n", "<LF>").replace("\r", "<CR>").replace("\t", "<TAB>")


def _excerpt(raw: str, pos: int) -> str:
    """The text around ``pos``, on one line, with the position marked."""
    start, end = max(0, pos - EXCERPT_CHARS), min(len(raw), pos + EXCERPT_CHARS)
    before = ("..." if start > 0 else "") + _visible(raw[start:pos])
    after = _visible(raw[pos:end]) + ("..." if end < len(raw) else "")
    return before + MARK + after


def _large_content_hint(tool: str, chars: int, newlines: int) -> str:
    """``chars`` and ``newlines`` are what crossed its threshold (0: did not)."""
    why = [f"{chars} characters"] if chars else []
    why += [f"a string value with {newlines} line breaks"] if newlines else []
    return (f"These arguments look like large content ({', '.join(why)}). Do not put file "
            f"content in tool-call JSON: call "
            f"{tool} to start a write session, then send the content as plain "
            "text (not JSON) in your messages and end it with a line DONE.")


# ---------------------------------------------------------------------------------------------
# Schema errors


def _key(name: str, info: Any) -> str:
    """The key the model sends for a field: its validation alias or alias, else its name."""
    alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
    return alias or name


def _required(model: type[BaseModel]) -> list[str]:
    return [_key(n, f) for n, f in model.model_fields.items() if f.is_required()]


def _fields(model: type[BaseModel]) -> list[str]:
    return [_key(n, f) for n, f in model.model_fields.items()]


def _names(keys: Sequence[str]) -> str:
    return ", ".join(f"'{k}'" for k in keys)


def _describe_fields(model: type[BaseModel]) -> str:
    required = _required(model)
    optional = [k for k in _fields(model) if k not in required]
    parts = []
    if required:
        parts.append(f"the required {_plural(len(required), 'field')} {_names(required)}")
    if optional:
        parts.append(("the optional " if required else "only the optional ")
                     + f"{_plural(len(optional), 'field')} {_names(optional)}")
    return " and ".join(parts) if parts else "no fields"


def _plural(count: int, word: str) -> str:
    return word if count == 1 else word + "s"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {json.dumps(value)}"
    if isinstance(value, (int, float)):
        return f"the number {json.dumps(value)}"
    if isinstance(value, str):
        return f"a string ({_short(value)})"
    if isinstance(value, list):
        return f"an array of {len(value)} {_plural(len(value), 'item')}"
    return type(value).__name__


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + "..."


def _problem(model: type[BaseModel], error: Mapping[str, Any]) -> str:
    loc = tuple(error.get("loc", ()))
    where = f"field '{'.'.join(str(part) for part in loc)}'" if loc else "arguments"
    text = f"{where}: {error['msg']}"
    kind = error.get("type")
    if kind == "extra_forbidden":
        owner = _model_at(model, loc[:-1])
        if owner is not None:
            text += f" (allowed fields: {_names(_fields(owner)) or 'none'})"
    elif kind != "missing" and "input" in error and loc:
        text += f" (got {_short(error['input'])})"
    return text


def _unwrap(annotation: Any) -> Any:
    """``Annotated[X, ...]`` → ``X``; ``X | None`` (or a union with one model) → ``X``."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(annotation) if a is not type(None)]
            models = [a for a in members
                      if isinstance(a, type) and issubclass(a, BaseModel)]
            if len(members) == 1:
                annotation = members[0]
            elif len(models) == 1:
                annotation = models[0]
            else:
                return annotation
        else:
            return annotation


def _model_at(model: type[BaseModel], path: Sequence[Any]) -> type[BaseModel] | None:
    """The (nested) model at ``path`` of an error location, when it can be told; else None."""
    current: Any = model
    for part in path:
        current = _unwrap(current)
        origin, args = typing.get_origin(current), typing.get_args(current)
        if isinstance(current, type) and issubclass(current, BaseModel) and isinstance(part, str):
            found = [f for n, f in current.model_fields.items() if _key(n, f) == part or n == part]
            if not found:
                return None
            current = found[0].annotation
        elif isinstance(part, int) and origin in (list, tuple, set, frozenset) and args:
            current = args[0]
        elif origin is not None and isinstance(origin, type) and issubclass(
                origin, Mapping) and len(args) == 2:
            current = args[1]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None
