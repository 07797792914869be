"""docs/plugins.md documents every hook of ``orion.hookspecs`` with its exact signature, names
no hook that does not exist, and its examples run."""

from __future__ import annotations

import ast
import inspect
import re
import sys
import tempfile
import types
from pathlib import Path

import pytest

from orion import hookspecs

DOCS = Path(__file__).resolve().parent.parent / "docs" / "plugins.md"

#: ``## name(args)``: a hook heading (other ``##`` headings have no parentheses).
HEADING = re.compile(r"^##\s+`?([A-Za-z_]\w*)\((.*?)\)`?\s*$", re.M)
#: Any level-2 heading that starts like a call, to catch a malformed hook heading.
CALL_LIKE = re.compile(r"^##\s+`?([A-Za-z_]\w*)\(", re.M)
CODE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def spec_functions() -> dict[str, inspect.Signature]:
    return {name: inspect.signature(obj) for name, obj in vars(hookspecs).items()
            if inspect.isfunction(obj) and hasattr(obj, "orion_spec")}


SPECS = spec_functions()


def docs_text() -> str:
    return DOCS.read_text(encoding="utf-8")


def documented() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for match in HEADING.finditer(docs_text()):
        name, args = match.group(1), match.group(2)
        assert name not in found, f"docs/plugins.md documents {name!r} twice"
        found[name] = [a.strip() for a in args.split(",") if a.strip()]
    return found


def code_blocks() -> list[tuple[int, str]]:
    text = docs_text()
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in CODE.finditer(text)]


def test_hookspecs_are_found():
    assert len(SPECS) >= 13
    assert "authorize_tool_call" in SPECS


@pytest.mark.parametrize("name", sorted(SPECS))
def test_every_hookspec_has_a_heading_with_its_exact_arguments(name):
    headings = documented()
    assert name in headings, (f"docs/plugins.md has no '## {name}(...)' heading for hook "
                              f"{name!r} of orion/hookspecs.py")
    expected = list(SPECS[name].parameters)
    assert headings[name] == expected, (
        f"docs/plugins.md documents {name}({', '.join(headings[name])}) but the hookspec is "
        f"{name}({', '.join(expected)})")


def test_docs_name_no_hook_that_does_not_exist():
    unknown = sorted(set(documented()) - set(SPECS))
    assert not unknown, f"docs/plugins.md documents hooks that do not exist: {unknown}"


def test_every_call_like_heading_is_a_well_formed_hook_heading():
    text = docs_text()
    call_like = [m.group(1) for m in CALL_LIKE.finditer(text)]
    assert sorted(call_like) == sorted(documented()), (
        "a '## name(' heading is not of the form '## name(arg, ...)'")


def test_docs_reference_only_existing_hooks():
    """``pm.hook.<name>`` and ``@hookimpl`` functions in the docs name real hooks, with
    arguments the hook has."""
    text = docs_text()
    for name in re.findall(r"\.hook\.([A-Za-z_]\w*)", text):
        assert name in SPECS, f"docs/plugins.md calls pm.hook.{name}, which is not a hook"
    checked = 0
    for line, code in code_blocks():
        for node in ast.walk(ast.parse(code)):
            if not isinstance(node, ast.FunctionDef):
                continue
            for decorator in node.decorator_list:
                call = decorator if isinstance(decorator, ast.Call) else None
                target = call.func if call else decorator
                if not (isinstance(target, ast.Name) and target.id == "hookimpl"):
                    continue
                hook = node.name
                for keyword in call.keywords if call else ():
                    if keyword.arg == "specname":
                        hook = ast.literal_eval(keyword.value)
                optional = any(k.arg == "optionalhook" for k in (call.keywords if call else ()))
                if optional:
                    continue
                assert hook in SPECS, (f"docs/plugins.md (block at line {line}) implements "
                                       f"{hook!r}, which is not a hook")
                args = [a.arg for a in node.args.args if a.arg not in ("self", "cls")]
                extra = set(args) - set(SPECS[hook].parameters)
                assert not extra, (f"docs/plugins.md (block at line {line}): {hook} has no "
                                   f"argument(s) {sorted(extra)}")
                checked += 1
    assert checked >= len(SPECS)


def test_each_hook_section_has_an_example_implementing_it():
    text = docs_text()
    headings = list(HEADING.finditer(text))
    for i, match in enumerate(headings):
        end = headings[i + 1].start() if i + 1 < len(headings) else len(text)
        section = text[match.end():end]
        name = match.group(1)
        assert "```python" in section, f"the section of {name} has no example"
        assert re.search(rf"def {name}\(", section), (
            f"the example of {name} does not implement it")


@pytest.mark.parametrize("line,code", code_blocks(),
                         ids=[f"line{line}" for line, _ in code_blocks()])
def test_examples_run(line, code, tmp_path, monkeypatch):
    """Each ``python`` block is a complete program; run it as a module of its own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # examples' temporary files
    name = f"orion_docs_example_{line}"
    module = types.ModuleType(name)
    module.__file__ = str(DOCS)
    monkeypatch.setitem(sys.modules, name, module)
    exec(compile(code, f"{DOCS}:{line}", "exec"), module.__dict__)
