"""The host under one name: hooks receive it as ``host`` (``runtime`` still works, with a
warning, until 0.3.0), typed ``orion.api.Host``; write sessions are seen through a view whose
status compares as the strings teams used."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path

import pytest

from orion import hookimpl
from orion.api import (ContextRequest, GateRequest, Host, WriteSessionView, WriteStatus,
                       write_session_of, write_sessions)
from orion.models.script import load_script
from orion.models.scripted import ScriptedModel
from orion.hooks.manager import make_plugin_manager
from orion.runtime.runtime import Runtime

WRITE = """
conversation:
  - model:
      tool_calls:
        - name: WritePlanTool_begin
          arguments: {intent: "notes", target_file: notes.md, operation: create}
  - model: {text: "# Notes\\n"}
  - model: {text: "DONE"}
  - model: {text: "Written."}
"""


class Seen:
    def __init__(self) -> None:
        self.hosts: list[object] = []


def _runtime(tmp_path: Path, *plugins: object,
             script: str = "conversation:\n  - model: {text: hi}\n") -> Runtime:
    pm = make_plugin_manager(entrypoints=False)
    for number, plugin in enumerate(plugins):
        pm.register(plugin, f"plugin_{number}")
    return Runtime(model=ScriptedModel(load_script("s.yaml", text=script).cursor()), plugins=pm,
                   workspace=tmp_path)


def test_the_runtime_hooks_receive_the_host_as_host_without_a_warning(tmp_path: Path) -> None:
    seen = Seen()

    class Plugin:
        @hookimpl
        def runtime_started(self, host: Host) -> None:
            seen.hosts.append(("started", host))

        @hookimpl
        def conversation_reset(self, host: Host) -> None:
            seen.hosts.append(("reset", host))

        @hookimpl
        def runtime_closing(self, host: Host) -> None:
            seen.hosts.append(("closing", host))

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        runtime = _runtime(tmp_path, Plugin())
        runtime.reset()
        runtime.close()
    assert seen.hosts == [("started", runtime), ("reset", runtime), ("closing", runtime)]
    assert isinstance(runtime, Host)


def test_the_old_name_runtime_still_works_and_says_it_goes(tmp_path: Path) -> None:
    seen = Seen()

    class OldPlugin:
        @hookimpl
        def runtime_started(self, runtime: Host) -> None:
            seen.hosts.append(runtime)

    with pytest.warns(DeprecationWarning, match="'runtime' is now called 'host'"):
        runtime = _runtime(tmp_path, OldPlugin())
    assert seen.hosts == [runtime]
    runtime.close()


def test_requests_tool_contexts_and_turns_carry_the_host_as_host(tmp_path: Path) -> None:
    """One name everywhere a plugin meets the host; ``runtime``, the name before 0.2.0, reads
    the same object with a warning that says when it goes."""
    from orion.api import ToolContext, Turn

    runtime = _runtime(tmp_path)
    carriers = [ContextRequest("c1", host=runtime), ToolContext(tmp_path, host=runtime),
                Turn(host=runtime, number=1)]
    for carrier in carriers:
        assert carrier.host is runtime
        with pytest.warns(DeprecationWarning, match=r"\.runtime is now \.host .*goes in 0\.3\.0"):
            assert carrier.runtime is runtime
    runtime.close()


def test_context_and_gate_requests_are_one_type() -> None:
    assert ContextRequest is GateRequest
    assert GateRequest("c1", states={"plan_mode": "inactive"}) == \
        ContextRequest("c1", states={"plan_mode": "inactive"})


def test_a_write_session_is_seen_through_a_view_whose_status_compares_as_a_string(
        tmp_path: Path) -> None:
    runtime = _runtime(tmp_path, script=WRITE)
    asyncio.run(runtime.handle("Write notes.md."))
    [open_session] = write_sessions(runtime)
    assert isinstance(open_session, WriteSessionView)
    assert open_session.status is WriteStatus.ACTIVE and open_session.status == "active"
    assert (open_session.file, open_session.operation) == ("notes.md", "create")
    assert not open_session.written and open_session.report == ""
    assert write_session_of(open_session.lifecycle) == open_session
    assert not hasattr(open_session, "journal")  # the view, not the session

    runtime.advance(2000)  # the idle prompt; the model answers DONE
    asyncio.run(runtime.pump())
    # The view reads the live session: the same view now says it was written.
    assert open_session.status == "written" and open_session.status in ("written", "incomplete")
    assert open_session.written and (open_session.lines, open_session.bytes) == (1, 8)
    assert (tmp_path / "notes.md").read_text() == "# Notes\n"
    runtime.close()


def test_a_host_that_is_not_orions_runtime_has_no_write_sessions(tmp_path: Path) -> None:
    class OwnHost:
        pass

    assert write_sessions(OwnHost()) == []  # type: ignore[arg-type]


def test_write_status_values_are_the_strings_of_before() -> None:
    assert [status.value for status in WriteStatus] == [
        "active", "written", "written_with_set_aside", "incomplete", "failed", "blocked",
        "abandoned", "set_aside"]
