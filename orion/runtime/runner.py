"""Play a scripted conversation through the real runtime (``orion run``).

The runner and the scripted model share one cursor over the script: the runner takes ``user``
and ``wait_ms`` entries, and every model request takes the ``expect`` and ``model`` entries in
front of it. Time is virtual, so ``wait_ms: 2500`` passes at once.

What plugins do when a runtime starts (``runtime_started``: the write sessions handle the
orphans of earlier runs, and one marked for ``--continue`` asks the model to go on) happens
before the first entry; what they release when it closes, after the last. The report is put
together from the plugins' answers to ``report_run`` (:mod:`orion.runtime.run_report`).
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from orion.clock import VirtualClock, kernel_boot_time
from orion.workspace.confined import PathSwapped, open_parent
from orion.config import WorkspaceConfig, load_config
from orion.hooks.blame import plugin_failure_line
from orion.errors import ConfigError, OrionError
from orion.models.base import ScriptError
from orion.models.script import Script
from orion.models.scripted import ScriptedModel
from orion.hooks.manager import PluginManager
from orion.runtime.report import Reporter
from orion.runtime.run_report import FileReport, RunReport
from orion.runtime.runtime import Runtime
from orion.runtime.stop_signals import RUN_SIGNALS, StopSignals, Stopped
from orion.trace import events as trace_events

__all__ = ["FileReport", "RunReport", "RunResult", "play", "seed_files", "with_script_settings"]


def _sections() -> dict[str, Any]:
    """The sections of ``orion run --json`` that plugins fill, as they are when none does:
    the object has the same keys whichever plugins are loaded."""
    return {"sessions": [], "plan": None}


@dataclass
class RunResult:
    ok: bool
    files: list[FileReport] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    #: The plugins' sections of the report (``report_run``), by key.
    sections: dict[str, Any] = field(default_factory=_sections)
    #: The signal that stopped the run (SIGTERM, SIGHUP, SIGINT), if one did.
    stopped: int | None = None

    @property
    def sessions(self) -> list[dict[str, Any]]:
        """The write sessions of the run, as the write sessions' plugin reports them."""
        return self.sections.get("sessions") or []

    @property
    def plan(self) -> dict[str, Any] | None:
        """The plan, as plan mode reports it."""
        return self.sections.get("plan")

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "files": [asdict(f) for f in self.files], **self.sections,
                "prompts": self.prompts, "errors": self.errors}


def seed_files(root: Path, files: dict[str, str]) -> None:
    """Write the script's ``files`` into the workspace, confined to it as every write is (no
    component may be a symbolic link: see :mod:`orion.workspace.confined`). An existing file with other
    content is an error, never overwritten: a script must not destroy a user's work."""
    for relative, text in files.items():
        try:
            with open_parent(root.resolve(), relative, create=True) as parent, parent.locked():
                existing = parent.read()
                if existing is not None:
                    if existing.decode("utf-8", "replace") != text:
                        raise ConfigError(f"the script seeds {relative!r}, but the workspace "
                                          "already has that file with other content; use an "
                                          "empty workspace")
                    continue
                parent.replace(text.encode("utf-8"), mode=0o644 & ~_umask())
        except PathSwapped as exc:
            raise ConfigError(f"the script seeds {relative!r}, but a symbolic link or a file "
                              f"stands in its path in the workspace ({exc}); nothing "
                              "seeded there") from exc
        except ValueError as exc:
            raise ConfigError(f"the script seeds {relative!r}: {exc}") from exc


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def with_script_settings(config: WorkspaceConfig, script: Script) -> WorkspaceConfig:
    """The workspace config, with the script's setting overrides on top of ``orion.yaml``'s."""
    if not script.settings:
        return config
    merged = {name: dict(values) for name, values in config.model.settings.items()}
    for name, values in script.settings.items():
        merged.setdefault(name, {}).update(values)
    return WorkspaceConfig(config.workspace, config.model.model_copy(update={"settings": merged}),
                           config.document)


async def play(script: Script, *, workspace: Path, plugins: PluginManager,
               state_dir: Path | None = None, reporter: Reporter | None = None) -> RunResult:
    """Play ``script`` in ``workspace``; problems end the run and are listed in ``errors``."""
    workspace.mkdir(parents=True, exist_ok=True)
    config = with_script_settings(load_config(workspace), script)
    seed_files(workspace, script.files)
    cursor = script.cursor()
    # Virtual time that starts now: timers fire without waiting, trace times are real dates,
    # and the second clock starts at the kernel's (sessions of other processes compare with it).
    runtime = Runtime(model=ScriptedModel(cursor), plugins=plugins, workspace=workspace,
                      state_dir=state_dir, config=config,
                      clock=VirtualClock(start_ms=time.time() * 1000.0, boot=kernel_boot_time()),
                      reporter=reporter)
    errors: list[str] = []
    with StopSignals(RUN_SIGNALS) as signals:
        stopped = await _play_until_stopped(runtime, cursor, signals, errors)
        result = RunResult(ok=False, errors=errors)
        for report in plugins.hook.report_run(host=runtime):
            if not isinstance(report, RunReport):
                raise TypeError(f"a report_run implementation returned {report!r}, not a "
                                "RunReport")
            result.sections.update(report.sections)
            result.files.extend(report.files)
            result.errors.extend(report.problems)
        runtime.close()  # flushes traces, releases open journals, closes the plan store
        late = await signals.settle() if stopped is None else None
    if late is not None:  # it came while the run closed: the close finished first
        stopped = late
        result.errors.append(f"{late} while the run closed: what it wrote is as reported")
    result.stopped = stopped.signum if stopped is not None else None
    # A file written twice is reported once, where and as it was last written.
    files: dict[str, FileReport] = {}
    for file in result.files:
        files.pop(file.path, None)
        files[file.path] = file
    result.files = list(files.values())
    result.prompts = list(runtime.prompts)
    result.ok = not result.errors
    return result


async def _play_until_stopped(runtime: Runtime, cursor: Any, signals: StopSignals,
                              errors: list[str]) -> Stopped | None:
    """The script's entries; the signal that stopped them, if one did. Problems that end the
    run go to ``errors``."""
    try:
        await signals.run(_play_entries(runtime, cursor))
    except Stopped as exc:
        # SIGTERM, SIGHUP or Ctrl-C: what follows (the runtime closing) saves the open write
        # sessions and says how to go on; the command exits with 128 + the signal's number.
        errors.append(f"{exc}: the run did not finish")
        return exc
    except Exception as exc:
        # Orion's own errors, and a plugin's (a team's pipeline system, a hook wrapper): one
        # line each; anything else is a bug of Orion's and keeps its traceback.
        line = str(exc) if isinstance(exc, OrionError) else plugin_failure_line(exc, runtime.plugins)
        if line is None:
            runtime.close()
            raise
        errors.append(line)
        runtime.tracer.emit(trace_events.error("orion run", exc, at_ms=runtime.clock.now_ms(),
                                               conversation_id=runtime.conversation.id))
    except BaseException:
        runtime.close()  # whatever ended the run, open journals are flushed and released
        raise
    return None


async def _play_entries(runtime: Runtime, cursor: Any) -> None:
    """The script's entries, in order."""
    # A write session adopted at start (--continue) asked the model to go on: that request
    # takes the script's first model entries.
    await runtime.pump()
    while not cursor.done:
        entry = cursor.peek()
        if entry is None:
            break
        if entry.kind == "user":
            cursor.next()
            await runtime.handle(entry.user)
        elif entry.kind == "wait_ms":
            cursor.next()
            runtime.advance(entry.wait_ms)
            await runtime.pump()
        else:
            raise ScriptError(f"{entry.where}: the script has a {entry.kind} entry next, but "
                              "no model request came for it (Orion was waiting for the "
                              "user or for time to pass)")
