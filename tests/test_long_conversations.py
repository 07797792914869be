"""A long day of writes stays bounded: ``keep_backups`` holds as the writes happen (not only at
the next start), an append keeps the range it added instead of a copy of the file, and a
runtime keeps what an ended session needs for its report, not its content.

Real ``orion run`` processes on real workspaces; the memory figures are in
``bench/bench_end_to_end.py`` (lines 6 and 7).
"""

from __future__ import annotations

import asyncio
import collections
import gc
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from orion.api import hookimpl
from orion.models.script import load_script
from orion.hooks.manager import make_plugin_manager
from orion.runtime.report import Reporter
from orion.runtime.runner import play
from orion.write_session import manager as manager_module

ORION = str(Path(sys.executable).parent / "orion")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ORION_", "OPENAI_"))}


def writes(count: int, operation: str, target: str = "notes.md", lines: int = 3) -> list:
    entries: list = []
    for n in range(count):
        body = "".join(f"write {n} line {i}\n" for i in range(lines))
        entries += [{"user": f"Write {n}."},
                    {"model": {"tool_calls": [{"name": "WritePlanTool_begin", "arguments": {
                        "intent": f"write {n}", "target_file": target,
                        "operation": operation}}]}},
                    {"model": {"text": body + "DONE\n"}},
                    {"model": {"text": "Done."}}]
    return entries


def run(tmp_path: Path, ws: Path, conversation: list, settings: dict | None = None,
        files: dict | None = None) -> subprocess.CompletedProcess:
    script = tmp_path / "day.yaml"
    data: dict = {"conversation": conversation}
    if settings:
        data["settings"] = {"write_session": settings}
    if files:
        data["files"] = files
    script.write_text(yaml.safe_dump(data), encoding="utf-8")
    done = subprocess.run([ORION, "run", str(script), "--workspace", str(ws), "--json"],
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_keep_backups_holds_while_one_run_writes(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("the first version\n")
    run(tmp_path, ws, writes(12, "overwrite"), {"keep_backups": 3})
    state = ws / ".orion"
    assert len(list((state / "undo").iterdir())) == 3
    assert len(list((state / "backups").iterdir())) == 3  # not 12 until the next start
    history = json.loads(subprocess.run([ORION, "sessions", "history", "--json", "--workspace",
                                         str(ws)], env=_env(), capture_output=True,
                                        text=True).stdout)
    assert len(history) == 3


def test_appends_keep_the_range_they_added_not_copies_of_the_file(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    seed = "".join(f"seed line {n:05d} of a twenty kilobyte file\n" for n in range(500))
    assert len(seed) > 20_000
    run(tmp_path, ws, writes(200, "append"), {"keep_backups": 0},
        files={"notes.md": seed})
    state = ws / ".orion"
    kept = sum(p.stat().st_size for p in state.rglob("*")
               if p.is_file() and p.parent.name in ("backups", "appends")
               or "backups" in p.parts)
    assert kept < 200 * 300, kept  # 200 small range records, not 200 copies of 20-60 KiB
    assert not (state / "backups").exists() or not any((state / "backups").iterdir())
    ranges = sorted(json.loads(p.read_text())["length"] for p in (state / "appends").iterdir())
    assert len(ranges) == 200 and ranges[0] == len(seed.encode())
    # The way back is whole: the last append is undone to the bytes before it.
    before = (ws / "notes.md").read_bytes()
    history = json.loads(subprocess.run([ORION, "sessions", "history", "--json", "--workspace",
                                         str(ws)], env=_env(), capture_output=True,
                                        text=True).stdout)
    last = history[0]["id"]
    length = json.loads((state / "appends" / f"{last}.json").read_text())["length"]
    done = subprocess.run([ORION, "sessions", "undo", last[:8], "--workspace", str(ws)],
                          env=_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (ws / "notes.md").read_bytes() == before[:length]
    assert hashlib.sha256(before[:length]).hexdigest() == \
        json.loads((state / "appends" / f"{last}.json").read_text())["sha256"]


def test_undo_of_an_append_refuses_a_file_that_no_longer_starts_with_its_bytes(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    run(tmp_path, ws, writes(1, "append"), files={"notes.md": "old\n"})
    record = next((ws / ".orion" / "undo").iterdir())
    data = json.loads(record.read_text())
    # Someone rewrote the file's start, then made it hash as Orion wrote it: impossible by
    # chance, so forge the record instead: the file's bytes as they are now.
    (ws / "notes.md").write_text("new\nwrite 0 line 0\nwrite 0 line 1\nwrite 0 line 2\n")
    data["sha256"] = hashlib.sha256((ws / "notes.md").read_bytes()).hexdigest()
    record.write_text(json.dumps(data))
    done = subprocess.run([ORION, "sessions", "undo", record.stem[:8], "--workspace", str(ws)],
                          env=_env(), capture_output=True, text=True)
    assert done.returncode == 1
    assert "no longer starts with the bytes session" in done.stderr, done.stderr
    assert (ws / "notes.md").read_text().startswith("new\n")


def test_a_runtime_keeps_summaries_of_old_sessions_and_no_content_of_ended_ones(tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setattr(manager_module, "KEEP_ENDED", 5)
    ws = tmp_path / "ws"
    ws.mkdir()
    script = tmp_path / "day.yaml"
    script.write_text(yaml.safe_dump({"conversation": writes(12, "create", lines=50)[:0] + [
        entry for n in range(12) for entry in writes(1, "create", target=f"n{n}.md",
                                                       lines=50)]}), encoding="utf-8")
    kept = []

    class Watch(Reporter):
        pass

    async def go():
        result = await play(load_script(script), workspace=ws,
                            plugins=make_plugin_manager(entrypoints=False, env={}),
                            reporter=Watch())
        return result

    original = manager_module.SessionManager.close

    def close(self):
        kept.extend(self.sessions)
        original(self)
    monkeypatch.setattr(manager_module.SessionManager, "close", close)
    result = asyncio.run(go())
    assert result.ok, result.errors
    assert len(result.sessions) == 12  # every write is still reported
    assert [s["status"] for s in result.sessions] == ["written"] * 12
    assert len(kept) == 5  # but only the latest ended sessions are kept whole
    assert all(s.journal.content() == b"" and s.finalizer.fixed is None for s in kept)


def test_a_file_written_many_times_is_one_record_reported_as_its_last_write_left_it(
        tmp_path, monkeypatch):
    """What a runtime keeps of its writes grows with the files it wrote, not with the writes:
    30 writes to 3 files are 3 records, and the run reports each file once, as it is now."""
    ws = tmp_path / "ws"
    ws.mkdir()
    conversation = [entry for n in range(30)
                    for entry in writes(1, "create" if n < 3 else "append",
                                        target=f"n{n % 3}.md", lines=2)]
    for n, entry in enumerate(conversation):  # distinct content for every write
        if "text" in entry.get("model", {}):
            entry["model"]["text"] = f"write {n}\n" + entry["model"]["text"]
    kept: dict = {}
    original = manager_module.SessionManager.close

    def close(self):
        kept.update(files=dict(self.files), count=self.write_count)
        original(self)
    monkeypatch.setattr(manager_module.SessionManager, "close", close)
    done = run(tmp_path, ws, conversation)
    report = json.loads(done.stdout)
    assert [f["path"] for f in report["files"]] == ["n0.md", "n1.md", "n2.md"]
    for entry in report["files"]:
        data = (ws / entry["path"]).read_bytes()
        assert entry["bytes"] == len(data)
        assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert len(report["sessions"]) == 30  # every session is still reported
    script = tmp_path / "day.yaml"
    result = asyncio.run(play(load_script(script), workspace=tmp_path / "ws2",
                              plugins=make_plugin_manager(entrypoints=False, env={})))
    assert result.ok, result.errors
    assert kept["count"] == 30 and sorted(kept["files"]) == ["n0.md", "n1.md", "n2.md"]


def test_ended_write_sessions_are_freed_as_they_are_let_go_not_by_the_cyclic_collector(
        tmp_path, monkeypatch):
    """A chat that runs all day does not wait for Python's full collections to get back what a
    write held: an ended session, its journal and its content buffer are freed as soon as the
    runtime lets go of them (it keeps the last ``KEEP_ENDED``), and writing leaves no reference
    cycles behind. Checked after the last of 14 writes, with the cyclic collector's findings
    kept (``DEBUG_SAVEALL``) so that a cycle shows instead of being freed."""
    monkeypatch.setattr(manager_module, "KEEP_ENDED", 5)
    ws = tmp_path / "ws"
    ws.mkdir()
    conversation = [entry for n in range(14)
                    for entry in writes(1, "create" if n < 2 else "overwrite",
                                        target=f"n{n % 2}.md", lines=5)]
    script = tmp_path / "day.yaml"
    script.write_text(yaml.safe_dump({"conversation": conversation}), encoding="utf-8")
    found: list[collections.Counter] = []

    class Census:
        @hookimpl
        def lifecycle_finished(self, lifecycle, host):
            if lifecycle.name == "write_session":
                gc.collect()
                found.append(collections.Counter(type(o).__qualname__ for o in gc.garbage))

    plugins = make_plugin_manager(entrypoints=False, env={})
    plugins.register(Census())
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        result = asyncio.run(play(load_script(script), workspace=ws, plugins=plugins))
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert result.ok, result.errors
    assert len(found) == 14
    last = found[-1]
    held = {name: last[name] for name in ("WriteSession", "Journal", "BytesIO", "JSONEncoder")}
    assert held == dict.fromkeys(held, 0), held
    # Whatever else the cyclic collector found did not grow with the writes.
    assert sum(found[-1].values()) == sum(found[1].values()), (found[1], found[-1])
