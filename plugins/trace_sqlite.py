"""The default trace store: ``<state dir>/orion.db``, through sqlite-utils.

One store per state directory, opened on first use and closed when the runtime that used it
has stored its last traces (``close_traces``); traces that come later open it again. Batches are
stored by the store's writer thread (:mod:`orion.trace.writer`), so a step never waits for
SQLite; closing stores what is queued, and a process killed outright has its unstored events
counted as dropped by the next store to open the database. As a runtime
starts, events beyond ``trace.keep_days`` are removed (``prune_traces``). The store never
raises for database problems (locked, full, read-only): it retries, then drops the batch and
counts it, which ``orion traces stats`` shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from orion import hookimpl
from orion.trace.store import TraceStore
from orion.trace.writer import TraceWriter

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from orion.api import TraceEvent

DATABASE = "orion.db"
_stores: dict[Path, TraceStore] = {}


_by_dir: dict[Path, TraceStore] = {}
_writers: dict[TraceStore, TraceWriter] = {}


def store_for(state_dir: Path) -> TraceStore:
    # Looked up by the directory as given first: resolving a path costs more than the rest of
    # a flush's bookkeeping, and this runs after every model request.
    store = _by_dir.get(state_dir)
    if store is None:
        path = Path(state_dir).resolve() / DATABASE
        store = _stores.get(path)
        if store is None:
            store = _stores[path] = TraceStore(path)
        _by_dir[state_dir] = store
    return store


@hookimpl
def store_traces(events: Sequence[TraceEvent], blobs: Mapping[str, str],
                 state_dir: Path) -> None:
    store = store_for(state_dir)
    writer = _writers.get(store)
    if writer is None:
        writer = _writers[store] = TraceWriter(store)
    writer.submit(events, blobs)


@hookimpl
def prune_traces(state_dir: Path, keep_ms: float, now_ms: float) -> int:
    if state_dir not in _by_dir and not (Path(state_dir) / DATABASE).exists():
        return 0  # nothing recorded yet: retention does not create the database
    return store_for(state_dir).retain(keep_ms, now_ms)


@hookimpl
def close_traces(state_dir: Path) -> None:
    store = _by_dir.pop(state_dir, None)
    if store is None:
        return
    for cache in (_by_dir, _stores):
        for key in [key for key, value in cache.items() if value is store]:
            del cache[key]
    writer = _writers.pop(store, None)
    if writer is not None:
        writer.close()
    store.close()
