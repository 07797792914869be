"""What people see: the live line of a streaming write, on a terminal and in a log."""

from __future__ import annotations

import io

from rich.console import Console

from orion.runtime.report import ConsoleReporter
from orion.write_session.progress import Progress


def reporter(terminal: bool) -> tuple[ConsoleReporter, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=200, color_system=None)
    return ConsoleReporter(console), out


def at(lines: int, state: str = "awaiting_content", continuation: int = 0) -> Progress:
    return Progress("docs/guide.md", lines, lines * 40, state, continuation, 3)


def test_the_live_line_names_target_lines_bytes_state_and_continuation():
    assert at(120, "continuing", 1).line() == (
        "writing docs/guide.md: 120 lines, 4.7 KiB, continuing, continuation 1/3")
    assert at(2).line() == "writing docs/guide.md: 2 lines, 80 B, awaiting_content, continuation 0/3"


def test_on_a_terminal_one_line_is_rewritten_in_place():
    console_reporter, out = reporter(terminal=True)
    for n in range(1, 6):
        console_reporter.progress(at(n))
    console_reporter.progress_done()
    text = out.getvalue()
    assert text.count("\r\x1b[2K") == 5 and text.count("\n") == 1
    assert text.endswith("writing docs/guide.md: 5 lines, 200 B, awaiting_content, "
                         "continuation 0/3\n")


def test_in_a_log_plain_lines_come_on_state_changes_and_every_50_lines():
    console_reporter, out = reporter(terminal=False)
    for n in range(1, 121):
        console_reporter.progress(at(n))
    console_reporter.progress(at(120, "continuing", 1))
    console_reporter.progress_done()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert [line.split(":")[1].split(",")[0].strip() for line in lines] == [
        "1 lines", "50 lines", "100 lines", "120 lines"]
    assert lines[-1].endswith("continuing, continuation 1/3")
