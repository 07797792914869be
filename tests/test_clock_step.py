"""A wall clock that steps (an NTP correction, a virtual machine resumed with a stale clock)
never deletes a session: its age is measured by the time since boot too, and a session past its
TTL goes to the trash, from which only time measured since boot deletes it.

With an injected clock (the runtime's VirtualClock, whose wall time and time since boot can be
moved apart), and with a real clock step: libfaketime (Debian's ``faketime``) runs a real
``orion run`` with the wall clock two hours ahead of a session a real ``orion run`` left behind
seconds earlier (killed mid-stream). ``FAKETIME_DONT_FAKE_MONOTONIC=1`` steps the wall clock
alone, as NTP does; without it libfaketime moves the time since boot too, as a virtual machine
restored with its clocks ahead would: then the session goes to the trash, whole.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from orion.clock import BootTime, VirtualClock, kernel_boot_time
from orion.models.script import load_script
from orion.models.scripted import ScriptedModel
from orion.hooks.manager import make_plugin_manager
from orion.runtime.report import Reporter
from orion.runtime.runtime import Runtime
from orion.write_session.manager import manager_for
from orion.write_session.orphans import scan

ORION = str(Path(sys.executable).parent / "orion")
HOUR = 3_600_000.0


class Notes(Reporter):
    def __init__(self) -> None:
        self.notices: list[str] = []

    def notice(self, text: str) -> None:
        self.notices.append(text)


def _env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORION_", "OPENAI_"))}
    return {**env, **more}


def kill_mid_write(tmp_path: Path, ws: Path, lines_on_disk: int = 150) -> Path:
    """A real ``orion run`` writing slowly, SIGKILLed once its journal holds
    ``lines_on_disk`` lines: the orphan a crash leaves."""
    script = tmp_path / "slow.yaml"
    script.write_text(yaml.safe_dump({"conversation": [
        {"user": "Write the guide."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "guide", "target_file": "guide.md", "operation": "create"}}]}},
        {"model": {"chunks": [f"line {n}\n" for n in range(1, 5001)] + ["DONE\n"],
                   "chunk_delay_ms": 2}},
    ]}), encoding="utf-8")
    proc = subprocess.Popen([ORION, "run", str(script), "--workspace", str(ws)], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sessions = ws / ".orion" / "write_sessions"
    end = time.monotonic() + 120
    try:
        while True:  # bounded: a broken run fails here, it measures nothing
            found = [p / "content.txt" for p in sessions.glob("*") if p.is_dir()] \
                if sessions.exists() else []
            if found and found[0].exists() and \
                    found[0].read_bytes().count(b"\n") >= lines_on_disk:
                break
            assert proc.poll() is None and time.monotonic() < end, "the write never got there"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return found[0].parent


def hello(tmp_path: Path) -> Path:
    script = tmp_path / "hello.yaml"
    script.write_text(textwrap.dedent("""\
        conversation:
          - user: Hello.
          - model: {text: Hi.}
        """), encoding="utf-8")
    return script


def runtime_with(ws: Path, clock: VirtualClock, notes: Notes) -> Runtime:
    script = load_script("inline.yaml", text="conversation:\n  - user: hi\n")
    return Runtime(model=ScriptedModel(script.cursor()), plugins=make_plugin_manager(
        entrypoints=False, env={}), workspace=ws, clock=clock, reporter=notes)


# -- an injected clock --------------------------------------------------------------------------


def test_a_wall_clock_two_hours_ahead_offers_a_session_killed_seconds_ago(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    journal = kill_mid_write(tmp_path, ws)
    lines = (journal / "content.txt").read_bytes().count(b"\n")
    notes = Notes()
    stepped = VirtualClock(start_ms=time.time() * 1000 + 2 * HOUR, boot=kernel_boot_time())
    actions = manager_for(runtime_with(ws, stepped, notes)).at_start
    assert [a.action for a in actions] == ["offered"], notes.notices
    assert f"for guide.md ({lines} lines, saved " in notes.notices[-1], notes.notices
    assert " h ago" not in notes.notices[-1] and " min ago" not in notes.notices[-1]
    assert (journal / "content.txt").read_bytes().count(b"\n") == lines
    (orphan,) = scan(ws / ".orion")
    assert orphan.age_ms is not None and orphan.age_ms < HOUR  # orion sessions list agrees


def test_past_the_ttl_by_both_clocks_the_session_goes_to_the_trash_whole(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    journal = kill_mid_write(tmp_path, ws)
    content = (journal / "content.txt").read_bytes()
    boot = kernel_boot_time()
    assert boot is not None
    notes = Notes()
    later = VirtualClock(start_ms=time.time() * 1000 + 2 * HOUR,
                         boot=BootTime(boot.boot, boot.ms + 2 * HOUR))
    actions = manager_for(runtime_with(ws, later, notes)).at_start
    assert [a.action for a in actions] == ["trashed"], notes.notices
    trashed = ws / ".orion" / "trash" / journal.name
    assert (trashed / "content.txt").read_bytes() == content
    assert not journal.exists()
    assert f"to {trashed}: older than 1 h. It is deleted from there after another 1 h; " \
           f"`mv {trashed} {journal.parent}/` brings it back" in notes.notices[-1]


def test_only_time_since_boot_in_the_trash_deletes_a_session(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    journal = kill_mid_write(tmp_path, ws)
    boot = kernel_boot_time()
    assert boot is not None
    start = time.time() * 1000

    def start_at(wall_h: float, boot_id: str, boot_h: float) -> list[str]:
        notes = Notes()
        clock = VirtualClock(start_ms=start + wall_h * HOUR,
                             boot=BootTime(boot_id, boot.ms + boot_h * HOUR))
        return [a.action for a in manager_for(runtime_with(ws, clock, notes)).at_start]

    assert start_at(2, boot.boot, 2) == ["trashed"]
    trashed = ws / ".orion" / "trash" / journal.name
    # The wall clock a day ahead, half an hour of uptime: still there.
    assert start_at(26, boot.boot, 2.5) == [] and trashed.exists()
    # A reboot (another boot id), the wall clock a week ahead: the half hour measured so far
    # is carried over, the week is not.
    assert start_at(170, "another boot", 0.0) == [] and trashed.exists()
    # Another 20 minutes of that boot: 50 minutes in all, under the hour.
    assert start_at(170, "another boot", 1 / 3) == [] and trashed.exists()
    # And 11 more: an hour and a minute, measured since boot alone.
    assert start_at(170, "another boot", 31 / 60) == ["deleted"]
    assert not trashed.exists()


def test_an_expired_session_that_holds_nothing_is_simply_removed(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    journal = kill_mid_write(tmp_path, ws)
    (journal / "content.txt").write_bytes(b"")
    boot = kernel_boot_time()
    notes = Notes()
    later = VirtualClock(start_ms=time.time() * 1000 + 2 * HOUR,
                         boot=BootTime(boot.boot, boot.ms + 2 * HOUR))
    actions = manager_for(runtime_with(ws, later, notes)).at_start
    assert [a.action for a in actions] == ["expired"]
    assert "and it held nothing" in notes.notices[-1]
    assert not (ws / ".orion" / "trash").exists()


# -- a real clock step: libfaketime -------------------------------------------------------------

needs_faketime = pytest.mark.skipif(shutil.which("faketime") is None,
                                    reason="libfaketime is not installed (apt-get install "
                                           "faketime)")


def faketime_run(tmp_path: Path, ws: Path, *, wall_only: bool) -> subprocess.CompletedProcess:
    env = _env(FAKETIME_DONT_FAKE_MONOTONIC="1") if wall_only else _env()
    done = subprocess.run(["faketime", "-f", "+2h", ORION, "run", str(hello(tmp_path)),
                           "--workspace", str(ws)], env=env, capture_output=True, text=True,
                          timeout=120)
    probe = subprocess.run(["faketime", "-f", "+2h", sys.executable, "-c",
                            "import time; print(time.time())"], env=env, capture_output=True,
                           text=True, timeout=60)
    if abs(float(probe.stdout) - time.time() - 7200) > 600:
        pytest.skip("libfaketime does not move this Python's clock here")
    return done


@needs_faketime
def test_an_ntp_step_of_two_hours_keeps_a_session_killed_seconds_before(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    journal = kill_mid_write(tmp_path, ws)
    content = (journal / "content.txt").read_bytes()
    done = faketime_run(tmp_path, ws, wall_only=True)
    assert done.returncode == 0, done.stderr
    assert f"orphaned write session {journal.name[:8]} for guide.md" in done.stderr, done.stderr
    assert "moved orphaned" not in done.stderr and "removed orphaned" not in done.stderr
    assert (journal / "content.txt").read_bytes() == content


@needs_faketime
def test_a_resumed_machine_with_every_clock_ahead_moves_the_session_to_the_trash(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    journal = kill_mid_write(tmp_path, ws)
    content = (journal / "content.txt").read_bytes()
    done = faketime_run(tmp_path, ws, wall_only=False)
    assert done.returncode == 0, done.stderr
    trashed = ws / ".orion" / "trash" / journal.name
    assert f"moved orphaned write session {journal.name[:8]} for guide.md" in done.stderr
    assert (trashed / "content.txt").read_bytes() == content
