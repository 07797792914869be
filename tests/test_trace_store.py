"""The SQLite trace store, on real database files: schema, round trips, and failures that must
never raise (read-only, locked, full), counted as dropped and logged once."""

from __future__ import annotations

import datetime as dt
import logging
import sqlite3
import time

import pytest
from sqlite_utils import Database

from orion.trace.events import Kind, TraceEvent
from orion.trace.store import DB_NAME, TraceStore, migrations, parse_since

BASE_MS = 1_700_000_000_000.0


def event(i: int, *, kind: str = Kind.TOOL_CALL, conversation: str = "c1",
          session: str = "s1") -> TraceEvent:
    return TraceEvent(kind, f"execute_tool t{i}", BASE_MS + i, conversation, session,
                      {"gen_ai.tool.name": f"t{i}", "orion.tool.outcome": "ok", "n": i,
                       "nested": {"list": [1, 2.5, None, True], "text": "é"}}, 1.5)


@pytest.fixture
def store(tmp_path):
    s = TraceStore.for_state_dir(tmp_path / "state" / ".orion")
    yield s
    s.close()


def warnings_of(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records
            if r.name == "orion.trace" and r.levelno >= logging.WARNING]


# -- schema ------------------------------------------------------------------------------------

def test_creates_the_file_in_wal_mode(store, tmp_path):
    assert store.path == tmp_path / "state" / ".orion" / DB_NAME
    assert store.path.exists()
    assert store.db.journal_mode == "wal"
    assert store.db.execute("PRAGMA busy_timeout").fetchone()[0] == 50


def test_migrations_are_recorded_once_across_opens(tmp_path):
    path = tmp_path / DB_NAME
    TraceStore(path).close()
    with TraceStore(path) as second:
        rows = list(second.db["_sqlite_migrations"].rows)
        assert [(r["migration_set"], r["name"]) for r in rows] == [
            ("orion.traces", "001_trace_tables"), ("orion.traces", "002_span_ids"),
            ("orion.traces", "003_blob_times"), ("orion.traces", "004_folded_phases")]
        assert migrations.pending(second.db) == []


def test_schema_tables_columns_and_indexes(store):
    db = store.db
    assert {"trace_records", "trace_blobs", "trace_counters"} <= set(db.table_names())
    assert "trace_events" in db.view_names()
    assert {c.name: c.type for c in db["trace_records"].columns} == {
        "id": "INTEGER", "kind": "TEXT", "name": "TEXT", "at_ms": "REAL",
        "duration_ms": "REAL", "conversation_id": "TEXT", "session_id": "TEXT",
        "attributes": "TEXT", "trace_id": "TEXT", "span_id": "TEXT", "parent_id": "TEXT",
        "links": "TEXT", "phase_span_id": "TEXT", "phase_parent_id": "TEXT",
        "phase_at_ms": "REAL", "phase_duration_ms": "REAL", "phase_name": "TEXT",
        "phase_attributes": "TEXT"}
    assert [c.name for c in db["trace_events"].columns] == [
        "id", "kind", "name", "at_ms", "duration_ms", "conversation_id", "session_id",
        "attributes", "trace_id", "span_id", "parent_id", "links"]
    assert db["trace_records"].pks == ["id"]
    indexed = {tuple(i.columns) for i in db["trace_records"].indexes}
    assert {("conversation_id",), ("session_id",), ("at_ms",), ("trace_id",)} <= indexed
    assert ("kind",) not in indexed
    assert db["trace_blobs"].pks == ["sha256"]
    assert list(db["trace_counters"].rows) == [{"name": "dropped", "value": 0}]


# -- round trips -------------------------------------------------------------------------------

def test_round_trip_filters_order_and_limit(store):
    events = [event(i) for i in range(5)]
    events += [event(10, kind=Kind.TRANSITION, conversation="c2", session="s2"),
               event(11, kind=Kind.MODEL_REQUEST, conversation="c2", session="s1")]
    assert store.write(events) is True

    rows = store.query()
    assert [r["at_ms"] for r in rows] == [BASE_MS + i for i in (11, 10, 4, 3, 2, 1, 0)]
    first = rows[-1]
    assert first == {"id": first["id"], "kind": "tool_call", "name": "execute_tool t0",
                     "at_ms": BASE_MS, "duration_ms": 1.5, "conversation_id": "c1",
                     "session_id": "s1", "attributes": dict(events[0].attributes),
                     "trace_id": "", "span_id": "", "parent_id": "", "links": []}
    raw = store.db.execute("SELECT attributes FROM trace_events WHERE id = ?",
                           [first["id"]]).fetchone()[0]
    assert ": " not in raw and ", " not in raw  # compact JSON

    assert [r["name"] for r in store.query(conversation="c2")] == [
        "execute_tool t11", "execute_tool t10"]
    assert [r["kind"] for r in store.query(session="s1", conversation="c2")] == [
        "model_request"]
    assert len(store.query(kind="tool_call")) == 5
    assert [r["at_ms"] for r in store.query(since_ms=BASE_MS + 4)] == [
        BASE_MS + 11, BASE_MS + 10, BASE_MS + 4]
    assert [r["at_ms"] for r in store.query(limit=2)] == [BASE_MS + 11, BASE_MS + 10]
    assert len(store.query(limit=None)) == 7
    assert store.query(kind="nothing") == []

    stats = store.stats()
    assert stats["total"] == 7
    assert stats["counts"] == {"model_request": 1, "tool_call": 5, "transition": 1}
    assert stats["dropped"] == 0
    assert stats["path"] == str(store.path)
    assert stats["size_bytes"] >= store.path.stat().st_size > 0


def test_same_time_events_come_back_newest_inserted_first(store):
    same = [TraceEvent("transition", f"e{i}", BASE_MS) for i in range(3)]
    assert store.write(same)
    assert [r["name"] for r in store.query()] == ["e2", "e1", "e0"]


def test_attributes_are_stored_as_compact_ascii_json_and_empty_ones_as_braces(store):
    attributes = [{"a": [1, 2.5, None, True], "é": {"x": "ü"}}, {}, None, {"n": 0}]
    assert store.write([TraceEvent("error", f"e{i}", BASE_MS + i, attributes=a)
                        for i, a in enumerate(attributes)])
    raw = [r[0] for r in store.db.execute("SELECT attributes FROM trace_events ORDER BY id")]
    assert raw == ['{"a":[1,2.5,null,true],"\\u00e9":{"x":"\\u00fc"}}', "{}", "{}", '{"n":0}']


def test_blobs_are_stored_once(store):
    assert store.write([event(1)], {"ab" * 32: "full text"})
    assert store.write([event(2)], {"ab" * 32: "full text", "cd" * 32: "other"})
    assert store.write([], {"cd" * 32: "other"})
    rows = list(store.db.query("SELECT sha256, length, text FROM trace_blobs ORDER BY sha256"))
    dated = dict(store.db.execute("SELECT sha256, last_ms FROM trace_blobs").fetchall())
    # Each text is dated by the newest event that brought it; a batch without events keeps it.
    assert dated == {"ab" * 32: BASE_MS + 2, "cd" * 32: BASE_MS + 2}
    assert rows == [{"sha256": "ab" * 32, "length": 9, "text": "full text"},
                    {"sha256": "cd" * 32, "length": 5, "text": "other"}]
    assert store.blob("ab" * 32) == "full text" and store.blob("ef" * 32) is None
    assert store.stats()["blobs"] == 2


def test_lone_surrogates_are_stored_escaped(store):
    assert store.write([TraceEvent("tool_call", "execute_tool \ud800x", BASE_MS, "c\udfff",
                                   attributes={"name": "\ud800"})], {"ff" * 32: "a\udc80b"})
    row = store.query()[0]
    assert row["name"] == "execute_tool \\ud800x" and row["conversation_id"] == "c\\udfff"
    assert row["attributes"] == {"name": "\ud800"}  # JSON escapes it, and gives it back
    assert store.blob("ff" * 32) == "a\\udc80b"


def test_caller_bugs_are_raised_before_touching_the_database(store):
    with pytest.raises(TypeError):
        store.write([TraceEvent("error", "x", BASE_MS, attributes={"bad": object()})])
    assert store.stats()["total"] == 0 and store.dropped == 0


# -- failures: never raised, counted, logged once ------------------------------------------------

def test_read_only_database_drops_counts_and_warns_once(tmp_path, caplog):
    path = tmp_path / DB_NAME
    TraceStore(path).close()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    ro = TraceStore(Database(conn))
    try:
        assert ro.path == path
        with caplog.at_level(logging.DEBUG, logger="orion.trace"):
            results = [ro.write([event(i) for i in range(3)]) for _ in range(3)]
        assert results == [False, False, False]
        assert ro.dropped == 9
        assert ro.stats()["dropped"] == 9  # the persisted counter could not be written
        assert ro.stats()["total"] == 0
        [warning] = warnings_of(caplog)
        assert "readonly database" in warning.getMessage()
        assert str(path) in warning.getMessage()
    finally:
        ro.close()
        conn.close()
    with TraceStore(path) as again:  # the file itself is fine
        assert again.stats()["dropped"] == 9  # this process's drops, not persisted yet
        assert again.write([event(1)])
        assert again.dropped == 0
    check = sqlite3.connect(path)
    try:  # ... persisted by the first write that could
        assert check.execute("SELECT value FROM trace_counters").fetchall() == [(9,)]
    finally:
        check.close()


def test_locked_database_drops_after_retries_then_recovers(tmp_path, caplog):
    path = tmp_path / DB_NAME
    store = TraceStore(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        started = time.perf_counter()
        with caplog.at_level(logging.WARNING, logger="orion.trace"):
            assert store.write([event(i) for i in range(4)]) is False
        elapsed = time.perf_counter() - started
        assert 0.15 < elapsed < 1.0  # retried with the busy timeout, well under a second
        [warning] = warnings_of(caplog)
        assert "database is locked" in warning.getMessage()
        assert str(path) in warning.getMessage()
        assert store.stats()["dropped"] == 4
        other.execute("COMMIT")

        assert store.write([event(10)]) is True
        assert [r["name"] for r in store.query()] == ["execute_tool t10"]
        assert store.stats()["dropped"] == 4
    finally:
        other.close()
        store.close()
    with TraceStore(path) as again:  # persisted by the first successful write
        assert again.stats()["dropped"] == 4
        assert again.dropped == 0


def test_disk_full_drops_without_raising(store, caplog):
    assert store.write([event(0)])
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {pages}")
    big = [TraceEvent("tool_call", "x" * 2000, BASE_MS + i) for i in range(200)]
    with caplog.at_level(logging.WARNING, logger="orion.trace"):
        assert store.write(big) is False
        assert store.write(big[:50]) is False
    [warning] = warnings_of(caplog)
    assert "database or disk is full" in warning.getMessage()
    assert store.dropped == 250
    assert store.stats()["total"] == 1
    assert store.stats()["dropped"] == 250
    # Small writes that fit still go through.
    assert store.write([TraceEvent("error", "e", BASE_MS)]) is True


def test_dropped_counter_survives_the_process(tmp_path):
    path = tmp_path / DB_NAME
    with TraceStore(path) as first:
        first.db.execute(f"PRAGMA max_page_count = "
                         f"{first.db.execute('PRAGMA page_count').fetchone()[0]}")
        assert first.write([TraceEvent("tool_call", "x" * 5000, BASE_MS)] * 20) is False
    with TraceStore(path) as second:
        assert second.dropped == 0
        assert second.stats()["dropped"] == 20
        assert list(second.db["trace_counters"].rows) == [{"name": "dropped", "value": 20}]


def test_a_store_that_cannot_open_never_raises_on_write(tmp_path, caplog):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("file", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="orion.trace"):
        store = TraceStore(blocker / "orion.db", backoff_s=(0.001,))
        assert store.write([event(1)]) is False
        assert store.write([event(2)]) is False
    assert store.dropped == 2
    [warning] = warnings_of(caplog)
    assert "not-a-dir" in warning.getMessage()
    store.close()


def test_writes_after_close_are_dropped(tmp_path):
    store = TraceStore(tmp_path / DB_NAME)
    store.close()
    store.close()
    assert store.write([event(1)]) is False
    assert store.dropped == 1
    with pytest.raises(sqlite3.ProgrammingError):
        store.query()


# -- parse_since -------------------------------------------------------------------------------

NOW = 1_700_000_000_000.0


@pytest.mark.parametrize(("text", "ago_ms"), [
    ("30s", 30_000), ("10m", 600_000), ("2h", 7_200_000), ("1d", 86_400_000),
    ("1w", 604_800_000), ("500ms", 500), ("1h30m", 5_400_000), (" 1.5h ", 5_400_000),
    ("2H", 7_200_000),
])
def test_parse_since_durations(text, ago_ms):
    assert parse_since(text, NOW) == NOW - ago_ms


def test_parse_since_iso_dates_and_datetimes():
    utc = dt.timezone.utc
    assert parse_since("2024-05-01T12:30:00Z", NOW) == dt.datetime(
        2024, 5, 1, 12, 30, tzinfo=utc).timestamp() * 1000
    assert parse_since("2024-05-01T12:30:00+02:00", NOW) == dt.datetime(
        2024, 5, 1, 10, 30, tzinfo=utc).timestamp() * 1000
    assert parse_since("2024-05-01", NOW) == dt.datetime(2024, 5, 1).timestamp() * 1000
    assert parse_since("2024-05-01 08:00", NOW) == dt.datetime(
        2024, 5, 1, 8).timestamp() * 1000


@pytest.mark.parametrize("text", ["", "  ", "10", "ten minutes", "10x", "-5m", "m",
                                  "2024-13-01", "yesterday"])
def test_parse_since_rejects_with_a_clear_message(text):
    with pytest.raises(ValueError, match="expected a duration such as 30s.*ISO 8601"):
        parse_since(text, NOW)


@pytest.mark.parametrize("per", [1, 7, 90])
def test_multi_row_statements_and_executemany_store_the_same(tmp_path, per):
    events = [event(i, conversation=f"c{i % 3}") for i in range(250)]
    more = [event(i) for i in range(1000, 1003)]
    with TraceStore(tmp_path / DB_NAME, rows_per_statement=per) as store:
        assert store.write(events) and store.write(more)
        rows = store.query(limit=None)
    # A span's id is twice its record's plus one (a folded phase takes the even one).
    assert [r["id"] for r in rows] == [2 * i + 1 for i in range(253, 0, -1)]
    assert [(r["name"], r["at_ms"], r["conversation_id"], r["attributes"])
            for r in reversed(rows)] == [
        (e.name, e.at_ms, e.conversation_id, dict(e.attributes)) for e in events + more]


def test_rows_per_statement_is_bounded(tmp_path):
    with pytest.raises(ValueError, match="rows_per_statement"):
        TraceStore(tmp_path / DB_NAME, rows_per_statement=500)
