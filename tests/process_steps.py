"""Steps that put Orion's own process and state under a fault: a signal or a closed terminal in
the middle of a write, a wall clock stepped ahead, a journal file swapped for a link
(docs/testing.md).

They start the ``orion`` command as the steps of :mod:`orion.testing.system_steps` do (the
scenario's environment, never the test process's ``ORION_*`` variables), and record its
output and exit status where those steps' ``Then the console shows ...`` and ``Then the
command fails with exit code ...`` read them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from pytest_bdd import given, parsers, then, when

from orion.testing.steps import PATH, UNIT, _session_dir, _session_id, duration_ms
from orion.testing.system_steps import _console
from orion.testing.world import World

from pty_terminal import InTerminal

#: How long a command may run before the step fails (it bounds a hang, it measures nothing).
COMMAND_TIMEOUT_S = 120


def _slow_write(directory: Path, path: str, lines: int, every_ms: int) -> Path:
    """A script: the model writes ``lines`` numbered lines to ``path``, one chunk each, with a
    real pause of ``every_ms`` between chunks."""
    script = {"conversation": [
        {"user": f"Write {path}."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "a long file", "target_file": path, "operation": "create"}}]}},
        {"model": {"chunks": [f"line {n}\n" for n in range(1, lines + 1)] + ["DONE\n"],
                   "chunk_delay_ms": every_ms}},
        {"model": {"text": "Done."}},
    ]}
    file = directory / "script.yaml"
    file.write_text(yaml.safe_dump(script), encoding="utf-8")
    return file


def _env(world: World) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ORION_", "WRITE_SESSION_"))}
    env.update(world.env)
    return {**env, "TERM": "xterm", "COLUMNS": "200"}


@when(parsers.re(r'the user runs "orion run" in a terminal while the model writes '
                 r'(?P<lines>\d+) lines to ' + PATH + r' one every (?P<every>\d+) ms, and '
                 r'(?P<fault>SIGTERM|SIGHUP|SIGINT|the terminal|the open-file limit)'
                 r'(?: arrives| closes| drops to 10) once (?P<shown>\d+) '
                 r'lines show'), converters={"lines": int, "every": int, "shown": int})
def run_stopped_mid_write(orion_world: World, lines: int, path: str, every: int, fault: str,
                          shown: int, request: pytest.FixtureRequest) -> None:
    """``orion run`` in a pseudo-terminal of its own (``tests/pty_terminal.py``); once
    its live line shows ``shown`` lines, the signal is sent (or the terminal closed, and the
    kernel sends SIGHUP; or its open-file limit lowered to 10 with ``prlimit``). What the live
    line showed last is kept for the Then steps."""
    if fault == "the open-file limit" and shutil.which("prlimit") is None:
        pytest.skip("needs prlimit (util-linux) to lower a running process's limit")
    directory = Path(tempfile.mkdtemp(prefix="orion-script-"))
    request.addfinalizer(lambda: shutil.rmtree(directory, ignore_errors=True))
    script = _slow_write(directory, path, lines, every)
    args = ["run", str(script)]
    console = _console(orion_world)
    console["mark"] = len(console["runs"])
    orion_world.mark()
    terminal = InTerminal([sys.executable, "-m", "orion", *args], orion_world.workspace,
                          _env(orion_world))
    try:
        orion_world.data["lines shown"] = terminal.wait_for_lines(shown, COMMAND_TIMEOUT_S)
        if fault == "the terminal":
            terminal.hang_up()
        elif fault == "the open-file limit":  # RLIMIT_NOFILE, on the running process
            subprocess.run(["prlimit", "--pid", str(terminal.proc.pid), "--nofile=10:10"],
                           check=True, capture_output=True)
        else:
            terminal.proc.send_signal(getattr(signal, fault))
        code = terminal.wait(COMMAND_TIMEOUT_S)
    finally:
        terminal.close()
    console["runs"].append({"args": args, "code": code, "stdout": terminal.text(),
                            "stderr": ""})


def _left_journal(world: World) -> tuple[Path, int]:
    """The one journal an ``orion`` command left, and its lines (numbered from 1, whole)."""
    sessions = world.workspace / ".orion" / "write_sessions"
    (journal,) = [p for p in sessions.iterdir() if p.is_dir()]
    content = (journal / "content.txt").read_text(encoding="utf-8")
    saved = content.count("\n")
    assert content == "".join(f"line {n}\n" for n in range(1, saved + 1)), content[-300:]
    assert not (journal / "lock").exists(), "the journal is still locked"
    return journal, saved


@then("the open write session's journal holds every line the terminal showed")
def journal_holds_what_showed(orion_world: World) -> None:
    shown = orion_world.data.get("lines shown")
    assert shown, "no command showed a live line in this scenario"
    _, saved = _left_journal(orion_world)
    assert saved >= shown, f"the journal holds {saved} lines; {shown} showed before"


@then(parsers.re(r"the write session's journal holds all (?P<lines>\d+) lines"),
      converters={"lines": int})
def journal_holds_all(orion_world: World, lines: int) -> None:
    _, saved = _left_journal(orion_world)
    assert saved == lines, f"the journal holds {saved} lines"


# -- the wall clock ----------------------------------------------------------------------------


@when(parsers.re(rf"the wall clock jumps (?P<amount>\d+) {UNIT} ahead"),
      converters={"amount": int})
def wall_clock_jumps(orion_world: World, amount: int, unit: str) -> None:
    """An NTP correction or a virtual machine resumed with a stale clock: the wall clock
    moves, the second clock (time since boot) does not, and no time passes for Orion."""
    orion_world.step_wall_clock(duration_ms(amount, unit))


def _trashed(world: World, path: str) -> Path:
    return world.state_dir / "trash" / _session_id(world, path)


@then(parsers.re(rf"the trash holds the journal of {PATH} with (?P<lines>\d+) lines"),
      converters={"lines": int})
def trash_holds(orion_world: World, path: str, lines: int) -> None:
    journal = _trashed(orion_world, path)
    found = (journal / "content.txt").read_bytes().count(b"\n")
    assert found == lines, f"the trashed journal holds {found} lines"


@then(parsers.re(rf"the trash no longer holds the journal of {PATH}"))
def trash_emptied(orion_world: World, path: str) -> None:
    assert not _trashed(orion_world, path).exists(), "the journal is still in the trash"


# -- the journal's files -----------------------------------------------------------------------


@when(parsers.re(rf'the journal file "(?P<name>[^"]+)" of {PATH} is replaced by a link to '
                 r"the file outside the workspace"))
def journal_file_is_a_link(orion_world: World, name: str, path: str) -> None:
    """What a cloned repository can ship, or another process do: the journal's file is a
    symbolic link to ``keep.txt`` beside the workspace (``no file outside the workspace
    changed`` checks it)."""
    file = _session_dir(orion_world, path) / name
    file.unlink(missing_ok=True)
    file.symlink_to(orion_world.outside / "keep.txt")


@when(parsers.re(rf'the set-aside index of {PATH} numbers its part (?P<number>\d+) '
                 r'"(?P<forged>[^"]+)"'), converters={"number": int})
def forged_part_number(orion_world: World, path: str, number: int, forged: str) -> None:
    """What a repository can ship: the journal's index of its parts set aside gives part
    ``number`` a "number" that is a path (``../../payload``)."""
    index = _session_dir(orion_world, path) / "set_aside" / "index.json"
    data = json.loads(index.read_text(encoding="utf-8"))
    (entry,) = [e for e in data["parts"] if e.get("number") == number]
    entry["number"] = forged
    index.write_text(json.dumps(data), encoding="utf-8")


@given(parsers.re(r"the process's umask is (?P<mask>[0-7]{3})"))
def process_umask(request: pytest.FixtureRequest, mask: str) -> None:
    """The umask new files and directories get their mode through (restored after the
    scenario): a rule that holds "whatever the umask" is seen with a permissive one."""
    before = os.umask(int(mask, 8))
    request.addfinalizer(lambda: os.umask(before))


@then(parsers.re(rf"the journal of {PATH} is its owner's only"))
def journal_is_private(orion_world: World, path: str) -> None:
    import stat

    journal = _session_dir(orion_world, path)
    for directory in (journal.parent, journal):
        mode = stat.S_IMODE(directory.stat().st_mode)
        assert mode == 0o700, f"{directory.name}/ has the mode {mode:o}"
    for file in journal.rglob("*"):
        mode = stat.S_IMODE(file.stat().st_mode)
        assert mode == (0o700 if file.is_dir() else 0o600), f"{file.name} has the mode {mode:o}"


@when(parsers.re(r'the user types "(?P<message>[^"]+)" in "orion chat" in a terminal, waits '
                 r'for "(?P<reply>[^"]+)" and leaves'))
def chat_in_a_terminal(orion_world: World, message: str, reply: str) -> None:
    """``orion chat`` against the scenario's endpoint (``Given a model endpoint ...``) in a
    pseudo-terminal of its own, so its prompt is the line editor with its history: the message
    is typed, the reply waited for, then Ctrl-D ends the chat."""
    from fault_steps import _endpoint

    server = _endpoint(orion_world)
    args = ["chat", "--base-url", server.base_url, "--model", "test-model"]
    console = _console(orion_world)
    console["mark"] = len(console["runs"])
    orion_world.mark()
    terminal = InTerminal([sys.executable, "-m", "orion", *args], orion_world.workspace,
                          {**_env(orion_world), "OPENAI_API_KEY": "unused"})
    try:
        terminal.wait_for("you>", COMMAND_TIMEOUT_S)
        terminal.type(message + "\r")
        terminal.wait_for(reply, COMMAND_TIMEOUT_S)
        terminal.type("\x04")
        code = terminal.wait(COMMAND_TIMEOUT_S)
    finally:
        terminal.close()
    console["runs"].append({"args": args, "code": code, "stdout": terminal.text(),
                            "stderr": ""})
