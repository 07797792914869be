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
   Target: at most 10x. The script itself is part of what ``orion run`` reads. Line 2b times
   the same run against a Python program doing the same job with the bytes (read the script
   with libyaml, write the content, fsync): what Orion adds over any Python program that does
   it. Target: at most 10x.
3. ``orion run`` of a one-message script in a workspace holding 10,000 orphaned write sessions
   (copies of a real one left by a process that never finished it), against the same run in an
   empty workspace. Target: at most 0.2 s extra.
4. The memory of a ``--memory-megabytes`` write (default 50) in ``orion run``, the reply read
   from a file beside the script (``text_file``): the whole process's peak resident set size
   over ``orion run hello``'s, as a plugin installed for the run reads them from
   ``/proc/self/status``. Target: at most 2x the content. Printed beside it: the peak while the
   write streams and is written over the RSS when it began, and the same run with the reply
   inline in the script, which holds the content itself (its parsed text, two bytes a
   character once one is beyond Latin-1).
5. The same write in ``orion chat``, streamed by a loopback OpenAI-compatible endpoint through
   the real ``openai`` SDK: the whole process's peak RSS over a one-line chat. Target: at most
   2x the content. Line 5b: the same chat on a terminal (a pseudo-terminal, typed into as a
   person types), where the write is a bounded preview and a live line, over a one-line chat on
   a terminal. Same target.
6. Memory per write over ``--writes`` writes (default 1,000) in one ``orion chat`` (40 lines
   each, to 50 files: created, then overwritten and appended to in turn; begin, the content,
   DONE, a short reply): the resident set after the last write
   over the one after the first fifth, per write, against the size of one write's content (the
   baseline: what a write could hold if it kept its content). Target: at most 0.5x that, i.e.
   a write leaves less behind than half its content. Printed beside it: ``.orion``'s growth
   per write over the same span (undo records and backups, pruned to ``keep_backups`` as writes
   happen; the trace database).
7. A one-line write of ``--one-line-megabytes`` (default 256; run once at 2048 for the 2 GiB
   figure) in ``orion run``, the reply read from a file: the peak RSS over ``orion run
   hello``'s, against the content's size. Target: at most 2x.
8. ``orion run`` of a ``--stream-megabytes`` reply (default 20 MiB of Markdown, read from a file
   beside the script, ``text_file``) streamed in the scripted model's default 16-character
   chunks into a write session, against a minimal Python program (``python -c``) that reads the
   same file 16 characters at a time, writes each piece and fsyncs: the wall clock, best of
   ``--reps``, the two alternating. Target: at most 5x. Printed beside it: the loop's time in
   the benchmark's own process (no interpreter start), the CPU time of both (steadier than the
   wall clock on a busy machine), and the run's peak RSS over ``orion run hello``'s against the
   content's size (as line 4). A second line gives the floors any run of this script has: the
   start-up (``orion run hello``), the scripted model's stream drained in this process, and
   what is left, Orion's own work with the stream.

Before timing, Orion's modules and the environment's packages are compiled to bytecode, as an
install does (see :func:`compile_bytecode`).
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from bench_write_ingest import markdown, open_session  # noqa: E402

from orion.models.script import split_chunks  # noqa: E402

sys.path.insert(0, str(ROOT / "tests"))
from sse_server import SSEServer, begin_write, stream, text_stream  # noqa: E402

BIN = Path(sys.executable).parent
ORION = str(BIN / "orion")
MAX_HELP_RATIO = 2.0
MAX_RUN_RATIO = 10.0
MAX_ORPHAN_EXTRA_S = 0.2
MAX_MEMORY_RATIO = 2.0
ORPHANS = 10_000


def compile_bytecode() -> None:
    """Compile Orion's modules and the environment's packages to bytecode, as ``pip install``
    does: an installed program starts from its bytecode, and a machine that does not write it
    (``PYTHONDONTWRITEBYTECODE``, an editable install) would compile every module at every
    start, about 0.2 s of each ``orion`` process here. Quick once done (only what changed)."""
    import compileall
    import sysconfig

    for directory in (ROOT / "orion", ROOT / "plugins", Path(sysconfig.get_paths()["purelib"])):
        compileall.compile_dir(directory, quiet=2, workers=0)


def run(argv: list[str], **kwargs) -> None:
    """Run ``argv`` to its end; stop the benchmark, with its error output, if it fails."""
    proc = subprocess.run(argv, capture_output=True, **kwargs)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} failed ({proc.returncode}):\n"
                         f"{proc.stderr.decode(errors='replace')[-2000:]}")


def run_on_terminal(argv: list[str], env: dict[str, str], typed: bytes, done: bytes) -> None:
    """Run ``argv`` on a pseudo-terminal of 100 x 40 (its stdin, stdout and stderr), as a person
    at a terminal: type ``typed`` once the prompt shows, and Ctrl-D once ``done`` shows. This
    terminal does not answer questions about the cursor's position, and says so
    (``PROMPT_TOOLKIT_NO_CPR``), so the prompt does not wait for answers."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                            env={**env, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"},
                            start_new_session=True)
    os.close(slave)
    seen, step, end = b"", 0, time.monotonic() + 600
    try:
        while proc.poll() is None and time.monotonic() < end:
            if not select.select([master], [], [], 0.1)[0]:
                continue
            try:
                data = os.read(master, 1 << 16)
            except OSError:  # the program closed the terminal
                break
            seen = (seen + data)[-4096:]
            if step == 0 and b"you>" in seen:
                os.write(master, typed.rstrip(b"\n") + b"\r")
                step, seen = 1, b""
            elif step == 1 and done in seen:
                os.write(master, b"\x04")
                step = 2
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    if code != 0 or step != 2:
        raise SystemExit(f"{' '.join(argv[:3])} on a terminal failed ({code}, step {step})")


def best_of(reps: int, argv: list[str], **kwargs) -> float:
    best = float("inf")
    for _ in range(reps):
        started = time.perf_counter()
        run(argv, **kwargs)
        best = min(best, time.perf_counter() - started)
    return best


def run_probed(argv: list[str], env: dict[str, str], stdin: bytes = b"", *,
               terminal: bytes = b"") -> dict[str, Any]:
    """Run ``argv`` to its end with the memory probe (:data:`PROBE`) loaded; what it noted.
    With ``terminal``, the text shown when it is done: it runs on a terminal instead."""
    if terminal:
        run_on_terminal(argv, env, stdin, terminal)
    else:
        run(argv, input=stdin, env=env)
    out = Path(env["ORION_MEMORY_PROBE"])
    notes: dict[str, Any] = {"rss_after_writes": []}
    for line in out.read_text().splitlines():
        record = json.loads(line)
        if "rss" in record:
            notes["rss_after_writes"].append(record.pop("rss"))
        notes.update(record)
    out.unlink()
    return notes


#: A team's plugin, installed the way any is (an ``[orion]`` entry point in a distribution's
#: metadata on ``sys.path``), that reads the process's memory from ``/proc/self/status``. The
#: process's own figures: a parent's ``wait4`` would count the parent's pages too (the child's
#: peak RSS starts at the forked copy of the parent, before ``exec``). When a
#: ``write_session`` lifecycle starts, the probe notes the peak RSS so far and the RSS, then
#: resets the peak to the current RSS (``/proc/self/clear_refs``); when it ends (the target
#: written) it notes the peak since; when the runtime closes, the peak again.
PROBE = r"""
import json, os
from orion.api import hookimpl

def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)

def _note(**values):
    with open(os.environ["ORION_MEMORY_PROBE"], "a") as f:
        f.write(json.dumps(values) + "\n")

@hookimpl
def lifecycle_started(lifecycle, host):
    if lifecycle.name == "write_session":
        _note(peak_before=_status("VmHWM"), begin=_status("VmRSS"))
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")

@hookimpl
def lifecycle_finished(lifecycle, host):
    if lifecycle.name == "write_session":
        _note(end=_status("VmHWM"), rss=_status("VmRSS"))

@hookimpl
def runtime_closing(host):
    _note(closing=_status("VmHWM"))
"""


def install_probe(where: Path) -> dict[str, str]:
    """The memory probe plugin installed in ``where``; the environment that loads it."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "orion_memory_probe.py").write_text(PROBE)
    dist = where / "orion_memory_probe-1.0.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: orion-memory-probe\n"
                                   "Version: 1.0\n")
    (dist / "entry_points.txt").write_text("[orion]\nmemory_probe = orion_memory_probe\n")
    return {**os.environ, "PYTHONPATH": str(where), "ORION_MEMORY_PROBE": str(where / "out")}


def peaks(notes: dict[str, int]) -> tuple[int, int]:
    """The process's peak RSS, and the peak while the write streamed and was written over the
    RSS when it began (bytes)."""
    whole = max(notes.get("peak_before", 0), notes["closing"])
    return whole, notes.get("end", 0) - notes.get("begin", 0)


def chat_responses(content: str) -> list:
    """What a model answers in the chat memory run: the begin call, the content in 4 KiB
    deltas ending with DONE, then a short last reply."""
    text = content + "DONE\n"
    deltas = split_chunks(text, 4096)
    return [begin_write("docs/big.md"), stream(text_stream(*deltas)),
            stream(text_stream("The document is written."))]


#: Line 2b's floor: the least a Python program pays to do what ``orion run`` of the script does
#: with its bytes (read the script with the same parser, write the content, make it durable).
SAME_JOB = """
import os, sys, yaml
with open(sys.argv[1], "rb") as f:
    script = yaml.load(f.read(), Loader=yaml.CSafeLoader)
text = script["conversation"][2]["model"]["text"].removesuffix("DONE\\n")
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
data = text.encode("utf-8")
written = 0
while written < len(data):
    written += os.write(fd, data[written:])
os.fsync(fd)
os.close(fd)
"""


def write_script(path: Path, content: str, *, from_file: bool = False) -> None:
    """A conversation that writes ``content`` to docs/big.md through a write session. Written
    as JSON, which is YAML too: the content needs no indentation. ``from_file``: the reply's
    text is in a file beside the script (``text_file``), not in the script."""
    reply: dict = {"chunk_size": 4096, "text": content + "DONE\n"}
    if from_file:
        text_file = path.with_suffix(".reply.md")
        text_file.write_text(reply.pop("text"), encoding="utf-8")
        reply["text_file"] = text_file.name
    conversation = [
        {"user": "Write the big document to docs/big.md."},
        {"model": {"text": "I'll write it in a write session.", "tool_calls": [
            {"name": "WritePlanTool_begin", "arguments": {
                "intent": "a big document", "target_file": "docs/big.md",
                "operation": "create"}}]}},
        {"model": reply},
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
    parser.add_argument("--memory-megabytes", type=float, default=50.0,
                        help="the size of the write whose memory lines 4 and 5 measure")
    parser.add_argument("--writes", type=int, default=1000,
                        help="how many writes line 6 makes in one orion chat")
    parser.add_argument("--one-line-megabytes", type=float, default=256.0,
                        help="the size of line 7's one-line write (2048: the 2 GiB figure)")
    parser.add_argument("--stream-megabytes", type=float, default=20.0,
                        help="the size of line 8's reply, streamed in 16-character chunks")
    parser.add_argument("--only", type=int, nargs="*", default=None,
                        help="run only these lines: 6, 7 (minutes at full size), 8")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args(argv)
    ok = True
    print(f"Orion end-to-end benchmark: python {sys.version.split()[0]}; best of {args.reps} "
          "runs of each process")
    compile_bytecode()

    if args.only:
        with tempfile.TemporaryDirectory(prefix="orion-bench-") as tmp:
            if 6 in args.only:
                ok &= writes_over_time(Path(tmp), args.writes)
            if 7 in args.only:
                ok &= one_line_write(Path(tmp), args.one_line_megabytes)
            if 8 in args.only:
                ok &= streamed_reply(Path(tmp), args.stream_megabytes, args.reps)
        return 1 if args.check and not ok else 0

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
        python_floor = best_of(args.reps, [sys.executable, "-c", SAME_JOB, str(script),
                                           str(tmp_path / "same-job.md")])
        assert (tmp_path / "same-job.md").read_text(encoding="utf-8") == content
        ratio = best_run / python_floor
        ok &= ratio <= MAX_RUN_RATIO
        print(f"[2b] the same run against a Python program doing the same job (read the script "
              f"with libyaml, write the content, fsync)  {python_floor:6.3f} s   ratio "
              f"{ratio:5.1f}x (target <= {MAX_RUN_RATIO:g}x)   "
              f"{'OK' if ratio <= MAX_RUN_RATIO else 'MISS'}")

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
        ok &= memory(tmp_path, args.memory_megabytes)
        ok &= writes_over_time(tmp_path, args.writes)
        ok &= one_line_write(tmp_path, args.one_line_megabytes)
        ok &= streamed_reply(tmp_path, args.stream_megabytes, args.reps)
    return 1 if args.check and not ok else 0


#: Line 6's target: what a write leaves behind in the process, against its content's size.
MAX_PER_WRITE_RATIO = 0.5
#: Line 6: each write's content (40 lines).
WRITE_BODY = "".join(f"Line {n} of the notes: a sentence of ordinary length, " \
                     "with some words.\n" for n in range(1, 41))


def writes_over_time(tmp: Path, count: int) -> bool:
    """Line 6: ``count`` writes in one ``orion chat``; what each leaves behind."""
    env = install_probe(tmp / "probe")
    clean = {k: v for k, v in env.items() if not k.startswith(("OPENAI_", "ORION_"))}
    clean.update(OPENAI_API_KEY="bench", ORION_MEMORY_PROBE=env["ORION_MEMORY_PROBE"])
    responses = []
    for n in range(count):
        operation = "create" if n < 50 else ("append" if n % 2 else "overwrite")
        responses += [begin_write(f"notes/{n % 50}.md", operation),
                      stream(text_stream(WRITE_BODY, "DONE\n")),
                      stream(text_stream("Written."))]
    workspace = tmp / "c-many"
    lines = "".join(f"Write note {n}.\n" for n in range(count))
    started = time.perf_counter()
    with SSEServer(responses) as server:
        notes = run_probed([ORION, "chat", "--base-url", server.base_url, "--model", "bench",
                            "--workspace", str(workspace)], clean, stdin=lines.encode())
    took = time.perf_counter() - started
    rss = notes["rss_after_writes"]
    assert len(rss) == count, f"{len(rss)} of {count} writes finished"
    first = count // 5
    per_write = (rss[-1] - rss[first - 1]) / (count - first)
    state = workspace / ".orion"
    state_bytes = sum(p.stat().st_size for p in state.rglob("*") if p.is_file())
    size = len(WRITE_BODY.encode("utf-8"))
    ratio = per_write / size
    print(f"[6] orion chat, memory per write over {count:,} writes: {per_write / 1024:+.2f} KiB "
          f"per write (RSS {rss[first - 1] / 2**20:.1f} MB after {first:,} writes, "
          f"{rss[-1] / 2**20:.1f} MB after {count:,})   ratio {ratio:4.2f}x one write's "
          f"{size / 1024:.1f} KiB of content (target <= {MAX_PER_WRITE_RATIO:g}x)   "
          f"{'OK' if ratio <= MAX_PER_WRITE_RATIO else 'MISS'}   (.orion: "
          f"{state_bytes / 2**20:.1f} MB, {state_bytes / count / 1024:.1f} KiB per write; "
          f"{took:.0f} s)")
    return ratio <= MAX_PER_WRITE_RATIO


def one_line_write(tmp: Path, megabytes: float) -> bool:
    """Line 7: a write whose content is one line of ``megabytes``, in ``orion run``."""
    env = install_probe(tmp / "probe")
    size = int(megabytes * 1024 * 1024)
    text_file = tmp / "one-line.reply.md"
    with open(text_file, "wb") as f:
        piece = b"0123456789abcdef" * 65536  # 1 MiB
        for _ in range(size // len(piece)):
            f.write(piece)
        f.write(piece[:size % len(piece)])
        f.write(b"\nDONE\n")
    script = tmp / "one-line.yaml"
    script.write_text(json.dumps({"conversation": [
        {"user": "Write the one-line file."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "one long line", "target_file": "line.txt", "operation": "create"}}]}},
        {"model": {"text_file": text_file.name, "chunk_size": 65536}},
        {"model": {"text": "Written."}}]}))
    hello = ROOT / "examples" / "hello.yaml"
    base, _ = peaks(run_probed([ORION, "run", str(hello), "--workspace",
                                str(tmp / "l-hello")], env))
    workspace = tmp / "l-write"
    started = time.perf_counter()
    whole, write = peaks(run_probed([ORION, "run", str(script), "--workspace", str(workspace)],
                                    env))
    took = time.perf_counter() - started
    written = (workspace / "line.txt").stat().st_size
    text_file.unlink()
    shutil.rmtree(workspace, ignore_errors=True)
    assert written == size + 1, f"the write holds {written} bytes, not {size + 1}"
    ratio = (whole - base) / size
    print(f"[7] orion run, a one-line write of {megabytes:g} MB: peak RSS {whole / 2**20:.0f} MB,"
          f" +{(whole - base) / 2**20:.0f} MB over `orion run hello`'s   ratio {ratio:4.2f}x "
          f"content (target <= {MAX_MEMORY_RATIO:g}x)   "
          f"{'OK' if ratio <= MAX_MEMORY_RATIO else 'MISS'}   ({took:.0f} s)")
    return ratio <= MAX_MEMORY_RATIO


#: Line 8's target: ``orion run`` of the streamed reply against the minimal loop.
MAX_STREAM_RATIO = 5.0
#: Line 8's floor: the least a Python program does with the reply's 16-character pieces (read
#: them from the file, write each, make the file durable, as Orion says "written" only then).
PIECES_LOOP = """
import os, sys
with open(sys.argv[1], encoding="utf-8", newline="") as src, \\
        open(sys.argv[2], "w", encoding="utf-8", newline="") as out:
    while piece := src.read(16):
        out.write(piece)
    out.flush()
    os.fsync(out.fileno())
"""


def children_cpu() -> float:
    """The CPU time (user and system) of the processes this one has waited for."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def streamed_reply(tmp: Path, megabytes: float, reps: int) -> bool:
    """Line 8: ``orion run`` of a reply of ``megabytes`` in 16-character chunks, against the
    minimal loop over the same pieces."""
    content = markdown(int(megabytes * 1024 * 1024))
    size = len(content.encode("utf-8"))
    text_file = tmp / "pieces.reply.md"
    text_file.write_text(content + "DONE\n", encoding="utf-8", newline="")
    script = tmp / "pieces.yaml"
    script.write_text(json.dumps({"description": "a reply in 16-character chunks",
                                  "conversation": [
        {"user": "Write the big document to docs/big.md."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "a big document", "target_file": "docs/big.md",
            "operation": "create"}}]}},
        {"model": {"text_file": text_file.name}},  # the default chunk size: 16 characters
        {"model": {"text": "The document is written."}}]}))
    looped = tmp / "pieces.loop.md"
    loop = [sys.executable, "-c", PIECES_LOOP, str(text_file), str(looped)]
    run_s = loop_s = run_cpu = loop_cpu = float("inf")
    for rep in range(reps):  # alternating, so a busy moment weighs on both
        workspace = tmp / f"p-{rep}"
        cpu = children_cpu()
        run_s = min(run_s, best_of(1, [ORION, "run", str(script), "--workspace",
                                       str(workspace)]))
        run_cpu = min(run_cpu, children_cpu() - cpu)
        written = (workspace / "docs" / "big.md").read_text(encoding="utf-8")
        assert written == content, "orion run did not write the content it was given"
        shutil.rmtree(workspace)
        cpu = children_cpu()
        loop_s = min(loop_s, best_of(1, loop))
        loop_cpu = min(loop_cpu, children_cpu() - cpu)
        assert looped.stat().st_size == size + len("DONE\n")
    in_process = float("inf")
    namespace: dict[str, Any] = {}
    for _ in range(reps):
        sys.argv[1:] = [str(text_file), str(looped)]
        started = time.perf_counter()
        exec(PIECES_LOOP, namespace)
        in_process = min(in_process, time.perf_counter() - started)
    # Two floors of any run of this script: the program starting and ending (a one-message
    # script), and the scripted model's stream alone, drained in this process.
    hello = ROOT / "examples" / "hello.yaml"
    start_s = best_of(reps, [ORION, "run", str(hello), "--workspace", str(tmp / "p-start")])
    model_s = min(scripted_stream_s(script) for _ in range(reps))
    env = install_probe(tmp / "probe")
    base, _ = peaks(run_probed([ORION, "run", str(hello), "--workspace", str(tmp / "p-hello")],
                               env))
    whole, _ = peaks(run_probed([ORION, "run", str(script), "--workspace",
                                 str(tmp / "p-memory")], env))
    shutil.rmtree(tmp / "p-memory")
    ratio = run_s / loop_s
    print(f"[8] orion run, a {megabytes:g} MiB reply in {size // 16:,} 16-character chunks "
          f"(text_file)  {run_s:6.2f} s   the minimal loop over the same pieces with an fsync "
          f"(python -c)  {loop_s:6.3f} s   ratio {ratio:5.2f}x (target <= "
          f"{MAX_STREAM_RATIO:g}x)   {'OK' if ratio <= MAX_STREAM_RATIO else 'MISS'}   (the "
          f"loop in this process {in_process:.3f} s; CPU time, user and system: orion run "
          f"{run_cpu:.2f} s, the loop {loop_cpu:.3f} s, {run_cpu / loop_cpu:.2f}x; "
          f"peak RSS {whole / 2**20:.0f} MB, "
          f"+{(whole - base) / 2**20:.1f} MB over `orion run hello`'s, "
          f"{(whole - base) / size:.2f}x content)")
    print(f"    floors of any such run: `orion run hello` {start_s:.3f} s "
          f"({start_s / loop_s:.2f}x the loop), the scripted model's stream of these chunks "
          f"alone, in this process, {model_s:.3f} s ({model_s / loop_s:.2f}x); what Orion "
          f"does with the stream: {run_s - start_s - model_s:.3f} s "
          f"({(run_s - start_s - model_s) / loop_s:.2f}x)")
    return ratio <= MAX_STREAM_RATIO


def scripted_stream_s(script: Path) -> float:
    """The time to drain the scripted model's stream of ``script``'s long reply (its third
    entry) in this process: every event made and read, nothing done with them."""
    import asyncio

    from orion.models.script import ModelEntry, load_script
    from orion.models.scripted import stream_reply

    entry = load_script(script).entries[2]
    assert isinstance(entry, ModelEntry)
    reply = entry.model

    async def drain() -> None:
        async for _ in stream_reply(reply, 1):
            pass

    started = time.perf_counter()
    asyncio.run(drain())
    return time.perf_counter() - started


def memory(tmp: Path, megabytes: float) -> bool:
    """Lines 4 and 5: the memory a write of ``megabytes`` takes, in ``orion run`` and in
    ``orion chat``."""
    content = markdown(int(megabytes * 1024 * 1024))
    size = len(content.encode("utf-8"))
    env = install_probe(tmp / "probe")
    script, from_file = tmp / "memory.yaml", tmp / "memory-from-file.yaml"
    write_script(script, content)
    write_script(from_file, content, from_file=True)
    hello = ROOT / "examples" / "hello.yaml"
    ok = True

    def verdict(ratio: float) -> str:
        return "OK" if ratio <= MAX_MEMORY_RATIO else "MISS"

    def check_written(workspace: Path) -> None:
        written = (workspace / "docs" / "big.md").read_text(encoding="utf-8")
        assert written == content, "the write did not produce the content it was given"

    base, _ = peaks(run_probed([ORION, "run", str(hello), "--workspace",
                                str(tmp / "m-hello")], env))
    runs = {}
    for name, path in (("file", from_file), ("inline", script)):
        workspace = tmp / f"m-{name}"
        runs[name] = peaks(run_probed([ORION, "run", str(path), "--workspace", str(workspace)],
                                      env))
        check_written(workspace)
    whole, write = runs["file"]
    ratio = (whole - base) / size
    ok &= ratio <= MAX_MEMORY_RATIO
    inline, inline_write = runs["inline"]
    print(f"[4] orion run, {megabytes:g} MB write, the reply read from a file (text_file): "
          f"peak RSS {whole / 2**20:.0f} MB, +{(whole - base) / 2**20:.1f} MB over `orion run "
          f"hello`'s {base / 2**20:.0f} MB   ratio {ratio:4.2f}x content (target <= "
          f"{MAX_MEMORY_RATIO:g}x)   {verdict(ratio)}   (while the write streams and is written: "
          f"+{write / 2**20:.1f} MB, {write / size:.2f}x; the reply inline in the script: "
          f"{inline / 2**20:.0f} MB, {(inline - base) / size:.2f}x, +{inline_write / 2**20:.1f}"
          f" MB while the write streams: the script holds the content too)")

    clean = {k: v for k, v in env.items() if not k.startswith(("OPENAI_", "ORION_"))}
    clean.update(OPENAI_API_KEY="bench", ORION_MEMORY_PROBE=env["ORION_MEMORY_PROBE"])

    def chat(workspace: Path, responses: list, line: str, done: str = "") -> tuple[int, int]:
        with SSEServer(responses) as server:
            return peaks(run_probed([ORION, "chat", "--base-url", server.base_url, "--model",
                                     "bench", "--workspace", str(workspace)], clean,
                                    stdin=line.encode(), terminal=done.encode()))

    # Line 5 with stdin and stdout piped; line 5b on a terminal, as a person types.
    for label, name, done in (
            (f"[5] orion chat, {megabytes:g} MB write from a loopback endpoint", "c", ""),
            ("[5b] orion chat on a terminal, the same write", "t", "The document is written.")):
        base, _ = chat(tmp / f"{name}-hello", [stream(text_stream("Hello."))], "hi\n",
                       done="Hello." if done else "")
        workspace = tmp / f"{name}-write"
        whole, write = chat(workspace, chat_responses(content), "Write the big document.\n",
                            done=done)
        check_written(workspace)
        ratio = (whole - base) / size
        ok &= ratio <= MAX_MEMORY_RATIO
        over = "a one-line chat" + (" on a terminal" if done else "")
        print(f"{label}: peak RSS {whole / 2**20:.0f} MB, +{(whole - base) / 2**20:.1f} MB over "
              f"{over}   ratio {ratio:4.2f}x content (target <= {MAX_MEMORY_RATIO:g}x)   "
              f"{verdict(ratio)}   (while the write streams and is written: "
              f"+{write / 2**20:.1f} MB, {write / size:.2f}x)")
    return ok


if __name__ == "__main__":
    sys.exit(main())
