"""Saves what the real server sends for the cases the replays of ``make test`` need, as data
under tests/data/real_server/ (one file a case: the HTTP status, then the body's lines as
they arrived). Run by ``make test-real-capture`` against a server :mod:`serve` started::

    python tests/real_server/capture.py BASE_URL
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lane import post_lines

DATA = Path(__file__).resolve().parent.parent / "data" / "real_server"

CASES = {
    # A chat reply cut by max_tokens: finish_reason "length".
    "length_cut": {"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 8},
    # A request longer than the context window (the lane's server has 2,048 tokens).
    "context_overflow": {"messages": [{"role": "user", "content": "word " * 3000}],
                         "max_tokens": 8},
}


def capture(base_url: str, name: str, body: dict[str, object]) -> None:
    request = {"model": "smollm2", "stream": True, "stream_options": {"include_usage": True},
               "temperature": 0, **body}
    status, lines = post_lines(f"{base_url}/chat/completions", request)
    (DATA / f"{name}.json").write_text(json.dumps(
        {"status": status, "lines": lines}, indent=1) + "\n")


def main() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    for name, body in CASES.items():
        capture(sys.argv[1].rstrip("/"), name, body)


if __name__ == "__main__":
    main()
