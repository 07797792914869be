"""A step's data table may start with a header row naming its columns (as Gherkin tables
usually do): the header is never read as data, so ``| argument | value |`` above the
arguments of a tool call does not become an argument named ``argument``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from orion.api import write_sessions
from orion.testing.steps import model_calls_tool_with_table, table_rows
from orion.testing.world import World

ARGUMENTS = [["intent", "guide"], ["target_file", "docs/guide.md"], ["operation", "create"]]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    world = World(tmp_path / "w")
    yield world
    if not world.loop.is_closed():
        world.close()


@pytest.mark.parametrize("header", [[], [["argument", "value"]], [["Argument", "Value"]]],
                         ids=["without", "header", "capitalised"])
def test_a_tool_call_table_with_or_without_its_header_row_calls_with_the_arguments(
        world: World, header: list[list[str]]) -> None:
    model_calls_tool_with_table(world, "WritePlanTool_begin", header + ARGUMENTS)
    [outcome] = world.tools_since_mark
    assert outcome.ok, outcome.content
    assert outcome.arguments["target_file"] == "docs/guide.md"
    assert [s.file for s in write_sessions(world.runtime)] == ["docs/guide.md"]


def test_only_a_first_row_that_is_the_header_is_left_out() -> None:
    rows = [["from", "to"], ["a", "b"], ["from", "to"]]
    assert table_rows(rows, "from", "to") == [["a", "b"], ["from", "to"]]
    assert table_rows([["a", "b"]], "from", "to") == [["a", "b"]]
