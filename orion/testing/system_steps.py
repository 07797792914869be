"""Steps that reach outside the scenario's runtime: Orion started as a user starts it (the
``orion`` command in a subprocess), symbolic and hard links, FIFOs, file modes and owners,
another user watching a directory, a small real disk, a journal the operating system refuses,
values JSON cannot hold, and what Orion logs and prints (docs/testing.md).

The command steps run ``python -m orion ...`` in the workspace with the scenario's environment
(``orion_env`` and the ``Given the environment variable`` steps), never the test process's
``ORION_*`` or ``WRITE_SESSION_*`` variables. The command's own clock is the real one, so a
scenario that hands sessions to a command sets its virtual clock against the real time first
(``Given the scenario's clock starts 100 minutes before the real time``).
"""

from __future__ import annotations

import errno
import math
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from pytest_bdd import given, parsers, then, when

from orion.testing.steps import PATH, TEXT, ContentOn, _book, lines_of, unescape
from orion.testing.world import World

#: The step library loaded with these (pytest loads a plugin module's ``pytest_plugins``):
#: statecharts written in a scenario.
pytest_plugins = ["orion.testing.chart_steps"]

#: How long a command may take before the step fails (it never sleeps; this bounds a hang).
COMMAND_TIMEOUT_S = 120
#: A file every Linux kernel refuses to open for writing with EACCES, root included: the
#: kernel's release string (a read-only sysctl).
PERMISSION_DENIED_FILE = Path("/proc/sys/kernel/osrelease")


def _console(world: World) -> dict[str, Any]:
    return world.data.setdefault("console", {"runs": [], "mark": 0})


# -- the clock ---------------------------------------------------------------------------------


@given(parsers.re(r"the scenario's clock starts (?P<amount>\d+) minutes before the real time"),
       converters={"amount": int})
def clock_before_real_time(orion_world: World, amount: int) -> None:
    assert not orion_world.started, "the clock is set before Orion starts"
    orion_world.set_start_ms(time.time() * 1000 - amount * 60_000)


# -- the orion command -------------------------------------------------------------------------


def _run(world: World, args: list[str], request: pytest.FixtureRequest, *,
         preexec: Any = None, stdin: str = "", **more_env: str) -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ORION_", "WRITE_SESSION_"))}
    env.update(more_env)
    env.update(world.env)
    env["COLUMNS"] = "200"
    console = _console(world)
    console["mark"] = len(console["runs"])
    world.mark()
    process = subprocess.run([sys.executable, "-m", "orion", *args], cwd=world.workspace,
                             env=env, input=stdin, capture_output=True, text=True,
                             timeout=COMMAND_TIMEOUT_S, preexec_fn=preexec)
    console["runs"].append({"args": args, "code": process.returncode,
                            "stdout": process.stdout, "stderr": process.stderr})


@when(parsers.re(r'the user runs "orion (?P<command>[^"]+)"'))
def user_runs(orion_world: World, command: str, request: pytest.FixtureRequest) -> None:
    """``<session>`` in the command is the id of the latest write session begun (in this
    scenario's runtime, or else the one session an ``orion`` command left behind)."""
    if "<session>" in command:
        book = _book(orion_world)
        session_id = book["sessions"].get(book["target"] or "")
        if not session_id:
            from orion.write_session.orphans import scan
            left = scan(orion_world.state_dir, now_ms=time.time() * 1000)
            assert len(left) == 1, f"<session> names no one session: {[o.id for o in left]}"
            session_id = left[0].id
        command = command.replace("<session>", session_id[:8])
    _run(orion_world, shlex.split(command), request)


@when(parsers.re(r'the user runs "orion run" with the script:'))
def user_runs_script(orion_world: World, docstring: str, request: pytest.FixtureRequest) -> None:
    """``orion run SCRIPT`` in the workspace; the script lives in a directory of its own, so
    neither the workspace nor its neighbours get an extra file."""
    directory = Path(tempfile.mkdtemp(prefix="orion-script-"))
    request.addfinalizer(lambda: shutil.rmtree(directory, ignore_errors=True))
    script = directory / "script.yaml"
    script.write_text(lines_of(docstring), encoding="utf-8")
    _run(orion_world, ["run", str(script)], request)


@when('the user opens "orion chat" and leaves at once')
def user_opens_chat(orion_world: World, request: pytest.FixtureRequest) -> None:
    """``orion chat`` with no input: it starts (crash recovery included) and ends at the end
    of its input without asking the model anything. Its endpoint is a loopback port nothing
    listens on, so it could not reach a model if it tried."""
    _run(orion_world, ["chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "none"],
         request, OPENAI_API_KEY="unused")


def _runs_since(world: World) -> list[dict[str, Any]]:
    console = _console(world)
    runs = console["runs"][console["mark"]:]
    assert runs, "no orion command ran since the last When step"
    return runs


@then(parsers.re(rf"the console shows {TEXT}"))
def console_shows(orion_world: World, text: str) -> None:
    wanted = unescape(text)
    runs = _runs_since(orion_world)
    assert any(wanted in r["stdout"] + r["stderr"] for r in runs), \
        [(r["args"], r["code"], r["stdout"][-2000:], r["stderr"][-2000:]) for r in runs]


@then(parsers.re(rf"the console does not show {TEXT}"))
def console_does_not_show(orion_world: World, text: str) -> None:
    wanted = unescape(text)
    runs = _runs_since(orion_world)
    assert not any(wanted in r["stdout"] + r["stderr"] for r in runs), runs


@then("the command succeeds")
def command_succeeds(orion_world: World) -> None:
    for run in _runs_since(orion_world):
        assert run["code"] == 0, run


@then(parsers.re(r"the command fails with exit code (?P<code>\d+)"), converters={"code": int})
def command_fails_with(orion_world: World, code: int) -> None:
    for run in _runs_since(orion_world):
        assert run["code"] == code, run


@when('the user drops the damaged plan with "orion plan drop"')
def user_drops_damaged_plan(orion_world: World, request: pytest.FixtureRequest) -> None:
    """``orion plan drop ID`` for the plan ``the Markdown of the active plan is damaged``
    damaged."""
    plan_id = orion_world.data.get("damaged_plan")
    assert plan_id, "no plan was damaged in this scenario"
    _run(orion_world, ["plan", "drop", plan_id[:8]], request)


# -- the file system ---------------------------------------------------------------------------


@given(parsers.re(rf'the workspace has a link {PATH} to "(?P<target>[^"]+)"'))
def workspace_link(orion_world: World, path: str, target: str) -> None:
    """A symbolic link in the workspace; ``target`` is written into the link as given (a
    relative target is relative to the link's directory, e.g. ``../outside``)."""
    link = orion_world.workspace / path
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


@given(parsers.re(rf'the workspace has a hard link {PATH} to "(?P<target>[^"]+)"'))
def workspace_hard_link(orion_world: World, path: str, target: str) -> None:
    """A second name of the workspace file ``target`` (both names are one file)."""
    link = orion_world.workspace / path
    link.parent.mkdir(parents=True, exist_ok=True)
    os.link(orion_world.workspace / target, link)
    _book(orion_world)["given_files"][path] = link.read_bytes()  # what "is unchanged" compares


@given("the workspace's orion.yaml is:")
def workspace_orion_yaml(orion_world: World, docstring: str) -> None:
    assert not orion_world.started, "orion.yaml is read when Orion starts: give it first"
    (orion_world.workspace / "orion.yaml").write_text(lines_of(docstring), encoding="utf-8")


@given(parsers.re(rf"the workspace has a FIFO {PATH}"))
def workspace_fifo(orion_world: World, path: str) -> None:
    """A named pipe nobody writes into: a reader that opens it blocking waits forever."""
    fifo = orion_world.workspace / path
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)


@when(parsers.re(rf"another program replaces {PATH} by a FIFO"))
def file_replaced_by_fifo(orion_world: World, path: str) -> None:
    """The file is removed and a named pipe nobody writes into takes its name."""
    fifo = orion_world.workspace / path
    fifo.unlink()
    os.mkfifo(fifo)


@given(parsers.re(rf"{PATH} has the mode (?P<mode>[0-7]{{3,4}})"))
def file_has_mode_given(orion_world: World, path: str, mode: str) -> None:
    (orion_world.workspace / path).chmod(int(mode, 8))


@then(parsers.re(rf"{PATH} has the mode (?P<mode>[0-7]{{3,4}})"))
def file_has_mode(orion_world: World, path: str, mode: str) -> None:
    actual = stat.S_IMODE((orion_world.workspace / path).stat().st_mode)
    assert actual == int(mode, 8), f"{path} has the mode {actual:o}"


def _needs_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"{what} needs root (as CI has)")


@given(parsers.re(rf'{PATH} belongs to the user "(?P<user>[\w-]+)" and the group '
                  r'"(?P<group>[\w-]+)"'))
def file_belongs_to_given(orion_world: World, path: str, user: str, group: str) -> None:
    _needs_root("giving a file to another user")
    import grp
    import pwd

    os.chown(orion_world.workspace / path, pwd.getpwnam(user).pw_uid, grp.getgrnam(group).gr_gid)


@then(parsers.re(rf'{PATH} belongs to the user "(?P<user>[\w-]+)" and the group '
                 r'"(?P<group>[\w-]+)"'))
def file_belongs_to(orion_world: World, path: str, user: str, group: str) -> None:
    import grp
    import pwd

    info = (orion_world.workspace / path).stat()
    owner = (pwd.getpwuid(info.st_uid).pw_name, grp.getgrgid(info.st_gid).gr_name)
    assert owner == (user, group), f"{path} belongs to {owner[0]}:{owner[1]}"


@given(parsers.re(rf"another user watches the directory of {PATH}"))
def other_user_watches(orion_world: World, path: str, request: pytest.FixtureRequest) -> None:
    """A process of the user ``nobody`` watches the file's directory (inotify) and tries to
    open and read every temp file the moment it is created
    (:mod:`orion.testing.observer`)."""
    _needs_root("watching as another user")
    import pwd

    from orion.testing.observer import Observer

    directory = (orion_world.workspace / path).parent
    directory.chmod(directory.stat().st_mode | 0o005)  # others may list and open in it
    observer = Observer(directory, user=pwd.getpwnam("nobody").pw_uid)
    request.addfinalizer(observer.stop)
    orion_world.data["observer"] = (path, observer)


@then(parsers.re(rf"the other user could read none of the new content of {PATH}"))
def other_user_read_nothing(orion_world: World, path: str) -> None:
    watched, observer = orion_world.data["observer"]
    assert watched == path, f"the other user watches the directory of {watched}"
    seen = observer.result()
    assert seen["created"] >= 1, f"no temp file appeared beside {path}: {seen}"
    assert seen["opened"] == 0 and seen["bytes"] == 0, f"the other user read it: {seen}"
    for status in seen["at_create"]:  # owner-only from the start
        assert status is None or status[0] & 0o077 == 0, seen


@when(parsers.re(rf"the user replaces {PATH} with a binary file"))
def user_replaces_with_binary(orion_world: World, path: str) -> None:
    orion_world.mark()
    data = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    (orion_world.workspace / path).write_bytes(data)
    _book(orion_world)["given_files"][path] = data  # what "is unchanged" compares with now


@given(parsers.re(r'the directory "(?P<path>[^"]+)" of the workspace is on a disk with '
                  r"(?P<size>\d+) KiB of space"), converters={"size": int})
def small_disk(orion_world: World, path: str, size: int, request: pytest.FixtureRequest) -> None:
    """A real tmpfs of ``size`` KiB mounted on the directory (it needs root, as in CI; the
    scenario is skipped where mounting is not permitted). Unmounted when the scenario ends."""
    directory = orion_world.workspace / path
    directory.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("needs mount(8) to put a directory on a small tmpfs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}k", "tmpfs",
                           str(directory)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(directory)],
                                                capture_output=True))


@then(parsers.re(r'the directory "(?P<path>[^"]+)" holds only '
                 r'(?P<names>"[^"]+"(?:(?:, | and )"[^"]+")*)'))
def directory_holds_only(orion_world: World, path: str, names: str) -> None:
    import re
    wanted = sorted(re.findall(r'"([^"]+)"', names))
    found = sorted(p.name for p in (orion_world.workspace / path).iterdir())
    assert found == wanted, f"{path} holds {found}, not only {wanted}"


@given("the operating system refuses to let write sessions save their content")
def journals_permission_denied(orion_world: World) -> None:
    """Every write-session journal opened from now on appends its content to a file the
    kernel refuses to open for writing (EACCES, root included)."""
    try:
        fd = os.open(PERMISSION_DENIED_FILE, os.O_WRONLY | os.O_APPEND)
    except OSError as exc:
        if exc.errno != errno.EACCES:
            pytest.skip(f"{PERMISSION_DENIED_FILE} gives {errno.errorcode.get(exc.errno or 0)} here, "
                        "not EACCES")
    else:
        os.close(fd)
        pytest.skip(f"{PERMISSION_DENIED_FILE} is writable here")
    assert orion_world.plugins is not None
    orion_world.plugins.register(ContentOn(PERMISSION_DENIED_FILE),
                                 "orion-testing-permission-denied")


# -- traces ------------------------------------------------------------------------------------


@when("a plugin records a trace event with the values NaN, infinity and bytes")
def plugin_records_non_json(orion_world: World) -> None:
    from orion.trace.events import Kind, TraceEvent

    runtime = orion_world.runtime
    orion_world.mark()
    runtime.tracer.emit(TraceEvent(
        Kind.VALIDATION_ISSUE, "plugin measurement", runtime.clock.now_ms(),
        runtime.conversation.id, "", {"ratio": math.nan, "limit": math.inf,
                                      "floor": -math.inf, "digest": b"\x00\xffraw"}))


# -- logs and the console ------------------------------------------------------------------------


@then("nothing Orion logged or printed holds the streamed content")
def nothing_logged_or_printed(orion_world: World) -> None:
    """No record of the ``orion.*`` loggers, nothing written to stdout or stderr during the
    scenario (captured from its start by the ``orion_world`` fixture), and no output of an
    ``orion`` command holds a line the model streamed."""
    lines = {line.rstrip("\n") for line in _book(orion_world)["streamed"] if line.strip()}
    assert lines, "the scenario streamed no content"
    capfd = orion_world.data.get("capfd")
    assert capfd is not None, "stdout and stderr are not captured in this scenario"
    out, err = capfd.readouterr()
    sys.stdout.write(out)  # still shown in pytest's report
    sys.stderr.write(err)
    places = {"stdout": out, "stderr": err}
    for run in _console(orion_world)["runs"]:
        places[f"orion {' '.join(run['args'])}"] = run["stdout"] + run["stderr"]
    for record in orion_world.log_records:
        places[f"log {record.name}"] = places.get(f"log {record.name}", "") + "\n" + \
            record.getMessage()
    for where, text in places.items():
        leaked = [line for line in lines if line in text]
        assert not leaked, f"{where} holds streamed content: {leaked[:3]}"


@then(parsers.re(rf"Orion logged {TEXT}"))
def orion_logged(orion_world: World, text: str) -> None:
    wanted = unescape(text)
    messages = [r.getMessage() for r in orion_world.log_records]
    assert any(wanted in m for m in messages), messages


# -- trace retention ---------------------------------------------------------------------------

AGES = r"(?P<ages>\d+(?:, \d+)*(?: and \d+)?)"


def _ages(text: str) -> list[int]:
    return [int(age) for age in text.replace(" and ", ", ").split(", ")]


def _aged(name: str) -> bool:
    return name.endswith(" days old")


@given(parsers.re(rf"the trace database holds events {AGES} days old"))
def trace_database_holds(orion_world: World, ages: str) -> None:
    """One event per age, named after it (``45 days old``), recorded that long before now in
    the workspace's ``orion.db`` through the trace store, as an earlier run would have."""
    from orion.trace.events import Kind, TraceEvent
    from orion.trace.recorder import DAY_MS
    from orion.trace.store import TraceStore

    now = time.time() * 1000.0
    with TraceStore(orion_world.state_dir / "orion.db") as store:
        for age in _ages(ages):
            assert store.write([TraceEvent(Kind.TOOL_CALL, f"{age} days old", now - age * DAY_MS,
                                           "earlier", "earlier", {"orion.tool.outcome": "ok"})])


@then(parsers.re(rf"the trace database holds the events {AGES} days old"))
def trace_database_holds_only(orion_world: World, ages: str) -> None:
    """Of the events the Given step recorded, exactly these are left."""
    from orion.trace.store import TraceStore

    with TraceStore(orion_world.state_dir / "orion.db") as store:
        left = {row["name"] for row in store.query(limit=1_000_000) if _aged(row["name"])}
    assert left == {f"{age} days old" for age in _ages(ages)}, sorted(left)
