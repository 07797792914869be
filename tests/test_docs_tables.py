"""Every Markdown table in the docs renders: a header row, a delimiter row, and the same
number of cells in every row (a table with a stray header renders as one broken table)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([*ROOT.glob("*.md"), *ROOT.glob("docs/**/*.md"), *ROOT.glob("bench/*.md"),
                *ROOT.glob("examples/**/*.md")])
CODE = re.compile(r"`[^`]*`")
PIPE = re.compile(r"(?<!\\)\|")
DELIMITER = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")


def tables(text: str) -> list[tuple[int, list[str]]]:
    """``(first line number, rows)`` of each table outside fenced code blocks."""
    found: list[tuple[int, list[str]]] = []
    fenced = False
    rows: list[str] = []
    for number, line in enumerate([*text.splitlines(), ""], start=1):
        if line.startswith(("```", "~~~")):
            fenced = not fenced
        if not fenced and line.startswith("|"):
            rows.append(line.rstrip())
            continue
        if rows:
            found.append((number - len(rows), rows))
            rows = []
    return found


def cells(row: str) -> int:
    return len(PIPE.findall(CODE.sub("x", row))) - 1


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_has_a_header_a_delimiter_and_rows_of_the_same_width(page):
    for line, rows in tables(page.read_text(encoding="utf-8")):
        where = f"{page.relative_to(ROOT)}:{line}"
        assert len(rows) >= 2 and DELIMITER.match(rows[1].replace(" ", "")), (
            f"{where}: a table's second row must be its delimiter (| --- | --- |)")
        widths = {cells(row) for row in rows}
        assert len(widths) == 1, f"{where}: rows with {sorted(widths)} cells in one table"


def test_a_broken_table_is_found():
    broken = "| a | b |\n| --- | --- |\n| a | b | c |\n| --- | --- | --- |\n"
    [(line, rows)] = tables(broken)
    assert line == 1 and len({cells(row) for row in rows}) == 2
