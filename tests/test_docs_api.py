"""docs/api.md documents every name of ``orion.api.__all__``, names nothing else, and its
examples run, in order, in one namespace (the first sets up a runtime the others use)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orion import api

DOCS = Path(__file__).resolve().parent.parent / "docs" / "api.md"
#: ``## `name```: a name's heading (other ``##`` headings, without backquotes, group them).
HEADING = re.compile(r"^## `([A-Za-z_]\w*)`\s*$", re.M)
CODE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def sections() -> dict[str, str]:
    """Each documented name and the text up to the next name's heading."""
    text = DOCS.read_text(encoding="utf-8")
    matches = list(HEADING.finditer(text))
    found: dict[str, str] = {}
    for match, after in zip(matches, [*matches[1:], None]):
        name = match.group(1)
        assert name not in found, f"docs/api.md documents {name!r} twice"
        found[name] = text[match.end():after.start() if after else len(text)]
    return found


def test_every_exported_name_is_documented() -> None:
    missing = sorted(set(api.__all__) - set(sections()))
    assert not missing, f"orion.api exports names docs/api.md does not document: {missing}"


def test_every_documented_name_is_exported() -> None:
    unknown = sorted(set(sections()) - set(api.__all__))
    assert not unknown, f"docs/api.md documents names orion.api does not export: {unknown}"


@pytest.mark.parametrize("name", sorted(api.__all__))
def test_every_name_has_an_example_that_uses_it(name: str) -> None:
    section = sections().get(name, "")
    examples = CODE.findall(section)
    assert examples, f"docs/api.md has no example under {name!r}"
    assert any(re.search(rf"\b{name}\b", code) for code in examples), \
        f"the example under {name!r} does not use it"


def test_the_examples_run_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = DOCS.read_text(encoding="utf-8")
    namespace: dict[str, object] = {"__name__": "docs_api"}
    for match in CODE.finditer(text):
        line = text.count("\n", 0, match.start()) + 2
        code = compile(match.group(1), f"docs/api.md:{line}", "exec")
        exec(code, namespace)  # noqa: S102 - the page's own examples
    runtime = namespace["runtime"]
    runtime.close()  # type: ignore[attr-defined]
