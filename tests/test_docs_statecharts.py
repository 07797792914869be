"""The ``python`` examples of docs/statecharts.md run, each in a fresh interpreter: a reader who
copies one gets what the page says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "statecharts.md"
CODE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
EXAMPLES = CODE.findall(DOCS.read_text(encoding="utf-8"))


def test_the_page_has_examples() -> None:
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("code", EXAMPLES, ids=[f"example{i}" for i in range(len(EXAMPLES))])
def test_example_runs(code: str, tmp_path: Path) -> None:
    ran = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
