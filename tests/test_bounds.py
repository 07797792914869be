"""Every loop and every third-party call is bounded (FS-20..FS-24, docs/design/faults.md):
the unfinished-line question, a ``marker_regex``, the diff of a write, the chat history and
an absurd ``--older-than``. A hang is bounded by the subprocess's timeout, so a test that would
hang fails instead; nothing here asserts how fast anything is."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml
from sse_server import SSEServer, begin_write, stream, text_stream

from orion.clock import VirtualClock
from orion.hooks.manager import make_plugin_manager
from orion.models.openai_compat import OpenAICompatibleModel
from orion.runtime.chat_history import HistoryFile
from orion.runtime.runtime import Runtime
from tmux_terminal import chat_in_terminal, flowed, needs_tmux, started
from write_harness import Capture

UNFINISHED = "Your message stopped in the middle of line"


def _clean_env(**extra: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    return {**clean, **extra}


def _orion(*args: str, cwd: Path, timeout: float = 120,
           stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orion", *args], cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=timeout, env=_clean_env())


# -- FS-20: the unfinished-line question counts like an idle prompt ----------------------------


def test_a_model_that_keeps_stopping_mid_line_is_asked_a_bounded_number_of_times(tmp_path):
    # Every reply stops in the middle of a line again, never with DONE: each answer takes the
    # place of the line asked about, and is asked about in turn.
    replies = [stream(text_stream(f"version {n}")) for n in range(40)]
    reporter = Capture()
    with SSEServer([begin_write("VERSION"), *replies]) as server:
        model = OpenAICompatibleModel(model="test-model", base_url=server.base_url,
                                      api_key="k", max_retries=0)
        runtime = Runtime(model=model, plugins=make_plugin_manager(entrypoints=False, env={}),
                          workspace=tmp_path, clock=VirtualClock(), reporter=reporter)
        asyncio.run(runtime.handle("Write VERSION."))
        runtime.close()
        bodies = [r.body for r in server.requests]
    questions = [b for b in bodies if UNFINISHED in b["messages"][-1]["content"]]
    # max_idle_prompts (3) questions, then the file is written as the idle rule says
    assert len(questions) == 3
    # the user's message, begin's result, 3 questions, the write's report
    assert len(bodies) == 6, len(bodies)
    assert "(incomplete: line 1 still unfinished after 3 prompts)" in \
        bodies[-1]["messages"][-1]["content"]
    assert (tmp_path / "VERSION").read_text() == "version 3"
    assert any("line 1 still unfinished after 3 prompts: writing VERSION as incomplete"
               in notice for notice in reporter.notices), reporter.notices


# -- FS-21: a marker_regex is searched with a time limit ----------------------------------------


def _insert_script(workspace: Path, marker: str, told: str = "") -> Path:
    script = workspace / "insert.yaml"
    script.write_text(textwrap.dedent(f"""\
        conversation:
          - user: Add a line after the marker.
          - model:
              tool_calls:
                - name: WritePlanTool_begin
                  arguments: {{intent: a line, target_file: data.txt, operation: insert,
                              location_marker: '{marker}', marker_regex: true,
                              position: after}}
          - expect: "{told or 'WritePlanTool_begin'}"
          - model: {{text: "I will pick another marker."}}
        """))
    return script


@pytest.mark.parametrize("marker,line,told", [
    # the pattern: Python's engine never returns; regex's sees it fails at once
    ("(a+)+$", "a" * 30 + "!", "occurs 0 times in data.txt"),
    # one that backtracks in regex's engine too: stopped by the time limit
    ("(a|aa)+$", "a" * 40 + "!", "took more than 1 s to search data.txt and was stopped at "
                                  "line 1"),
])
def test_a_pathological_marker_regex_is_refused_at_begin_never_a_hang(tmp_path, marker, line,
                                                                       told):
    (tmp_path / "data.txt").write_text(f"{line}\nlast line\n")
    script = _insert_script(tmp_path, marker, told)
    done = _orion("run", str(script), cwd=tmp_path, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout + done.stderr  # the model was told, as expected
    assert (tmp_path / "data.txt").read_text() == f"{line}\nlast line\n"


def test_sigterm_ends_a_run_that_searches_a_pathological_marker_regex(tmp_path):
    # Many lines that each backtrack: before the time limit, a search for ever that SIGTERM
    # could not interrupt (Python's engine holds the interpreter).
    (tmp_path / "data.txt").write_text(("a" * 40 + "!\n") * 200)
    script = _insert_script(tmp_path, "(a|aa)+$")
    proc = subprocess.Popen([sys.executable, "-m", "orion", "run", str(script)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_clean_env())
    try:
        for _ in range(600):  # Orion has started once its state directory is there
            if (tmp_path / ".orion").exists() or proc.poll() is not None:
                break
            time.sleep(0.05)
        time.sleep(0.3)  # into the search (it would never end without its time limit)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # ended: by Orion's handler (143), by the signal itself, or done and refused before it
    assert proc.returncode in (0, 1, 143, -signal.SIGTERM), (proc.returncode, err)
    assert "Traceback" not in err, err
    assert (tmp_path / "data.txt").read_text() == ("a" * 40 + "!\n") * 200


# -- FS-23: the chat history is a private regular file ----------------------------------------


def _history_file(path: Path) -> tuple[HistoryFile, list[str]]:
    told: list[str] = []
    return HistoryFile(path, told.append), told


def test_a_new_history_is_its_owner_s_only_whatever_the_umask(tmp_path):
    history, told = _history_file(tmp_path / ".orion" / "chat_history")
    old = os.umask(0)
    try:
        history.append(b"\n# now\n+hello\n")
    finally:
        os.umask(old)
    assert (tmp_path / ".orion" / "chat_history").stat().st_mode & 0o777 == 0o600
    assert history.read() == b"\n# now\n+hello\n" and told == []


def test_a_history_others_could_read_is_made_private_and_the_user_told(tmp_path):
    path = tmp_path / "chat_history"
    path.write_bytes(b"\n# then\n+my secret\n")
    path.chmod(0o644)
    history, told = _history_file(path)
    assert history.read() == b"\n# then\n+my secret\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert told == [f"the chat history {path} could be read by others (mode 0644); it is now "
                    "readable by you only (0600)"]


def test_only_the_last_entries_of_a_long_history_are_read_and_kept(tmp_path):
    from orion.runtime import chat_history

    path = tmp_path / "chat_history"
    entry = b"\n# then\n+" + b"x" * 1000 + b"\n"
    path.write_bytes(entry * (2 * chat_history.MAX_BYTES // len(entry) + 2))
    path.chmod(0o600)
    history, _ = _history_file(path)
    read = history.read()
    assert len(read) <= chat_history.MAX_BYTES and read.startswith(b"\n# then\n+x")
    history.append(b"\n# now\n+last\n")  # past twice the cap: cut back to the last entries
    assert path.stat().st_size <= chat_history.MAX_BYTES
    assert path.read_bytes().startswith(b"\n# then\n+x") and path.read_bytes().endswith(
        b"\n# now\n+last\n")
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("make,what", [
    (os.mkfifo, "a FIFO"),
    (os.mkdir, "a directory"),
    (lambda p: os.symlink("/etc/passwd", p), "a symbolic link"),
])
def test_a_history_that_is_no_regular_file_is_named_once_and_never_opened(tmp_path, make, what):
    path = tmp_path / "chat_history"
    make(path)
    history, told = _history_file(path)
    assert history.read() == b""  # a FIFO opened for reading would wait here for ever
    history.append(b"\n# now\n+hello\n")
    assert history.read() == b""
    assert told == [f"the chat history {path} is {what}, not a regular file: it is never "
                    "opened, and this chat goes on without history"]


@pytest.mark.slow
@needs_tmux
@pytest.mark.parametrize("make", [os.mkfifo, os.mkdir], ids=["fifo", "directory"])
def test_the_chat_answers_with_a_fifo_or_a_directory_at_its_history(tmp_path, make):
    (tmp_path / ".orion").mkdir(mode=0o700)
    make(tmp_path / ".orion" / "chat_history")
    with SSEServer([stream(text_stream("Hi there."))]) as server:
        with chat_in_terminal(server, tmp_path, f"history-{make.__name__}") as terminal:
            started(terminal)
            terminal.send("Hello")
            rows = terminal.wait_for_prompt("Hi there.")
            terminal.keys("C-d")
            assert terminal.exit_status() == "0"
    text = flowed(rows)
    assert "is never opened, and this chat goes on without history" in text, rows
    assert text.count("goes on without history") == 1, rows
    assert "Traceback" not in text, rows


# -- FS-22: the diff of a write is bounded and reads regular files only -----------------------


def _overwrite(workspace: Path, path: str, old: str, new: str) -> str:
    """``orion run`` overwrites ``path`` (holding ``old``) with ``new``; the write's id."""
    (workspace / path).write_text(old)
    script = workspace.parent / f"{workspace.name}-overwrite.yaml"
    script.write_text(yaml.safe_dump({"conversation": [
        {"user": f"Rewrite {path}."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "a rewrite", "target_file": path, "operation": "overwrite"}}]}},
        {"model": {"text": new + "DONE\n"}},
        {"model": {"text": "Done."}}]}))
    done = _orion("run", str(script), cwd=workspace, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [record] = (workspace / ".orion" / "undo").glob("*.json")
    return record.stem


def test_a_long_file_with_many_blank_lines_diffs_without_a_hang(tmp_path):
    # Every other line blank: the repeated line made the matcher quadratic (over 90 s).
    old = "".join("\n" if n % 2 else f"line {n}\n" for n in range(80_000))
    new = "".join("\n" if n % 2 else (f"line {n}\n" if n % 6 else f"changed {n}\n")
                  for n in range(80_000))
    write_id = _overwrite(tmp_path, "big.txt", old, new)
    done = _orion("sessions", "diff", write_id[:8], cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    changed = sum(1 for n in range(0, 80_000, 2) if n % 6 == 0)
    assert f"big.txt: +{changed} -{changed} lines" in done.stdout + done.stderr
    assert done.stdout.count("\n+changed ") == changed


def test_lines_too_alike_to_anchor_are_cut_and_the_figures_say_so():
    from orion.write_session.diff import changes

    rows = [f"row {n % 7}\n" for n in range(40_000)]  # no line occurs once: nothing anchors
    found = changes("".join(rows).encode(), "".join(rows[1:] + ["row 1\n"]).encode())
    assert "cut: " in found.summary() and "counted as removed and added whole" in \
        found.summary()
    assert found.added - found.removed == 0


def test_sessions_diff_of_a_target_that_became_a_fifo_is_refused_never_a_hang(tmp_path):
    write_id = _overwrite(tmp_path, "notes.txt", "old\n", "new\n")
    (tmp_path / "notes.txt").unlink()
    os.mkfifo(tmp_path / "notes.txt")
    done = _orion("sessions", "diff", write_id[:8], cwd=tmp_path, timeout=60)
    assert done.returncode != 0
    assert "notes.txt is not a regular file now; nothing was read from it (notes.txt is a " \
           "FIFO, not a regular file" in done.stdout + done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr


# -- FS-24: an absurd duration is a one-line error --------------------------------------------


@pytest.mark.parametrize("args", [
    ("traces", "prune", "--older-than", "99999999999999999999d"),
    ("traces", "prune", "--older-than", "9" * 400 + "ms"),
    ("traces", "prune", "--older-than", "9999-12-31T23:59:59-12:00"),
    ("traces", "--since", "99999999999999999999d"),
    ("sessions", "clean", "--older-than", "99999999999999999999d"),
])
def test_an_absurd_duration_is_one_line_that_names_it(tmp_path, args):
    seeded = _orion("run", "tools", cwd=tmp_path)  # an orion.db with events in it
    assert seeded.returncode == 0, seeded.stderr
    done = _orion(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    [line] = [row for row in done.stderr.splitlines() if row.startswith("Error:")]
    assert args[-2] in line and ("longer than Orion counts: at most 36525d (100 years)" in line
                                 or "outside the dates Orion counts" in line), line
