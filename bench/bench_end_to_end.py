"""End-to-end benchmark: the commands a user types, timed as whole processes, against floors
measured in the same run.

Run from the repository root with the project's virtualenv::

    .venv/bin/python bench/bench_end_to_end.py              # prints figures, always exits 0
    .venv/bin/python bench/bench_end_to_end.py --check      # exits 1 when a target is missed
    .venv/bin/python bench/bench_end_to_end.py --megabytes 50

Each line times real processes (``subprocess.run``, wall clock, best of ``--reps``), the way
a shell runs them:

1. ``orion --help`` against ``python -c "import click"`` (the least a click program costs).
   Target: at most 2x.
2. ``orion run`` of a scripted conversation that writes ``--megabytes`` of Markdown through a
   write session (begin, the content streamed in 4 KiB chunks, DONE, the model's last reply),
   against the floor: ``cp`` of the same bytes plus an interpreter start (``python -c pass``).
   Target: at most 10x. The script itself is part of what ``orion run`` reads.
3. ``orion run`` of a one-message script in a workspace holding 10,000 orphaned write sessions
   (copies of a real one left by a process that never finished it), against the same run in an
   empty workspace. Target: at most 0.2 s extra.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from bench_write_ingest import markdown, open_session  # noqa: E402

BIN = Path(sys.executable).parent
ORION = str(BIN / "orion")
MAX_HELP_RATIO = 2.0
MAX_RUN_RATIO = 10.0
MAX_ORPHAN_EXTRA_S = 0.2
ORPHANS = 10_000


def best_of(reps: int, argv: list[str], **kwargs) -> float:
    best = float("inf")
    for _ in range(reps):
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, **kwargs)
        elapsed = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv[:3])} failed ({proc.returncode}):\n"
                             f"{proc.stderr.decode(errors='replace')[-2000:]}")
        best = min(best, elapsed)
    return best


def write_script(path: Path, content: str) -> None:
    """A conversation that writes ``content`` to docs/big.md through a write session. Written
    as JSON, which is YAML too: the content needs no indentation."""
    conversation = [
        {"user": "Write the big document to docs/big.md."},
        {"model": {"text": "I'll write it in a write session.", "tool_calls": [
            {"name": "WritePlanTool_begin", "arguments": {
                "intent": "a big document", "target_file": "docs/big.md",
                "operation": "create"}}]}},
        {"model": {"chunk_size": 4096, "text": content + "DONE\n"}},
        {"model": {"text": "The document is written."}},
    ]
    path.write_text(json.dumps({"description": "a big write", "conversation": conversation}))


def leave_orphans(workspace: Path, count: int) -> None:
    """``count`` orphaned write sessions in ``workspace``: one real session opened and fed in
    a child process that exits without finishing it, then copied under new ids."""
    code = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(ROOT / 'bench')!r}); sys.path.insert(0, {str(ROOT)!r})\n"
        "from pathlib import Path\n"
        "from bench_write_ingest import open_session\n"
        "runtime, session = open_session(Path(sys.argv[1]), 'docs/orphan.md')\n"
        "session.feed('a line of a document that was never finished\\n' * 200)\n"
        "session.checkpoint()\n"
        "os._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(workspace)], check=True)
    sessions = workspace / ".orion" / "write_sessions"
    (original,) = [p for p in sessions.iterdir() if p.is_dir()]
    for i in range(count - 1):
        shutil.copytree(original, sessions / f"{original.name[:-8]}{i:08x}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=5.0)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)
    ok = True
    print(f"Orion end-to-end benchmark: python {sys.version.split()[0]}; best of {args.reps} "
          "runs of each process")

    click_s = best_of(args.reps, [sys.executable, "-c", "import click"])
    help_s = best_of(args.reps, [ORION, "--help"])
    ratio = help_s / click_s
    ok &= ratio <= MAX_HELP_RATIO
    print(f"[1] orion --help  {help_s:6.3f} s   python -c 'import click'  {click_s:6.3f} s   "
          f"ratio {ratio:5.1f}x (target <= {MAX_HELP_RATIO}x)   "
          f"{'OK' if ratio <= MAX_HELP_RATIO else 'MISS'}")

    with tempfile.TemporaryDirectory(prefix="orion-bench-") as tmp:
        tmp_path = Path(tmp)
        content = markdown(int(args.megabytes * 1024 * 1024))
        data = tmp_path / "content.md"
        data.write_text(content, encoding="utf-8")
        script = tmp_path / "big.yaml"
        write_script(script, content)
        floor = (best_of(args.reps, ["cp", str(data), str(tmp_path / "copy.md")])
                 + best_of(args.reps, [sys.executable, "-c", "pass"]))
        best_run = float("inf")
        for rep in range(args.reps):
            workspace = tmp_path / f"run-{rep}"
            workspace.mkdir()
            best_run = min(best_run, best_of(1, [ORION, "run", str(script),
                                                 "--workspace", str(workspace)]))
            written = (workspace / "docs" / "big.md").read_text(encoding="utf-8")
            assert written == content, "orion run did not write the content it was given"
        ratio = best_run / floor
        ok &= ratio <= MAX_RUN_RATIO
        print(f"[2] orion run, {args.megabytes:g} MB write  {best_run:7.2f} s   floor (cp + "
              f"interpreter start)  {floor:6.3f} s   ratio {ratio:6.1f}x "
              f"(target <= {MAX_RUN_RATIO:g}x)   {'OK' if ratio <= MAX_RUN_RATIO else 'MISS'}")

        hello = ROOT / "examples" / "hello.yaml"
        empty = tmp_path / "empty"
        crowded = tmp_path / "crowded"
        empty.mkdir()
        crowded.mkdir()
        leave_orphans(crowded, ORPHANS)
        # ttl 0 keeps the orphans (no removal timed), as a user who keeps them for recovery.
        env = {**os.environ, "ORION_WRITE_SESSION_ORPHAN_TTL_MS": "0"}
        base_s = best_of(args.reps, [ORION, "run", str(hello), "--workspace", str(empty)],
                         env=env)
        crowded_s = best_of(args.reps, [ORION, "run", str(hello), "--workspace", str(crowded)],
                            env=env)
        extra = crowded_s - base_s
        ok &= extra <= MAX_ORPHAN_EXTRA_S
        print(f"[3] orion run with {ORPHANS:,} orphaned sessions  {crowded_s:6.3f} s   empty "
              f"workspace  {base_s:6.3f} s   extra {extra:6.3f} s (target <= "
              f"{MAX_ORPHAN_EXTRA_S} s)   {'OK' if extra <= MAX_ORPHAN_EXTRA_S else 'MISS'}")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
