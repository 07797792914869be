"""A trace store over a database in memory (sqlite-utils' ``Database(memory=True)``, as a test
or a script builds one) stores and reads events: there is no file to lock while it is set up."""

from __future__ import annotations

from sqlite_utils import Database

from orion.trace.events import Kind, TraceEvent
from orion.trace.store import TraceStore


def test_a_store_in_memory_writes_and_reads_events() -> None:
    store = TraceStore(Database(memory=True))
    assert store.path is None
    event = TraceEvent(Kind.TOOL_CALL, "execute_tool read_file", 1.0, conversation_id="c1",
                       attributes={"gen_ai.tool.name": "read_file"})
    assert store.write([event])
    [row] = store.query(conversation="c1")
    assert row["name"] == "execute_tool read_file" and row["kind"] == "tool_call"
