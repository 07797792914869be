"""The command line's output where it goes: tables whole when piped, sized to a terminal on
one; errors on stderr; ``orion traces stats --workspace``; ``orion run NAME`` for a shipped
example; built-in statecharts by name. Real subprocesses, a real pseudo-terminal, real files.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest
from click.testing import CliRunner

from orion.cli import cli
from orion.errors import UnknownStatechart
from orion.models.examples import shipped_examples
from orion.plan.store import PlanStore
from orion.statechart import builtin_statechart, load_builtin

ROOT = Path(__file__).resolve().parents[1]
TITLE = "Migrate the billing service to the new ledger, " * 3  # 144 characters


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["TERM"] = "xterm"
    return env


@pytest.fixture
def planned(tmp_path) -> Path:
    """A workspace with one plan whose title is wider than 80 columns."""
    store = PlanStore.for_state_dir(tmp_path / ".orion")
    plan = store.create(TITLE.strip())
    store.set_content(plan.id, "# Ledger\n", None)
    store.close()
    return tmp_path


def test_a_piped_table_keeps_each_row_on_one_line(planned):
    proc = subprocess.run([sys.executable, "-m", "orion", "plan", "history", "--workspace",
                           str(planned)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=environment())
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if "READY" in line]
    assert len(rows) == 1 and TITLE.strip() in rows[0]
    assert len(rows[0]) > 150


def test_a_piped_message_is_not_broken_at_80_columns(planned):
    proc = subprocess.run([sys.executable, "-m", "orion", "plan", "show", "--workspace",
                           str(planned)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=environment())
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == f"{TITLE.strip()}  READY, revision 1"
    assert proc.stdout == "# Ledger\n"  # the draft as stored


def in_terminal(args: list[str], columns: int) -> str:
    """Run ``orion ARGS`` on a pseudo-terminal ``columns`` wide; what it printed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "orion", *args], stdin=slave, stdout=slave,
                            stderr=slave, env=environment(), close_fds=True)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError as exc:  # EIO: the child closed the terminal
            if exc.errno != errno.EIO:
                raise
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, out
    return out.decode()


def test_on_a_terminal_the_table_fits_its_width(planned):
    out = in_terminal(["plan", "history", "--workspace", str(planned)], columns=70)
    lines = [re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", line) for line in out.splitlines()]
    table = [line for line in lines if line.strip()]
    assert table and max(len(line) for line in table) <= 70
    assert TITLE.strip() not in "".join(table)  # wrapped inside its cell


def test_columns_set_by_the_user_is_kept_when_piped(planned):
    proc = subprocess.run([sys.executable, "-m", "orion", "plan", "history", "--workspace",
                           str(planned)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env={**environment(), "COLUMNS": "60"})
    assert proc.returncode == 0, proc.stderr
    assert max(len(line) for line in proc.stdout.splitlines()) <= 60


# -- orion traces stats --workspace ------------------------------------------------------------

def test_traces_stats_takes_the_workspace_after_the_subcommand(tmp_path):
    runner = CliRunner()
    ran = runner.invoke(cli, ["run", "hello", "--workspace", str(tmp_path)])
    assert ran.exit_code == 0, ran.output
    after = runner.invoke(cli, ["traces", "stats", "--workspace", str(tmp_path), "--json"])
    before = runner.invoke(cli, ["traces", "--workspace", str(tmp_path), "stats", "--json"])
    assert after.exit_code == before.exit_code == 0, after.output
    assert after.stdout == before.stdout
    assert '"total": ' in after.stdout and str(tmp_path / ".orion" / "orion.db") in after.stdout
    moved = tmp_path / "elsewhere"
    (tmp_path / ".orion").rename(moved)
    state = runner.invoke(cli, ["traces", "stats", "--state-dir", str(moved), "--json"])
    assert state.exit_code == 0 and str(moved / "orion.db") in state.stdout


# -- shipped examples and built-in statecharts by name -------------------------------------------

def test_orion_run_plays_a_shipped_example_by_name_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no examples/ here
    names = [p.stem for p in shipped_examples()]
    assert {"hello", "tools", "plan_mode", "demo"} <= set(names)
    for name in ("tools", "tools.yaml"):
        result = CliRunner().invoke(cli, ["run", name, "--workspace", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        assert "The release is on Friday." in result.stderr


def test_orion_run_of_an_unknown_name_lists_the_shipped_examples(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    for arg, what in (("nope", "is neither a file nor a shipped example"),
                      ("examples/tools.yaml", "is neither a file nor a shipped example"),
                      ("adir", "is a directory")):
        result = CliRunner().invoke(cli, ["run", arg])
        assert result.exit_code == 2
        assert what in result.stderr and "plan_mode" in result.stderr


def test_a_file_of_the_same_name_wins_over_a_shipped_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tools").write_text("conversation:\n  - user: hi\n  - model: {text: mine}\n")
    result = CliRunner().invoke(cli, ["run", "tools", "--workspace", str(tmp_path / "ws")])
    assert result.exit_code == 0, result.output
    assert "mine" in result.stderr and "Friday" not in result.stderr


def test_built_in_statecharts_load_by_name():
    definition = load_builtin("plan_mode", env={})
    assert definition.name == "plan_mode"
    assert builtin_statechart("write_session").name == "write_session.yaml"
    with pytest.raises(UnknownStatechart, match=r"no built-in statechart named 'nope' "
                                                r"\(built-in: plan_mode, write_session\)"):
        load_builtin("nope")
    assert issubclass(UnknownStatechart, LookupError)
