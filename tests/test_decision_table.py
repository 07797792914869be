"""The decision table of docs/write-sessions.md, row by row, against the code.

The rows are read from the docs ("The decision table"): each row's first columns name a case,
for which this test holds concrete inputs; its other columns say what ``read_start`` or
``decide_end`` answers, and the test reads that answer from the row's words. A row the docs
change (another step, a line kept instead of set aside) fails here until the code says the
same; a row the docs add, or drop, fails too until its inputs are here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orion.write_session.decision import (BESIDE_A_TOOL_CALL, Cut, Facts, Next, Quoted,
                                          decide_end, read_start)

DOC = Path(__file__).resolve().parent.parent / "docs" / "write-sessions.md"
DASH = "–"


def _tables() -> list[list[list[str]]]:
    """The tables under "### The decision table", each as its rows of cells (no header)."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("### The decision table", 1)[1].split("\n### ", 1)[0]
    tables: list[list[list[str]]] = []
    rows: list[list[str]] | None = None
    for line in section.splitlines():
        if not line.startswith("|"):
            rows = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if rows is None:
            rows = []
            tables.append(rows)
            continue  # the header
        if not all(set(cell) <= {"-"} for cell in cells):
            rows.append(cells)
    return tables


START_TABLE, END_TABLE = _tables()

# -- read_start -------------------------------------------------------------------------------

U = "total,12,"  # an unfinished line, as a prompt quotes it
QUOTED_CUT = Quoted(("a,1", "b,2"), U)
QUOTED_LINES = Quoted(("a,1", "b,2"), None)
HEAD = ("h1", "h2", "h3", "h4", "h5")

#: Inputs for each case the first two columns name: (text, quoted, the content's first lines).
START_CASES: dict[tuple[str, str], list[tuple[str, Quoted | None, tuple[str, ...]]]] = {
    ("an unfinished line `U`", "`U`"): [
        (U + "5\nc,3\n", QUOTED_CUT, ()),
        (U + "\n", QUOTED_CUT, ())],
    ("an unfinished line `U`", "the last quoted complete lines, then `U`"): [
        ("b,2\n" + U + "5\nc,3\n", QUOTED_CUT, ()),
        ("a,1\nb,2\n" + U + "5\n", QUOTED_CUT, ())],
    ("an unfinished line `U`", "anything else with content"): [
        ("c,3\nd,4\n", QUOTED_CUT, ()),
        ("total,13\n", QUOTED_CUT, ())],
    ("an unfinished line `U`", "only `DONE`, or nothing"): [
        ("", QUOTED_CUT, ()),  # the terminator line is not part of the text read
        ("\n", QUOTED_CUT, ())],
    ("complete lines (a cut at a line end)", "the last quoted lines"): [
        ("b,2\nc,3\n", QUOTED_LINES, ()),
        ("a,1\nb,2\nc,3\n", QUOTED_LINES, ())],
    ("complete lines, or nothing (the idle prompt)", "anything else"): [
        ("c,3\n", QUOTED_LINES, ()),
        ("c,3\n", None, ()),
        ("c,3\n", None, HEAD)],
    ("any", "the content's first lines (10, or all when fewer; more than 3)"): [
        ("h1\nh2\nh3\nh4\nh5\nmore\n", None, HEAD),
        ("h1\nh2\nh3\nh4\nh5\n", QUOTED_LINES, HEAD)],
}


def _expected_start(row: list[str]) -> dict[str, object]:
    """What the row's words say ``read_start`` answers."""
    _, _, repeat, unfinished, then = row
    expected: dict[str, object] = {"circular": then.startswith("suspected restart")}
    if repeat != DASH:
        said = repeat.split(" (", 1)[0]
        expected["repeat"] = {"`U`": len(U), "nothing": 0}[said]
        expected["resent"] = "(the lines: set aside)" in repeat
    if unfinished.startswith("kept"):
        expected["cut_line"] = "kept"
    elif unfinished.startswith("set aside"):
        expected["cut_line"] = "set_aside"
    elif unfinished == DASH and not expected["circular"]:
        expected["cut_line"] = None
    return expected


def _start_rows() -> list[tuple[str, list[str]]]:
    return [(f"{row[0]} / {row[1]}", row) for row in START_TABLE]


@pytest.mark.parametrize(("name", "row"), _start_rows(), ids=[n for n, _ in _start_rows()])
def test_each_row_of_the_read_start_table_is_what_read_start_answers(name, row):
    cases = START_CASES.get((row[0], row[1]))
    assert cases, f"the docs' row {name!r} has no inputs here: add them to START_CASES"
    for text, quoted, head in cases:
        start = read_start(text, ended=True, quoted=quoted, head=head,
                           head_complete=len(head) > 3, tail=("t1", "t2", "t3"))
        assert start is not None
        expected = _expected_start(row)
        got = {"circular": start.circular, "repeat": start.repeat,
               "resent": start.resent > 0, "cut_line": start.cut_line}
        assert {key: got[key] for key in expected} == expected, (name, text)


def test_every_read_start_case_here_is_a_row_of_the_docs():
    assert set(START_CASES) == {(row[0], row[1]) for row in START_TABLE}


# -- decide_end ---------------------------------------------------------------------------------

#: The facts of each case the first column names.
END_CASES: dict[str, list[Facts]] = {
    "the session does not take content (correcting, finished)": [
        Facts(Cut.CLEAN, receiving=False), Facts(Cut.LENGTH, done=True, receiving=False),
        Facts(Cut.CLEAN, tool_calls=True, text=True, receiving=False)],
    "has the terminator line": [
        Facts(Cut.CLEAN, done=True, grew=True, text=True),
        Facts(Cut.LENGTH, done=True, text=True),
        Facts(Cut.CLEAN, tool_calls=True, done=True, text=True)],
    "calls a tool, no terminator line": [
        Facts(Cut.CLEAN, tool_calls=True, text=True, grew=True),
        Facts(Cut.CLEAN, tool_calls=True),
        Facts(Cut.LENGTH, tool_calls=True, text=True, mid_line=True, grew=True)],
    "cut off (`length`, `content_filter`, error event, dropped connection, no reason)": [
        Facts(cut, grew=grew, mid_line=grew, text=grew)
        for cut in (Cut.LENGTH, Cut.FILTER, Cut.ERROR, Cut.CONNECTION) for grew in (True, False)],
    "clean, stops in the middle of a line": [
        Facts(Cut.CLEAN, mid_line=True, grew=True, text=True)],
    "clean, otherwise": [
        Facts(Cut.CLEAN, grew=True, text=True), Facts(Cut.CLEAN), Facts(Cut.CLEAN, text=True)],
}

#: The step a row's words name, by how its cell starts.
STEPS = {DASH: Next.STAY, "finalize": Next.FINALIZE, "the session stays": Next.STAY,
         "continue": Next.CONTINUE, "ask about the unfinished line": Next.ASK_UNFINISHED,
         "pause": Next.PAUSE}


def _expected_end(row: list[str], facts: Facts) -> tuple[Next, str | None, bool]:
    _, step, aside = row
    named = [word for word in STEPS if step.startswith(word)]
    assert named, f"the step {step!r} of the docs is not one of {list(STEPS)}"
    set_aside: str | None = None
    if aside.startswith("what it added"):
        set_aside = BESIDE_A_TOOL_CALL if facts.text or "if it had text" not in aside else None
    after_done = aside.startswith("text after it")
    return STEPS[named[0]], set_aside, after_done


@pytest.mark.parametrize("row", END_TABLE, ids=[row[0] for row in END_TABLE])
def test_each_row_of_the_decide_end_table_is_what_decide_end_answers(row):
    cases = END_CASES.get(row[0])
    assert cases, f"the docs' row {row[0]!r} has no facts here: add them to END_CASES"
    for facts in cases:
        end = decide_end(facts)
        assert (end.next, end.set_aside, end.after_done) == _expected_end(row, facts), facts


def test_every_decide_end_case_here_is_a_row_of_the_docs():
    assert set(END_CASES) == {row[0] for row in END_TABLE}


def test_the_docs_table_is_read_whole():
    """Both tables are found, with the columns the test reads."""
    assert len(START_TABLE) >= 7 and all(len(row) == 5 for row in START_TABLE)
    assert len(END_TABLE) >= 6 and all(len(row) == 3 for row in END_TABLE)
    assert not any(re.search(r"\|", cell) for row in START_TABLE + END_TABLE for cell in row)
