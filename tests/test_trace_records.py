"""A lifecycle step is one record in ``orion.db`` (the phase it ends folded into its
transition's row), and readers still see every span: the ``trace_events`` view gives back the
spans the ``store_traces`` hook received, ``orion traces --tree`` nests them, and a database
written by Orion 0.2.0 (two rows per step) reads as it did and takes new records."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from sqlite_utils import Database

from orion import hookimpl
from orion.cli import cli
from orion.clock import VirtualClock
from orion.hooks.manager import make_plugin_manager
from orion.runtime.runtime import Runtime
from orion.trace.batch import TraceBatch
from orion.trace.events import TraceEvent
from orion.trace.store import DB_NAME, TraceStore, migrations
from orion.write_session.manager import manager_for
from orion.write_session.plan import WritePlan

BASE_MS = 1_700_000_000_000.0
SPAN_FIELDS = ("kind", "name", "at_ms", "duration_ms", "conversation_id", "session_id",
               "trace_id", "span_id", "parent_id")


class Keep:
    """Keeps the batches the hook hands over, without reading them (a reader would build the
    spans, and the store would fold those instead of the steps)."""

    def __init__(self) -> None:
        self.batches: list[Any] = []

    @hookimpl
    def store_traces(self, events):
        self.batches.append(events)


class NoModel:
    name = "none"

    async def stream(self, request):  # pragma: no cover - no model request here
        raise AssertionError("no model request")
        yield


def open_session(tmp_path: Path, keep: Keep | None = None) -> tuple[Runtime, Any]:
    pm = make_plugin_manager(entrypoints=False, env={})
    if keep is not None:
        pm.register(keep, name="keep")
    runtime = Runtime(model=NoModel(), plugins=pm, workspace=tmp_path, clock=VirtualClock(), env={})
    manager = manager_for(runtime)
    manager.begin(WritePlan(intent="records", target_file="doc.md", operation="create"))
    session = manager.active
    session.feed("# A document\n")
    return runtime, session


def view(path: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM trace_events ORDER BY id")]


def same_span(row: dict[str, Any], event: TraceEvent) -> None:
    assert {f: row[f] for f in SPAN_FIELDS} == {f: getattr(event, f) for f in SPAN_FIELDS}
    assert json.loads(row["attributes"]) == json.loads(json.dumps(event.attributes))
    assert row["links"].split() == list(event.links)


def test_a_step_is_one_record_and_the_view_gives_back_the_spans_the_hook_received(tmp_path):
    keep = Keep()
    runtime, session = open_session(tmp_path, keep)
    trigger = session.lifecycle.trigger
    for _ in range(20):
        trigger("message_end")
        trigger("content")
    runtime.tracer.flush(wait=True)
    database = tmp_path / ".orion" / DB_NAME
    with sqlite3.connect(database) as db:
        records = db.execute("SELECT count(*) FROM trace_records WHERE kind = 'transition' "
                             "AND phase_span_id != ''").fetchone()[0]
    assert records >= 40  # each step's phase is in its transition's row
    assert all(type(batch) is TraceBatch for batch in keep.batches)
    events = [event for batch in keep.batches for event in batch]  # built only now
    rows = view(database)
    assert len(rows) == len(events)
    for row, event in zip(rows, events):
        same_span(row, event)
    phases = [r for r in rows if r["kind"] == "phase"]
    assert len(phases) >= 40
    assert "write_session awaiting_done_or_more_content" in {r["name"] for r in phases}
    runtime.close()


def test_a_batch_a_plugin_read_is_stored_folded_all_the_same(tmp_path):
    class Reader(Keep):
        @hookimpl
        def store_traces(self, events):
            self.batches.append(list(events))  # reads them as the hook hands them over

    reader = Reader()
    runtime, session = open_session(tmp_path, reader)
    for _ in range(5):
        session.lifecycle.trigger("message_end")
        session.lifecycle.trigger("content")
    runtime.close()
    database = tmp_path / ".orion" / DB_NAME
    with sqlite3.connect(database) as db:
        records, spans = db.execute(
            "SELECT (SELECT count(*) FROM trace_records), (SELECT count(*) FROM trace_events)"
        ).fetchone()
    events = [event for batch in reader.batches for event in batch]
    assert spans == len(events) > records
    for row, event in zip(view(database), events):
        same_span(row, event)


def test_steps_off_the_usual_shape_are_stored_as_the_spans_they_make(tmp_path):
    """A payload that holds content (hashed, and its words kept out of the name) and a phase
    of another trace (the conversation changed under it) take the events' path: the first is
    still one record, the second two; either way the view reads back the hook's spans."""
    from orion.statechart.interpreter.lifecycle import Transition

    keep = Keep()
    runtime, session = open_session(tmp_path, keep)
    lifecycle = session.lifecycle
    lifecycle.trigger("message_end")
    runtime.tracer.transition(lifecycle, Transition(
        lifecycle.name, lifecycle.id, "content", lifecycle.state, lifecycle.state,
        {"text": "a line of the secret document", "count": 3}, 0.0, 0.25))
    runtime.conversation.reset()  # a new conversation: a new turn, a new trace
    lifecycle.trigger("content")
    runtime.tracer.flush(wait=True)
    database = tmp_path / ".orion" / DB_NAME
    events = [event for batch in keep.batches for event in batch]
    rows = view(database)
    assert len(rows) == len(events)
    for row, event in zip(rows, events):
        same_span(row, event)
    payload = next(r for r in rows if '"count":3' in r["attributes"])
    assert "secret" not in payload["attributes"] and "secret" not in payload["name"]
    with sqlite3.connect(database) as db:
        cut = db.execute("SELECT count(*) FROM trace_records WHERE kind = 'phase'").fetchone()[0]
    assert cut == 1  # the phase of the old trace: a row of its own
    assert len({r["trace_id"] for r in rows if r["trace_id"]}) == 2
    runtime.close()


# -- a database of Orion 0.2.0 -----------------------------------------------------------------

TRACE = "a" * 32
ROOT, PHASE, FIRST, SECOND = "1" * 16, "2" * 16, "3" * 16, "4" * 16
SESSION = "5f0c" * 8
#: What 0.2.0 wrote for a turn in which a write session paused and went on: the phase a step
#: ended and the step's transition were two rows, each a span.
ROWS_0_2_0 = [
    ("transition", "write_session message_end", BASE_MS + 10, 0.5, "conv-1", SESSION,
     {"orion.lifecycle": "write_session", "orion.event": "message_end",
      "orion.source": "session_active.receiving", "orion.dest": "session_active.paused",
      "orion.payload": {}}, TRACE, FIRST, ROOT),
    ("phase", "write_session paused", BASE_MS + 10.5, 20.0, "conv-1", SESSION,
     {"orion.lifecycle": "write_session", "orion.phase": "session_active.paused"},
     TRACE, PHASE, ROOT),
    ("transition", "write_session content", BASE_MS + 30.5, 0.25, "conv-1", SESSION,
     {"orion.lifecycle": "write_session", "orion.event": "content",
      "orion.source": "session_active.paused", "orion.dest": "session_active.receiving",
      "orion.payload": {}}, TRACE, SECOND, ROOT),
    ("turn", "invoke_agent orion", BASE_MS, 100.0, "conv-1", "",
     {"gen_ai.operation.name": "invoke_agent", "orion.turn.number": 1}, TRACE, ROOT, ""),
]


def database_of_0_2_0(path: Path) -> None:
    """A database as Orion 0.2.0 left it: its two migrations, its table, its rows."""
    db = Database(sqlite3.connect(path))
    migrations.apply(db, stop_before="003_blob_times")
    db.conn.executemany(
        "INSERT INTO trace_events (kind, name, at_ms, duration_ms, conversation_id, "
        "session_id, attributes, trace_id, span_id, parent_id, links) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '')",
        [(*row[:6], json.dumps(row[6]), *row[7:]) for row in ROWS_0_2_0])
    db.conn.commit()
    db.close()


def test_a_database_of_0_2_0_reads_as_it_did_and_takes_new_records(tmp_path):
    path = tmp_path / ".orion" / DB_NAME
    path.parent.mkdir()
    database_of_0_2_0(path)
    with TraceStore(path) as store:
        assert [m["name"] for m in store.db["_sqlite_migrations"].rows][-1] == \
            "004_folded_phases"
        newest_first = store.query(limit=None)
        assert [r["span_id"] for r in newest_first] == [SECOND, PHASE, FIRST, ROOT]
        assert store.query(kind="phase")[0]["attributes"]["orion.phase"] == \
            "session_active.paused"
        [trace] = store.traces()
        assert [r["span_id"] for r in trace] == [ROOT, FIRST, PHASE, SECOND]
        assert store.stats()["counts"] == {"phase": 1, "transition": 2, "turn": 1}
        assert store.span_ms() == (BASE_MS, BASE_MS + 30.5)

    tree = CliRunner().invoke(cli, ["traces", "--workspace", str(tmp_path), "--tree"],
                              env={"COLUMNS": "200"})
    assert tree.exit_code == 0, tree.output
    lines = tree.output.splitlines()
    assert lines[0].startswith("turn 1")
    drawn = [next(i for i, line in enumerate(lines) if name in line)
             for name in ("write_session message_end", "write_session paused",
                          "write_session content")]
    assert drawn == sorted(drawn)

    # A run in that workspace appends records beside the old rows.
    runtime, session = open_session(tmp_path)
    session.lifecycle.trigger("message_end")
    session.lifecycle.trigger("content")
    runtime.close()
    with TraceStore(path) as store:
        rows = store.query(limit=None, session=session.id)
        assert {"phase", "transition"} <= {r["kind"] for r in rows}
        assert len(store.query(limit=None, session=SESSION)) == 3
        assert store.prune(BASE_MS + 20) == 3  # the root, the first step and its phase
        assert [r["span_id"] for r in store.query(limit=None, session=SESSION)] == [SECOND]
