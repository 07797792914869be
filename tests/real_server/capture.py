"""Saves what the real server sends for the cases the replays of ``make test`` need, as data
under tests/data/real_server/ (one file a case: the HTTP status, then the body's lines as
they arrived). Run by ``make test-real-capture`` against a server :mod:`serve` started::

    python tests/real_server/capture.py BASE_URL [llama-cpp-python]
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

TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}}]

#: llama-cpp-python's server (``python -m llama_cpp.server --chat_format
#: chatml-function-calling``), whose build from source takes half an hour on two cores: its
#: files are kept, and saved again with ``capture.py BASE_URL llama-cpp-python``.
LLAMA_CPP_PYTHON = {
    # A forced call: every delta carries it twice, as tool_calls and as function_call.
    "llama_cpp_python_tool_call": {
        "messages": [{"role": "system", "content": "Paths are relative to the project, for "
                                                   "example notes.md or src/app.py."},
                     {"role": "user", "content": "What is in notes.md?"}],
        "max_tokens": 60, "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "read_file"}}},
    # content: null beside tool calls: HTTP 500 and the server's validation errors.
    "llama_cpp_python_null_content": {
        "messages": [{"role": "user", "content": "Read notes.md"},
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "c1", "type": "function", "function": {
                             "name": "read_file", "arguments": '{"path": "notes.md"}'}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "hello"}],
        "max_tokens": 8, "tools": TOOLS},
    # A prompt past the context window: HTTP 200 and nothing.
    "llama_cpp_python_overflow": {"messages": [{"role": "user", "content": "word " * 3000}],
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
    cases = LLAMA_CPP_PYTHON if sys.argv[2:] == ["llama-cpp-python"] else CASES
    for name, body in cases.items():
        capture(sys.argv[1].rstrip("/"), name, body)


if __name__ == "__main__":
    main()
