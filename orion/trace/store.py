"""The SQLite trace store: ``<state_dir>/orion.db``, written in batches, never in the way. The
file holds traces only (plans are in ``plans.db``: :mod:`orion.plan.store`).

One :class:`TraceStore` per database file. Its schema is the ``orion.traces`` migration set of
:class:`sqlite_utils.Migrations` (recorded in ``_sqlite_migrations``), in WAL mode with
``synchronous=NORMAL`` (no fsync per commit; a power cut may lose the last batches, never the
database) and a short busy timeout, so a lock is noticed quickly.

Tables:

- ``trace_records``: one row per span, except a lifecycle step: its transition's row holds
  the phase it ends (``phase_*`` columns), so a step is one row (:mod:`orion.trace.records`).
  Attributes as compact JSON, ``links`` as space-separated ``<trace_id>-<span_id>``; indexed
  on ``conversation_id``, ``session_id``, ``at_ms`` and ``trace_id``. A batch is one
  transaction: its records' prepared values in multi-row INSERTs (``executemany`` for the
  rest), the steps' rows apart from other events' as their columns differ
  (``bench/bench_trace_store.py``).
- ``trace_events``: the view readers use, one row per span (:class:`~orion.trace.events.
  TraceEvent`), the folded phases given back as spans of their own. Databases written before
  the fold (two rows per step) read the same.
- ``trace_blobs``: captured full texts by sha256, each stored once.
- ``trace_counters``: ``dropped``, the number of events the store could not write, so the
  count survives the process.

Failure contract: :meth:`TraceStore.write` never raises for a database problem. Any
``sqlite3.Error`` or ``OSError`` (creating the directory) is a failure to store. Operational
ones (locked or busy, disk full, read-only, I/O error) are retried a few times with a short
backoff (well under a second in all); the others (a constraint, a corrupt file, a closed
store, a value SQLite cannot bind) would fail again, so they are not. Then the batch is
dropped: its events are counted (in memory for the process and the file, and best effort
in ``trace_counters``), ONE warning per store goes to the ``orion.trace`` logger naming the
cause and the path, and ``write`` returns ``False``. Later writes are attempted normally and
succeed once the cause is gone; the first that does (by any store of the process on that file)
also persists the count of events dropped meanwhile. Exceptions that are not
database problems are caller bugs and propagate: an attribute that is not JSON data
(``TypeError``), or something that is not a ``TraceEvent`` (``AttributeError``). They are
raised before the database is touched, and the ``store_traces`` hook is an isolated observer
hook, so even they never fail a write or a plan operation of the runtime: the plugin manager
reports them in its failures.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import itertools
import json
import logging
import operator
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sqlite_utils import Database, Migrations

from orion.clock import countable_moment, typed_duration_ms
from orion.workspace.statedb import TRACES_DB, setting_up

from orion.trace import ledger, records
from orion.trace.events import TraceEvent
from orion.trace.shapes import Shapes

log = logging.getLogger("orion.trace")

#: The database file inside a workspace's state directory (traces only: plans are in
#: ``plans.db``).
DB_NAME = TRACES_DB

#: Milliseconds a statement waits for another connection's lock before failing.
BUSY_TIMEOUT_MS = 50
#: The connection's page cache (KiB): the pages an append touches, the last of the table and
#: of each index, fit with room to spare.
CACHE_KIB = 256
#: Sleeps between attempts of one batch (so ``len + 1`` attempts); with the busy timeout a
#: locked database costs about 4 x 50 ms + 60 ms + one 50 ms try of the counter.
BACKOFF_S = (0.01, 0.02, 0.03)

#: Errors that mean "the database could not store this batch".
DATABASE_ERRORS = (sqlite3.Error, OSError)
#: Of those, the ones worth another attempt: locked or busy, full, read-only, I/O errors (a
#: constraint, a corrupt file, a closed store or an unbindable value will not get better).
RETRIED_ERRORS = (sqlite3.OperationalError, OSError)

_NO_BLOBS: Mapping[str, str] = MappingProxyType({})

migrations = Migrations("orion.traces")


@migrations(name="001_trace_tables")
def _m001_trace_tables(db: Database) -> None:
    # IF NOT EXISTS: two processes opening a new file at once must not break each other (the
    # loser then fails on the unique migration record, and sets up again on its next write).
    db.executescript("""
        CREATE TABLE IF NOT EXISTS trace_events (
            id INTEGER PRIMARY KEY,
            kind TEXT,
            name TEXT,
            at_ms REAL,
            duration_ms REAL,
            conversation_id TEXT,
            session_id TEXT,
            attributes TEXT
        );
        CREATE INDEX IF NOT EXISTS idx_trace_events_conversation_id
            ON trace_events (conversation_id);
        CREATE INDEX IF NOT EXISTS idx_trace_events_session_id ON trace_events (session_id);
        CREATE INDEX IF NOT EXISTS idx_trace_events_kind ON trace_events (kind);
        CREATE INDEX IF NOT EXISTS idx_trace_events_at_ms ON trace_events (at_ms);
        CREATE TABLE IF NOT EXISTS trace_blobs (
            sha256 TEXT PRIMARY KEY,
            length INTEGER,
            text TEXT
        );
        CREATE TABLE IF NOT EXISTS trace_counters (
            name TEXT PRIMARY KEY,
            value INTEGER
        );
        INSERT OR IGNORE INTO trace_counters (name, value) VALUES ('dropped', 0);
    """)


@migrations(name="002_span_ids")
def _m002_span_ids(db: Database) -> None:
    # Events became spans: the trace (turn) they belong to, their parent, their links. Rows of
    # older versions keep empty ids and show as roots.
    columns = {column.name for column in db["trace_events"].columns}
    for column in ("trace_id", "span_id", "parent_id", "links"):
        if column not in columns:
            db.execute(f"ALTER TABLE trace_events ADD COLUMN {column} TEXT NOT NULL DEFAULT ''")
    db.execute("CREATE INDEX IF NOT EXISTS idx_trace_events_trace_id ON trace_events (trace_id)")


@migrations(name="003_blob_times")
def _m003_blob_times(db: Database) -> None:
    # Retention removes captured texts with the events: each keeps the time of the newest
    # event that brought it. Texts of older versions count from the newest event now.
    if "last_ms" not in {column.name for column in db["trace_blobs"].columns}:
        db.execute("ALTER TABLE trace_blobs ADD COLUMN last_ms REAL")
        db.execute("UPDATE trace_blobs SET last_ms = (SELECT max(at_ms) FROM trace_events)")
    db.execute("CREATE INDEX IF NOT EXISTS idx_trace_blobs_last_ms ON trace_blobs (last_ms)")


#: The ``trace_events`` view: a record's own span, and the phase folded into it. A span's ``id``
#: is ``2 * id + 1`` of its record, the folded phase's one less, so ``ORDER BY id`` is the order
#: they were recorded in (the phase ended as its transition began).
SPANS_VIEW = """
    CREATE VIEW IF NOT EXISTS trace_events AS
    SELECT id * 2 AS id, 'phase' AS kind, phase_name AS name, phase_at_ms AS at_ms,
           phase_duration_ms AS duration_ms, conversation_id, session_id,
           phase_attributes AS attributes, trace_id, phase_span_id AS span_id,
           phase_parent_id AS parent_id, links
      FROM trace_records WHERE phase_span_id != ''
    UNION ALL
    SELECT id * 2 + 1 AS id, kind, name, at_ms, duration_ms, conversation_id, session_id,
           attributes, trace_id, span_id, parent_id, links
      FROM trace_records
"""
PHASE_COLUMNS = (("phase_span_id", "TEXT NOT NULL DEFAULT ''"),
                 ("phase_parent_id", "TEXT NOT NULL DEFAULT ''"), ("phase_at_ms", "REAL"),
                 ("phase_duration_ms", "REAL"), ("phase_name", "TEXT"),
                 ("phase_attributes", "TEXT"))


@migrations(name="004_folded_phases")
def _m004_folded_phases(db: Database) -> None:
    # A lifecycle step was two rows (the phase it ends, the transition); it is one record now,
    # the phase in columns of its own, and ``trace_events`` the view of the spans. Rows of
    # older versions stay as they are: each is a span, read through the view like any other.
    if "trace_records" not in db.table_names():
        db.execute("ALTER TABLE trace_events RENAME TO trace_records")
    columns = {column.name for column in db["trace_records"].columns}
    for column, declared in PHASE_COLUMNS:
        if column not in columns:
            db.execute(f"ALTER TABLE trace_records ADD COLUMN {column} {declared}")
    # Of the indexes, the one on ``kind`` served no reader (a kind is one of a dozen, and the
    # view's phases have none) and cost a tenth of a record's insert.
    db.execute("DROP INDEX IF EXISTS idx_trace_events_kind")
    db.execute(SPANS_VIEW)


COLUMNS = ("id", "kind", "name", "at_ms", "duration_ms", "conversation_id", "session_id",
           "attributes", "trace_id", "span_id", "parent_id", "links")
INSERT_EVENT = ("INSERT INTO trace_records (kind, name, at_ms, duration_ms, conversation_id, "
                "session_id, attributes, trace_id, span_id, parent_id, links) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
#: A text seen again is stored once; its ``last_ms`` (the newest event of the batch that
#: brought it) keeps it through retention as long as an event kept refers to it.
INSERT_BLOB = ("INSERT INTO trace_blobs (sha256, length, text, last_ms) VALUES (?, ?, ?, ?) "
               "ON CONFLICT (sha256) DO UPDATE SET "
               "last_ms = coalesce(max(excluded.last_ms, last_ms), excluded.last_ms, last_ms)")
#: A record with its phase (:mod:`orion.trace.records`): the event's columns, then the phase's.
INSERT_RECORD = (INSERT_EVENT.partition(") VALUES")[0] + ", "
                 + ", ".join(name for name, _ in PHASE_COLUMNS) + ") VALUES ("
                 + ", ".join(["?"] * (11 + len(PHASE_COLUMNS))) + ")")
#: Values per ``trace_records`` row in :data:`INSERT_RECORD`.
RECORD_WIDTH = 11 + len(PHASE_COLUMNS)
ADD_DROPPED = "UPDATE trace_counters SET value = value + ? WHERE name = 'dropped'"

#: Values per ``trace_events`` row in :data:`INSERT_EVENT` (every column but ``id``).
WIDTH = 11
#: Rows per multi-row INSERT (11 parameters a row: 990, under SQLite's old limit of 999).
#: 1 means plain ``executemany`` for every row.
ROWS_PER_STATEMENT = 90
MAX_ROWS_PER_STATEMENT = 999 // WIDTH


@functools.lru_cache(maxsize=8)
def _multi_insert(rows: int, width: int = WIDTH, insert: str = INSERT_EVENT) -> str:
    head = insert.partition(" VALUES ")[0]
    row = f"({', '.join(['?'] * width)})"
    return f"{head} VALUES {', '.join([row] * rows)}"


def _not_json(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# One reusable C encoder: compact separators, ASCII output (lone surrogates, possible in
# JSON-decoded model output, stay storable) and no circular-reference bookkeeping (attributes
# are JSON data; a cycle would be a caller bug, raised as RecursionError). About twice as fast
# as ``json.dumps(..., separators=(",", ":"))``, which builds an encoder per call.
# (c_make_encoder is CPython's C accelerator, absent from the type stubs)
_make_encoder = getattr(json.encoder, "c_make_encoder", None)
if _make_encoder is not None:  # pragma: no branch - CPython
    _encode = _make_encoder(
        None, _not_json, json.encoder.encode_basestring_ascii, None, ":", ",", False, False,
        True)

    def _dumps_all(values: list[Any]) -> Iterator[str]:
        # map() over the C encoder: no Python frame per event.
        return map("".join, map(_encode, values, itertools.repeat(0)))

    def _dumps(value: Any) -> str:
        return "".join(_encode(value, 0))
else:  # pragma: no cover - interpreters without the C accelerator
    _encode_py = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode

    def _dumps_all(values: list[Any]) -> Iterator[str]:
        return map(_encode_py, values)

    def _dumps(value: Any) -> str:
        return _encode_py(value)

#: The event fields stored, in :data:`INSERT_EVENT` order; one C call per event.
_fields = operator.attrgetter("kind", "name", "at_ms", "duration_ms", "conversation_id",
                              "session_id", "attributes", "trace_id", "span_id", "parent_id",
                              "links")
_AT_MS = 2  # the index of ``at_ms`` in a row
_ATTRIBUTES = 6  # the index of ``attributes`` in a row
_LINKS = 10  # and of ``links``


def event_values(events: Sequence[TraceEvent]) -> list[Any]:
    """The ``trace_events`` values of the events as one flat list, :data:`WIDTH` per event in
    :data:`INSERT_EVENT` order, the attributes as compact JSON (falsy ones as ``{}``).

    Flat because a multi-row INSERT binds a flat list. Built with C loops only (``attrgetter``,
    ``chain``, ``map``, a slice assignment): no Python code runs per event, which saves about
    a tenth of the time spent outside SQLite; the rest is the JSON encoding itself."""
    values = list(itertools.chain.from_iterable(map(_fields, events)))
    attributes = values[_ATTRIBUTES::WIDTH]
    if not all(attributes):  # rare: an empty dict, or None from a caller
        attributes = [a or {} for a in attributes]
    values[_ATTRIBUTES::WIDTH] = _dumps_all(attributes)
    links = values[_LINKS::WIDTH]
    if any(links):  # rare: a span that continues an earlier turn's session
        values[_LINKS::WIDTH] = [" ".join(map(str, v)) if v else "" for v in links]
    else:
        values[_LINKS::WIDTH] = itertools.repeat("", len(links))
    return values


def _storable(value: Any) -> Any:
    """``value`` with lone surrogates escaped, so SQLite's UTF-8 encoding cannot fail."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


class _PendingDrops:
    """Dropped events not yet in a database's ``trace_counters``, shared by the stores of
    one process on that file."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.count += n

    def take(self, n: int) -> None:
        with self._lock:
            self.count -= n


_pending_by_file: dict[str, _PendingDrops] = {}
_pending_lock = threading.Lock()


def _pending_drops(path: Path | None) -> _PendingDrops:
    if path is None:  # an in-memory or temporary database: only this store
        return _PendingDrops()
    key = os.path.realpath(path)
    with _pending_lock:
        return _pending_by_file.setdefault(key, _PendingDrops())


#: Per database file: what waits for this process's queued batches (a writer's ``settle``).
_settlers: dict[str, Callable[[], None]] = {}


def register_settler(path: Path, settle: Callable[[], None]) -> None:
    """Reads of ``path`` in this process first call ``settle`` (see :mod:`orion.trace.writer`)."""
    _settlers[os.path.realpath(path)] = settle


def unregister_settler(path: Path, settle: Callable[[], None]) -> None:
    key = os.path.realpath(path)
    if _settlers.get(key) == settle:
        del _settlers[key]


class TraceStore:
    """Trace events in SQLite.

    ``TraceStore(path)`` opens (creating its parent directories) or creates the database at
    ``path``, normally ``<state_dir>/orion.db`` (see :meth:`for_state_dir`).
    ``TraceStore(db)`` uses an existing :class:`sqlite_utils.Database`, which stays the
    caller's: :meth:`close` leaves it open. The store sets the connection's busy timeout.

    ``busy_timeout_ms`` and ``backoff_s`` (the sleeps between attempts of a failing batch)
    bound how long a failing write takes; ``rows_per_statement`` is the size of the multi-row
    INSERTs a batch is written with (1: ``executemany`` only).

    Setting up (connecting, WAL, migrations) happens at construction; if it fails for a
    database reason the constructor does not raise, and every write tries again first (and
    counts the batch as dropped while it cannot). :meth:`query` and :meth:`stats` are for
    people and the CLI: they raise database errors. The store is safe to share between
    threads (one lock around the connection).
    """

    def __init__(self, target: str | os.PathLike[str] | Database, *,
                 busy_timeout_ms: int = BUSY_TIMEOUT_MS,
                 backoff_s: Sequence[float] = BACKOFF_S,
                 rows_per_statement: int = ROWS_PER_STATEMENT) -> None:
        self._lock = threading.RLock()
        if not 1 <= int(rows_per_statement) <= MAX_ROWS_PER_STATEMENT:
            raise ValueError(f"rows_per_statement must be 1 to {MAX_ROWS_PER_STATEMENT}")
        self.rows_per_statement = int(rows_per_statement)
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._backoff_s = tuple(backoff_s)
        self._db: Database | None = None
        self._owns_db = not isinstance(target, Database)
        self._ready = False
        self._closed = False
        self._warned = False
        self._rows: weakref.WeakKeyDictionary[Shapes, records.StepRows] = \
            weakref.WeakKeyDictionary()
        #: Events dropped by this store (since it was opened).
        self.dropped = 0
        if isinstance(target, Database):
            self._db = target
            self.path = self._main_file(target)
        else:
            self.path = Path(target)
        # Drops not yet added to the persisted counter are kept per database file for the
        # whole process, so every store on that file (the CLI's too) sees and persists them.
        self._pending = _pending_drops(self.path)
        try:
            self._setup()
        except DATABASE_ERRORS as exc:
            log.debug("trace store %s: setup failed (%s); retrying on write", self.path, exc)

    @classmethod
    def for_state_dir(cls, state_dir: str | os.PathLike[str], **kwargs: Any) -> TraceStore:
        """The store of a workspace: ``<state_dir>/orion.db``."""
        return cls(Path(state_dir) / DB_NAME, **kwargs)

    # -- setup -----------------------------------------------------------------------------

    @staticmethod
    def _main_file(db: Database) -> Path | None:
        try:
            for _, name, file in db.execute("PRAGMA database_list").fetchall():
                if name == "main":
                    return Path(file) if file else None
        except sqlite3.Error:
            pass
        return None

    def _setup(self) -> None:
        """Connect, WAL, busy timeout, migrations. Raises database errors; idempotent."""
        if self._ready:
            return
        if self._db is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout_ms / 1000,
                                   check_same_thread=False)
            try:
                self._db = Database(conn, execute_plugins=False)
            except BaseException:
                conn.close()
                raise
        db = self._db
        db.conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        # The store appends: a write touches the last pages of the table and of each index.
        # SQLite's default page cache (2 MB) would fill with pages no write reads again, and a
        # long chat's memory would grow by it.
        db.conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        # A database in memory is this connection's alone: there is no file to lock.
        with setting_up(self.path) if self.path is not None else contextlib.nullcontext():
            db.enable_wal()
            if db.execute("PRAGMA synchronous").fetchone()[0] != 1:
                db.execute("PRAGMA synchronous = NORMAL")
            if migrations.pending(db):
                migrations.apply(db)
        self._ready = True
        if self.path is not None:
            self._count_lost(ledger.claim(self.path))

    def _count_lost(self, lost: list[tuple[int, int]]) -> None:
        """Events of processes that ended before storing them: into the ``dropped`` counter,
        with one warning each."""
        for pid, count in lost:
            self._pending.add(count)
            log.warning("trace store %s: process %d ended before storing its last %d trace "
                        "events; they are counted as dropped", self.path, pid, count)
        if lost:
            self._persist_drops()

    @property
    def db(self) -> Database:
        """The underlying database (set up on first use if construction could not)."""
        with self._lock:
            self._check_open()
            self._setup()
            assert self._db is not None
            return self._db

    def _settle(self) -> None:
        """Wait for this process's batches queued for this file (read what was recorded)."""
        if self.path is not None:
            settle = _settlers.get(os.path.realpath(self.path))
            if settle is not None:
                settle()

    def _check_open(self) -> None:
        if self._closed:
            raise sqlite3.ProgrammingError(f"trace store {self.path} is closed")

    # -- writing ---------------------------------------------------------------------------

    def write(self, events: Sequence[TraceEvent], blobs: Mapping[str, str] = _NO_BLOBS) -> bool:
        """Store a batch in one transaction; ``True`` if stored, ``False`` if dropped.

        Never raises for a database problem (see the module docstring)."""
        return self.write_batches((events,), blobs)

    def write_batches(self, batches: Sequence[Sequence[TraceEvent]],
                      blobs: Mapping[str, str] = _NO_BLOBS) -> bool:
        """Store several batches in one transaction (a writer thread's queue), as
        :meth:`write` does one. A :class:`~orion.trace.batch.TraceBatch` is stored as its
        records (:mod:`orion.trace.records`), each step one row."""
        # Caller bugs raise here, before the database.
        runs = records.runs(batches, _dumps, event_values, self._step_rows)
        spans = sum(map(len, batches))
        # The batch's newest event dates its texts.
        last_ms = max((v for steps, values in runs
                       for v in values[_AT_MS::RECORD_WIDTH if steps else WIDTH] if v),
                      default=None) if blobs else None
        blob_rows = [(sha, len(text), text, last_ms) for sha, text in blobs.items()]
        if not spans and not blob_rows:
            return True
        with self._lock:
            last: BaseException | None = None
            attempt, sanitized = 0, False
            while True:
                try:
                    self._check_open()
                    self._setup()
                    self._insert(runs, blob_rows)
                    return True
                except UnicodeEncodeError:
                    if sanitized:
                        raise
                    # A lone surrogate in a name, an id or a blob: store it escaped.
                    runs = [(steps, [_storable(v) for v in values]) for steps, values in runs]
                    blob_rows = [tuple(_storable(v) for v in row) for row in blob_rows]
                    sanitized = True
                    continue
                except DATABASE_ERRORS as exc:
                    last = exc
                    if not isinstance(exc, RETRIED_ERRORS) or attempt >= len(self._backoff_s):
                        break
                time.sleep(self._backoff_s[attempt])
                attempt += 1
            self._drop(spans, last)
            return False

    def _step_rows(self, shapes: Shapes) -> records.StepRows:
        # One per recorder's shapes: the encodings of its steps' shapes, made once.
        rows = self._rows.get(shapes)
        if rows is None:
            rows = self._rows[shapes] = records.StepRows(shapes, _dumps)
        return rows

    def _insert(self, runs: list[records.Run], blob_rows: list[tuple[Any, ...]]) -> None:
        assert self._db is not None
        conn = self._db.conn
        # A caller's transaction open on a shared Database is not ours to end: BEGIN then
        # fails, and the batch is dropped like any other failure.
        conn.execute("BEGIN IMMEDIATE")
        try:
            for steps, values in runs:
                if steps:
                    self._insert_events(conn, values, RECORD_WIDTH, INSERT_RECORD)
                elif values:
                    self._insert_events(conn, values)
            if blob_rows:
                conn.executemany(INSERT_BLOB, blob_rows)
            pending = self._pending.count
            if pending:
                conn.execute(ADD_DROPPED, (pending,))
            conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        if pending:
            self._pending.take(pending)

    def _insert_events(self, conn: sqlite3.Connection, values: list[Any],
                       width: int = WIDTH, insert: str = INSERT_EVENT) -> None:
        # Whole chunks of ``rows_per_statement`` rows go in multi-row INSERTs (one prepared
        # statement, cached); the rest through executemany. A multi-row INSERT costs about 1 us
        # less per row than executemany's one execution per row, a sixth of the store's time
        # (with the indexes, 2 us of 7 for a step's record).
        per = min(self.rows_per_statement, 999 // width)
        count = len(values) // width
        whole = (count - count % per) * width if per > 1 else 0
        if whole:
            sql, size = _multi_insert(per, width, insert), per * width
            for start in range(0, whole, size):
                conn.execute(sql, values[start:start + size])
        if whole < len(values):
            rest = iter(values[whole:])
            # zip() of one iterator ``width`` times: the rows as tuples, cut in C.
            conn.executemany(insert, zip(*[rest] * width))

    def _rollback(self) -> None:
        try:
            if self._db is not None and self._db.conn.in_transaction:
                self._db.conn.rollback()
        except sqlite3.Error:
            pass

    def unpersisted_drops(self) -> int:
        """Events this process counted as dropped that the file's counter does not hold yet."""
        return self._pending.count

    def count_dropped(self, count: int, cause: BaseException) -> None:
        """Count a batch that :meth:`write` raised for (a writer thread's caller bug). Said in
        words of its own, every time: a database problem never gets here, so a bug is never
        taken for one (nor hidden behind its "said once")."""
        with self._lock:
            self._count_dropped(count)
        log.warning("trace store %s: a batch of %d events was not stored because the code that "
                    "recorded it failed (%s: %s); dropped and counted", self.path, count,
                    type(cause).__name__, cause)

    def _persist_drops(self) -> None:
        if self._ready and not self._closed and self._db is not None:
            conn = self._db.conn
            try:  # best effort: the cause of the failure may well stop this too
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error:
                return
            try:
                pending = self._pending.count
                conn.execute(ADD_DROPPED, (pending,))
                conn.execute("COMMIT")
                self._pending.take(pending)
            except sqlite3.Error:
                self._rollback()

    def _count_dropped(self, count: int) -> None:
        self.dropped += count
        self._pending.add(count)
        self._persist_drops()

    def _drop(self, count: int, cause: BaseException | None) -> None:
        self._count_dropped(count)
        if not self._warned:
            self._warned = True
            reason = f"{type(cause).__name__}: {cause}" if cause else "unknown error"
            log.warning("trace store %s: cannot store traces (%s); dropped a batch of %d "
                        "events. Later batches are still tried; further drops are counted "
                        "(the store's 'dropped' statistic), not logged again.",
                        self.path, reason, count)
        else:
            log.debug("trace store %s: dropped %d events (%s)", self.path, count, cause)

    # -- reading ---------------------------------------------------------------------------

    def query(self, *, conversation: str | None = None, session: str | None = None,
              kind: str | None = None, since_ms: float | None = None,
              limit: int | None = 100) -> list[dict[str, Any]]:
        """Events matching every given filter, newest first (by ``at_ms``, then insertion),
        at most ``limit`` (``None``: all). ``attributes`` are parsed back from JSON."""
        self._settle()
        where, params = _filters(conversation, session, kind, since_ms)
        sql = f"SELECT {', '.join(COLUMNS)} FROM trace_events"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY at_ms DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(max(0, int(limit)))
        with self._lock:
            return _decoded(self.db.conn.execute(sql, params))

    def traces(self, *, conversation: str | None = None, session: str | None = None,
               since_ms: float | None = None, limit: int | None = 10) -> list[list[dict[str, Any]]]:
        """The newest ``limit`` traces (turns) with a span matching every given filter,
        oldest first, each as its events in start order (the root, when stored, first)."""
        self._settle()
        where, params = _filters(conversation, session, None, since_ms)
        where.append("trace_id != ''")
        sql = (f"SELECT trace_id FROM trace_events WHERE {' AND '.join(where)} "
               "GROUP BY trace_id ORDER BY min(at_ms) DESC, min(id) DESC")
        if limit is not None:
            sql += " LIMIT ?"
            params.append(max(0, int(limit)))
        with self._lock:
            conn = self.db.conn
            ids = [row[0] for row in conn.execute(sql, params)][::-1]
            return [_decoded(conn.execute(
                f"SELECT {', '.join(COLUMNS)} FROM trace_events WHERE trace_id = ? "
                "ORDER BY parent_id != '', at_ms, id", (trace_id,))) for trace_id in ids]

    def span_ms(self) -> tuple[float | None, float | None]:
        """When the oldest and the newest record happened (epoch ms; a transition's, for the
        phase folded into it); ``None`` for an empty store. Two subqueries, so that each is one lookup in the index on ``at_ms`` (a single
        ``SELECT min(), max()`` scans the table)."""
        self._settle()
        with self._lock:
            oldest, newest = self.db.conn.execute(
                "SELECT (SELECT min(at_ms) FROM trace_records), "
                "(SELECT max(at_ms) FROM trace_records)").fetchone()
        return oldest, newest

    def prune(self, before_ms: float) -> int:
        """Remove the records that happened before ``before_ms`` (a phase goes with the
        transition that ended it), and the captured texts no newer event refers to; how many
        events (spans) went. The file keeps its size: SQLite reuses
        the freed pages for the next events (``vacuum`` gives them back)."""
        self._settle()
        with self._lock:
            conn = self.db.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                # A record goes with the phase folded into it: both are counted.
                removed = conn.execute(
                    "SELECT count(*) + count(nullif(phase_span_id, '')) FROM trace_records "
                    "WHERE at_ms < ?", (before_ms,)).fetchone()[0]
                conn.execute("DELETE FROM trace_records WHERE at_ms < ?", (before_ms,))
                conn.execute("DELETE FROM trace_blobs WHERE last_ms < ?", (before_ms,))
                conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        return removed

    def retain(self, keep_ms: float, now_ms: float) -> int:
        """Retention: :meth:`prune` the events more than ``keep_ms`` older than the newest
        event, or than ``now_ms`` when the clock is behind it. Counting back from the newest
        event means a clock stepped ahead (a resumed VM, a wrong NTP answer) ages nothing, and
        a workspace left alone for a month keeps its last ``keep_ms`` of work. Best effort: a
        database that is busy or damaged is tried again at the next start, and 0 is
        returned."""
        try:
            oldest, newest = self.span_ms()
            if oldest is None or newest is None:
                return 0
            before_ms = min(newest, now_ms) - keep_ms
            if oldest >= before_ms:  # the usual start: nothing to remove, no write lock taken
                return 0
            return self.prune(before_ms)
        except DATABASE_ERRORS as exc:
            log.debug("trace store %s: retention skipped (%s)", self.path, exc)
            return 0

    def vacuum(self) -> None:
        """Give the pages freed by :meth:`prune` back to the file system."""
        self._settle()
        with self._lock:
            self.db.conn.execute("VACUUM")
            # In WAL mode the rewritten file is in the log until a checkpoint moves it back.
            self.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def blob(self, sha256: str) -> str | None:
        """The captured text with this sha256, or ``None``."""
        self._settle()
        with self._lock:
            row = self.db.conn.execute("SELECT text FROM trace_blobs WHERE sha256 = ?",
                                       (sha256,)).fetchone()
        return row[0] if row else None

    def stats(self) -> dict[str, Any]:
        """``path``, ``total`` events, ``counts`` (per kind), ``blobs``, ``dropped`` (the
        persisted counter plus drops this process could not persist yet), ``dropped_here`` (by
        this store) and ``size_bytes`` (database file plus WAL)."""
        self._settle()
        with self._lock:
            conn = self.db.conn
            counts = dict(conn.execute(
                "SELECT kind, count(*) FROM trace_events GROUP BY kind ORDER BY kind"))
            blobs = conn.execute("SELECT count(*) FROM trace_blobs").fetchone()[0]
            row = conn.execute(
                "SELECT value FROM trace_counters WHERE name = 'dropped'").fetchone()
            persisted = row[0] if row else 0
            return {"path": str(self.path) if self.path else None,
                    "total": sum(counts.values()), "counts": counts, "blobs": blobs,
                    "dropped": persisted + self._pending.count, "dropped_here": self.dropped,
                    "size_bytes": self.size_bytes()}

    def size_bytes(self) -> int:
        """The database file's size plus its write-ahead log's (0 in memory)."""
        if self.path is None:
            return 0
        size = 0
        for file in (self.path, self.path.with_name(self.path.name + "-wal")):
            try:
                size += file.stat().st_size
            except OSError:
                pass
        return size

    # -- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (if the store opened it). Later writes are dropped; reads
        raise ``sqlite3.ProgrammingError``. Closing twice is harmless."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._db is not None and self._owns_db:
                try:
                    self._db.close()
                except sqlite3.Error:
                    pass

    def __enter__(self) -> TraceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<TraceStore {self.path}{' closed' if self._closed else ''}>"


def _filters(conversation: str | None, session: str | None, kind: str | None,
             since_ms: float | None) -> tuple[list[str], list[Any]]:
    """The WHERE clauses and parameters of the given filters."""
    where: list[str] = []
    params: list[Any] = []
    for column, value in (("conversation_id", conversation), ("session_id", session),
                          ("kind", kind)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(str(value))
    if since_ms is not None:
        where.append("at_ms >= ?")
        params.append(float(since_ms))
    return where, params


def _decoded(rows: Iterator[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """``trace_events`` rows as dicts, their attributes and links parsed back."""
    result = []
    for row in rows:
        item = dict(zip(COLUMNS, row))
        item["attributes"] = json.loads(item["attributes"] or "{}")
        item["links"] = item["links"].split() if item["links"] else []
        result.append(item)
    return result


# -- the CLI's --since ---------------------------------------------------------------------


def parse_since(text: str, now_ms: float) -> float:
    """``--since`` as milliseconds since the epoch.

    Accepts a duration before ``now_ms`` (``30s``, ``10m``, ``2h``, ``1d``, ``1w``, ``500ms``,
    combined as ``1h30m``) or an ISO 8601 date or datetime (``2024-05-01``,
    ``2024-05-01T12:30``, ``2024-05-01 12:30:00+02:00``, ``...Z``); a date or datetime without
    an offset is local time. Raises ``ValueError`` otherwise."""
    value = text.strip() if isinstance(text, str) else ""
    back = typed_duration_ms(value.replace(" ", "").lower(), text)
    if back is not None:
        # Further back than the epoch is the epoch: no event is older.
        return max(0.0, now_ms - back)
    if value:
        try:
            moment = _dt.datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            try:
                return countable_moment(moment.timestamp() * 1000.0, text)
            except (OverflowError, OSError):  # a date the platform's time cannot hold
                raise ValueError(f"{text!r} is outside the dates Orion counts (1970-01-01 to "
                                 "9998-12-31)") from None
    raise ValueError(
        f"invalid since value {text!r}: expected a duration such as 30s, 10m, 2h, 1d or 1h30m, "
        f"or an ISO 8601 date or datetime such as 2024-05-01 or 2024-05-01T12:30:00Z")
