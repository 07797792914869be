"""The harness of the write-session tests: scripted conversations played through the real
runtime (``orion.runtime.runner.play``) with the built-in plugins, and what they left behind
(files, prompts, requests, notices, trace events)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sqlite3
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from orion.cli import cli
from orion.workspace import confined
from orion.models.events import TextDelta
from orion.models.script import load_script
from orion.models.scripted import ScriptedModel
from orion.hooks.manager import make_plugin_manager
from orion.runtime import runner
from orion.runtime.report import Reporter
from orion.write_session.progress import Progress
from orion.runtime.runner import RunResult, play
from orion.trace.writer import settle_all


# -- the harness -------------------------------------------------------------------------------


class Capture(Reporter):
    """A reporter that keeps what Orion tells people, and the target's stat when the write
    report reaches the model (to prove the file is written once)."""

    def __init__(self) -> None:
        self.notices: list[str] = []
        self.prompts: list[str] = []
        self.progress_lines: list[Progress] = []
        self.watch: Path | None = None
        self.stat_at_report: os.stat_result | None = None

    def notice(self, text: str) -> None:
        self.notices.append(text)

    def prompt(self, text: str) -> None:
        self.prompts.append(text)
        if self.watch is not None and self.stat_at_report is None and self.watch.exists() \
                and re.match(r"(Created|Overwrote|Appended|Inserted|Replaced) ", text):
            self.stat_at_report = self.watch.stat()

    def progress(self, progress: Progress) -> None:
        self.progress_lines.append(progress)



#: A script whose model opens a write session for ``a.txt`` (create); append the replies.
BEGIN_A_TXT = """\
conversation:
  - user: write it
  - model:
      tool_calls:
        - name: WritePlanTool_begin
          arguments: {target_file: a.txt, operation: create, intent: a file}
"""

@dataclass
class Played:
    result: RunResult
    workspace: Path
    reporter: Capture
    model: ScriptedModel
    writes: list[Path] = field(default_factory=list)

    @property
    def state_dir(self) -> Path:
        return self.workspace / ".orion"

    def read(self, relative: str) -> bytes:
        return (self.workspace / relative).read_bytes()

    def text(self, relative: str) -> str:
        return self.read(relative).decode("utf-8")

    def sent(self, request: int) -> list[dict[str, Any]]:
        """The messages of request ``request`` (1-based), as the model received them."""
        return self.model.log[request - 1].sent.messages

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        db = self.state_dir / "orion.db"
        settle_all()  # this process's trace writer stores off the step
        with sqlite3.connect(db) as connection:
            rows = connection.execute(
                "SELECT kind, name, session_id, attributes FROM trace_events ORDER BY id"
            ).fetchall()
        events = [{"kind": k, "name": n, "session_id": s, "attributes": json.loads(a)}
                  for k, n, s, a in rows]
        return [e for e in events if kind is None or e["kind"] == kind]

    def transitions(self) -> list[tuple[str, str, str]]:
        return [(e["attributes"]["orion.event"], e["attributes"]["orion.source"],
                 e["attributes"]["orion.dest"]) for e in self.events("transition")
                if e["attributes"]["orion.lifecycle"] == "write_session"]


class SubstitutingModel(ScriptedModel):
    """The scripted model, remembered by the test, that can stream what a YAML script cannot
    hold (a lone surrogate): each ``TextDelta`` has the test's substitutions applied."""

    substitutions: dict[str, str] = {}
    instances: list[ScriptedModel] = []

    def __init__(self, cursor) -> None:
        super().__init__(cursor)
        SubstitutingModel.instances.append(self)

    async def stream(self, request):
        async for event in super().stream(request):
            if type(event) is TextDelta and self.substitutions:
                text = event.text
                for old, new in self.substitutions.items():
                    text = text.replace(old, new)
                event = TextDelta(text)
            yield event


def make_runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``run(script, ...)`` plays a script (YAML text, or a dict dumped as YAML) through
    ``play`` in ``tmp_path/ws<n>`` and returns a :class:`Played`."""
    monkeypatch.setattr(SubstitutingModel, "instances", [])
    monkeypatch.setattr(SubstitutingModel, "substitutions", {})
    monkeypatch.setattr(runner, "ScriptedModel", SubstitutingModel)
    writes: list[Path] = []
    original = confined.Parent.replace

    def counting(self, data, **kw):
        writes.append(Path(self.path))
        return original(self, data, **kw)

    monkeypatch.setattr(confined.Parent, "replace", counting)
    counter = iter(range(1, 1000))

    def _run(script: str | dict, *, orion_yaml: str | None = None, watch: str | None = None,
             substitutions: dict[str, str] | None = None, name: str = "script.yaml",
             workspace: Path | None = None) -> Played:
        workspace = workspace or tmp_path / f"ws{next(counter)}"
        workspace.mkdir(parents=True, exist_ok=True)
        if orion_yaml is not None:
            (workspace / "orion.yaml").write_text(textwrap.dedent(orion_yaml))
        text = script if isinstance(script, str) else dump(script)
        path = tmp_path / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        reporter = Capture()
        reporter.watch = workspace / watch if watch else None
        SubstitutingModel.substitutions = substitutions or {}
        before = len(writes)
        result = asyncio.run(play(load_script(path), workspace=workspace, reporter=reporter,
                                  plugins=make_plugin_manager(entrypoints=False, env={})))
        return Played(result, workspace, reporter, SubstitutingModel.instances[-1],
                      writes[before:])
    return _run


def dump(script: dict) -> str:
    return yaml.safe_dump(script, sort_keys=False, allow_unicode=True, width=1 << 20)


def begin(target: str, operation: str = "create", **fields: Any) -> dict:
    return {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
        "intent": "test write", "target_file": target, "operation": operation, **fields}}]}}


def say(text: str | None = None, **reply: Any) -> dict:
    if text is not None:
        reply["text"] = text
    return {"model": reply}


def status(played: Played) -> str:
    """The status of the one write session ``played`` had."""
    [session] = played.result.sessions
    return session["status"]


def show(played: Played, *args: str) -> str:
    """What ``orion sessions show`` prints of that session."""
    result = CliRunner().invoke(cli, ["sessions", "show", played.result.sessions[0]["id"][:8],
                                      "--workspace", str(played.workspace), *args])
    assert result.exit_code == 0, result.output
    return result.output
