"""Putting text set aside back (``WritePlanTool_keep``) rewrites the journal's content file
atomically (FS-14): a process killed with SIGKILL at any moment of the rewrite leaves the old
content or the new one, never a cut or an empty file.

A real child process takes a journal of 11 MB over and puts a part back into it. Every system
call that changes files (``open``, ``write``, ``ftruncate``, ``fsync``, ``rename``, ...) says
its name on stdout before it runs; the child stops at the n-th one, and the test kills it
there with SIGKILL, for every n until the rewrite ends. Then ``content.txt`` is read as
recovery reads it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orion.write_session.journal import Journal

HEAD = b"".join(b"head line %d\n" % n for n in range(1, 1001))
TAIL = (b"x" * 79 + b"\n") * 140_000  # 11 MB after the place the part goes back to
PART = b"the part set aside\n"

CHILD = textwrap.dedent("""
    import os
    import sys
    from orion.write_session.journal import Journal

    directory, at, stop_at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    journal = Journal.open(directory)
    calls = 0

    def stopping(name, call):
        def run(*args, **kwargs):
            global calls
            calls += 1
            if calls == stop_at:
                print(f"stopped at {name}", flush=True)
                sys.stdin.readline()  # until the test kills the process
            return call(*args, **kwargs)
        return run

    for name in ("open", "write", "ftruncate", "truncate", "fsync", "replace", "rename",
                 "unlink", "close"):
        setattr(os, name, stopping(name, getattr(os, name)))
    journal.insert(at, b"the part set aside\\n")
    print("rewritten", flush=True)
""")


@pytest.mark.slow
def test_a_keep_killed_at_any_moment_leaves_the_content_whole(tmp_path: Path):
    stops = []
    for stop_at in range(1, 100):
        directory = tmp_path / f"session-{stop_at}"
        with Journal.create(directory, {"target_file": "big.txt"}) as journal:
            journal.append(HEAD.decode())
            journal.append(TAIL.decode())
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(directory), str(len(HEAD)),
                                  str(stop_at)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
        try:
            said = child.stdout.readline().strip()
            child.send_signal(signal.SIGKILL)
        finally:
            child.wait()
        content = (directory / "content.txt").read_bytes()
        assert content in (HEAD + TAIL, HEAD + PART + TAIL), \
            f"killed at {said} ({stop_at}): content.txt holds {len(content)} bytes"
        with Journal.open(directory) as again:  # and recovery takes it over, whole
            assert again.content() == content
        # ... and the rewrite the killed process never renamed is gone with it
        assert not [p.name for p in directory.iterdir() if ".orion-tmp-" in p.name], said
        if said == "rewritten":
            assert content == HEAD + PART + TAIL
            break
        stops.append(said)
    assert len(stops) >= 3, stops  # it was killed in the middle of the rewrite, several times
