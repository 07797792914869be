"""The plan store under real faults: a damaged row in a real ``plans.db`` spoils only its plan
(the others and new plans go on; the damaged one is named with the way to drop it), and two real
processes drafting one plan at the same moment never overwrite each other in silence.

Each conversation runs in its own process (``tests/plan_driver.py`` style: the real runtime,
plugins and plan store, a scripted model), so the race is one between two SQLite connections
of two processes, as two ``orion chat`` in one workspace are.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from pathlib import Path

import pytest
import yaml

#: A conversation in its own process: the real runtime with the default plugins, the model
#: playing a script. With a gate (request number, ready file, go file) the model "thinks" at
#: that request until the go file exists: the request (and the plan block it carries) is
#: built, the reply is not yet there. Prints the notices and the tool results as JSON.
DRIVER = textwrap.dedent("""
    import asyncio, json, sys, time
    from pathlib import Path
    from orion.errors import OrionError
    from orion.models.script import load_script
    from orion.models.scripted import ScriptedModel
    from orion.hooks.manager import make_plugin_manager
    from orion.runtime.report import Reporter
    from orion.runtime.runtime import Runtime

    workspace, script_path, *gate = sys.argv[1:]

    class Thinking(ScriptedModel):
        async def stream(self, request):
            if gate and request.number == int(gate[0]):
                Path(gate[1]).touch()
                for _ in range(30000):  # bounded: the test gives the go long before
                    if Path(gate[2]).exists():
                        break
                    time.sleep(0.01)
            async for event in super().stream(request):
                yield event

    class Notices(Reporter):
        def __init__(self):
            super().__init__()
            self.notices = []

        def notice(self, text):
            self.notices.append(text)

    async def main():
        cursor = load_script(script_path).cursor()
        notices = Notices()
        runtime = Runtime(model=Thinking(cursor), plugins=make_plugin_manager(env={}),
                          workspace=workspace, reporter=notices)
        error = None
        try:
            while not cursor.done:
                entry = cursor.next()
                await runtime.handle(entry.user)
        except OrionError as exc:
            error = str(exc)
        finally:
            runtime.close()
        tools = [m.content for m in runtime.conversation.messages if m.role == "tool"]
        print(json.dumps({"error": error, "notices": notices.notices, "tools": tools}))
        sys.exit(1 if error else 0)

    asyncio.run(main())
""")


def set_content(markdown: str, **more) -> dict:
    return {"model": {"tool_calls": [{"name": "plan_set_content",
                                      "arguments": {"plan_markdown": markdown, **more}}]}}


PLAN_GET = {"model": {"tool_calls": [{"name": "plan_get", "arguments": {}}]}}
FIRST = "# Release\n\n1. Build.\n"
FROM_B = "# Release\n\n1. Build.\n2. Sign the wheel.\n"
FROM_A = "# Release\n\n1. Build.\n2. Announce.\n"
MERGED = "# Release\n\n1. Build.\n2. Sign the wheel.\n3. Announce.\n"


@pytest.fixture
def driver(tmp_path):
    path = tmp_path / "driver.py"
    path.write_text(DRIVER)
    scripts = iter(range(1000))

    def start(ws: Path, *conversation: dict, gate: tuple = ()) -> subprocess.Popen:
        script = tmp_path / f"script{next(scripts)}.yaml"
        script.write_text(yaml.safe_dump({"conversation": list(conversation)}, sort_keys=False))
        return subprocess.Popen([sys.executable, str(path), str(ws), str(script), *map(str, gate)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(ws: Path, *conversation: dict, gate: tuple = ()) -> dict:
        out, err = start(ws, *conversation, gate=gate).communicate(timeout=300)
        assert "Traceback" not in err, err[-3000:]
        return json.loads(out.strip().splitlines()[-1])

    run.start = start
    return run


def orion(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "orion", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"})


def database(ws: Path) -> sqlite3.Connection:
    return closing(sqlite3.connect(ws / ".orion" / "plans.db"))


def revisions(ws: Path) -> list[tuple[int, str]]:
    with database(ws) as db:
        return db.execute("SELECT revision, markdown FROM plan_revisions ORDER BY revision"
                          ).fetchall()


# -- two chats on one plan -----------------------------------------------------------------


@pytest.mark.slow
def test_two_processes_drafting_one_plan_neither_overwrites_the_other_in_silence(tmp_path,
                                                                                 driver):
    ws = tmp_path / "ws"
    ws.mkdir()
    first = driver(ws, {"user": "/plan on Release"}, {"user": "Plan the release."},
                   set_content(FIRST), {"model": {"text": "Stored."}})
    assert first["error"] is None, first
    ready, go = tmp_path / "a-asked", tmp_path / "go"
    # A: its request carries the plan as revision 1; its model thinks until B has stored.
    a = driver.start(ws, {"user": "Add the announcement."},
                     set_content(FROM_A),
                     {"expect": "another session in this workspace stored revision 2"},
                     PLAN_GET, {"expect": "Sign the wheel"},
                     set_content(MERGED), {"expect": "\"revision\": 3"},
                     {"model": {"text": "Merged both."}},
                     gate=(1, ready, go))
    for _ in range(30000):  # bounded: until A's request is built (or A ended early)
        if ready.exists() or a.poll() is not None:
            break
        time.sleep(0.01)
    assert ready.exists(), a.communicate()
    b = driver(ws, {"user": "Add signing."}, set_content(FROM_B), {"model": {"text": "Stored."}})
    assert b["error"] is None and b["notices"] == [], b
    go.touch()
    out, err = a.communicate(timeout=300)
    assert a.returncode == 0, (out, err[-3000:])
    result = json.loads(out.strip().splitlines()[-1])
    refused = result["tools"][0]
    assert "PlanChanged: the draft was not stored: it is based on revision 1 of plan" in refused
    assert "Nothing was overwritten. Load the plan with plan_get, merge your changes" in refused
    [notice] = [n for n in result["notices"] if "plan draft not stored" in n]
    assert "another session in this workspace stored revision 2" in notice
    # Every draft is there, in order; A's first draft was never stored over B's.
    assert revisions(ws) == [(1, FIRST), (2, FROM_B), (3, MERGED)]


def test_a_draft_with_the_revision_it_read_still_goes_through_after_a_reload(tmp_path, driver):
    """One conversation on its own is never refused: its own drafts move what it knows."""
    ws = tmp_path / "ws"
    ws.mkdir()
    done = driver(ws, {"user": "/plan on"}, {"user": "Plan."}, set_content(FIRST),
                  set_content(FROM_B), PLAN_GET, set_content(MERGED),
                  {"expect": "\"revision\": 3"}, {"model": {"text": "ok"}})
    assert done["error"] is None and not [n for n in done["notices"] if "not stored" in n]
    assert [r for r, _ in revisions(ws)] == [1, 2, 3]


# -- a damaged row ---------------------------------------------------------------------------


def plans(ws: Path) -> list[tuple[str, str]]:
    with database(ws) as db:
        return db.execute("SELECT id, status FROM plans ORDER BY created_ms, rowid").fetchall()


@pytest.mark.slow
@pytest.mark.parametrize("damage,said", [
    ("UPDATE plans SET markdown = CAST(X'2320ff0a' AS TEXT) WHERE id = :id",
     "its markdown is not UTF-8 (byte 0xff at offset 2)"),
    ("UPDATE plans SET status = 'PAUSED' WHERE id = :id",
     "its status 'PAUSED' is none of COLLECTING, READY, EXECUTING"),
    ("UPDATE plans SET revision = 'two' WHERE id = :id",
     "its revision 'two' is not a whole number"),
])
def test_a_damaged_plan_row_spoils_only_that_plan(tmp_path, damage, said):
    ws = tmp_path / "ws"
    ws.mkdir()
    assert orion("run", "plan_mode", "--workspace", str(ws), cwd=ws).returncode == 0
    (damaged, _), (kept, _) = plans(ws)  # the superseded plan, and the one that replaced it
    with database(ws) as db:
        db.execute("PRAGMA ignore_check_constraints = ON")  # what Orion itself never does
        db.execute(damage, {"id": damaged})
        db.commit()
    history = orion("plan", "history", "--workspace", str(ws), "--json", cwd=ws)
    assert history.returncode == 0, history.stderr
    assert [plan["id"] for plan in json.loads(history.stdout)] == [kept]
    assert f"plan {damaged[:8]} is damaged in plans.db ({said}" in history.stderr
    assert f"`orion plan drop {damaged[:8]}` removes it" in history.stderr
    shown = orion("plan", "show", kept[:8], "--workspace", str(ws), cwd=ws)
    assert shown.returncode == 0 and "Tag v1.2.0" in shown.stdout
    refused = orion("plan", "show", damaged[:8], "--workspace", str(ws), cwd=ws)
    assert refused.returncode == 2 and said in refused.stderr
    # New plan work in the same workspace goes on.
    again = orion("run", "plan_mode", "--workspace", str(ws), cwd=ws)
    assert again.returncode == 0, again.stderr[-3000:]
    dropped = orion("plan", "drop", damaged[:8], "--workspace", str(ws), cwd=ws)
    assert dropped.returncode == 0 and f"dropped plan {damaged[:8]}" in dropped.stderr
    assert damaged not in [plan_id for plan_id, _ in plans(ws)] and len(plans(ws)) == 3
    after = orion("plan", "history", "--workspace", str(ws), cwd=ws)
    assert "damaged" not in after.stderr


@pytest.mark.slow
def test_a_damaged_active_plan_stops_only_plan_work_and_says_the_way_out(tmp_path, driver):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.md").write_text("Ship on Friday.\n")
    started = driver(ws, {"user": "/plan on"}, {"user": "Plan."}, set_content(FIRST),
                     {"model": {"text": "Stored."}})
    assert started["error"] is None
    [(active, _)] = plans(ws)
    with database(ws) as db:
        db.execute("UPDATE plans SET markdown = CAST(X'ff' AS TEXT) WHERE id = ?", (active,))
        db.commit()
    hurt = driver(ws, {"user": "/plan on"}, {"user": "What is in the notes?"},
                  {"model": {"tool_calls": [{"name": "read_file",
                                             "arguments": {"path": "notes.md"}}]}},
                  {"expect": "Ship on Friday"}, {"model": {"text": "Friday."}})
    assert hurt["error"] is None, hurt  # the conversation and its other tools go on
    way_out = (f"plan work is unavailable: the active plan {active[:8]} is damaged in plans.db "
               f"(its markdown is not UTF-8 (byte 0xff at offset 0)); the other plans are not "
               f"affected. `orion plan drop {active[:8]}` removes it and its drafts; then /plan "
               "on starts a new plan")
    assert way_out in hurt["notices"], hurt["notices"]
    assert orion("plan", "drop", active[:8], "--workspace", str(ws), cwd=ws).returncode == 0
    healed = driver(ws, {"user": "/plan on"}, {"user": "Plan."}, set_content(FROM_A),
                    {"model": {"text": "Stored."}})
    assert healed["error"] is None and any("Plan work is on" in n for n in healed["notices"])
    assert [status for _, status in plans(ws)] == ["READY"]
