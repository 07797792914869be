"""radon's grades: no function of Orion is graded E or F, and the grade-D ones are exactly
those docs/complexity.md lists with a reason."""

from __future__ import annotations

import re
from pathlib import Path

from radon.complexity import cc_rank, cc_visit

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "complexity.md"


def _grades() -> dict[str, str]:
    """``path:qualified name`` of every function and method graded D or worse, with its grade."""
    grades = {}
    for folder in ("orion", "plugins"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for block in cc_visit(path.read_text(encoding="utf-8")):
                for function in [block, *getattr(block, "methods", [])]:
                    rank = cc_rank(function.complexity)
                    if rank in "DEF" and not hasattr(function, "methods"):
                        name = (f"{function.classname}.{function.name}"
                                if function.classname else function.name)
                        grades[f"{path.relative_to(ROOT).as_posix()}:{name}"] = rank
    return grades


def _listed() -> set[str]:
    section = DOC.read_text(encoding="utf-8").split("## Graded D", 1)[1]
    return set(re.findall(r"^- `([^`]+)`:", section, flags=re.M))


def test_no_function_is_graded_e_or_f() -> None:
    worst = {name: rank for name, rank in _grades().items() if rank in "EF"}
    assert not worst, f"split these functions (radon grades them E or F): {worst}"


def test_the_grade_d_functions_are_those_the_docs_list() -> None:
    graded_d = {name for name, rank in _grades().items() if rank == "D"}
    listed = _listed()
    assert graded_d - listed == set(), \
        "graded D but not in docs/complexity.md (split it, or list it with a reason)"
    assert listed - graded_d == set(), \
        "listed in docs/complexity.md but no longer graded D: remove its line"
