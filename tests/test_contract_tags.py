"""docs/statecharts.md says, for every tag of a built-in chart's contract, what the runtime does
while a state has it, so a team can tell where a state of its own is safe."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| `(?P<chart>\w+)` \| `(?P<tag>\w+)` \| (?P<meaning>.+) \|$", re.M)


def contract_tags() -> list[tuple[str, str]]:
    found = []
    for chart in sorted((ROOT / "statecharts").glob("*.yaml")):
        data = yaml.safe_load(chart.read_text(encoding="utf-8"))
        contract = data.get("contract") or {}
        found += [(data["statechart"], tag) for tag in contract.get("tags", [])]
    return found


def documented() -> dict[tuple[str, str], str]:
    text = (ROOT / "docs" / "statecharts.md").read_text(encoding="utf-8")
    section = text.split("### What each contract tag makes the runtime do", 1)[1]
    section = section.split("\n### ", 1)[0]
    return {(m["chart"], m["tag"]): m["meaning"] for m in ROW.finditer(section)}


def test_the_built_in_contracts_have_tags() -> None:
    assert ("write_session", "finalizing") in contract_tags()
    assert ("plan_mode", "plan_on") in contract_tags()


@pytest.mark.parametrize(("chart", "tag"), contract_tags(), ids="/".join)
def test_every_contract_tag_says_what_the_runtime_does(chart: str, tag: str) -> None:
    meaning = documented().get((chart, tag), "")
    assert len(meaning.split()) >= 8, f"docs/statecharts.md does not say what {chart}'s tag " \
                                      f"{tag!r} makes the runtime do"


def test_the_table_names_no_tag_that_is_not_in_a_contract() -> None:
    assert set(documented()) <= set(contract_tags())

