"""A trace store's writer thread: batches are stored after the step that made them moved on.

:meth:`TraceWriter.submit` queues a batch and returns; the thread takes everything queued and
stores it in one transaction (:meth:`orion.trace.store.TraceStore.write_batches`, which retries a
busy database and counts what it cannot store). The queue is bounded
(:data:`MAX_QUEUED` events): a producer that outruns the database waits for room rather than
losing events.

Nothing is dropped in silence:

- closing the writer (the runtime's ``close_traces``) stores what is queued first, and so does
  the interpreter's exit for writers still open (SIGTERM and SIGHUP close the runtime);
- a process killed outright loses what was queued, and its ledger
  (:mod:`orion.trace.ledger`) says how many events that was: the next store to open the
  database adds them to the ``dropped`` counter and warns once;
- a reader of the same database in this process (:meth:`TraceStore.query` and the others)
  first waits for this process's queued batches, so it reads what was recorded.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections.abc import Mapping, Sequence

from orion.trace.events import TraceEvent
from orion.trace.ledger import Ledger
from orion.trace.store import TraceStore, register_settler, unregister_settler

log = logging.getLogger("orion.trace")

#: Events queued at most; a batch that would pass it waits for the thread to catch up.
MAX_QUEUED = 50_000


class TraceWriter:
    """One store's thread. ``submit`` from any thread; ``settle`` and ``close`` wait."""

    def __init__(self, store: TraceStore, *, max_queued: int = MAX_QUEUED) -> None:
        self.store = store
        self.max_queued = max(1, int(max_queued))
        self._cond = threading.Condition()
        self._queue: list[tuple[Sequence[TraceEvent], Mapping[str, str]]] = []
        self._queued = 0  # events submitted and not yet stored or counted (in flight too)
        self._taken = 0  # of those, the ones the thread is storing now
        self._closed = False
        self._thread: threading.Thread | None = None
        self._ledger = Ledger(store.path) if store.path is not None else None
        if store.path is not None:
            register_settler(store.path, self.settle)
        _open.add(self)

    def submit(self, events: Sequence[TraceEvent], blobs: Mapping[str, str]) -> None:
        count = len(events)
        if not count and not blobs:
            return
        with self._cond:
            if self._closed:  # a batch after close: stored on this thread, as before
                self.store.write(events, blobs)
                return
            while self._queued and self._queued + count > self.max_queued:
                self._cond.wait()
            self._queue.append((events, blobs))
            self._queued += count
            self._note()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="orion-trace-writer",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _note(self) -> None:
        if self._ledger is not None:
            self._ledger.note(self._queued + self.store.unpersisted_drops())

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                batches, self._queue = self._queue, []
                self._taken = sum(len(events) for events, _ in batches)
            self._store(batches)
            with self._cond:
                self._queued -= self._taken
                self._taken = 0
                self._note()
                self._cond.notify_all()

    def _store(self, batches: list[tuple[Sequence[TraceEvent], Mapping[str, str]]]) -> None:
        blobs = batches[0][1] if len(batches) == 1 else {
            sha: text for _, more in batches for sha, text in more.items()}
        parts = [events for events, _ in batches]
        try:
            self.store.write_batches(parts, blobs)
        except Exception as exc:  # a caller's bug (not JSON data): counted, the thread goes on
            self.store.count_dropped(sum(map(len, parts)), exc)

    def settle(self) -> None:
        """Wait until every batch submitted so far is stored (or counted as dropped)."""
        if threading.current_thread() is self._thread:
            return
        with self._cond:
            while self._queued and self._thread is not None and self._thread.is_alive():
                self._cond.wait()

    def close(self) -> None:
        """Store what is queued, stop the thread, remove the ledger (nothing is unaccounted
        for once the store could count its drops)."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        _open.discard(self)
        if self.store.path is not None:
            unregister_settler(self.store.path, self.settle)
        if self._ledger is not None:
            if self.store.unpersisted_drops():
                self._ledger.note(self.store.unpersisted_drops())
            else:
                self._ledger.close()


_open: weakref.WeakSet[TraceWriter] = weakref.WeakSet()


def settle_all() -> None:
    """Wait until every open writer of this process stored what it was given."""
    for writer in list(_open):
        writer.settle()


@atexit.register
def _close_all() -> None:
    """At the interpreter's exit, writers nobody closed store their queues."""
    for writer in list(_open):
        writer.close()
