"""Real faults for tests and scenarios: a small or read-only disk (a tmpfs mount), a disk that
fills up, a file-size limit, a process without the right to override directory modes, two
processes writing one file at once, a directory swapped for a symbolic link as fast as another
process can, a writer killed in the middle of a write, a live writer, a damaged or locked
database, and a plugin that sets a fault up at the moment a write is finalized.

Nothing here simulates: each fault is the operating system's own. Mounting needs root (as CI
has); the callers skip, saying so, where it is refused.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

from orion import hookimpl

__all__ = ["DAMAGE", "KILLED_WRITER", "LIVE_WRITER", "LOCK_HOLDER", "RACER", "SWAPPER",
           "WITHOUT_OVERRIDE", "AtFinalization", "MountRefused", "fill", "mount_tmpfs",
           "plans_into", "remount", "snapshot", "unmount"]


# -- disks ---------------------------------------------------------------------------------------


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry under ``root``: files with their bytes, links with their target (to tell
    that nothing out there was written, removed or replaced)."""
    found: dict[str, tuple[str, bytes | str]] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            found[key] = ("link", os.readlink(path))
        elif path.is_file():
            found[key] = ("file", path.read_bytes())
        else:
            found[key] = ("dir", "")
    return found


class MountRefused(RuntimeError):
    """This machine does not let the process mount a tmpfs (no root, or no mount(8))."""


def mount_tmpfs(path: Path, size_kib: int, *, read_only: bool = False) -> Path:
    """A real tmpfs of ``size_kib`` KiB on ``path`` (created if missing); read-only on
    request. Raises :class:`MountRefused` where mounting is not permitted."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size_kib}k" + (",ro" if read_only else "")
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                              capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise MountRefused("needs mount(8) to put a directory on a small tmpfs") from exc
    if done.returncode != 0:
        raise MountRefused(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    return path


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path: Path, mode: str) -> None:
    """Turn a mounted tmpfs read-only (``ro``) or writable again (``rw``) under what runs."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True)


def fill(directory: Path) -> None:
    """Take every free byte of ``directory``'s file system (a file ``filler`` holds them)."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)


#: Root may write where a directory's mode says no: a process started under this prefix runs
#: without the capabilities that let it (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), so a root
#: process is refused what the mode refuses, as any user is. It stays uid 0, so it still reads
#: an interpreter installed in a directory private to root.
WITHOUT_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]


# -- other processes -------------------------------------------------------------------------------

#: ``python -c RACER WORKSPACE NAME COUNT [TARGET [RACERS]]``: once RACERS of them started,
#: appends ``NAME i`` to TARGET (``shared.md``) COUNT times, each a plan checked, then executed
#: a moment later, as a write session does (a refused write is checked and tried again).
#: Prints how many times it was refused.
RACER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from orion.write_session.operations import TargetChanged, execute
    from orion.write_session.plan import WritePlan, check_plan

    ws, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    target = sys.argv[4] if len(sys.argv) > 4 else "shared.md"
    racers = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    # A start line: on a busy machine one process could finish before the other starts.
    gate = ws.parent / (ws.name + ".race")
    gate.mkdir(exist_ok=True)
    (gate / name).touch()
    for _ in range(6000):
        if len(list(gate.iterdir())) >= racers:
            break
        time.sleep(0.01)
    refused = 0
    for i in range(count):
        for attempt in range(500):  # bounded: a refused write is checked and tried again
            plan = WritePlan(intent="race", target_file=target, operation="append")
            checked = check_plan(plan, workspace=ws, state_dir=ws / ".orion")
            time.sleep(0.001)  # the model streams between the check and the write
            try:
                execute(checked, f"{name} {i}\\n".encode(), state_dir=ws / ".orion",
                        session_id=f"{name}-{i}-{attempt}")
                break
            except TargetChanged:
                refused += 1
        else:
            raise SystemExit(f"{name} {i} never written")
    print(refused)
""")

#: ``python -c SWAPPER SUB ALT STOP``: exchanges the directory SUB with ALT (a symbolic link)
#: and back, atomically (renameat2 RENAME_EXCHANGE: SUB is never missing), as fast as it can,
#: until the file STOP exists. Prints ``ready`` (or ``unsupported``) first, the swaps last.
SWAPPER = textwrap.dedent("""
    import ctypes, os, sys
    sub, alt, stop = sys.argv[1:4]
    libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    def exchange():
        return libc.renameat2(AT_FDCWD, sub.encode(), AT_FDCWD, alt.encode(), RENAME_EXCHANGE)
    swaps = 0
    print("ready" if exchange() == 0 and exchange() == 0 else "unsupported", flush=True)
    for _ in range(5_000_000):  # bounded; the caller stops it much sooner
        if swaps % 64 == 0 and os.path.exists(stop):
            break
        if exchange() == 0:
            swaps += 1
    if os.path.islink(sub):
        exchange()
    print(swaps)
""")

#: ``python -c KILLED_WRITER DIRECTORY [NAME]``: starts writing a temp file for NAME
#: (``big.md``) in DIRECTORY, as an atomic write does, prints ``ready`` and waits to be killed.
KILLED_WRITER = textwrap.dedent("""
    import os, sys, time
    from orion.workspace.confined import temp_name
    name = sys.argv[2] if len(sys.argv) > 2 else "big.md"
    fd = os.open(os.path.join(sys.argv[1], temp_name(name)), os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"x" * 100000)
    print("ready", flush=True)
    time.sleep(600)
""")

#: ``python -c LIVE_WRITER DIRECTORY NAME AGE_S``: a process in the middle of a long write: its
#: temp file for NAME, last written AGE_S seconds ago; prints the file's name and waits.
LIVE_WRITER = textwrap.dedent("""
    import os, sys, time
    from orion.workspace.confined import temp_name
    directory, name, age = sys.argv[1], sys.argv[2], float(sys.argv[3])
    temp = os.path.join(directory, temp_name(name))
    with open(temp, "wb") as f:
        f.write(b"in progress")
    then = time.time() - age
    os.utime(temp, (then, then))
    print(os.path.basename(temp), flush=True)
    time.sleep(600)
""")

#: ``python -c LOCK_HOLDER DATABASE``: holds an exclusive transaction on an SQLite database,
#: prints ``locked`` and waits to be killed.
LOCK_HOLDER = textwrap.dedent("""
    import sqlite3, sys, time
    c = sqlite3.connect(sys.argv[1], isolation_level=None)
    c.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    time.sleep(600)
""")


def plans_into(workspace: Path, directory: str, count: int) -> tuple[int, int]:
    """Check and execute ``count`` plans that create files in ``directory`` of the workspace,
    as write sessions do (while :data:`SWAPPER` swaps it): how many were written, and how many
    the swap made fail."""
    from orion.errors import OrionError
    from orion.write_session.operations import execute
    from orion.write_session.plan import Operation, WritePlan, check_plan

    written = refused = 0
    for i in range(count):
        plan = WritePlan(intent="race", target_file=f"{directory}/f{i}.md",
                         operation=Operation.CREATE)
        try:
            checked = check_plan(plan, workspace=workspace, state_dir=workspace / ".orion")
            execute(checked, b"data\n", state_dir=workspace / ".orion", session_id=f"s{i}")
            written += 1
        except (OrionError, OSError):
            refused += 1
    return written, refused


# -- damaged databases ---------------------------------------------------------------------------


def _garbage(db: Path) -> None:
    db.write_bytes(bytes(range(256)) * 20)


def _truncated(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE filler (x TEXT)")
        conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 500,)] * 200)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])


def _directory(db: Path) -> None:
    db.mkdir()
    (db / "something").write_text("not a database")


def _wrong_schema(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE plans (name TEXT)")
        conn.execute("CREATE TABLE trace_events (what TEXT)")


#: Ways a database file gets damaged, by name: bytes that are no database, a file cut in the
#: middle, a directory in its place, tables of another schema.
DAMAGE: dict[str, Callable[[Path], None]] = {
    "garbage": _garbage, "truncated": _truncated, "directory": _directory,
    "wrong schema": _wrong_schema}


# -- the moment of the write ---------------------------------------------------------------------


class AtFinalization:
    """A plugin whose ``normalize_content`` (run when a session is finalized, just before the
    write) does ``action``: the moment a real fault is set up under a running write."""

    def __init__(self, action: Callable[[], object]):
        self.action = action

    @hookimpl
    def normalize_content(self, path: str, content: bytes) -> None:
        self.action()
        return None
