"""The rules of docs/design/ and the scenarios of features/ point at each other: every rule has
a scenario that carries its id as a tag, every scenario carries at least one rule id, no
scenario cites an id that no page defines, every id is a registered pytest marker (so
``--strict-markers`` accepts the tag and ``-m WS-5`` selects its scenarios), and
docs/testing.md cites every id."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design"
FEATURES = ROOT / "features"
RULE = re.compile(r"^\*\*(?P<id>[A-Z]{2}-\d+) — (?P<title>.+?)\*\*", re.M)
RULE_ID = re.compile(r"^[A-Z]{2}-\d+$")
SCENARIO = re.compile(r"^\s*Scenario(?: Outline)?:\s*(?P<title>.+?)\s*$")


@dataclass(frozen=True)
class Scenario:
    feature: str
    line: int
    title: str
    tags: frozenset[str]

    @property
    def where(self) -> str:
        return f"features/{self.feature}:{self.line} {self.title!r}"

    @property
    def rule_ids(self) -> set[str]:
        return {tag for tag in self.tags if RULE_ID.match(tag)}


def design_rules() -> dict[str, str]:
    """Rule id -> the page that defines it."""
    rules: dict[str, str] = {}
    for page in sorted(DESIGN.glob("*.md")):
        for match in RULE.finditer(page.read_text(encoding="utf-8")):
            assert match["id"] not in rules, f"{match['id']} is defined twice"
            rules[match["id"]] = page.name
    return rules


def feature_scenarios() -> list[Scenario]:
    """Every scenario of features/ with its own tags and its feature's."""
    found: list[Scenario] = []
    for path in sorted(FEATURES.glob("*.feature")):
        pending: list[str] = []
        feature_tags: list[str] = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            text = line.strip()
            if text.startswith("@"):
                pending += [tag.lstrip("@") for tag in text.split() if tag.startswith("@")]
            elif text.startswith("Feature:"):
                feature_tags, pending = pending, []
            elif match := SCENARIO.match(line):
                found.append(Scenario(path.name, number, match["title"],
                                      frozenset(feature_tags + pending)))
                pending = []
            elif text and not text.startswith("#"):
                pending = []
    return found


def test_the_design_pages_define_rules() -> None:
    rules = design_rules()
    pages = {page for page in rules.values()}
    assert len(pages) == 9, f"rules found only in {sorted(pages)}"
    assert len(rules) >= 40, sorted(rules)


def test_every_scenario_states_at_least_one_rule() -> None:
    untagged = [s.where for s in feature_scenarios() if not s.rule_ids]
    assert not untagged, ("these scenarios carry no rule id of docs/design/ as a tag "
                          "(add e.g. @WS-5 on the line above the Scenario):\n  "
                          + "\n  ".join(untagged))


def test_no_scenario_cites_an_unknown_rule() -> None:
    rules = design_rules()
    unknown = [f"{s.where} cites {sorted(s.rule_ids - set(rules))}"
               for s in feature_scenarios() if s.rule_ids - set(rules)]
    assert not unknown, "rule ids that no page of docs/design/ defines:\n  " + \
        "\n  ".join(unknown)


def test_every_rule_has_a_scenario() -> None:
    cited = {rule for s in feature_scenarios() for rule in s.rule_ids}
    missing = [f"{rule} ({page})" for rule, page in design_rules().items()
               if rule not in cited]
    assert not missing, "rules of docs/design/ that no scenario states:\n  " + \
        "\n  ".join(missing)


#: Titles that start with a section of a document the reader does not have ("Protocol 4:",
#: "2.1:", "Phase 1, create:", "Invariant 3:"): the title should say the behaviour, the tags
#: the rule.
SECTION_TITLE = re.compile(r"^(?:\d+(?:\.\d+)*[:,]|(?:Protocol|Phase|Invariant|Flow|Validation|"
                           r"Implementation|Review|Context|Edge|Unit|Success|Future|Risks?|"
                           r"Principle|Acceptance)\b[^:]*:)")


def test_scenario_titles_say_the_behaviour() -> None:
    numbered = [s.where for s in feature_scenarios() if SECTION_TITLE.match(s.title)]
    assert not numbered, ("these scenario titles start with a section of a design document; "
                          "say the behaviour and put the rule id in a tag:\n  "
                          + "\n  ".join(numbered))


def test_every_rule_is_a_registered_marker() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    markers = {entry.split(":", 1)[0].strip()
               for entry in config["tool"]["pytest"]["ini_options"]["markers"]}
    missing = sorted(set(design_rules()) - markers)
    assert not missing, f"rule ids not registered as markers in pyproject.toml: {missing}"


def test_docs_testing_cites_every_rule() -> None:
    doc = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    missing = [rule for rule in design_rules() if not re.search(rf"\b{rule}\b", doc)]
    assert not missing, f"docs/testing.md does not cite {missing}"


#: A citation of the original design documents (the directory's name spelled apart, as in
#: tests/test_standalone.py, so that this pattern is no such citation itself).
CITATION = re.compile(r"sha" r"red/seeds|\bseed 00\d|seeds?/00\d")


def test_nothing_cites_files_outside_the_repository() -> None:
    """A clone has no design documents beside it: features and docs cite docs/design/."""
    offenders = [str(path.relative_to(ROOT))
                 for path in [*FEATURES.glob("*.feature"), *(ROOT / "docs").rglob("*.md"),
                              ROOT / "pyproject.toml"]
                 if CITATION.search(path.read_text("utf-8"))]
    assert not offenders, f"these files cite design documents outside the repository: " \
                          f"{offenders}"


# -- the rule index of docs/testing.md ------------------------------------------------------------

INDEX_START = "<!-- rule index: generated by `python tests/bdd/test_rule_index.py` -->"
INDEX_END = "<!-- end of the rule index -->"


def rule_index() -> str:
    """The rule index section of docs/testing.md: every rule, its page, its scenarios."""
    rules = design_rules()
    titles = {match["id"]: match["title"]
              for page in sorted(DESIGN.glob("*.md"))
              for match in RULE.finditer(page.read_text(encoding="utf-8"))}
    by_rule: dict[str, list[Scenario]] = {rule: [] for rule in rules}
    for scenario in feature_scenarios():
        for rule in sorted(scenario.rule_ids):
            by_rule.setdefault(rule, []).append(scenario)
    lines = [INDEX_START, "", "| rule | scenarios |", "|---|---|"]
    for rule, page in rules.items():
        cited = "<br>".join(f"`{s.feature}`: {s.title}" for s in by_rule[rule]) or "**none**"
        lines.append(f"| [{rule}](design/{page}) {titles[rule]} | {cited} |")
    lines += ["", INDEX_END]
    return "\n".join(lines)


def test_docs_testing_holds_the_current_rule_index() -> None:
    doc = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")
    assert INDEX_START in doc and INDEX_END in doc, "docs/testing.md has no rule index"
    current = doc[doc.index(INDEX_START):doc.index(INDEX_END) + len(INDEX_END)]
    assert current == rule_index(), ("the rule index of docs/testing.md is out of date: run "
                                     "`python tests/bdd/test_rule_index.py` to rewrite it")


if __name__ == "__main__":
    path = ROOT / "docs" / "testing.md"
    doc = path.read_text(encoding="utf-8")
    start, end = doc.index(INDEX_START), doc.index(INDEX_END) + len(INDEX_END)
    path.write_text(doc[:start] + rule_index() + doc[end:], encoding="utf-8")
    print(f"rewrote the rule index of {path.relative_to(ROOT)}")
