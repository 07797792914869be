"""Steps that set up real faults around a write (docs/testing.md, "Fault steps"; the rules are
docs/design/write-faults.md): a small, full or read-only disk, a file-size limit, a failing
observer, a damaged or locked trace database, other processes writing in the same directory or
swapping a directory for a symbolic link, a writer killed in the middle of a write, a live
writer, and a model endpoint on a loopback port that fails or cuts a stream, for ``orion chat``.

Each fault is the operating system's own (``tests/faults.py``); what needs root
(mounting a tmpfs) is skipped, saying so, where it is not permitted.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from pytest_bdd import given, parsers, then, when

from orion import hookimpl
from orion.trace.writer import settle_all
from orion.testing.steps import PATH, TEXT, _book, generated, unescape
from orion.testing.system_steps import _run, _runs_since
from orion.testing.world import World

import faults

__all__ = ["FailingObserver"]

#: How long a helper process may take to say it is ready (it never sleeps before that).
READY_TIMEOUT_S = 60


def _mounted(world: World, request: pytest.FixtureRequest, directory: Path, kib: int, *,
             read_only: bool = False) -> None:
    try:
        faults.mount_tmpfs(directory, kib, read_only=read_only)
    except faults.MountRefused as exc:
        pytest.skip(str(exc))
    request.addfinalizer(lambda: faults.unmount(directory))


def _process(request: pytest.FixtureRequest, script: str, *args: str) -> subprocess.Popen[str]:
    """A helper process of ``tests/faults.py``, killed when the scenario ends."""
    process = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                               text=True)

    def stop() -> None:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=READY_TIMEOUT_S)
    request.addfinalizer(stop)
    return process


# -- disks -----------------------------------------------------------------------------------------


@given(parsers.re(r"the workspace is on a disk with (?P<size>\d+) KiB of space"),
       converters={"size": int})
def workspace_on_small_disk(orion_world: World, size: int,
                            request: pytest.FixtureRequest) -> None:
    """A real tmpfs of that size mounted on the workspace itself (its state directory
    included), before Orion starts."""
    assert not orion_world.started, "the disk is set up before Orion starts"
    _mounted(orion_world, request, orion_world.workspace, size)


@given(parsers.re(r'the directory "(?P<path>[^"]+)" of the workspace is on a read-only disk'))
def directory_read_only(orion_world: World, path: str, request: pytest.FixtureRequest) -> None:
    """A read-only tmpfs mounted there: every write into it fails with EROFS."""
    _mounted(orion_world, request, orion_world.workspace / path, 64, read_only=True)


@when(parsers.re(r'the disk holding "(?P<path>[^"]+)" fills up'))
def disk_fills_up(orion_world: World, path: str) -> None:
    """Every free byte of that directory's file system is taken (by a file ``filler``)."""
    faults.fill(orion_world.workspace / path)


@when(parsers.re(r'the disk holding "(?P<path>[^"]+)" has room again'))
def disk_has_room(orion_world: World, path: str) -> None:
    (orion_world.workspace / path / "filler").unlink()


@given("rescue files go to a directory of their own")
def rescue_directory(orion_world: World) -> None:
    """The temp and home directories of the ``orion`` commands the scenario starts, where a
    content no disk write could keep is rescued: a directory outside the workspace."""
    directory = orion_world.root / "rescue"
    directory.mkdir(exist_ok=True)
    orion_world.env.update(TMPDIR=str(directory), HOME=str(directory))
    orion_world.data["rescue"] = directory


# -- orion run with a generated script -------------------------------------------------------------


@when(parsers.re(rf"the user runs \"orion run\" with a script that writes (?P<count>\d+) lines "
                 rf"to {PATH}(?:, with a file-size limit of (?P<limit>\d+) KiB)?"),
      converters={"count": int})
def run_writing_script(orion_world: World, count: int, path: str, limit: str | None,
                       request: pytest.FixtureRequest) -> None:
    """``orion run`` on a script in which the model begins to create the file and streams the
    generated lines 1 to ``count`` and DONE; with a file-size limit (RLIMIT_FSIZE) on every
    file the process writes, if given."""
    directory = Path(tempfile.mkdtemp(prefix="orion-script-"))
    request.addfinalizer(lambda: shutil.rmtree(directory, ignore_errors=True))
    script = directory / "script.yaml"
    script.write_text(yaml.safe_dump({"conversation": [
        {"user": f"Write {path}."},
        {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
            "intent": "the document", "target_file": path, "operation": "create"}}]}},
        {"model": {"text": generated(path, 1, count) + "DONE\n"}},
        {"model": {"text": "Done."}}]}, sort_keys=False), encoding="utf-8")
    _book(orion_world)["streamed"].append(generated(path, count, count).rstrip("\n"))
    preexec = None
    if limit is not None:
        size = int(limit) * 1024

        def preexec() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    _run(orion_world, ["run", str(script)], request, preexec=preexec)


@then(parsers.re(rf"the console shows {TEXT} once"))
def console_shows_once(orion_world: World, text: str) -> None:
    wanted = unescape(text)
    said = "".join(r["stdout"] + r["stderr"] for r in _runs_since(orion_world))
    assert said.count(wanted) == 1, said[-3000:]


@then(parsers.re(rf"the console names a rescue file that holds the generated lines "
                 rf"(?P<first>\d+) to (?P<last>\d+) of {PATH}"),
      converters={"first": int, "last": int})
def rescue_file_holds(orion_world: World, first: int, last: int, path: str) -> None:
    said = "".join(r["stdout"] + r["stderr"] for r in _runs_since(orion_world))
    named = re.findall(r"(/\S*orion-rescued-\S+?\.txt)", said)
    assert named, f"the console names no rescue file: {said[-2000:]}"
    assert Path(named[0]).read_text(encoding="utf-8") == generated(path, first, last)


# -- observers and the trace database --------------------------------------------------------------


class FailingObserver:
    """A plugin whose ``lifecycle_transition`` raises ``error`` on every transition."""

    def __init__(self, error: BaseException):
        self.error = error

    @hookimpl
    def lifecycle_transition(self, lifecycle: Any, transition: Any) -> None:
        raise self.error


@given(parsers.re(r'a plugin "(?P<name>\w+)" fails with "(?P<kind>\w+): (?P<message>[^"]*)" '
                  r"on every transition"))
def failing_observer(orion_world: World, name: str, kind: str, message: str) -> None:
    error = getattr(builtins, kind)
    assert isinstance(error, type) and issubclass(error, Exception), kind
    assert orion_world.plugins is not None
    orion_world.plugins.register(FailingObserver(error(message)), name)


class FailingGuard:
    """A plugin that provides the guard ``name``, which raises ``error`` whenever it is asked."""

    def __init__(self, name: str, error: BaseException):
        self.name, self.error = name, error

    @hookimpl
    def register_guards(self, register: Any) -> None:
        def guard(lifecycle: Any, transition: Any) -> bool:
            raise self.error
        register(self.name, guard)


@given(parsers.re(r'a plugin "(?P<name>\w+)" provides the guard "(?P<guard>\w+)", which fails '
                  r'with "(?P<kind>\w+): (?P<message>[^"]*)"'))
def failing_guard(orion_world: World, name: str, guard: str, kind: str, message: str) -> None:
    error = getattr(builtins, kind)
    assert isinstance(error, type) and issubclass(error, Exception), kind
    assert orion_world.plugins is not None
    orion_world.plugins.register(FailingGuard(guard, error(message)), name)


@given(parsers.re(r'the workspace\'s orion.db is damaged \((?P<damage>[\w ]+)\)'))
def orion_db_damaged(orion_world: World, damage: str) -> None:
    """``garbage``, ``truncated``, ``directory`` or ``wrong schema`` (:data:`faults.DAMAGE`)."""
    state = orion_world.workspace / ".orion"
    state.mkdir(parents=True, exist_ok=True)
    faults.DAMAGE[damage](state / "orion.db")


@given("another process holds the workspace's orion.db locked")
def orion_db_locked(orion_world: World, request: pytest.FixtureRequest) -> None:
    """A process in an exclusive transaction on ``orion.db`` for the rest of the scenario."""
    state = orion_world.workspace / ".orion"
    state.mkdir(parents=True, exist_ok=True)
    holder = _process(request, faults.LOCK_HOLDER, str(state / "orion.db"))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"


@then(parsers.re(rf"Orion logged {TEXT} once"))
def orion_logged_once(orion_world: World, text: str) -> None:
    wanted = unescape(text)
    settle_all()  # the trace writer logs from its thread, once it has tried its batches
    messages = [r.getMessage() for r in orion_world.log_records]
    assert sum(wanted in m for m in messages) == 1, messages


# -- other processes -------------------------------------------------------------------------------


@when(parsers.re(rf"two processes append (?P<count>\d+) lines each to {PATH} at once, as write "
                 r"sessions do"), converters={"count": int})
def two_appenders(orion_world: World, count: int, path: str) -> None:
    """Two real processes, each appending ``<name> <i>`` lines one write at a time: a plan
    checked, then executed a moment later (:data:`faults.RACER`)."""
    processes = [subprocess.Popen([sys.executable, "-c", faults.RACER,
                                   str(orion_world.workspace), name, str(count), path, "2"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for name in ("A", "B")]
    for process in processes:
        _, errors = process.communicate(timeout=300)
        assert process.returncode == 0, errors[-3000:]
    orion_world.data["appenders"] = (path, count)


@then(parsers.re(rf"{PATH} holds its first line and each process's lines, every one once"))
def appends_all_there(orion_world: World, path: str) -> None:
    wanted_path, count = orion_world.data["appenders"]
    assert wanted_path == path
    lines = (orion_world.workspace / path).read_text(encoding="utf-8").splitlines()
    first = _book(orion_world)["given_files"][path].decode("utf-8").splitlines()
    appended = lines[len(first):]
    assert lines[:len(first)] == first, lines[:3]
    expected = {f"{name} {i}" for name in "AB" for i in range(count)}
    assert len(appended) == len(expected) and set(appended) == expected, \
        f"{len(appended)} lines appended, {len(expected - set(appended))} lost"


@when(parsers.re(r'another program replaces the directory "(?P<path>[^"]+)" with a link to '
                 r'"(?P<target>[^"]+)"'))
def directory_replaced_by_link(orion_world: World, path: str, target: str) -> None:
    """The directory (empty) is removed and a symbolic link takes its name; ``target`` is
    written into the link as given (relative to the link's directory: ``../outside`` is the
    neighbour directory outside the workspace)."""
    orion_world.mark()
    directory = orion_world.workspace / path
    directory.rmdir()
    directory.symlink_to(target)


@given(parsers.re(r'another process swaps the directory "(?P<path>[^"]+)" with a link to the '
                  r"outside, back and forth, as fast as it can"))
def swapper(orion_world: World, path: str, request: pytest.FixtureRequest) -> None:
    """The directory and a symbolic link to the neighbour directory outside the workspace are
    exchanged atomically (renameat2 RENAME_EXCHANGE) in a loop (:data:`faults.SWAPPER`)."""
    directory = orion_world.workspace / path
    directory.mkdir(parents=True, exist_ok=True)
    link = directory.with_name(directory.name + ".swap")
    link.symlink_to(orion_world.outside)
    stop = Path(tempfile.mkdtemp(prefix="orion-swap-")) / "stop"
    request.addfinalizer(lambda: shutil.rmtree(stop.parent, ignore_errors=True))
    process = _process(request, faults.SWAPPER, str(directory), str(link), str(stop))
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    orion_world.data["swapper"] = (process, stop)


@when(parsers.re(r'(?P<count>\d+) plans write files into "(?P<path>[^"]+)" meanwhile'),
      converters={"count": int})
def plans_write_into(orion_world: World, count: int, path: str) -> None:
    """Each a plan checked and executed as a write session does (``create``); a write the
    swap makes fail is counted as refused. The swapping stops afterwards."""
    try:
        written, refused = faults.plans_into(orion_world.workspace, path, count)
    finally:
        process, stop = orion_world.data["swapper"]
        stop.touch()
        swaps = int((process.communicate(timeout=READY_TIMEOUT_S)[0] or "0").strip() or 0)
    orion_world.data["swapped_writes"] = (written, refused, swaps, count)


@then(parsers.re(r'every write landed inside the workspace or was refused, and the directory '
                 r'was swapped meanwhile'))
def writes_landed_or_refused(orion_world: World) -> None:
    written, refused, swaps, count = orion_world.data["swapped_writes"]
    assert swaps > 0 and written > 0 and written + refused == count, (swaps, written, refused)


# -- temp files of other processes -----------------------------------------------------------------


@given(parsers.re(rf"a process was killed in the middle of writing {PATH}"))
def killed_writer(orion_world: World, path: str, request: pytest.FixtureRequest) -> None:
    """A real process began the temp file of an atomic write beside the file and was killed
    with SIGKILL: its temp file is left behind."""
    directory = (orion_world.workspace / path).parent
    directory.mkdir(parents=True, exist_ok=True)
    before = set(os.listdir(directory))
    process = _process(request, faults.KILLED_WRITER, str(directory), Path(path).name)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=READY_TIMEOUT_S)
    [left] = set(os.listdir(directory)) - before
    orion_world.data.setdefault("temp_files", {})[path] = directory / left


@given(parsers.re(rf"another process has been writing {PATH} for (?P<hours>\d+) hours"),
       converters={"hours": int})
def live_writer(orion_world: World, path: str, hours: int,
                request: pytest.FixtureRequest) -> None:
    """A running process in the middle of a long write: its temp file beside the file, last
    written that long ago (:data:`faults.LIVE_WRITER`)."""
    directory = (orion_world.workspace / path).parent
    directory.mkdir(parents=True, exist_ok=True)
    process = _process(request, faults.LIVE_WRITER, str(directory), Path(path).name,
                       str(hours * 3600))
    assert process.stdout is not None
    name = process.stdout.readline().strip()
    assert name, "the writer did not start"
    orion_world.data.setdefault("temp_files", {})[path] = directory / name


@then(parsers.re(rf"the temp file of {PATH} is gone"))
def temp_file_gone(orion_world: World, path: str) -> None:
    temp = orion_world.data["temp_files"][path]
    assert not temp.exists(), f"{temp.name} is still there"


@then(parsers.re(rf"the temp file of {PATH} is still there"))
def temp_file_there(orion_world: World, path: str) -> None:
    temp = orion_world.data["temp_files"][path]
    assert temp.exists(), f"{temp.name} was removed"


# -- a model endpoint for orion chat ---------------------------------------------------------------


def _endpoint(world: World) -> Any:
    server = world.data.get("endpoint")
    assert server is not None, "no model endpoint: start with `Given a model endpoint ...`"
    return server


@given("a model endpoint on this machine")
def model_endpoint(orion_world: World, request: pytest.FixtureRequest) -> None:
    """A loopback chat-completions endpoint (``tests/sse_server.py``) that answers
    the requests in the order the next steps give the answers."""
    from sse_server import SSEServer

    server = SSEServer()
    server.start()
    request.addfinalizer(server.close)
    orion_world.data["endpoint"] = server


@given(parsers.re(r'the endpoint answers HTTP (?P<status>\d+) "(?P<message>[^"]*)" until the '
                  r"SDK's retries are used up"), converters={"status": int})
def endpoint_fails(orion_world: World, status: int, message: str) -> None:
    from sse_server import retryable

    # The SDK tries a request 1 + 3 times (its max_retries, and Orion's).
    _endpoint(orion_world).enqueue(*[retryable(status, message=message)] * 4)


@given(parsers.re(rf"the endpoint then replies {TEXT}"))
def endpoint_replies(orion_world: World, text: str) -> None:
    from sse_server import stream, text_stream

    _endpoint(orion_world).enqueue(stream(text_stream(unescape(text))))


@given(parsers.re(rf"the endpoint then begins to create {PATH}"))
def endpoint_begins(orion_world: World, path: str) -> None:
    from sse_server import begin_write

    _endpoint(orion_world).enqueue(begin_write(path))
    _book(orion_world)["next_line"][path] = 1


@given(parsers.re(rf"the endpoint then streams (?P<count>\d+) (?:more )?lines of {PATH} "
                  r"(?P<ending>and DONE|and the connection breaks)"), converters={"count": int})
def endpoint_streams(orion_world: World, count: int, path: str, ending: str) -> None:
    """The generated lines, one chunk each, numbered on; then a line DONE, or the socket
    closed in the middle of the response (no end of the chunked body)."""
    from sse_server import finish_chunk, stream, text_chunk

    book = _book(orion_world)
    first = book["next_line"].get(path, 1)
    book["next_line"][path] = first + count
    lines = generated(path, first, first + count - 1).splitlines(keepends=True)
    if ending == "and DONE":
        chunks = [text_chunk(line) for line in [*lines, "DONE\n"]] + [finish_chunk("stop")]
        _endpoint(orion_world).enqueue(stream(chunks))
    else:
        _endpoint(orion_world).enqueue(stream([text_chunk(line) for line in lines],
                                              done=False, cut=True))


@when("the user chats in \"orion chat\":")
def user_chats(orion_world: World, docstring: str, request: pytest.FixtureRequest) -> None:
    """``orion chat`` against the endpoint, each docstring line typed as a message, then the
    end of input."""
    server = _endpoint(orion_world)
    _run(orion_world, ["chat", "--base-url", server.base_url, "--model", "test-model"],
         request, stdin="".join(f"{line}\n" for line in docstring.splitlines()),
         OPENAI_API_KEY="unused")


@then(parsers.re(r"the endpoint was asked (?P<count>\d+) times"), converters={"count": int})
def endpoint_asked(orion_world: World, count: int) -> None:
    requests = [r for r in _endpoint(orion_world).requests if r.method == "POST"]
    assert len(requests) == count, [json.dumps(r.body)[:200] for r in requests]

