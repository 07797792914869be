"""Built-in validator: the syntax of JSON, YAML, TOML and Python files.

Chosen by the extension of ``request.path`` (case-insensitive): ``.json``; ``.yaml`` and
``.yml``; ``.toml``; ``.py`` and ``.pyi``. Only content that decodes as UTF-8 is parsed (the
``validate_utf8`` plugin reports the rest). One issue, code ``syntax``, for the first error the
parser finds, at its line and column (1-based; the column counts characters; lines end at
``\\n``, ``\\r\\n`` or ``\\r``, as everywhere in validation).

* JSON: ``json.loads`` (a byte order mark is an error, as for ``json.load`` and most tools).
* YAML: every document is parsed and composed (``yaml.compose_all`` with the safe loader), but
  not constructed: application tags such as ``!Ref`` are valid YAML and not reported.
* TOML: ``tomllib.loads``; the position comes from the error message.
* Python: ``compile(source, path, "exec")``, which also finds what the compiler rejects
  (``return`` outside a function, ...); nothing is run. A leading byte order mark is allowed,
  as Python allows it in files; warnings such as invalid escape sequences are not reported.

Disable with ``plugins: {disable: [orion_plugins.validate_syntax]}`` in ``orion.yaml``.
"""

from __future__ import annotations

import json
import re
import tomllib
import warnings
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

import yaml

from orion.api import Issue, LineView, hookimpl, position

if TYPE_CHECKING:
    from orion.api import ValidationRequest

Found = tuple[int, int, str] | None  # line, column, message


def check_json(text: str) -> Found:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return (*position(text, exc.pos), f"JSON: {exc.msg}")
    return None


def check_yaml(text: str) -> Found:
    try:
        for _ in yaml.compose_all(text, Loader=yaml.SafeLoader):
            pass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if exc.context and exc.problem:
            problem = f"{problem} ({exc.context})"
        return (*position(text, mark.index if mark is not None else 0), f"YAML: {problem}")
    except yaml.reader.ReaderError as exc:
        return (*position(text, exc.position),
                f"YAML: character U+{exc.character:04X} is not allowed ({exc.reason})")
    except yaml.YAMLError as exc:
        return 1, 1, f"YAML: {exc}"
    return None


_TOML_AT = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)\s*$")


def check_toml(text: str) -> Found:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = _TOML_AT.search(message)
        if match is None:
            index = 0
        elif match.group(1) is None:
            index = len(text)
        else:
            # tomllib counts lines at "\n" only and columns from the line's start.
            line, column = int(match.group(1)), int(match.group(2))
            start = 0
            for _ in range(line - 1):
                start = text.index("\n", start) + 1
            index = start + column - 1
        problem = message[:match.start()] if match else message
        if text.startswith("\ufeff") and index == 0:
            problem += " (the content starts with a byte order mark, U+FEFF)"
        return (*position(text, index), f"TOML: {problem}")
    return None


def check_python(text: str, path: str = "<content>") -> Found:
    bom = text.startswith("\ufeff")
    source = text[1:] if bom else text
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        if exc.lineno is None:  # "source code string cannot contain null bytes"
            index = source.find("\0")
            line, column = position(source, max(index, 0))
        else:
            line, column = exc.lineno, exc.offset or 1
        if bom and line == 1:
            column += 1
        return line, column, f"Python: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes before 3.12; nesting
        index = max(source.find("\0"), 0)
        line, column = position(source, index)
        return line, column + (bom and line == 1), f"Python: {exc}"
    return None


CHECKS: dict[str, Callable[[str], Found]] = {
    ".json": check_json,
    ".yaml": check_yaml,
    ".yml": check_yaml,
    ".toml": check_toml,
    ".py": check_python,
    ".pyi": check_python,
}


@hookimpl
def validate_content(request: ValidationRequest) -> list[Issue] | None:
    check = CHECKS.get(PurePosixPath(request.path.replace("\\", "/")).suffix.lower())
    if check is None:
        return None
    try:
        text = request.content.decode("utf-8")
    except UnicodeDecodeError:
        return None  # validate_utf8 reports it
    found = check(text)
    if found is None:
        return None
    line, column, message = found
    view = LineView(request.content)
    last = max(len(view), 1)
    if line > last:  # an error at the very end, after the final line break
        line, column = last, len(view.cells(last)) + 1
    line, column = max(line, 1), max(column, 1)
    return [Issue(line, column, "syntax", message, view.context(line, column))]
