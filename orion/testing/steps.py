"""The Gherkin step library: common steps and the write-session steps (docs/testing.md).

Loaded by Orion's pytest plugin (``orion.testing.plugin``), so every project that installs Orion
and pytest-bdd can use these steps in its own ``.feature`` files. Each step drives the real
runtime, statecharts and plugins of the scenario's :class:`~orion.testing.world.World` (the
``orion_world`` fixture) with the queued model and the virtual clock: nothing of Orion is
mocked, and no step sleeps.

Conventions:

* Quoted fields are typed and never greedy: ``"(?P<path>[^"]+)"``. Text the model sends is
  quoted with escapes: ``\\n`` (line break), ``\\t``, ``\\r``, ``\\"``, ``\\\\``, ``\\uXXXX`` (a
  character) and ``\\xNN`` (*the byte* NN: ``\\x00`` is NUL, ``\\xff`` an invalid UTF-8 byte).
* A docstring (``\"\"\"``) is sent or compared as its lines, each ended by a line break.
* "Generated lines" of a file are ``Line <n> of <path>.``; a scenario that streams 250 lines
  and then 10 more gets lines 1 to 260, in order.
* When the model is asked something and the scenario has not given the reply yet, the
  conversation waits at that request; the next step that makes the model say something
  answers it. Otherwise such a step starts a user turn (``Write <path>.`` / ``Go on.``).
* What a ``Then`` step checks about the model and the user ("is asked", "is told") is what
  happened since the last ``When`` (or ``Given``) step began.
* Orion errors (``OrionError``) do not end a step; a scenario fails at its end when an error
  happened that no ``Then Orion reports an error containing "..."`` step expected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pytest_bdd import given, parsers, step, then

from orion import hookimpl
from orion.runtime.context import STATE_NOTE
from orion.testing.world import World

# -- field patterns --------------------------------------------------------------------------

PATH = r'"(?P<path>[^"]+)"'
TEXT = r'"(?P<text>(?:[^"\\]|\\.)*)"'
COUNT = r"(?P<count>\d+)"
def _int(value: str | None) -> int | None:
    return None if value is None else int(value)


# pytest-bdd types a converter as taking a str; an optional group passes None, which _int keeps.
INT: dict[str, Callable[[str], object]] = {name: _int for name in ("count", "line", "ms", "amount", "size", "repeat", "first",
                               "last")}

DONE_PROMPT = "If you're finished, reply with DONE on its own line; otherwise continue."
CONTINUE_PROMPT = "Your output was cut off."
UNFINISHED_PROMPT = "Your message stopped in the middle of line"
CORRECTIONS_PROMPT = "Correction round"
UNITS_MS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "second": 1000, "seconds": 1000,
            "s": 1000, "minute": 60_000, "minutes": 60_000, "min": 60_000,
            "hour": 3_600_000, "hours": 3_600_000, "h": 3_600_000}
UNIT = r"(?P<unit>ms|milliseconds?|seconds?|s|minutes?|min|hours?|h)"

_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}


def unescape(text: str) -> str:
    """A quoted step field as the text it stands for (see the module docstring)."""
    def sub(match: re.Match[str]) -> str:
        code = match.group(1)
        if code[0] == "x" and len(code) == 3:
            byte = int(code[1:], 16)
            # A byte >= 0x80 on its own is not UTF-8: carried as the lone surrogate that
            # surrogateescape decodes it to, which Orion's journal writes back as that byte.
            return chr(byte) if byte < 0x80 else chr(0xDC00 + byte)
        if code[0] == "u" and len(code) == 5:
            return chr(int(code[1:], 16))
        if code in _SIMPLE:
            return _SIMPLE[code]
        raise ValueError(f"unknown escape \\{code} in a step (use \\n, \\t, \\r, \\\", \\\\, "
                         "\\xNN or \\uXXXX)")
    return _ESCAPE.sub(sub, text)


def to_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def lines_of(docstring: str) -> str:
    return docstring if docstring.endswith("\n") else docstring + "\n"


def quoted_list(text: str) -> list[str]:
    """``"a", "b" and "c"`` as ``["a", "b", "c"]``."""
    return re.findall(r'"([^"]*)"', text)


def duration_ms(amount: int, unit: str) -> float:
    return float(amount) * UNITS_MS[unit]


# -- the world's bookkeeping -----------------------------------------------------------------


def _book(world: World) -> dict[str, Any]:
    """What the steps remember about a scenario, in ``world.data``."""
    book = world.data.setdefault("steps", {
        "next_line": {},        # path -> the number of the next generated line
        "sessions": {},         # path -> id of the latest session begun for it
        "target": None,         # the path of the latest session begun
        "streamed": [],         # every line the model streamed (for the trace checks)
        "given_files": {},      # path -> bytes a Given step wrote
        "errors_checked": 0,    # world.errors up to here were expected by a Then step
        "listed": [],           # the last `orion sessions list`
        "recovered": None,      # the last `orion sessions recover --finalize` result
    })
    return book


def generated_line(path: str, n: int) -> str:
    return f"Line {n} of {path}.\n"


def generated(path: str, first: int, last: int) -> str:
    return "".join(generated_line(path, n) for n in range(first, last + 1))


def _manager(world: World):
    from orion.write_session.manager import manager_for
    return manager_for(world.runtime)


def _session(world: World, path: str | None = None):
    """The latest write session this runtime knows (for ``path``, if given)."""
    sessions = list(_manager(world).sessions)
    if path is not None:
        sessions = [s for s in sessions if s.plan.relative == path]
    assert sessions, (f"no write session {'for ' + repr(path) + ' ' if path else ''}in this "
                      f"runtime (started {world.starts} time(s))")
    return sessions[-1]


def _active_target(world: World) -> str | None:
    active = _manager(world).active if world.started else None
    return active.plan.relative if active is not None else None


def _session_id(world: World, path: str) -> str:
    book = _book(world)
    if path in book["sessions"]:
        return book["sessions"][path]
    from orion.write_session.orphans import scan
    found = [o for o in scan(world.state_dir, now_ms=world.now_ms, now_boot=world.now_boot)
             if o.target_file == path]
    assert found, f"no write session was begun for {path!r}"
    return found[-1].id


def _session_dir(world: World, path: str) -> Path:
    return world.state_dir / "write_sessions" / _session_id(world, path)


def _note_stream(world: World, text: str) -> None:
    book = _book(world)
    book["streamed"].extend(line for line in text.splitlines() if len(line.strip()) >= 12)


def _with_session_id(world: World, text: str) -> str:
    """``<session>`` in a model's text: the first 8 characters of the open session's id (what
    strict mode's terminator ``DONE <session>`` names)."""
    if "<session>" not in text:
        return text
    target = _active_target(world) or _book(world)["target"]
    return text.replace("<session>", _session_id(world, target)[:8])


def _model_says(world: World, **reply: Any) -> None:
    """The model's next message: it answers the request that waits, or the user asks for it."""
    if reply.get("text"):
        reply["text"] = _with_session_id(world, reply["text"])
    world.mark()
    text = reply.get("text") or "".join(reply.get("chunks") or [])
    if text:
        _note_stream(world, text)
    if world.paused:
        world.reply(**reply)
    else:
        world.reply(**reply)
        target = _book(world)["target"]
        world.say(f"Write {target}." if target else "Go on.")
    _record_begins(world)


def _record_begins(world: World) -> None:
    book = _book(world)
    for outcome in world.tools_since_mark:
        if outcome.name == "WritePlanTool_begin" and outcome.ok:
            result = json.loads(outcome.content)
            book["sessions"][result["target_file"]] = result["session_id"]
            book["target"] = result["target_file"]


def _begin(world: World, path: str, operation: str, **fields: Any) -> None:
    book = _book(world)
    book["target"] = path
    arguments = {"intent": f"{operation} {path}", "target_file": path, "operation": operation}
    arguments.update(fields)
    world.mark()
    call = {"name": "WritePlanTool_begin", "arguments": arguments}
    if world.paused:
        world.reply(tool_calls=[call])
    else:
        world.reply(tool_calls=[call])
        world.say(f"Please {operation} {path}.")
    _record_begins(world)


def _ensure_session(world: World, path: str | None) -> str:
    """The target of the open session; begin one (create) for ``path`` if none is open."""
    active = _active_target(world)
    if path is None:
        assert active is not None, "no write session is open; say which file to write"
        return active
    if active != path:
        _begin(world, path, "create")
        assert _active_target(world) == path, (
            f"WritePlanTool_begin for {path!r} did not open a session: "
            f"{[o.content for o in world.tools_since_mark]}")
    return path


def _per_line(text: str) -> dict[str, Any]:
    """Reply fields that stream ``text`` one line per chunk, as models stream long text."""
    chunks = text.splitlines(keepends=True)
    return {"chunks": chunks} if chunks else {"text": text}


def _next_lines(world: World, path: str, count: int) -> str:
    book = _book(world)
    first = book["next_line"].get(path, 1)
    book["next_line"][path] = first + count
    return generated(path, first, first + count - 1)


# -- common Given steps ----------------------------------------------------------------------


@given(parsers.re(rf"the workspace has a file {PATH} with {COUNT} lines?"), converters=INT)
def workspace_file_with_lines(orion_world: World, path: str, count: int) -> None:
    _write_given(orion_world, path, generated(path, 1, count).encode())


@given(parsers.re(rf"the workspace has a file {PATH} containing {TEXT}"))
def workspace_file_with_text(orion_world: World, path: str, text: str) -> None:
    _write_given(orion_world, path, to_bytes(unescape(text)))


@given(parsers.re(rf"the workspace has a file {PATH} containing:"))
def workspace_file_with_docstring(orion_world: World, path: str, docstring: str) -> None:
    _write_given(orion_world, path, lines_of(docstring).encode())


@given(parsers.re(rf"the workspace has a binary file {PATH}"))
def workspace_binary_file(orion_world: World, path: str) -> None:
    _write_given(orion_world, path, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))


@given(parsers.re(rf"the workspace has a directory {PATH}"))
def workspace_directory(orion_world: World, path: str) -> None:
    (orion_world.workspace / path).mkdir(parents=True, exist_ok=True)


def _write_given(world: World, path: str, data: bytes) -> None:
    target = world.workspace / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    _book(world)["given_files"][path] = data


@given(parsers.re(r'the "(?P<chart>\w+)" setting "(?P<name>\w+)" is (?P<value>[^\s"]+)'))
def statechart_setting(orion_world: World, chart: str, name: str, value: str) -> None:
    assert not orion_world.started, "settings are read when Orion starts: give them first"
    config = orion_world.workspace / "orion.yaml"
    data = yaml.safe_load(config.read_text(encoding="utf-8")) if config.exists() else None
    data = data or {}
    data.setdefault("settings", {}).setdefault(chart, {})[name] = yaml.safe_load(value)
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


@given(parsers.re(r'the environment variable "(?P<name>\w+)" is "(?P<value>[^"]*)"'))
def environment_variable(orion_world: World, name: str, value: str) -> None:
    assert not orion_world.started, "Orion reads its environment when it starts: set it first"
    orion_world.env[name] = value


@given("plan work is active")
def plan_work_is_active(orion_world: World) -> None:
    orion_world.mark()
    orion_world.say("/plan on")
    assert not orion_world.errors, f"/plan on failed: {orion_world.errors}"


@given(parsers.re(r"the disk holding the write-session journals is full"))
def disk_is_full(orion_world: World) -> None:
    """Every write-session journal opened from now on appends its content to ``/dev/full``,
    a real device whose writes fail with ENOSPC (``content.txt`` is a symbolic link to it)."""
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    assert orion_world.plugins is not None
    orion_world.plugins.register(ContentOn("/dev/full"), "orion-testing-full-disk")


class ContentOn:
    """A plugin that makes each new write session's journal append its content to ``target``
    (a full device, a file the kernel refuses) from its ``begin`` on: the journal then meets
    that fault for real. (Not a link in the journal's place: a journal never follows one.)"""

    def __init__(self, target: str | Path):
        self.target = target

    @hookimpl
    def lifecycle_transition(self, lifecycle, transition, host):
        if lifecycle.name != "write_session" or transition.trigger != "begin":
            return
        from orion.write_session.manager import manager_for

        # The journal itself, not the public view: this step plants a real fault under it.
        session = manager_for(host).get(lifecycle.id) if host is not None else None
        if session is not None:
            session.journal.redirect_content(self.target)


# -- the user and time -----------------------------------------------------------------------


@step(parsers.re(r'the user (?:says|types) "(?P<line>[^"]*)"'))
def user_says(orion_world: World, line: str) -> None:
    orion_world.mark()
    orion_world.say(line)
    _record_begins(orion_world)


@step(parsers.re(r"(?P<ms>\d+) ms pass(?:es)?"), converters=INT)
def ms_pass(orion_world: World, ms: int) -> None:
    orion_world.mark()
    orion_world.advance(ms)
    _record_begins(orion_world)


@step(parsers.re(r"(?P<amount>\d+) (?P<unit>seconds?|minutes?|hours?) pass(?:es)?"),
      converters=INT)
def time_passes(orion_world: World, amount: int, unit: str) -> None:
    orion_world.mark()
    orion_world.advance(duration_ms(amount, unit))
    _record_begins(orion_world)


@step("Orion crashes")
def orion_crashes(orion_world: World) -> None:
    orion_world.mark()
    orion_world.crash()


@step(parsers.re(rf"Orion starts again(?: (?P<amount>\d+) {UNIT} later)?"))
def orion_starts_again(orion_world: World, amount: str | None, unit: str | None) -> None:
    later = duration_ms(int(amount), unit) if amount and unit else 0.0
    orion_world.mark()
    if orion_world.started:
        orion_world.restart(after_ms=later)
    else:
        orion_world.start(after_ms=later)
    _record_begins(orion_world)


@step(parsers.re(rf"Orion exits and starts again(?: (?P<amount>\d+) {UNIT} later)?"))
def orion_exits_and_starts_again(orion_world: World, amount: str | None,
                                 unit: str | None) -> None:
    orion_world.mark()
    orion_world.restart(after_ms=duration_ms(int(amount), unit) if amount and unit else 0.0)
    _record_begins(orion_world)


# -- the model: tool calls -------------------------------------------------------------------


@step(parsers.re(rf'the model begins to (?P<operation>create|overwrite|append) {PATH}'
                 rf'(?: for "(?P<intent>[^"]+)")?'))
def begins_plain(orion_world: World, operation: str, path: str, intent: str | None) -> None:
    _begin(orion_world, path, operation, **({"intent": intent} if intent else {}))


@step(parsers.re(rf'the model begins to insert into {PATH} (?P<position>before|after) the line '
                 rf'(?P<kind>with|matching) "(?P<marker>[^"]+)"'))
def begins_insert(orion_world: World, path: str, position: str, kind: str,
                  marker: str) -> None:
    """``with "text"``: the marker is text; ``matching "pattern"``: a regular expression."""
    extra = {"marker_regex": True} if kind == "matching" else {}
    _begin(orion_world, path, "insert", location_marker=unescape(marker), position=position,
           **extra)


@step(parsers.re(rf'the model begins to replace the block of {PATH} between '
                 rf'"(?P<start>[^"]+)" and "(?P<end>[^"]+)"'))
def begins_replace_block(orion_world: World, path: str, start: str, end: str) -> None:
    _begin(orion_world, path, "replace_block", start_marker=unescape(start),
           end_marker=unescape(end))


@step(parsers.re(rf'the model begins to replace every "(?P<search>[^"]+)" in {PATH}'))
def begins_replace_all(orion_world: World, path: str, search: str) -> None:
    _begin(orion_world, path, "replace_all", search=unescape(search))


@step(parsers.re(r'the model calls "(?P<tool>\w+)" with the arguments:'))
def model_calls_tool_with_table(orion_world: World, tool: str,
                                datatable: list[list[str]]) -> None:
    """A data table of ``| argument | value |`` rows (Gherkin reads ``\\n`` in a cell as a
    line break, ``\\|`` as a bar and ``\\\\`` as a backslash); a first row that is that
    header names the columns, no argument."""
    arguments = {row[0]: row[1] for row in table_rows(datatable, "argument", "value")}
    _call(orion_world, {"name": tool, "arguments": arguments})


@step(parsers.re(r'the model calls "(?P<tool>\w+)" with:'))
def model_calls_tool(orion_world: World, tool: str, docstring: str) -> None:
    arguments = json.loads(docstring)
    _call(orion_world, {"name": tool, "arguments": arguments})


@step(parsers.re(r"the model calls \"(?P<tool>\w+)\" with the raw arguments '(?P<raw>[^']*)'"))
def model_calls_tool_raw(orion_world: World, tool: str, raw: str) -> None:
    _call(orion_world, {"name": tool, "arguments": raw})


@step(parsers.re(rf'the model calls "WritePlanTool_execute" to create {PATH} with {COUNT} '
                 r"bytes of (?P<accented>accented )?content"), converters=INT)
def model_calls_execute_with_size(orion_world: World, path: str, count: int,
                                  accented: str | None) -> None:
    # Accented: lines of two-byte characters, so the bytes outnumber the characters.
    line = ("\u00e9" * 31 + "x" if accented else "x" * 63) + "\n"
    content = line * (count // 64) + "x" * (count % 64)
    _call(orion_world, {"name": "WritePlanTool_execute", "arguments": {
        "intent": f"create {path}", "target_file": path, "operation": "create",
        "content": content}})


def table_rows(datatable: list[list[str]], *header: str) -> list[list[str]]:
    """The rows of a step's data table, without its first row when that row is ``header``
    (the column names, in any case): a header is never read as data."""
    if datatable and [cell.strip().lower() for cell in datatable[0]] == list(header):
        return datatable[1:]
    return datatable


def _call(world: World, call: dict[str, Any]) -> None:
    arguments = call["arguments"]
    if isinstance(arguments, dict):
        if "target_file" in arguments:
            _book(world)["target"] = arguments["target_file"]
        if isinstance(arguments.get("content"), str):
            _note_stream(world, arguments["content"])
    world.mark()
    world.reply(tool_calls=[call])
    if world.model.replies:  # nothing was waiting: the user asks
        world.say("Please do it.")
    _record_begins(world)


# -- the model: content ----------------------------------------------------------------------


@step(parsers.re(rf"the model streams {COUNT} (?:more )?lines?(?: to {PATH})? "
                 r"(?P<ending>without DONE|and DONE)"), converters=INT)
def model_streams_lines(orion_world: World, count: int, path: str | None, ending: str) -> None:
    target = _ensure_session(orion_world, path)
    text = _next_lines(orion_world, target, count)
    if ending == "and DONE":
        text += "DONE\n"
    _model_says(orion_world, **_per_line(text))


@step(parsers.re(rf"the model streams {COUNT} (?:more )?lines?(?: to {PATH})? and is cut off "
                 r'(?:with finish reason "(?P<reason>[^"]*)"|(?P<none>without a finish reason))'),
      converters=INT)
def model_streams_lines_cut_off(orion_world: World, count: int, path: str | None,
                                reason: str | None, none: str | None) -> None:
    target = _ensure_session(orion_world, path)
    text = _next_lines(orion_world, target, count)
    _model_says(orion_world, **_per_line(text), finish_reason=None if none else reason)


@step(parsers.re(rf"the model has streamed {COUNT} (?:more )?lines?(?: to {PATH})? so far"),
      converters=INT)
def model_is_streaming(orion_world: World, count: int, path: str | None) -> None:
    """The model is in the middle of a message: these lines arrived, the message goes on."""
    target = _ensure_session(orion_world, path)
    text = _next_lines(orion_world, target, count)
    _note_stream(orion_world, text)
    orion_world.mark()
    orion_world.stream_partial(text, per_line=True)


@step(parsers.re(r"the model repeats the last (?P<repeat>\d+) lines?, then streams "
                 rf"{COUNT} more lines? (?P<ending>without DONE|and DONE)"), converters=INT)
def model_repeats_then_streams(orion_world: World, repeat: int, count: int,
                               ending: str) -> None:
    target = _ensure_session(orion_world, None)
    book = _book(orion_world)
    upto = book["next_line"].get(target, 1) - 1
    text = generated(target, upto - repeat + 1, upto) + _next_lines(orion_world, target, count)
    if ending == "and DONE":
        text += "DONE\n"
    _model_says(orion_world, **_per_line(text))


@step(parsers.re(rf"the model continues after the last saved line with {COUNT} more lines? "
                 r"(?P<ending>without DONE|and DONE)"), converters=INT)
def model_continues_after_saved(orion_world: World, count: int, ending: str) -> None:
    """After a crash the model goes on from what the journal saved, not from what it sent."""
    target = _ensure_session(orion_world, None)
    saved = _session(orion_world, target).journal.lines
    _book(orion_world)["next_line"][target] = saved + 1
    text = _next_lines(orion_world, target, count) + ("DONE\n" if ending == "and DONE" else "")
    _model_says(orion_world, **_per_line(text))


@step(parsers.re(rf"the model starts the file over with {COUNT} lines from line 1 "
                 r"(?P<ending>without DONE|and DONE)"), converters=INT)
def model_starts_over(orion_world: World, count: int, ending: str) -> None:
    target = _ensure_session(orion_world, None)
    text = generated(target, 1, count) + ("DONE\n" if ending == "and DONE" else "")
    _model_says(orion_world, **_per_line(text))


@step(parsers.re(rf"the model replies {TEXT}"))
def model_replies(orion_world: World, text: str) -> None:
    _model_says(orion_world, text=unescape(text))


@step(parsers.re(rf'the model replies {TEXT} with finish reason "(?P<reason>[^"]*)"'))
def model_replies_with_reason(orion_world: World, text: str, reason: str) -> None:
    _model_says(orion_world, text=unescape(text), finish_reason=reason)


@step(parsers.re(r'the model replies in the chunks (?P<chunks>"(?:[^"\\]|\\.)*"'
                 r'(?:(?:, | and )"(?:[^"\\]|\\.)*")*)'))
def model_replies_in_chunks(orion_world: World, chunks: str) -> None:
    parts = [unescape(c) for c in re.findall(r'"((?:[^"\\]|\\.)*)"', chunks)]
    _model_says(orion_world, chunks=parts)


@step(parsers.re(r"the model replies with an empty message"))
def model_replies_empty(orion_world: World) -> None:
    _model_says(orion_world, text="")


@step(parsers.re(r"the model streams:"))
def model_streams_docstring(orion_world: World, docstring: str) -> None:
    _model_says(orion_world, text=lines_of(docstring), chunk_size=7)


@step(parsers.re(rf"the model streams {TEXT} as the content of {PATH} "
                 r"(?P<ending>without DONE|and DONE)"))
def model_streams_text_to(orion_world: World, text: str, path: str, ending: str) -> None:
    _ensure_session(orion_world, path)
    body = unescape(text) + ("DONE\n" if ending == "and DONE" else "")
    _model_says(orion_world, text=body)


@step(parsers.re(rf"the model writes {TEXT} to {PATH}"))
def model_writes(orion_world: World, text: str, path: str) -> None:
    """A whole write: begin (create), the text, and a line DONE."""
    _ensure_session(orion_world, path)
    body = unescape(text)
    if body and not body.endswith("\n"):
        body += "\n"
    _model_says(orion_world, text=body + "DONE\n")


@step(parsers.re(rf"the model writes to {PATH}:"))
def model_writes_docstring(orion_world: World, path: str, docstring: str) -> None:
    _ensure_session(orion_world, path)
    _model_says(orion_world, text=lines_of(docstring) + "DONE\n")


@step(parsers.re(rf"the model corrects line (?P<line>\d+) to {TEXT}"), converters=INT)
def model_corrects_line(orion_world: World, line: int, text: str) -> None:
    _model_says(orion_world, text=f"L{line}: {unescape(text)}\n")


@step(parsers.re(r"the model replies with the corrections:"))
def model_replies_with_corrections(orion_world: World, docstring: str) -> None:
    _model_says(orion_world, text=lines_of(docstring))


@step(parsers.re(rf"the user deletes {PATH}"))
def user_deletes(orion_world: World, path: str) -> None:
    orion_world.mark()
    (orion_world.workspace / path).unlink()


@step(parsers.re(rf"the user changes {PATH} to {TEXT}"))
def user_changes_file(orion_world: World, path: str, text: str) -> None:
    orion_world.mark()
    (orion_world.workspace / path).write_bytes(to_bytes(unescape(text)))


# -- Then: the model -------------------------------------------------------------------------


def _latest_request(world: World):
    assert world.model.requests, "the model was never asked anything"
    return world.model.requests[-1]


def _asked_since(world: World, text: str) -> bool:
    return any(text in (request.newest_orion_message or "")
               for request in world.requests_since_mark)


def _show_requests(world: World) -> str:
    shown = [repr((r.newest_orion_message or "")[:160]) for r in world.requests_since_mark]
    return "; ".join(shown) or "no request"


@then("the model is asked to reply DONE")
def asked_to_reply_done(orion_world: World) -> None:
    assert _asked_since(orion_world, DONE_PROMPT), \
        f"the model was not asked to reply DONE: {_show_requests(orion_world)}"


@then("the model is not asked to reply DONE")
def not_asked_to_reply_done(orion_world: World) -> None:
    assert not _asked_since(orion_world, DONE_PROMPT), _show_requests(orion_world)
    assert DONE_PROMPT not in orion_world.prompts_since_mark


@then("the model was asked to reply DONE once")
def asked_to_reply_done_once(orion_world: World) -> None:
    """In the whole scenario, the idle prompt went into the conversation exactly once."""
    asked = [p for p in orion_world.reporter.prompts if DONE_PROMPT in p]
    assert len(asked) == 1, f"the model was asked to reply DONE {len(asked)} times"


@then("the model is not asked anything")
def not_asked_anything(orion_world: World) -> None:
    assert not orion_world.requests_since_mark, \
        f"the model was asked: {_show_requests(orion_world)}"


@then(parsers.re(rf"the model is asked {COUNT} times?"), converters=INT)
def asked_times(orion_world: World, count: int) -> None:
    assert len(orion_world.requests_since_mark) == count, _show_requests(orion_world)


@then("the model is asked to continue")
def asked_to_continue(orion_world: World) -> None:
    assert _asked_since(orion_world, CONTINUE_PROMPT), \
        f"the model was not asked to continue: {_show_requests(orion_world)}"


@then("the model is not asked to continue")
def not_asked_to_continue(orion_world: World) -> None:
    assert not _asked_since(orion_world, CONTINUE_PROMPT), _show_requests(orion_world)


@then(parsers.re(r"the model is asked for corrections(?: of line (?P<line>\d+))?"),
      converters=INT)
def asked_for_corrections(orion_world: World, line: int | None) -> None:
    prompts = [r.newest_orion_message or "" for r in orion_world.requests_since_mark
               if CORRECTIONS_PROMPT in (r.newest_orion_message or "")]
    assert prompts, f"the model was not asked for corrections: {_show_requests(orion_world)}"
    if line is not None:
        assert re.search(rf"^L{line}: ", prompts[-1], re.M), prompts[-1]


@then("the model is not asked for corrections")
def not_asked_for_corrections(orion_world: World) -> None:
    assert not _asked_since(orion_world, CORRECTIONS_PROMPT), _show_requests(orion_world)


@then(parsers.re(rf"the prompt contains {TEXT}"))
def prompt_contains(orion_world: World, text: str) -> None:
    newest = _latest_request(orion_world).newest_orion_message or ""
    wanted = _with_session_id(orion_world, unescape(text))
    assert wanted in newest, f"{wanted!r} not in {newest!r}"


@then(parsers.re(rf"the prompt does not contain {TEXT}"))
def prompt_does_not_contain(orion_world: World, text: str) -> None:
    newest = _latest_request(orion_world).newest_orion_message or ""
    assert unescape(text) not in newest, newest


def _system_context(request: Any) -> str:
    """The system context of a request: its system message, and the state the volatile
    blocks carry after the conversation (see ``orion.runtime.context.with_state_note``)."""
    system = request.messages[0]["content"]
    last = request.messages[-1].get("content") or ""
    at = last.find(STATE_NOTE)
    return system if at < 0 else f"{system}\n\n{last[at:]}"


@then(parsers.re(rf"the system prompt contains {TEXT}"))
def system_prompt_contains(orion_world: World, text: str) -> None:
    system = _system_context(_latest_request(orion_world))
    assert unescape(text) in system, system


@then(parsers.re(rf"the system prompt does not contain {TEXT}"))
def system_prompt_does_not_contain(orion_world: World, text: str) -> None:
    system = _system_context(_latest_request(orion_world))
    assert unescape(text) not in system, system


@then(parsers.re(rf"the model is told {TEXT}"))
def model_is_told(orion_world: World, text: str) -> None:
    wanted = unescape(text)
    said = [*orion_world.prompts_since_mark,
            *(o.content for o in orion_world.tools_since_mark)]
    assert any(wanted in s for s in said), f"{wanted!r} not in {said!r}"


@then(parsers.re(rf"the conversation does not hold {TEXT}"))
def conversation_does_not_hold(orion_world: World, text: str) -> None:
    wanted = unescape(text)
    for message in orion_world.runtime.conversation.messages:
        assert wanted not in (message.content or ""), message
        for call in message.tool_calls or []:
            assert wanted not in call["function"]["arguments"], call


@then(parsers.re(rf"the conversation holds {TEXT}"))
def conversation_holds(orion_world: World, text: str) -> None:
    wanted = unescape(text)
    assert any(wanted in (m.content or "") for m in orion_world.runtime.conversation.messages)


# -- Then: tools -----------------------------------------------------------------------------


def _advertised(world: World) -> dict[str, dict[str, Any]]:
    if world.model.requests:
        tools = world.model.requests[-1].tools
    else:  # nothing asked yet: what the next request would carry
        from orion.tools.gating import GateRequest, advertised
        runtime = world.runtime
        specs = advertised(runtime.plugins, list(runtime.plugins.registry.tools.values()),
                           GateRequest(conversation_id=runtime.conversation.id,
                                       states=runtime.states(), tags=runtime.tags(),
                                       host=runtime))
        tools = [spec.openai_definition() for spec in specs]
    return {tool["function"]["name"]: tool["function"] for tool in tools}


@then(parsers.re(r'the tool "(?P<tool>\w+)" is advertised'))
def tool_is_advertised(orion_world: World, tool: str) -> None:
    assert tool in _advertised(orion_world), sorted(_advertised(orion_world))


@then(parsers.re(r'the tool "(?P<tool>\w+)" is not advertised'))
def tool_is_not_advertised(orion_world: World, tool: str) -> None:
    assert tool not in _advertised(orion_world), sorted(_advertised(orion_world))


@then(parsers.re(r'the advertised tools are (?P<tools>"[^"]+"(?:(?:, | and )"[^"]+")*)'))
def advertised_tools_are(orion_world: World, tools: str) -> None:
    assert sorted(_advertised(orion_world)) == sorted(quoted_list(tools))


@then(parsers.re(r'no advertised tool has a parameter "(?P<param>\w+)"'))
def no_tool_has_parameter(orion_world: World, param: str) -> None:
    for name, function in _advertised(orion_world).items():
        assert param not in function["parameters"].get("properties", {}), name


@then(parsers.re(r'the tool "(?P<tool>\w+)" has no parameter "(?P<param>\w+)"'))
def tool_has_no_parameter(orion_world: World, tool: str, param: str) -> None:
    assert param not in _advertised(orion_world)[tool]["parameters"].get("properties", {})


@then(parsers.re(r'the tool "(?P<tool>\w+)" takes (?P<params>"\w+"(?:(?:, | and )"\w+")*)'))
def tool_takes(orion_world: World, tool: str, params: str) -> None:
    properties = _advertised(orion_world)[tool]["parameters"].get("properties", {})
    for param in quoted_list(params):
        assert param in properties, (param, sorted(properties))


@then(parsers.re(r'the parameter "(?P<param>\w+)" of "(?P<tool>\w+)" takes at most '
                 rf"{COUNT} characters"), converters=INT)
def parameter_is_bounded(orion_world: World, param: str, tool: str, count: int) -> None:
    schema = _advertised(orion_world)[tool]["parameters"]["properties"][param]
    bounds = [schema.get("maxLength")] + [alt.get("maxLength") for alt in schema.get("anyOf", [])]
    assert count in bounds, schema


def _last_outcome(world: World):
    outcomes = world.tools_since_mark or world.reporter.tools
    assert outcomes, "the model made no tool call"
    return outcomes[-1]


@then(parsers.re(rf"the model made {COUNT} tool calls?"), converters=INT)
def model_made_tool_calls(orion_world: World, count: int) -> None:
    made = [o.name for o in orion_world.reporter.tools]
    assert len(made) == count, made


@then(parsers.re(rf"the user typed {COUNT} lines?"), converters=INT)
def user_typed(orion_world: World, count: int) -> None:
    assert len(orion_world.reporter.users) == count, orion_world.reporter.users


@then("the tool call succeeds")
def tool_call_succeeds(orion_world: World) -> None:
    outcome = _last_outcome(orion_world)
    assert outcome.ok, outcome.content


@then(parsers.re(rf"the tool call is refused with a message containing {TEXT}"))
def tool_call_refused(orion_world: World, text: str) -> None:
    outcome = _last_outcome(orion_world)
    assert not outcome.ok, outcome.content
    message = json.loads(outcome.content)["error"]
    assert unescape(text) in message, message


@then(parsers.re(r'the tool call is refused as "(?P<kind>\w+)"'))
def tool_call_refused_as(orion_world: World, kind: str) -> None:
    outcome = _last_outcome(orion_world)
    assert (outcome.ok, outcome.kind) == (False, kind), outcome.content


@then(parsers.re(rf"the tool call is denied with a message containing {TEXT}"))
def tool_call_denied(orion_world: World, text: str) -> None:
    outcome = _last_outcome(orion_world)
    assert outcome.kind == "denied", outcome.content
    message = json.loads(outcome.content)["error"]
    assert unescape(text) in message, message


@then(parsers.re(r'the tool result has the fields (?P<fields>"\w+"(?:(?:, | and )"\w+")*)'))
def tool_result_fields(orion_world: World, fields: str) -> None:
    result = json.loads(_last_outcome(orion_world).content)
    assert sorted(result) == sorted(quoted_list(fields)), sorted(result)


@then(parsers.re(r'the tool result says "(?P<field>\w+)" is "(?P<value>[^"]*)"'))
def tool_result_field_is(orion_world: World, field: str, value: str) -> None:
    result = json.loads(_last_outcome(orion_world).content)
    assert str(result.get(field)) == value, result


@then(parsers.re(rf"the tool result's \"session_dir\" is the journal of {PATH}"))
def tool_result_session_dir(orion_world: World, path: str) -> None:
    result = json.loads(_last_outcome(orion_world).content)
    directory = Path(result["session_dir"])
    assert directory == _session_dir(orion_world, path), result
    assert (directory / "metadata.json").is_file(), sorted(directory.iterdir())


# -- Then: files -----------------------------------------------------------------------------


def _file(world: World, path: str) -> Path:
    return world.workspace / path


@then(parsers.re(rf"{PATH} has {COUNT} lines?"), converters=INT)
def file_has_lines(orion_world: World, path: str, count: int) -> None:
    data = _file(orion_world, path).read_bytes()
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    assert lines == count, f"{path} has {lines} lines"


@then(parsers.re(rf"{PATH} holds the generated lines (?P<first>\d+) to (?P<last>\d+)"),
      converters=INT)
def file_holds_generated(orion_world: World, path: str, first: int, last: int) -> None:
    data = _file(orion_world, path).read_text(encoding="utf-8")
    expected = generated(path, first, last)
    assert data == expected, _first_difference(data, expected)


def _first_difference(actual: str, expected: str) -> str:
    for n, (a, e) in enumerate(zip(actual.splitlines(), expected.splitlines()), start=1):
        if a != e:
            return f"line {n}: {a!r} instead of {e!r}"
    return (f"{len(actual.splitlines())} lines instead of {len(expected.splitlines())}; "
            f"ends {actual[-80:]!r}")


@then(parsers.re(rf"{PATH} exists"))
def file_exists(orion_world: World, path: str) -> None:
    assert _file(orion_world, path).is_file(), f"{path} does not exist"


@then(parsers.re(rf"{PATH} does not exist"))
def file_does_not_exist(orion_world: World, path: str) -> None:
    assert not _file(orion_world, path).exists(), f"{path} exists"


@then(parsers.re(rf"{PATH} contains {TEXT}"))
def file_contains(orion_world: World, path: str, text: str) -> None:
    data = _file(orion_world, path).read_bytes()
    assert to_bytes(unescape(text)) in data, data[-400:]


@then(parsers.re(rf"{PATH} does not contain {TEXT}"))
def file_does_not_contain(orion_world: World, path: str, text: str) -> None:
    data = _file(orion_world, path).read_bytes()
    assert to_bytes(unescape(text)) not in data, data[-400:]


@then(parsers.re(rf"the content of {PATH} is:"))
def file_content_is(orion_world: World, path: str, docstring: str) -> None:
    data = _file(orion_world, path).read_bytes().decode("utf-8", "surrogateescape")
    assert data == lines_of(docstring), f"{data!r}"


@then(parsers.re(rf"the content of {PATH} is {TEXT}"))
def file_content_is_text(orion_world: World, path: str, text: str) -> None:
    data = _file(orion_world, path).read_bytes()
    assert data == to_bytes(unescape(text)), f"{data!r}"


@then(parsers.re(rf"{PATH} is unchanged"))
def file_is_unchanged(orion_world: World, path: str) -> None:
    before = _book(orion_world)["given_files"][path]
    assert _file(orion_world, path).read_bytes() == before


@then(parsers.re(rf"{PATH} is valid UTF-8"))
def file_is_utf8(orion_world: World, path: str) -> None:
    _file(orion_world, path).read_bytes().decode("utf-8")


@then("no file outside the workspace changed")
def nothing_outside_changed(orion_world: World) -> None:
    assert not orion_world.outside_changed(), "a file outside the workspace changed"


@then(parsers.re(rf"a backup of {PATH} holds its previous content"))
def backup_holds_previous(orion_world: World, path: str) -> None:
    """A copy of the file as it was, or (an append) the range the append added, which gives
    the file as it was back from the file as it is."""
    from orion.write_session.operations import read_append_range

    before = _book(orion_world)["given_files"][path]
    backups = [p for p in (orion_world.state_dir / "backups").rglob(Path(path).name)
               if p.is_file()]
    if any(p.read_bytes() == before for p in backups):
        return
    current = _file(orion_world, path).read_bytes()
    ranges = [read_append_range(p) for p in (orion_world.state_dir / "appends").glob("*.json")]
    assert any(r is not None and r.target_file == path and r.pre_image(current) == before
               for r in ranges), (backups, ranges)


# -- Then: write sessions --------------------------------------------------------------------


@then(parsers.re(rf"a write session is open for {PATH}"))
def session_is_open(orion_world: World, path: str) -> None:
    assert _active_target(orion_world) == path, _active_target(orion_world)


@then("no write session is open")
def no_session_is_open(orion_world: World) -> None:
    assert _active_target(orion_world) is None, _active_target(orion_world)


@then(parsers.re(r'the write session is in state "(?P<state>[\w.]+)"'))
def session_state(orion_world: World, state: str) -> None:
    lifecycle = _session(orion_world).lifecycle
    assert _names_state(lifecycle.state, state), lifecycle.state


#: What a reader calls the states of the write-session statechart, by the tag (in the chart's
#: contract) that marks each: a team's overlay may rename or add states and these steps hold.
STATE_WORDS = {
    "not started": "not_started",
    "waiting for content": "receiving",
    "waiting for DONE or more content": "paused",
    "waiting for the rest of the cut-off output": "continuing",
    "checking the content": "finalizing",
    "waiting for corrections": "correcting",
    "written": "written",
    "abandoned": "abandoned",
}
_STATE_PHRASE = "|".join(re.escape(w) for w in sorted(STATE_WORDS, key=len, reverse=True))


@then(parsers.re(rf"the write session is (?P<words>{_STATE_PHRASE})"))
def session_state_in_words(orion_world: World, words: str) -> None:
    """The open session's state in the reader's words (``STATE_WORDS``)."""
    lifecycle = _session(orion_world).lifecycle
    assert lifecycle.has_tag(STATE_WORDS[words]), \
        f"{lifecycle.state} has tags {sorted(lifecycle.definition.tags.get(lifecycle.state, ()))}"


@then(parsers.re(rf"the write session went from "
                 rf"(?P<words>(?:{_STATE_PHRASE})(?: to (?:{_STATE_PHRASE}))+)"))
def session_went_in_words(orion_world: World, words: str) -> None:
    """``went from waiting for content to checking the content to written``: states with
    these tags, in this order (others may come between)."""
    session = _session(orion_world)
    tags = session.lifecycle.definition.tags
    seen = [session.lifecycle.definition.initial_leaf] + _went_through(orion_world, session)
    wanted = [STATE_WORDS[w] for w in re.findall(_STATE_PHRASE, words)]
    it = iter(tags.get(state, frozenset()) for state in seen)
    assert all(any(tag in found for found in it) for tag in wanted), f"went through {seen}"


@then(parsers.re(rf'the write session of {PATH} is "(?P<status>\w+)"'))
def session_status(orion_world: World, path: str, status: str) -> None:
    session = _session(orion_world, path)
    assert session.status == status, session.status


@then(parsers.re(rf"the write session has {COUNT} continuations?"), converters=INT)
def session_continuations(orion_world: World, count: int) -> None:
    assert _session(orion_world).lifecycle.context.get("continuations", 0) == count


@then(parsers.re(rf"the write session has {COUNT} correction rounds?"), converters=INT)
def session_corrections(orion_world: World, count: int) -> None:
    assert _session(orion_world).lifecycle.context.get("corrections", 0) == count


@then(parsers.re(r'the write session went through (?P<states>"[\w.]+"(?:(?:, | and )"[\w.]+")*)'))
def session_went_through(orion_world: World, states: str) -> None:
    session = _session(orion_world)
    seen = [session.lifecycle.definition.initial_leaf] + _went_through(orion_world, session)
    it = iter(seen)
    assert all(any(_names_state(path, state) for path in it) for state in quoted_list(states)), \
        f"went through {seen}"


def _names_state(path: str, name: str) -> bool:
    """Whether ``name`` (a state's path, or its own name alone) names the state at ``path``."""
    return path == name or path.endswith("." + name)


def _went_through(orion_world: World, session: Any) -> list[str]:
    """The states the session's lifecycle entered, in order, as its trace recorded them."""
    return [event["attributes"]["orion.dest"] for event in _trace_events(orion_world)
            if event["kind"] == "transition"
            and event["attributes"].get("orion.lifecycle") == "write_session"
            and event["session_id"] == session.id]


@then(parsers.re(r"(?P<count>\d+|one) write sessions? (?:was|were) begun"))
def sessions_begun(orion_world: World, count: str) -> None:
    begun = [o for o in orion_world.reporter.tools
             if o.name == "WritePlanTool_begin" and o.ok]
    assert len(begun) == (1 if count == "one" else int(count)), len(begun)


# -- Then: the journal -----------------------------------------------------------------------


def _lines_on_disk(world: World, path: str) -> int:
    content = _session_dir(world, path) / "content.txt"
    return content.read_bytes().count(b"\n") if content.exists() else 0


@then(parsers.re(rf"the journal of {PATH} holds {COUNT} lines? on disk"), converters=INT)
def journal_lines_on_disk(orion_world: World, path: str, count: int) -> None:
    assert _lines_on_disk(orion_world, path) == count, _lines_on_disk(orion_world, path)


@then(parsers.re(rf"the journal of {PATH} holds (?P<files>\"[\w.]+\"(?:(?:, | and )\"[\w.]+\")*)"))
def journal_files(orion_world: World, path: str, files: str) -> None:
    directory = _session_dir(orion_world, path)
    present = sorted(p.name for p in directory.iterdir())
    for name in quoted_list(files):
        assert name in present, present


#: What a reader calls the files of a session's journal.
JOURNAL_WORDS = {"the plan": "metadata.json", "the content": "content.txt",
                 "the counts": "state.json", "its owner's lock": "lock"}
_JOURNAL_PHRASE = "|".join(re.escape(w) for w in JOURNAL_WORDS)


@then(parsers.re(rf"the journal of {PATH} holds "
                 rf"(?P<words>(?:{_JOURNAL_PHRASE})(?:(?:, | and )(?:{_JOURNAL_PHRASE}))*)"))
def journal_holds_in_words(orion_world: World, path: str, words: str) -> None:
    names = [JOURNAL_WORDS[w] for w in re.findall(_JOURNAL_PHRASE, words)]
    journal_files(orion_world, path, ", ".join(f'"{n}"' for n in names))


@then(parsers.re(rf"the journal of {PATH} records the plan"))
def journal_records_plan(orion_world: World, path: str) -> None:
    journal_metadata(orion_world, path, '"intent", "target_file", "operation" and "plan"')


@then(parsers.re(rf"the journal of {PATH} counts {COUNT} lines?"), converters=INT)
def journal_counts_lines(orion_world: World, path: str, count: int) -> None:
    journal_state_lines(orion_world, path, count)


@then(parsers.re(rf"the journal of {PATH} records the intent {TEXT}"))
def journal_records_intent(orion_world: World, path: str, text: str) -> None:
    metadata = json.loads((_session_dir(orion_world, path) / "metadata.json").read_text())
    assert metadata.get("intent") == unescape(text), metadata


@then(parsers.re(rf'the journal metadata of {PATH} records (?P<keys>"\w+"(?:(?:, | and )"\w+")*)'))
def journal_metadata(orion_world: World, path: str, keys: str) -> None:
    metadata = json.loads((_session_dir(orion_world, path) / "metadata.json").read_text())
    for key in quoted_list(keys):
        assert key in metadata, sorted(metadata)
    assert metadata["target_file"] == path


@then(parsers.re(rf"the journal state of {PATH} records {COUNT} lines?"), converters=INT)
def journal_state_lines(orion_world: World, path: str, count: int) -> None:
    from orion.write_session.journal import read_state

    state, problem = read_state(_session_dir(orion_world, path))
    assert state is not None, problem
    assert state["lines"] == count, state


@then(parsers.re(rf"the journal of {PATH} is gone"))
def journal_is_gone(orion_world: World, path: str) -> None:
    assert not _session_dir(orion_world, path).exists()


@then(parsers.re(rf"the journal of {PATH} is still there"))
def journal_is_there(orion_world: World, path: str) -> None:
    assert _session_dir(orion_world, path).is_dir()


@then("no write session directory is left")
def no_session_directories(orion_world: World) -> None:
    root = orion_world.state_dir / "write_sessions"
    left = sorted(p.name for p in root.iterdir()) if root.exists() else []
    assert not left, left


# -- crash recovery and the session commands -------------------------------------------------


@then(parsers.re(rf"recovery of {PATH} is offered"))
def recovery_offered(orion_world: World, path: str) -> None:
    short = _session_id(orion_world, path)[:8]
    offers = [n for n in orion_world.notices_since_mark
              if n.startswith(f"orphaned write session {short} for {path}")
              and "--finalize | --continue" in n]
    assert offers, orion_world.notices_since_mark


@then("no recovery is offered")
def no_recovery_offered(orion_world: World) -> None:
    offers = [n for n in orion_world.notices_since_mark
              if n.startswith("orphaned write session") or "--finalize | --continue" in n]
    assert not offers, offers


def _orphan(world: World, path: str):
    from orion.write_session.orphans import scan
    wanted = _session_id(world, path)
    for orphan in scan(world.state_dir, now_ms=world.now_ms, now_boot=world.now_boot):
        if orphan.id == wanted:
            return orphan
    raise AssertionError(f"no write session directory for {path!r}")


def _command(world: World, action: Any) -> Any:
    """Run one `orion sessions` operation; Orion errors are kept like a conversation's."""
    from orion.errors import OrionError
    world.mark()
    try:
        return action()
    except OrionError as exc:
        world.errors.append(exc)
        return None


@step("the user lists the write sessions")
def user_lists_sessions(orion_world: World) -> None:
    from orion.write_session.orphans import scan
    _book(orion_world)["listed"] = scan(orion_world.state_dir, now_ms=orion_world.now_ms,
                                      now_boot=orion_world.now_boot)


@then(parsers.re(rf"the list shows the write session of {PATH} with {COUNT} lines?"),
      converters=INT)
def list_shows(orion_world: World, path: str, count: int) -> None:
    listed = _book(orion_world)["listed"]
    rows = [o for o in listed if o.target_file == path]
    assert rows and rows[-1].lines == count, [(o.target_file, o.lines) for o in listed]
    json.dumps(rows[-1].to_json())  # what `orion sessions list --json` prints


@step(parsers.re(r'the user recovers the write session "(?P<session_id>[^"]+)" with --finalize'))
def user_recovers_by_id(orion_world: World, session_id: str) -> None:
    from orion.write_session.recover import recover_finalize
    plugins = orion_world.plugins
    assert plugins is not None
    _book(orion_world)["recovered"] = _command(orion_world, lambda: recover_finalize(
        orion_world.workspace, orion_world.state_dir, session_id, plugins))


@step(parsers.re(rf"the user recovers the write session of {PATH} with "
                 r"--(?P<mode>finalize|continue)"))
def user_recovers(orion_world: World, path: str, mode: str) -> None:
    from orion.write_session.orphan_commands import mark_resume
    from orion.write_session.recover import recover_finalize
    book = _book(orion_world)
    session_id = _session_id(orion_world, path)
    if mode == "finalize":
        plugins = orion_world.plugins
        assert plugins is not None
        book["recovered"] = _command(orion_world, lambda: recover_finalize(
            orion_world.workspace, orion_world.state_dir, session_id, plugins))
    else:
        _command(orion_world, lambda: mark_resume(orion_world.state_dir, session_id,
                                                  now_ms=orion_world.now_ms))


@then(parsers.re(rf"the recovery reports {TEXT}"))
def recovery_reports(orion_world: World, text: str) -> None:
    result = _book(orion_world)["recovered"]
    assert result is not None, orion_world.errors
    assert unescape(text) in result.report, result.report


@step(parsers.re(rf"the user discards the write session of {PATH}"))
def user_discards(orion_world: World, path: str) -> None:
    from orion.write_session.orphan_commands import discard
    session_id = _session_id(orion_world, path)
    _command(orion_world, lambda: discard(orion_world.state_dir, session_id))


@step(parsers.re(rf"the user cleans up the write sessions older than (?P<amount>\d+) {UNIT}"),
      converters=INT)
def user_cleans(orion_world: World, amount: int, unit: str) -> None:
    from orion.write_session.orphan_commands import clean
    removed = _command(orion_world, lambda: clean(
        orion_world.state_dir, duration_ms(amount, unit), now_ms=orion_world.now_ms,
        now_boot=orion_world.now_boot))
    _book(orion_world)["cleaned"] = removed or []


@step(parsers.re(rf"the user undoes the write session of {PATH}"))
def user_undoes(orion_world: World, path: str) -> None:
    from orion.write_session.orphan_commands import undo
    session_id = _session_id(orion_world, path)
    _command(orion_world, lambda: undo(orion_world.workspace, orion_world.state_dir, session_id,
                                       now_ms=orion_world.now_ms))


# -- Then: what people are told, errors ------------------------------------------------------


@then(parsers.re(rf"the user is told {TEXT}"))
def user_is_told(orion_world: World, text: str) -> None:
    """A notice since the last When (or Given) step began."""
    wanted = unescape(text)
    notices = orion_world.notices_since_mark
    assert any(wanted in n for n in notices), notices


@then(parsers.re(rf"the user is not told {TEXT}"))
def user_is_not_told(orion_world: World, text: str) -> None:
    wanted = unescape(text)
    assert not any(wanted in n for n in orion_world.notices_since_mark)


@then(parsers.re(rf"the user is warned once {TEXT}"))
def user_is_warned_once(orion_world: World, text: str) -> None:
    wanted = unescape(text)
    found = [n for n in orion_world.reporter.notices if wanted in n]
    assert len(found) == 1, orion_world.reporter.notices


@then(parsers.re(rf"the command answers {TEXT}"))
def command_answers(orion_world: World, text: str) -> None:
    """A slash command's answer since the last When (or Given) step began."""
    wanted = unescape(text)
    replies = orion_world.replies_since_mark
    assert any(wanted in r for r in replies), replies


@then(parsers.re(rf"Orion reports an error containing {TEXT}"))
def orion_reports_error(orion_world: World, text: str) -> None:
    book = _book(orion_world)
    errors = orion_world.errors[book["errors_checked"]:]
    wanted = unescape(text)
    assert any(wanted in str(e) for e in errors), [str(e) for e in errors]
    book["errors_checked"] = len(orion_world.errors)


@then("no error occurred")
def no_error(orion_world: World) -> None:
    book = _book(orion_world)
    assert orion_world.errors[book["errors_checked"]:] == [], orion_world.errors


def unexpected_errors(world: World) -> list[Any]:
    """The Orion errors no ``Orion reports an error`` step expected."""
    return world.errors[_book(world)["errors_checked"]:] if "steps" in world.data \
        else list(world.errors)


# -- Then: traces ----------------------------------------------------------------------------


def _trace_events(world: World) -> list[dict[str, Any]]:
    return world.trace_events()


@then(parsers.re(r'the trace has a "(?P<kind>\w+)" event named "(?P<name>[^"]+)"'))
def trace_has_event(orion_world: World, kind: str, name: str) -> None:
    events = _trace_events(orion_world)
    assert any(e["kind"] == kind and e["name"].startswith(name) for e in events), \
        sorted({(e["kind"], e["name"]) for e in events})


def _strict_json(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"{token} is not JSON")
    return json.loads(text, parse_constant=refuse)


@then(parsers.re(rf"the trace records {TEXT}"))
def trace_records(orion_world: World, text: str) -> None:
    """An event whose name starts with the text (``wrote docs/guide.md``)."""
    wanted = unescape(text)
    names = sorted({e["name"] for e in _trace_events(orion_world)})
    assert any(name.startswith(wanted) for name in names), names


@then("every trace event is JSON")
def trace_is_json(orion_world: World) -> None:
    """Every stored event's attributes, as the database holds them, parse as strict JSON
    (no NaN or Infinity tokens) and re-serialize without them."""
    import contextlib
    import sqlite3

    orion_world.runtime.tracer.flush(wait=True)
    database = orion_world.state_dir / "orion.db"
    assert database.exists(), "no trace was stored"
    with contextlib.closing(sqlite3.connect(database)) as connection:
        rows = connection.execute("SELECT kind, name, attributes FROM trace_events").fetchall()
    assert rows, "no trace event was stored"
    for kind, name, attributes in rows:
        try:
            json.dumps(_strict_json(attributes), allow_nan=False)
        except ValueError as exc:
            raise AssertionError(f"the {kind} event {name!r} is not JSON ({exc}): "
                                 f"{attributes[:300]}") from None


@then(parsers.re(rf"the trace holds the sha256 of {TEXT}"))
def trace_holds_hash(orion_world: World, text: str) -> None:
    """What a trace keeps of a text (a path, an intent, a message): its sha256, never the
    text itself."""
    import hashlib

    wanted = unescape(text)
    digest = hashlib.sha256(wanted.encode("utf-8", "surrogatepass")).hexdigest()
    events = [json.dumps(e, ensure_ascii=False) for e in _trace_events(orion_world)]
    assert any(digest in event for event in events), \
        f"the sha256 of {wanted!r} is in no trace event"
    assert not any(wanted in event for event in events), f"{wanted!r} is in a trace event"


@then(parsers.re(rf"the trace holds (?!the sha256 of ){TEXT}"))
def trace_holds(orion_world: World, text: str) -> None:
    wanted = unescape(text)
    events = _trace_events(orion_world)
    assert any(wanted in json.dumps(e, ensure_ascii=False) for e in events), \
        f"{wanted!r} is in no trace event"


@then("no notice to the user holds the streamed content")
def notices_hold_no_content(orion_world: World) -> None:
    lines = set(_book(orion_world)["streamed"])
    for notice in orion_world.reporter.notices:
        leaked = [line for line in lines if line in notice]
        assert not leaked, notice


@then("the trace holds none of the streamed content")
def trace_holds_no_content(orion_world: World) -> None:
    """No file under the state directory but the journals, the backups and the text set aside
    holds a line the model streamed: not the trace database (nor its WAL), not the plan
    store."""
    _trace_events(orion_world)  # flushed
    lines = set(_book(orion_world)["streamed"])
    assert lines, "the scenario streamed no content"
    for path in orion_world.state_dir.rglob("*"):
        relative = path.relative_to(orion_world.state_dir)
        if not path.is_file() or relative.parts[0] in ("write_sessions", "backups",
                                                         "set_aside"):
            continue
        data = path.read_bytes().decode("utf-8", "replace")
        leaked = [line for line in lines if line in data]
        assert not leaked, f"{relative} holds {leaked[:3]}"


# -- content integrity (features/content_integrity.feature) ----------------------------------


@step(parsers.re(rf'the model says {TEXT} and calls "(?P<tool>\w+)" with:'))
def model_says_and_calls_tool(orion_world: World, text: str, tool: str, docstring: str) -> None:
    """One message with text beside a tool call: narration such as "Let me check first."."""
    world = orion_world
    world.mark()
    world.reply(text=unescape(text), tool_calls=[{"name": tool,
                                                  "arguments": json.loads(docstring)}])
    if world.model.replies:  # nothing was waiting: the user asks
        world.say("Please do it.")
    _record_begins(world)


@step(parsers.re(rf"the model streams {COUNT} (?:more )?lines?(?: to {PATH})? and stops in the "
                 r"middle of the next line"), converters=INT)
def model_stops_mid_line(orion_world: World, count: int, path: str | None) -> None:
    """The lines, then the start of the next one (``Line 201 of``) and finish reason ``stop``:
    what a gateway sends for a stream that was cut. The next generated line is the cut one, so
    a continuation that repeats it from its start holds the same text again."""
    target = _ensure_session(orion_world, path)
    text = _next_lines(orion_world, target, count)
    cut = _book(orion_world)["next_line"][target]
    text += f"Line {cut} of"
    _model_says(orion_world, **_per_line(text), finish_reason="stop")


# -- what is content: the rules the model is told (features/content_integrity.feature) -------


@then(parsers.re(r"the model is asked whether the file ends in the middle of line "
                 r"(?P<line>\d+)"), converters=INT)
def asked_about_unfinished_line(orion_world: World, line: int) -> None:
    wanted = f"{UNFINISHED_PROMPT} {line},"
    assert _asked_since(orion_world, wanted), \
        f"the model was not asked about line {line}: {_show_requests(orion_world)}"


@then(parsers.re(rf"the text set aside for {PATH} is {TEXT}"))
def text_set_aside_is(orion_world: World, path: str, text: str) -> None:
    """What ``orion sessions show`` prints of the parts still set aside, joined."""
    from orion.write_session.orphan_commands import show
    shown = show(orion_world.state_dir, _session_id(orion_world, path))
    kept = b"".join(shown.set_aside.read(part.number) for part in shown.set_aside.pending)
    assert kept.decode("utf-8", "replace") == unescape(text), shown.set_aside.parts


@step(parsers.re(r'the model thinks "(?P<thought>(?:[^"\\]|\\.)*)" and replies '
                 r'"(?P<text>(?:[^"\\]|\\.)*)"'))
def model_thinks_and_replies(orion_world: World, thought: str, text: str) -> None:
    """A reply with reasoning (``reasoning_content``) before its text."""
    _model_says(orion_world, reasoning=unescape(thought), text=unescape(text))


class _FirstLineRule:
    """A team's blocking rule (docs/validation.md): files of one suffix start with a line."""

    def __init__(self, name: str, suffix: str, first: str) -> None:
        self.name, self.suffix, self.first = name, suffix, first

    @hookimpl
    def validate_content(self, request: Any) -> Any:
        from orion.validation import Issue, text_lines
        lines = text_lines(request.content)
        if not request.path.endswith(self.suffix) or (lines and lines[0] == self.first):
            return None
        return Issue(1, 1, self.name, f"the first line must be {self.first}", blocking=True)


@given(parsers.re(r'a validator "(?P<name>[\w-]+)" blocks a write of "(?P<suffix>\.\w+)" files '
                  rf"whose first line is not {TEXT}"))
def blocking_first_line(orion_world: World, name: str, suffix: str, text: str) -> None:
    """A plugin whose issue blocks the write (``Issue(..., blocking=True)``): still there after
    the last correction round, the target is not written."""
    assert orion_world.plugins is not None
    orion_world.plugins.register(_FirstLineRule(name, suffix, unescape(text)), f"rule_{name}")
