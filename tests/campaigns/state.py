"""A held-out fault campaign for Orion's own state: randomized trials of the faults a hostile
workspace, a careless clock and a long day of work bring, against the real ``orion`` command.

Run from the repository root with the project's virtualenv, before a release::

    .venv/bin/python tests/campaigns/state.py --trials 30 --seed 1
    .venv/bin/python tests/campaigns/state.py --only clock --trials 5 --seed 7
    .venv/bin/python tests/campaigns/state.py --only signals --replay 3098353120   # one trial

Every kind varies the moment, the size, the path and the mode of its fault at random, from a
seed of its own derived from ``--seed``; each trial runs real processes under a timeout (a
timeout is a hang). One line per kind: the trials, and how many lost content (told saved,
not saved; or less kept than arrived), escaped (wrote or read outside the workspace, or a
journal more readable than its target), ended in a traceback, hung, or missed another promise
of the docs (``wrong``: an exit status, a message, a mode). A failed trial is printed below
its line with the seed that replays it (``--only KIND --replay SEED``). Exit status 1 when any
count is not 0, 0 otherwise. tests/campaigns/README.md says how to read the line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from orion.workspace.confined import TEMP_MARK
from orion.config.sourcefile import CONFIG_LIMIT
from orion.statechart.checks import MAX_STATES
from orion.testing.observer import Observer

# The harness of Orion's tests: real faults, the loopback endpoint, a pseudo-terminal.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from faults import snapshot  # noqa: E402
from pty_terminal import InTerminal  # noqa: E402
from sse_server import (Pause, SSEServer, begin_write, chunk, finish_chunk, stream,  # noqa: E402
                        text_chunk, text_stream)

ORION = str(Path(sys.executable).parent / "orion")
#: Bounds every process of a trial: a command that outlives it is a hang.
HANG_S = 90.0
NOBODY = 65534
USERS_GID = 100
NL = b"\n"
COUNTS = ("lost", "escaped", "tracebacks", "hangs", "wrong")


class Hang(Exception):
    """A process of the trial did not end within its bound."""


@dataclass
class Trial:
    """One trial's random source, directory and findings."""

    rng: random.Random
    root: Path
    what: str = ""
    found: list[tuple[str, str]] = field(default_factory=list)

    def finding(self, count: str, detail: str) -> None:
        self.found.append((count, detail))

    def check(self, ok: bool, count: str, detail: str) -> bool:
        if not ok:
            self.finding(count, detail)
        return ok

    def no_traceback(self, *outputs: str) -> None:
        said = "".join(outputs)
        self.check("Traceback" not in said, "tracebacks", said[-1500:])


def one_line(detail: str) -> str:
    """A finding on one line: a traceback's last lines, any other text's first 400 characters."""
    lines = [line.strip() for line in detail.strip().splitlines() if line.strip()]
    if any(line.startswith("Traceback") for line in lines):
        lines = lines[-3:]
    return " | ".join(lines)[:400]


@dataclass
class Tally:
    kind: str
    seed: int
    trials: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys((*COUNTS, "broken"), 0))
    failed: list[str] = field(default_factory=list)
    skipped: str = ""
    seconds: float = 0.0
    label: str = "seed"

    def add(self, trial_seed: int, trial: Trial) -> None:
        self.trials += 1
        for count in {count for count, _ in trial.found}:
            self.counts[count] += 1
        for count, detail in trial.found:
            self.failed.append(f"    {count}: replay with --only {self.kind} --replay "
                               f"{trial_seed} ({trial.what}): {one_line(detail)}")

    def line(self) -> str:
        if self.skipped:
            return f"{self.kind:<10} skipped: {self.skipped}"
        figures = "  ".join(f"{name} {self.counts[name]}" for name in COUNTS)
        if self.counts["broken"]:
            figures += f"  broken trials {self.counts['broken']}"
        return (f"{self.kind:<10} trials {self.trials:>4}  {figures}  {self.label} {self.seed}  "
                f"({self.seconds:.0f} s)")


# -- processes -------------------------------------------------------------------------------


def clean_env(**more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ORION_", "OPENAI_", "WRITE_SESSION_", "FAKETIME"))}
    return {**env, "COLUMNS": "400", "TERM": "xterm", **more}


def orion(*args: str, cwd: Path, env: dict[str, str] | None = None, prefix: list[str] = (),
          preexec: Callable[[], None] | None = None, stdin: str = "",
          timeout: float = HANG_S) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([*prefix, ORION, *args], cwd=cwd, capture_output=True, text=True,
                              errors="replace", input=stdin, env=env or clean_env(),
                              preexec_fn=preexec, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise Hang(f"orion {' '.join(args)} did not end within {timeout:.0f} s") from exc


def begin(target: str, operation: str = "create") -> dict:
    return {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
        "intent": "the file", "target_file": target, "operation": operation}}]}}


def script(path: Path, *entries: dict, user: str = "Write the file.") -> Path:
    path.write_text(yaml.safe_dump({"conversation": [{"user": user}, *entries]},
                                   sort_keys=False), encoding="utf-8")
    return path


def numbered(count: int, word: str = "line") -> list[str]:
    return [f"{word} {n}\n" for n in range(1, count + 1)]


def journals(ws: Path) -> list[Path]:
    sessions = ws / ".orion" / "write_sessions"
    return sorted(p for p in sessions.iterdir() if p.is_dir()) if sessions.is_dir() else []


def content_of(journal: Path) -> bytes:
    path = journal / "content.txt"
    return path.read_bytes() if path.is_file() and not path.is_symlink() else b""


def wait_for_journal(proc: subprocess.Popen, ws: Path, at_least: int,
                     deadline_s: float = HANG_S) -> Path:
    """The write session's journal once its content holds ``at_least`` bytes."""
    end = time.monotonic() + deadline_s
    while True:
        found = journals(ws)
        if found and len(content_of(found[0])) >= at_least:
            return found[0]
        if proc.poll() is not None:
            raise RuntimeError(f"the run ended before its journal held {at_least} bytes")
        if time.monotonic() > end:
            raise Hang(f"the journal never held {at_least} bytes")
        time.sleep(0.01)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def recover(trial: Trial, ws: Path, session: str, expected: bytes, target: Path) -> None:
    """``orion sessions recover --finalize`` writes what the journal holds into the target."""
    done = orion("sessions", "recover", session[:8], "--finalize", "--workspace", str(ws),
                 cwd=ws)
    trial.no_traceback(done.stdout, done.stderr)
    if trial.check(done.returncode == 0, "lost", f"recover --finalize failed: {done.stderr}"):
        written = target.read_bytes() if target.exists() else b""
        trial.check(written == expected, "lost",
                    f"recovered {len(written)} bytes, the journal held {len(expected)}")


_SAVED = re.compile(r"write session (\w+) for \S+ is still open \((\d+) lines? saved\)")


# -- 1. signals ------------------------------------------------------------------------------


def trial_signals(trial: Trial) -> None:
    rng = trial.rng
    if rng.random() < 0.7:
        signals_run(trial)
    else:
        signals_chat(trial)


def stop_in_terminal(terminal: InTerminal, how: str) -> tuple[int, int]:
    """Send the signal ``how`` names (or close the terminal: the kernel sends SIGHUP); the exit
    status and the signal's number."""
    if how == "hang-up":
        terminal.hang_up()
    else:
        terminal.proc.send_signal(signal.Signals[how])
    try:
        status = terminal.wait(deadline_s=HANG_S)
    except AssertionError as exc:
        raise Hang(str(exc)[:300]) from exc
    return status, signal.SIGHUP if how == "hang-up" else signal.Signals[how]


def signals_run(trial: Trial) -> None:
    """A signal to ``orion run`` in a terminal at a random moment of a slow write."""
    rng, root = trial.rng, trial.root
    ws = root / "ws"
    ws.mkdir()
    count = rng.randint(120, 700)
    lines = numbered(count)
    sizes = rng.choice([1, 1, 2, 3])  # lines per chunk
    chunks = ["".join(lines[i:i + sizes]) for i in range(0, count, sizes)]
    delay = rng.choice([2, 5, 10])
    path = script(root / "slow.yaml", begin("notes.md"),
                  {"model": {"chunks": chunks + ["DONE\n"], "chunk_delay_ms": delay}},
                  {"model": {"text": "Done."}})
    how = rng.choice(["SIGTERM", "SIGHUP", "SIGINT", "hang-up"])
    at = rng.randint(1, int(count * 0.8))
    trial.what = f"orion run, {count} lines by {sizes}, {delay} ms apart, {how} at {at}"
    terminal = InTerminal([ORION, "run", str(path), "--workspace", str(ws)], root,
                          clean_env(COLUMNS="160", OPENAI_API_KEY="k"))
    try:
        try:
            shown = terminal.wait_for_lines(at, deadline_s=HANG_S)
        except AssertionError as exc:  # the live line is drawn a few times a second
            if terminal.proc.poll() is None:
                raise Hang(str(exc)[:300]) from exc
            trial.what += " (the write ended first)"
            trial.check(terminal.proc.returncode == 0, "wrong",
                        f"exit {terminal.proc.returncode}: {terminal.text()[-600:]}")
            written = (ws / "notes.md").read_bytes() if (ws / "notes.md").exists() else b""
            trial.check(written == "".join(lines).encode(), "lost", "notes.md is not whole")
            return
        time.sleep(rng.uniform(0, 0.2))
        status, signum = stop_in_terminal(terminal, how)
    finally:
        terminal.close()
    output = terminal.text()
    trial.no_traceback(output)
    found = journals(ws)
    whole = "".join(lines).encode()
    if (ws / "notes.md").exists():  # the write ended before the signal: whole, or lost
        trial.check((ws / "notes.md").read_bytes() == whole, "lost", "a partial target")
        # After the command closed, only its last words are left: the signal's default
        # action may end them (a shell shows 128 + the number either way).
        trial.check(status in (128 + signum, -signum), "wrong", f"exit status {status}")
        return
    trial.check(status == 128 + signum, "wrong", f"exit status {status}, not {128 + signum}")
    if not trial.check(len(found) == 1, "lost", f"{len(found)} journals after the signal"):
        return
    kept = content_of(found[0])
    trial.check(whole.startswith(kept) and kept.endswith(b"\n") or not kept, "lost",
                f"the journal is not whole lines of the content: ...{kept[-80:]!r}")
    saved = kept.count(b"\n")
    trial.check(saved >= shown, "lost", f"{saved} lines saved, the live line showed {shown}")
    if how != "hang-up":  # a closed terminal shows nothing more
        said_saved(trial, output, saved)
    recover(trial, ws, found[0].name, kept, ws / "notes.md")


def said_saved(trial: Trial, output: str, saved: int) -> None:
    """The command's 'still open' line says how many lines the journal holds: exactly
    ``saved``."""
    claim = _SAVED.search(output)
    if trial.check(claim is not None, "wrong", f"no 'still open' line: {output[-600:]}"):
        trial.check(int(claim.group(2)) == saved, "lost",
                    f"said {claim.group(2)} lines saved, the journal holds {saved}")


def signals_chat(trial: Trial) -> None:
    """A signal to ``orion chat`` in a terminal while the model is still writing."""
    rng, root = trial.rng, trial.root
    count = rng.randint(1, 400)
    lines = numbered(count)
    pieces: list[str] = []
    text = "".join(lines)
    while text:  # random cuts, through lines too
        cut = rng.randint(1, 200)
        pieces.append(text[:cut])
        text = text[cut:]
    how = rng.choice(["SIGTERM", "SIGHUP", "hang-up"])
    trial.what = f"orion chat, {count} lines in {len(pieces)} chunks, {how}"
    reply = stream([text_chunk(p) for p in pieces] + [Pause(10), text_chunk("never shown\n"),
                                                       finish_chunk("stop")])
    with SSEServer([begin_write("notes.md"), reply, stream(text_stream("unused"))]) as server:
        terminal = InTerminal([ORION, "chat", "--base-url", server.base_url, "--model", "m",
                               "--workspace", str(root)], root,
                              clean_env(COLUMNS="160", OPENAI_API_KEY="k"))
        try:
            terminal.wait_for("you>", deadline_s=HANG_S)
            terminal.type("Write the notes.\r")
            end = time.monotonic() + HANG_S
            while len(server.requests) < 2 and time.monotonic() < end:
                terminal.read()
            terminal.read(rng.uniform(0.8, 2.0))
            time.sleep(rng.uniform(0, 1.0))
            status, signum = stop_in_terminal(terminal, how)
        finally:
            terminal.close()
    output = terminal.text()
    trial.no_traceback(output)
    trial.check(status == 128 + signum, "wrong", f"exit status {status}, not {128 + signum}")
    found = journals(root)
    if not trial.check(len(found) == 1, "lost", f"{len(found)} journals after the signal"):
        return
    kept = content_of(found[0])
    trial.check(kept == "".join(lines).encode(), "lost",
                f"the journal holds {kept.count(NL)} of {count} lines that arrived")
    if how != "hang-up":
        said_saved(trial, output, kept.count(NL))
    recover(trial, root, found[0].name, kept, root / "notes.md")


# -- 2. a careless clock ---------------------------------------------------------------------


def kill_mid_write(root: Path, ws: Path, lines_on_disk: int) -> Path:
    """A real ``orion run`` writing slowly, SIGKILLed once its journal holds that many lines."""
    path = script(root / "slow.yaml", begin("guide.md"),
                  {"model": {"chunks": numbered(5000) + ["DONE\n"], "chunk_delay_ms": 2}})
    proc = subprocess.Popen([ORION, "run", str(path), "--workspace", str(ws)], env=clean_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.monotonic() + HANG_S
        while True:
            found = journals(ws)
            if found and content_of(found[0]).count(b"\n") >= lines_on_disk:
                return found[0]
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError("the write never got there")
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def faketime_works() -> str:
    if shutil.which("faketime") is None:
        return "libfaketime is not installed (apt-get install faketime)"
    probe = subprocess.run(["faketime", "-f", "+2h", sys.executable, "-c",
                            "import time; print(time.time())"], capture_output=True, text=True,
                           timeout=60, env=clean_env())
    try:
        if abs(float(probe.stdout) - time.time() - 7200) < 600:
            return ""
    except ValueError:
        pass
    return "libfaketime does not move this Python's clock here"


def trial_clock(trial: Trial) -> None:
    """A session killed mid-write, then one or two starts with the clock stepped at random."""
    rng, root = trial.rng, trial.root
    ws = root / "ws"
    ws.mkdir()
    journal = kill_mid_write(root, ws, rng.choice([1, 50, 100, 150, 300]))
    content = content_of(journal)
    hello = script(root / "hello.yaml", {"model": {"text": "Hi."}}, user="Hello.")
    steps = []
    for _ in range(rng.randint(1, 3)):
        hours = rng.choice([-1, 1]) * 10 ** rng.uniform(-2, 3.5) if rng.random() < 0.3 \
            else 10 ** rng.uniform(-1, 3.5)
        wall_only = rng.random() < 0.6
        steps.append((hours, wall_only))
    trial.what = (f"{content.count(NL)} lines killed, then starts at "
                  + ", ".join(f"{h:+.2f} h ({'wall clock' if w else 'every clock'})"
                              for h, w in steps))
    trashed_once = False
    for hours, wall_only in steps:
        env = clean_env(**({"FAKETIME_DONT_FAKE_MONOTONIC": "1"} if wall_only else {}))
        command = rng.choice([["run", str(hello)], ["sessions", "list"]])
        done = orion(*command, "--workspace", str(ws), cwd=root, env=env,
                     prefix=["faketime", "-f", f"{hours:+.4f}h"])
        trial.no_traceback(done.stdout, done.stderr)
        trial.check(done.returncode == 0, "wrong", f"exit {done.returncode}: {done.stderr}")
        here = journal / "content.txt"
        trashed = ws / ".orion" / "trash" / journal.name / "content.txt"
        if trashed.exists():
            trial.check(trashed.read_bytes() == content, "lost", "the trashed copy differs")
            if not trashed_once:
                trial.check("moved orphaned" in done.stderr or command[0] == "sessions",
                            "wrong", f"moved to the trash without a message: {done.stderr}")
            trashed_once = True
        elif here.exists():
            trial.check(here.read_bytes() == content, "lost", "the journal's content changed")
        else:
            trial.finding("lost", f"the session is gone after a step of {hours:+.2f} h: "
                                  f"{done.stderr[-600:]}")
            return


# -- 3. the state directory linked out -------------------------------------------------------

#: Each part of the state directory a repository could ship as a link out of the workspace.
STATE_PARTS = [".orion", ".orion/backups", ".orion/undo", ".orion/orion.db",
               ".orion/write_sessions", ".orion/rescued", ".orion/orion.db-wal",
               ".orion/orion.db-shm", ".orion/plans.db", ".orion/plans.db-wal",
               ".orion/plans.db-shm", ".orion/trash", ".orion/orion.db.setup.lock",
               ".orion/plans.db.setup.lock"]
JOURNAL_PARTS = ["content.txt", "state.json", "metadata.json", "state.log", "degraded", "lock",
                 "."]
STATE_COMMANDS = [["run", "{script}"], ["run", "{script}", "--json"], ["sessions", "list"],
                  ["sessions", "history"], ["sessions", "clean", "--older-than", "0"],
                  ["plan", "show"], ["plan", "history"], ["traces"], ["traces", "stats"],
                  ["chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "none"]]
SECRET = b"a secret from outside the workspace 7f3a\n"


def leave_a_journal(root: Path, ws: Path, operation: str = "create",
                    target: str = "notes.md") -> Path:
    """``orion run`` of a write that never ends: its journal stays, as after a crash."""
    path = script(root / "open.yaml", begin(target, operation),
                  {"model": {"text": "first line\nsecond line\n", "finish_reason": "length"}},
                  {"model": {"text": "third line\n", "finish_reason": "length"}})
    orion("run", str(path), "--workspace", str(ws), cwd=root)
    found = journals(ws)
    if len(found) != 1:
        raise RuntimeError("the open write left no journal")
    return found[0]


def plant(rng: random.Random, link: Path, outside: Path, ws: Path, as_file: bool) -> str:
    """``link`` made a link out of the workspace: straight, relative, or through a link in
    the workspace that itself leads out."""
    target = outside / rng.choice(["planted", "state", "x.db"])
    if as_file:
        target.write_bytes(rng.choice([b"", SECRET]))
    else:
        target.mkdir()
        if rng.random() < 0.5:
            (target / "inside.txt").write_bytes(SECRET)
    how = rng.choice(["absolute", "relative", "through a workspace link"])
    link.parent.mkdir(parents=True, exist_ok=True)
    if how == "absolute":
        link.symlink_to(target)
    elif how == "relative":
        link.symlink_to(os.path.relpath(target, link.parent))
    else:
        hop = ws / f"hop{rng.randint(0, 99)}"
        hop.symlink_to(target)
        link.symlink_to(os.path.relpath(hop, link.parent))
    return f"{link.relative_to(ws)} -> {how} {target.name}"


def trial_links(trial: Trial) -> None:
    rng, root = trial.rng, trial.root
    ws, outside = root / "ws", root / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_bytes(SECRET)
    (ws / "notes.md").write_text("the user's old notes\n")
    path = script(root / "overwrite.yaml", begin("notes.md", "overwrite"),
                  {"model": {"text": "the new notes\nDONE\n"}}, {"model": {"text": "Done."}})
    if rng.random() < 0.6:
        part = rng.choice(STATE_PARTS)
        as_file = part.endswith((".db", "-wal", "-shm", ".lock"))
        if part != ".orion" and rng.random() < 0.5:  # a state directory that already exists
            orion("run", str(path), "--workspace", str(ws), cwd=root)
            (ws / "notes.md").write_text("the user's old notes\n")
            shutil.rmtree(ws / part) if (ws / part).is_dir() else (ws / part).unlink(
                missing_ok=True)
        planted = plant(rng, ws / part, outside, ws, as_file)
        command = [a.format(script=path) for a in rng.choice(STATE_COMMANDS)]
        expect = {2}
    else:
        part = rng.choice(JOURNAL_PARTS)
        journal = leave_a_journal(root, ws, rng.choice(["overwrite", "append"]))
        link = journal if part == "." else journal / part
        if link.is_dir() and not link.is_symlink():
            shutil.move(str(link), str(outside / "moved"))
            link.symlink_to(outside / "moved")
            planted = f"the journal directory -> {outside / 'moved'}"
        else:
            link.unlink(missing_ok=True)
            planted = plant(rng, link, outside, ws, as_file=True)
        command = rng.choice([["sessions", "recover", journal.name[:8], "--finalize"],
                              ["sessions", "recover", journal.name[:8]],
                              ["sessions", "list", "--json"], ["run", str(path)],
                              ["sessions", "discard", journal.name[:8]]])
        expect = {0, 1, 2}
    trial.what = f"{planted}; orion {' '.join(command[:3])}"
    before = snapshot(outside)
    done = orion(*command, "--workspace", str(ws), cwd=ws)
    trial.no_traceback(done.stdout, done.stderr)
    trial.check(done.returncode in expect, "wrong",
                f"exit {done.returncode}: {done.stderr[-800:]}")
    after = snapshot(outside)
    trial.check(after == before, "escaped",
                f"outside changed: {sorted(set(after.items()) ^ set(before.items()))[:4]}")
    for path in ws.rglob("*"):
        if path.is_file() and not path.is_symlink() and SECRET.strip() in path.read_bytes():
            trial.finding("escaped", f"the outside secret was read into {path}")
    said = done.stdout + done.stderr
    if SECRET.strip().decode() in said:
        trial.finding("escaped", "the outside secret was printed")
    if expect == {2}:
        trial.check("symbolic link" in said, "wrong", f"no message names the link: {said}")


# -- 4. file identity ------------------------------------------------------------------------

MODES = [0o600, 0o640, 0o644, 0o400, 0o200, 0o664, 0o755, 0o444, 0o2640, 0o4750, 0o660]


@dataclass
class Identity:
    """The file of an identity trial as it was before the write."""

    target: Path
    mode: int
    owner: tuple[int, int] | None
    others: list[Path]
    old: str


def identity_file(rng: random.Random, ws: Path) -> Identity:
    """A file of a random mode, owner (as root) and number of hard links, in a random place."""
    mode = rng.choice(MODES)
    owner = (rng.choice([0, NOBODY]), rng.choice([0, NOBODY, USERS_GID])) \
        if os.geteuid() == 0 else None
    target = ws / rng.choice(["notes.md", "sub/notes.md", "a b/ü.md"])
    target.parent.mkdir(parents=True, exist_ok=True)
    old = "".join(numbered(rng.randint(1, 300), "old"))
    target.write_text(old)
    others = [target.parent / f"other{i}.md" for i in range(1, rng.choice([1, 1, 2, 3]))]
    for other in others:
        os.link(target, other)
    if owner:
        os.chown(target, *owner)
    os.chmod(target, mode)
    return Identity(target, mode, owner, others, old)


def trial_identity(trial: Trial) -> None:
    rng, root = trial.rng, trial.root
    ws = root / "ws"
    ws.mkdir()
    file = identity_file(rng, ws)
    operation = rng.choice(["overwrite", "append"])
    crash = rng.random() < 0.3
    rel = str(file.target.relative_to(ws))
    trial.what = (f"{operation} of {rel} mode {oct(file.mode)} owner {file.owner} with "
                  f"{len(file.others) + 1} links" + (", the write left open" if crash else ""))
    if crash:
        journal_kept_private(trial, leave_a_journal(root, ws, operation, rel), file)
        return
    new_lines = numbered(rng.randint(1, 300), "new")
    path = script(root / "s.yaml", begin(rel, operation),
                  {"model": {"chunks": new_lines + ["DONE\n"]}}, {"model": {"text": "Done."}})
    watched = Observer(file.target.parent) if trial.rng.random() < 0.5 else None
    try:
        done = orion("run", str(path), "--workspace", str(ws), cwd=root)
    finally:
        seen = watched.result() if watched else None
    trial.no_traceback(done.stdout, done.stderr)
    if not trial.check(done.returncode == 0, "wrong", f"exit {done.returncode}: {done.stderr}"):
        return
    if seen:
        temp_files_kept_private(trial, seen, file.mode, file.owner)
    expected = (file.old if operation == "append" else "") + "".join(new_lines)
    trial.check(file.target.read_text() == expected, "lost", "the target is not the new text")
    identity_kept(trial, file, done.stderr)


def journal_kept_private(trial: Trial, journal: Path, file: Identity) -> None:
    """The journal of a write left open: its owner's only, never readable where the file is
    not; the file untouched."""
    for path in [journal, *journal.rglob("*")]:
        got = stat.S_IMODE(path.lstat().st_mode)
        trial.check(got & 0o077 == 0, "escaped",
                    f"{path.name} is {oct(got)}: readable beyond its owner")
        if path.is_file():
            trial.check(got & 0o400 == 0 or file.mode & 0o400, "escaped",
                        f"{path.name} is {oct(got)}, the target {oct(file.mode)}")
    trial.check(file.target.read_text() == file.old, "lost",
                "the target changed by an open write")
    trial.check(stat.S_IMODE(file.target.stat().st_mode) == file.mode, "wrong",
                "the target's mode changed")


def identity_kept(trial: Trial, file: Identity, said: str) -> None:
    """After the write: the mode, owner and group as they were; other names with the old text
    and the broken links reported; no temp file left."""
    info = file.target.stat()
    trial.check(stat.S_IMODE(info.st_mode) == file.mode, "wrong",
                f"mode {oct(stat.S_IMODE(info.st_mode))}, was {oct(file.mode)}")
    if file.owner:
        trial.check((info.st_uid, info.st_gid) == file.owner, "wrong",
                    f"owner {(info.st_uid, info.st_gid)}, was {file.owner}")
    for other in file.others:
        trial.check(other.read_text() == file.old, "lost", f"{other.name} lost the old text")
    if file.others:
        links = len(file.others) + 1
        trial.check(info.st_nlink == 1, "wrong", f"{info.st_nlink} links after the write")
        trial.check(f"had {links} hard links" in said, "wrong",
                    f"the report does not say the links were broken: {said}")
    leftovers = [p.name for p in file.target.parent.iterdir() if TEMP_MARK in p.name]
    trial.check(not leftovers, "wrong", f"temp files left: {leftovers}")


def temp_files_kept_private(trial: Trial, seen: dict, mode: int,
                            owner: tuple[int, int] | None) -> None:
    """What another process saw of the temp file that replaced the target: owner-only when
    created, the file's mode (and owner) by its first byte."""
    for status in seen["at_create"]:
        if status is not None:
            trial.check(status[0] & 0o077 == 0 or status[0] == mode, "escaped",
                        f"the temp file was created {oct(status[0])} for a {oct(mode)} file")
    for status in seen["first_byte"]:
        if status is not None:
            trial.check(status[0] == mode, "escaped",
                        f"the temp file held a byte at {oct(status[0])}, the file is {oct(mode)}")
            trial.check(owner is None or tuple(status[1:3]) == owner, "wrong",
                        f"the temp file held a byte as {status[1:3]}, the file is {owner}")


# -- 5. configuration names what is not a file -----------------------------------------------


BAD_FILES = ["FIFO", "/dev/zero", "/dev/urandom", "/dev/null", "directory", "huge",
             "link to a FIFO", "link to /dev/zero", "link loop"]


def bad_file(rng: random.Random, place: Path, kinds: list[str] = BAD_FILES) -> str:
    """``place`` made something that is not a readable configuration file; what it is."""
    kind = rng.choice(kinds)
    place.parent.mkdir(parents=True, exist_ok=True)
    if kind == "FIFO":
        os.mkfifo(place)
    elif kind.startswith("/dev/"):
        place.symlink_to(kind)
    elif kind == "directory":
        place.mkdir()
    elif kind == "huge":
        with open(place, "wb") as handle:  # sparse: costs no disk
            handle.write(b"statechart: x\n")
            handle.truncate(CONFIG_LIMIT + rng.randint(1, 1 << 30))
    elif kind == "link to a FIFO":
        os.mkfifo(place.with_name("fifo"))
        place.symlink_to("fifo")
    elif kind == "link to /dev/zero":
        place.with_name("zero").symlink_to("/dev/zero")
        place.symlink_to("zero")
    else:
        place.symlink_to(place.name)
    return kind


_LOCATED = re.compile(r"[^\s:]+:\d+:\d+: ")


def trial_config(trial: Trial) -> None:
    rng, root = trial.rng, trial.root
    ws = root / "ws"
    ws.mkdir()
    where = rng.choice(["orion.yaml", "statecharts entry", "script", "text_file",
                        "check argument"])
    bad = ws / "cfg" / rng.choice(["chart.yaml", "review.yaml", "x"])
    expect = {2}
    if where == "orion.yaml":
        kind = bad_file(rng, ws / "orion.yaml")
        command = rng.choice([["check"], ["check", "--json"], ["run", "hello"],
                              ["statechart", "list"]])
    elif where == "statecharts entry":
        kind = bad_file(rng, bad)
        spell = rng.choice([str(bad), str(bad.relative_to(ws))])
        (ws / "orion.yaml").write_text(rng.choice(["", "settings: {}\n"])
                                       + f"statecharts:\n  - {spell}\n")
        # `statechart list` lists what is configured without reading it; a chart it cannot
        # open (missing, a link loop) is left to the chart's own check, which check and run do.
        command = rng.choice([["check"], ["check", "--json"], ["run", "hello"]] +
                             ([["statechart", "list"]] if kind != "link loop" else []))
        if kind == "link loop" and command[0] == "check":
            expect = {1}  # the chart's own finding (as for a missing file), at the chart
    elif where == "script":
        kind = bad_file(rng, bad)
        command = ["run", str(bad)]
    elif where == "text_file":  # a reply's text has no size cap: a model may write gigabytes
        kind = bad_file(rng, bad, [k for k in BAD_FILES if k != "huge"])
        (ws / "s.yaml").write_text(f"conversation:\n  - user: hi\n"
                                   f"  - model: {{text_file: {bad}}}\n")
        command = ["run", str(ws / "s.yaml")]
    else:
        kind = bad_file(rng, bad)
        command = ["check", str(bad)]
        expect = {1, 2}  # a finding of the file, or a usage error (a directory, a link loop)
    trial.what = f"{where} is {kind}; orion {' '.join(command)}"
    done = orion(*command, "--workspace", str(ws), cwd=ws, timeout=60)
    trial.no_traceback(done.stdout, done.stderr)
    said = done.stdout + done.stderr
    trial.check(done.returncode in expect, "wrong",
                f"exit {done.returncode}, not {expect}: {said[-600:]}")
    if "--json" in command:
        try:
            entries = json.loads(done.stdout)
        except ValueError:
            trial.finding("wrong", f"--json printed no JSON: {done.stdout[-300:]}")
            return
        errors = [e for entry in entries for e in entry["errors"]]
        trial.check(any(e.get("line") and e.get("column") for e in errors), "wrong",
                    f"no located error: {done.stdout[-600:]}")
    elif where in ("script", "check argument"):  # an argument: its path is its location
        trial.check(str(bad) in said, "wrong", f"the script is not named: {said[-600:]}")
    else:
        trial.check(_LOCATED.search(said) is not None, "wrong",
                    f"no located error: {said[-600:]}")


# -- 6. overlays with completion loops -------------------------------------------------------


def loop_overlay(rng: random.Random) -> tuple[dict, str]:
    """An overlay of the write session with a loop of completion events of a random shape, or
    none, among a random number of other states."""
    shape = rng.choice(["self", "cycle", "guarded self", "guarded cycle", "none"])
    length = 1 if "self" in shape or shape == "none" else rng.randint(2, 12)
    pick = rng.random()  # mostly up to 3,000 states; sometimes past the 50,000-state limit
    filler = int(10 ** rng.uniform(0, 3.5)) if pick < 0.73 else \
        MAX_STATES + rng.randint(1, 20_000) if pick < 0.8 else rng.randint(0, 20)
    states: dict = {f"f{i}": {"tags": ["open"]} for i in range(filler)}
    insert = []
    if shape != "none":
        for i in range(length):
            states[f"spin{i}"] = {"tags": ["open", "receiving"], "initial": "f",
                                  "states": {"f": {"final": True}}}
        insert.append({"id": "to_spin", "trigger": "message_end", "before": "pause",
                       "source": "session_active.awaiting_content",
                       "dest": "session_active.spin0"})
        for i in range(length):
            move = {"trigger": f"done.state.session_active.spin{i}",
                    "source": f"session_active.spin{i}",
                    "dest": f"session_active.spin{(i + 1) % length}"}
            if shape.startswith("guarded"):
                move["unless"] = "model_asked"
            insert.append(move)
    chart = {"extends": "write_session", "states": {"session_active": {"states": states}}}
    if insert:
        chart["transitions"] = {"insert": insert}
    return chart, f"{shape} of {length}, {filler} other states"


def trial_overlays(trial: Trial) -> None:
    rng, root = trial.rng, trial.root
    chart, shape = loop_overlay(rng)
    trial.what = shape
    (root / "charts").mkdir()
    (root / "charts" / "spin.yaml").write_text(yaml.safe_dump(chart), encoding="utf-8")
    (root / "orion.yaml").write_text("statecharts: [charts/spin.yaml]\n", encoding="utf-8")
    path = script(root / "script.yaml", begin("notes.md"),
                  {"model": {"text": "first line\nsecond line\n"}})
    states = len(chart["states"]["session_active"]["states"])
    checked = orion("check", "--json", cwd=root, timeout=180)
    trial.no_traceback(checked.stdout, checked.stderr)
    trial.check(checked.returncode in (0, 1), "wrong", f"check exit {checked.returncode}")
    if states > MAX_STATES:
        trial.check(checked.returncode == 1 and "SC003" in checked.stdout, "wrong",
                    f"{states} states passed orion check")
    if shape.startswith(("self", "cycle")):
        trial.check(checked.returncode == 1, "wrong", "an unguarded loop passed orion check")
    ran = orion("run", str(path), cwd=root, timeout=180)
    trial.no_traceback(ran.stdout, ran.stderr)
    if checked.returncode == 1:
        trial.check(ran.returncode == 2, "wrong", f"run exit {ran.returncode} after check "
                                                  f"refused: {ran.stderr[-400:]}")
        trial.check(not journals(root), "wrong", "run started a write session of a bad chart")
        return
    trial.check(ran.returncode in (0, 1), "wrong", f"run exit {ran.returncode}")
    if (root / "notes.md").exists():
        trial.check((root / "notes.md").read_text() == "first line\nsecond line\n", "lost",
                    "the target is not the content")
    else:
        found = journals(root)
        kept = content_of(found[0]) if found else b""
        trial.check(kept == b"first line\nsecond line\n", "lost",
                    f"neither the target nor the journal holds the content: {kept!r}")


# -- 7. process limits -----------------------------------------------------------------------

_SAVED_IN = re.compile(r"(?:content is saved in|saved in write session) (\w{8})")


def big_reply(root: Path, megabytes: int) -> Path:
    path = root.parent / f"reply-{megabytes}.txt"
    if not path.exists():
        line = b"y" * 99 + b"\n"
        with open(path, "wb") as handle:
            for _ in range(megabytes * 1024 * 1024 // (len(line) * 1000)):
                handle.write(line * 1000)
            handle.write(b"DONE\n")
    return path


@dataclass
class LimitFault:
    """What a limits trial streams, and the limit it sets: from the start (``preexec``) or
    mid-stream (``midway``, given the process once the journal holds ``at`` bytes)."""

    what: str
    model: dict
    expected: bytes
    preexec: Callable[[], None] | None = None
    midway: Callable[[subprocess.Popen], str] | None = None
    at: int = 0


def _setrlimit(which: int, limit: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(which, (limit, limit))


def _prlimit(option: str, value: Callable[[int], int]) -> Callable[[subprocess.Popen], str]:
    def set_it(proc: subprocess.Popen) -> str:
        limit = value(proc.pid)
        subprocess.run(["prlimit", "--pid", str(proc.pid), f"--{option}={limit}:{limit}"],
                       capture_output=True, timeout=30)
        return f" (set to {limit:,})"
    return set_it


def _vm_size(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return int(next(r.split()[1] for r in status if r.startswith("VmSize:"))) * 1024


def limit_fault(rng: random.Random, root: Path) -> LimitFault:
    which = rng.choice(["NOFILE mid-stream", "NOFILE mid-stream", "NOFILE from the start",
                        "FSIZE from the start", "FSIZE from the start", "AS mid-stream"])
    if which == "AS mid-stream":
        reply = big_reply(root, 96)
        extra = rng.randint(30, 120) << 20
        at = rng.randint(1, 24) << 20
        return LimitFault(f"AS +{extra >> 20} MiB at {at >> 20} MiB",
                          {"text_file": str(reply), "chunk_size": 65536, "chunk_delay_ms": 1},
                          reply.read_bytes()[:-5],
                          midway=_prlimit("as", lambda pid: _vm_size(pid) + extra), at=at)
    if which.startswith("FSIZE"):
        megabytes = rng.choice([1, 2, 4])
        reply = big_reply(root, megabytes)
        limit = rng.randint(1024, megabytes << 20)
        return LimitFault(f"FSIZE {limit:,} bytes from the start, a {megabytes} MiB reply",
                          {"text_file": str(reply), "chunk_size": rng.choice([4096, 65536])},
                          reply.read_bytes()[:-5],
                          preexec=_setrlimit(resource.RLIMIT_FSIZE, limit))
    lines = numbered(rng.randint(200, 800))
    model = {"chunks": lines + ["DONE\n"], "chunk_delay_ms": rng.choice([2, 5])}
    expected = "".join(lines).encode()
    if which == "NOFILE from the start":
        limit = rng.randint(8, 40)
        return LimitFault(f"NOFILE {limit} from the start", model, expected,
                          preexec=_setrlimit(resource.RLIMIT_NOFILE, limit))
    limit, at = rng.randint(4, 16), rng.randint(1, len(expected) // 2)
    return LimitFault(f"NOFILE {limit} at {at:,} bytes", model, expected,
                      midway=_prlimit("nofile", lambda pid: limit), at=at)


def trial_limits(trial: Trial) -> None:
    ws = trial.root / "ws"
    ws.mkdir()
    fault = limit_fault(trial.rng, trial.root)
    trial.what = fault.what
    path = script(trial.root / "s.yaml", begin("out.md"), {"model": fault.model},
                  {"model": {"text": "Done."}})
    proc = subprocess.Popen([ORION, "run", str(path), "--workspace", str(ws)], env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", preexec_fn=fault.preexec)
    try:
        if fault.midway:
            try:
                wait_for_journal(proc, ws, fault.at)
                trial.what += fault.midway(proc)
            except (RuntimeError, OSError):
                trial.what += " (the write ended first)"
        try:
            out, err = proc.communicate(timeout=HANG_S * 2)
        except subprocess.TimeoutExpired as exc:
            raise Hang("orion run did not end") from exc
    finally:
        stop(proc)
    trial.no_traceback(out, err)
    trial.check("MemoryError" not in err, "tracebacks", err[-600:])
    judge_limits(trial, ws, fault, proc.returncode, err)


def judge_limits(trial: Trial, ws: Path, fault: LimitFault, status: int, err: str) -> None:
    """What the run said against what is on disk."""
    expected, target = fault.expected, ws / "out.md"
    if status == 0:
        trial.check(target.exists() and target.read_bytes() == expected, "lost",
                    f"exit 0 and out.md is not the content: {err[-400:]}")
        return
    trial.check(not target.exists() or target.read_bytes() == expected, "lost",
                "a partial out.md")
    claim = _SAVED_IN.search(err)
    found = journals(ws)
    kept = content_of(found[0]) if found else b""
    if claim:
        journal = next((j for j in found if j.name.startswith(claim.group(1))), None)
        kept = content_of(journal) if journal else b""
        # Out of memory the stream stops: what arrived is a prefix. Else all of it arrived.
        whole = kept == expected or ("out of memory" in err and expected.startswith(kept))
        trial.check(bool(kept) and whole, "lost", f"said saved in {claim.group(1)}, which "
                                                  f"holds {len(kept):,} of {len(expected):,} "
                                                  "bytes")
    elif kept:
        trial.check(expected.startswith(kept), "lost", "the journal is not the content")
        trial.check(any(w in err for w in ("recover", "rescued", "is lost when")), "wrong",
                    f"a failed write, and nothing says where its content is: {err[-600:]}")
    else:
        trial.check("nothing" in err.lower() or "not saved" in err or "lost" in err, "wrong",
                    f"failed, nothing kept, and not said: {err[-600:]}")


# -- 8. garbage in the stream ----------------------------------------------------------------

GARBAGE = [b"\xff", b"\xfe\xff", b"\xc3(", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x82",
           b"\xf8\x88\x80\x80\x80", b"\x80\x80\x80", b"\xf4\x90\x80\x80"]


def trial_garbage(trial: Trial) -> None:
    """Bytes that are not UTF-8 inside one event of a write's stream, at a random offset."""
    rng, root = trial.rng, trial.root
    count = rng.randint(1, 300)
    text = "".join(numbered(count, rng.choice(["line", "zeile", "ligne é", "行"])))
    pieces: list[str] = []
    rest = text
    while rest:
        cut = rng.randint(1, 120)
        pieces.append(rest[:cut])
        rest = rest[cut:]
    bad_at = rng.randint(0, len(pieces) - 1)
    events = [f"data: {json.dumps(text_chunk(p), ensure_ascii=rng.random() < 0.5)}\n\n"
              .encode() for p in pieces]
    garbage = rng.choice(GARBAGE) + bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 6)))
    event = events[bad_at]
    offset = rng.randint(0, len(event) - 2)
    events[bad_at] = event[:offset] + garbage + event[offset:]
    arrived = "".join(pieces[:bad_at])
    kept = arrived[:arrived.rfind("\n") + 1]
    rest = text[len(kept):]
    go_on = rng.random() < 0.6
    trial.what = (f"{count} lines in {len(pieces)} events, {garbage!r} at byte {offset} of "
                  f"event {bad_at}, " + ("the model continues" if go_on else "then nothing"))
    replies = [begin_write("notes.md"),
               stream([chunk({"role": "assistant", "content": ""}), *events[:bad_at + 1]],
                      done=False)]
    if go_on:
        replies += [stream([text_chunk(rest + "DONE\n"), finish_chunk("stop")]),
                    stream(text_stream("Written."))]
    with SSEServer(replies) as server:
        done = orion("chat", "--base-url", server.base_url, "--model", "m", "--workspace",
                     str(root), cwd=root, env=clean_env(OPENAI_API_KEY="k"),
                     stdin="Write the notes.\n")
    trial.no_traceback(done.stdout, done.stderr)
    said = done.stdout + done.stderr
    trial.check("not UTF-8" in said or "cut off" in said, "wrong",
                f"the cut-off is not named: {done.stderr[-600:]}")
    target = root / "notes.md"
    found = journals(root)
    if target.exists():
        written = target.read_text()
        trial.check(written == text if go_on else written in (kept, text), "lost",
                    f"notes.md holds {written.count(chr(10))} lines, not {count}")
        return
    if not trial.check(len(found) == 1, "lost", f"no notes.md and {len(found)} journals: "
                                                f"{done.stderr[-600:]}"):
        return
    journal = content_of(found[0]).decode("utf-8", "replace")
    trial.check(journal.startswith(kept) and text.startswith(journal), "lost",
                f"the journal holds {journal.count(chr(10))} lines, {kept.count(chr(10))} "
                "had arrived whole")
    if journal:  # a session that saved nothing has nothing to recover (and says so)
        recover(trial, root, found[0].name, journal.encode(), target)


# -- the campaign ----------------------------------------------------------------------------

KINDS: dict[str, Callable[[Trial], None]] = {
    "signals": trial_signals, "clock": trial_clock, "links": trial_links,
    "identity": trial_identity, "config": trial_config, "overlays": trial_overlays,
    "limits": trial_limits, "garbage": trial_garbage}
#: Trials of each kind per --trials: the cheap kinds run more.
WEIGHT = {"config": 2}


def preflight(kind: str) -> str:
    """Why ``kind`` cannot run here ('' when it can)."""
    if kind == "clock":
        return faketime_works()
    if kind == "limits" and shutil.which("prlimit") is None:
        return "prlimit (util-linux) is not installed"
    return ""


def run_trial(kind: str, trial_seed: int, scratch: Path) -> Trial:
    root = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=scratch))
    trial = Trial(random.Random(trial_seed), root)
    try:
        KINDS[kind](trial)
    except Hang as exc:
        trial.finding("hangs", str(exc))
    except Exception as exc:  # the trial could not set its fault up: said, never counted as
        trial.finding("broken", f"{type(exc).__name__}: {exc}")  # a pass
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return trial


def campaign(kind: str, seed: int, trials: int, scratch: Path, replay: int | None) -> Tally:
    kind_seed = zlib.crc32(f"{seed}:{kind}".encode())
    tally = Tally(kind, seed, label="replay" if replay is not None else "seed")
    if replay is not None:
        tally.seed = replay
    tally.skipped = preflight(kind)
    if tally.skipped:
        return tally
    started = time.monotonic()
    chooser = random.Random(kind_seed)
    seeds = [replay] if replay is not None else [chooser.getrandbits(32) for _ in range(trials)]
    for trial_seed in seeds:
        tally.add(trial_seed, run_trial(kind, trial_seed, scratch))
    tally.seconds = time.monotonic() - started
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=30, help="trials per kind (cheap kinds "
                        "run twice as many)")
    parser.add_argument("--seed", type=int, default=None, help="the campaign's seed (random "
                        "when not given; printed either way)")
    parser.add_argument("--only", choices=sorted(KINDS), action="append",
                        help="run only this kind (repeatable)")
    parser.add_argument("--replay", type=int, default=None,
                        help="run the one trial of this seed (with one --only)")
    args = parser.parse_args(argv)
    if args.replay is not None and len(args.only or []) != 1:
        parser.error("--replay needs exactly one --only KIND")
    seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(31)
    kinds = args.only or list(KINDS)
    print(f"Orion state campaign: seed {seed}, {args.trials} trials a kind "
          f"({', '.join(f'{k} x{w}' for k, w in WEIGHT.items())}), running as uid "
          f"{os.geteuid()}", flush=True)
    bad = 0
    # Stopped from outside, the campaign still removes its directories on the way out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory(prefix="orion-campaign-") as scratch:
        os.chmod(scratch, 0o755)
        for kind in kinds:
            tally = campaign(kind, seed, args.trials * WEIGHT.get(kind, 1), Path(scratch),
                             args.replay)
            print(tally.line(), flush=True)
            for failure in tally.failed:
                print(failure, flush=True)
            bad += sum(tally.counts.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
