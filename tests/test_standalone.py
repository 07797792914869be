"""The repository stands on its own: nothing in it reads or cites a file beside it, and the
test data written by others keeps its attribution and licence (tests/data/README.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Where code, tests and docs live. (The Gherkin features cite design rules, which
#: tests/bdd's rule index checks.)
SEARCHED = ["orion", "plugins", "statecharts", "tests", "docs", "examples", "bench",
            "Makefile", "README.md", "pyproject.toml"]
#: A path to the sibling directory, as text or built with ``/`` (``... / "<it>" / ...``); the
#: name is spelled apart so that this file itself is no such reference.
SIBLING = "sha" + "red"
#: Reading it: a relative path, or one built with ``/``.
READS = re.compile(rf"""\.\./{SIBLING}|["']{SIBLING}["']\s*/""")
#: Citing it (code and docs; a test may name it in a pattern that looks for such citations).
CITES = re.compile(rf"\b{SIBLING}/(corpus|seeds)\b")


def files() -> list[Path]:
    found = []
    for name in SEARCHED:
        path = ROOT / name
        candidates = [path] if path.is_file() else path.rglob("*")
        found += [p for p in candidates if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix not in (".txt", ".pyc")]
    return found


def test_nothing_reads_or_cites_a_directory_beside_the_repository():
    this = Path(__file__).resolve()
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
            for p in files() if p.resolve() != this
            for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace")
                                     .splitlines(), 1)
            if READS.search(line) or (CITES.search(line) and "tests" not in
                                      p.relative_to(ROOT).parts[:1])]
    assert hits == []


def test_the_vendored_corpus_keeps_its_attribution_and_licence():
    corpus = (ROOT / "tests" / "data" / "UTF-8-test.txt").read_bytes()
    assert len(corpus) == 23331
    assert b"Markus Kuhn" in corpus[:200] and b"CC BY 4.0" in corpus[:200]
    note = (ROOT / "tests" / "data" / "README.md").read_text()
    row = next(line for line in note.splitlines() if line.startswith("| `UTF-8-test.txt`"))
    for needed in ("Markus Kuhn", "2015-08-28", "CC BY 4.0",
                   "https://creativecommons.org/licenses/by/4.0/"):
        assert needed in row, needed
