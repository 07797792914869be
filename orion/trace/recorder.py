"""The runtime's trace recorder: spans as they happen, content-free, handed to the
``store_traces`` hook in batches.

**Turns.** A turn is one trace: a user message and everything until the next one (the model's
requests, tool calls, lifecycle transitions, the prompts timers inject, slash commands typed
meanwhile). What happens before the first message (recovering write sessions at startup, a
``/plan on`` typed first) opens the first turn, which the first message then joins. The turn's
root span (``invoke_agent orion``) is recorded when the runtime has answered the message;
what happens later in the turn is still under it. A new conversation (``/reset``) starts a new
turn.

**Spans.** :meth:`Recorder.span` opens a span the events inside it nest under (a model
request, a tool call); :meth:`Recorder.emit` records an event that ends now, under the span
open at that moment. Lifecycle transitions (:meth:`Recorder.transition`) are recorded that
way too, and each state a lifecycle rests in (outside its initial and final states) is a
**phase** span under the turn: ``write_session awaiting_content``, ``write_session
finalizing`` (validation), ``plan_mode collecting``. A phase still open when the turn ends is
cut there and goes on in the next turn as a new span; every span of a lifecycle (or any
session id) in a later turn links to the span where it began, so a write session that spans
several turns is one chain across their traces.

**Times.** Wall-clock, whatever clock the runtime's lifecycles use: ``orion run`` plays on a
virtual clock (timers fire at once), but its spans get the real start times and durations
(``time.time`` and ``time.perf_counter``). The time an event carries is ignored: it is
recorded as ending when it is emitted.

**Content.** Events are made JSON-safe (:func:`orion.trace.encoding.encode_event`) and
content-free (:func:`orion.trace.content.content_free`) here, before any plugin sees them;
with ``capture_content`` the texts left out go to the batch's blobs.

**Steps.** A lifecycle step is on the hot path of every write, so the recorder appends one
tuple per transition (the phase it ends folded in) and nothing else: no dict, no encoding
(:mod:`orion.trace.batch`). Its spans are built when a plugin reads the batch, with the
encoding and the content filter of each span's fixed parts done once per shape
(:mod:`orion.trace.shapes`); the SQLite store makes it one record on its writer thread
(:mod:`orion.trace.records`). The spans are what they were: the transition, and the phase it
ends.

A batch is flushed after every model request (the ``trace`` system of the pipeline), when it
is ``flush_interval_ms`` old at the next event, and when the runtime closes. Plugin failures
recorded by the plugin manager become ``error`` events.
"""

from __future__ import annotations

import math
import random
import re
from random import getrandbits
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orion.trace import events as ev
from orion.trace.batch import (P_ID, P_LIFECYCLE, P_STARTED, P_STATE, Phase, TraceBatch,
                               phase_event, span_hex)
from orion.trace.content import capture_from_env, content_free
from orion.trace.encoding import encode_event
from orion.trace.events import ERROR_TYPE, Kind, TraceEvent
from orion.trace.shapes import Shapes

#: The root span of a turn, as the GenAI conventions name an agent's invocation.
TURN_NAME = "invoke_agent orion"
AGENT = "orion"
_ERROR_TYPE = re.compile(r"([A-Za-z_][\w.]*):")
#: Sessions whose first span is remembered, for the links of their later spans. A live
#: session's is kept while it lives (a chat's plan may live all day); these bound them anyway.
MAX_SESSIONS = 1024
#: Ended sessions whose first span is still remembered: spans of an ended session come soon
#: after its end, or not at all.
MAX_ENDED = 16
#: ``trace.keep_days`` counts these.
DAY_MS = 86_400_000.0
_INF = math.inf
#: The payload of a step that had none (never changed: a span's attributes are built anew).
_NO_PAYLOAD: dict[str, Any] = {}


def _duration(value: Any) -> float:
    """A duration as a step reports it, made a finite number of milliseconds, at least 0."""
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        return 0.0
    return value  # type: ignore[no-any-return]


def capture_content(configured: bool, env: Mapping[str, str] | None = None) -> bool:
    """Whether traces keep content: as ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
    says when it is set (see :func:`orion.trace.content.capture_from_env`), else as
    ``trace.capture_content`` in ``orion.yaml`` says (off unless turned on)."""
    from_env = capture_from_env(env)
    return configured if from_env is None else from_env


def new_trace_id() -> str:
    return f"{random.getrandbits(128) or 1:032x}"


def new_span_id() -> str:
    return f"{random.getrandbits(64) or 1:016x}"


def link(trace_id: str, span_id: str) -> str:
    """A span link as events carry it."""
    return f"{trace_id}-{span_id}"


@dataclass(slots=True, eq=False)
class Span:
    """An open span: its place in the trace, when it started, its attributes so far."""

    kind: str
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    at_ms: float
    conversation_id: str
    session_id: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    links: tuple[str, ...] = ()
    started: float = field(default_factory=time.perf_counter)

    def set(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def update(self, attributes: Mapping[str, Any]) -> None:
        self.attributes.update(attributes)

    def fail(self, exc: BaseException) -> None:
        """Mark the span failed by ``exc``: its type as it is, its message as content."""
        self.attributes[ERROR_TYPE] = type(exc).__name__
        self.attributes["orion.error"] = f"{type(exc).__name__}: {exc}"


@dataclass(eq=False)
class Turn:
    root: Span
    number: int
    message: bool = False
    recorded: bool = False  # the root span was handed to the batch

    @property
    def id(self) -> str:
        """The turn's id: its trace id."""
        return self.root.trace_id


def _settle_writers() -> None:
    # Imported here: the store (and sqlite-utils) loads with the first batch, not the runtime.
    from orion.trace.writer import settle_all

    settle_all()


class Recorder:
    def __init__(self, plugins: Any, state_dir: Path, *, capture_content: bool = False,
                 max_text: int = 1024, flush_interval_ms: float = 100.0,
                 keep_days: float = 0.0, now_ms: Callable[[], float] | None = None,
                 conversation: Callable[[], str] | None = None):
        self.plugins = plugins
        self.state_dir = state_dir
        self.capture_content = capture_content
        self.max_text = max_text
        self.flush_interval = flush_interval_ms / 1000.0
        #: ``trace.keep_days``: the retention :meth:`prune` applies (0 keeps every event).
        self.keep_days = keep_days
        #: Wall-clock milliseconds since the epoch (tests may fix it).
        self.now_ms = now_ms or (lambda: time.time() * 1000.0)
        self._conversation = conversation or (lambda: "")
        self._batch: list[Any] = []  # TraceEvent or a step (orion.trace.batch.Step)
        self._spans = 0  # in the batch
        self._shapes = Shapes(max_text)
        self._resting: dict[int, frozenset[Any]] = {}  # per definition: initial and finals
        self._blobs: dict[str, str] = {}
        self._batch_started = 0.0  # perf_counter time of the batch's first event
        self._failures_seen = len(getattr(plugins, "failures", ()))
        self.emitted = 0
        self.turn: Turn | None = None
        self.turns = 0
        self._stack: list[Span] = []
        self._phases: dict[str, Phase] = {}  # lifecycle id -> its open phase
        self._carried: list[Phase] = []  # phases cut at a turn's end, to go on in the next
        self._origins: dict[str, str] = {}  # live session id -> the span where it began
        self._ended: dict[str, str] = {}  # the same, for the latest MAX_ENDED ended sessions

    # -- turns ----------------------------------------------------------------------------

    @contextmanager
    def user_turn(self, message: str = "") -> Iterator[Span]:
        """A user message: its turn, recorded when the block ends (with the error that ended
        it, if one did). ``message`` is content: only its length is kept (and the text with
        content capture)."""
        conversation = self._conversation()
        turn = self.turn
        if turn is not None and (turn.message or turn.root.conversation_id != conversation):
            self._close_turn()
            turn = None
        if turn is None:
            turn = self._open_turn(conversation)
        turn.message = True
        turn.root.set("orion.turn.input", message)  # content: traced as length and hash
        try:
            yield turn.root
        except BaseException as exc:
            turn.root.fail(exc)
            raise
        finally:
            if not turn.recorded:
                turn.recorded = True
                self._finish(turn.root)

    def _current_turn(self, conversation: str) -> Turn:
        turn = self.turn
        if turn is not None and conversation and turn.root.conversation_id != conversation:
            self._close_turn()
            turn = None
        return turn if turn is not None else self._open_turn(conversation or
                                                              self._conversation())

    def _open_turn(self, conversation: str) -> Turn:
        self.turns += 1
        trace_id = new_trace_id()
        root = Span(Kind.TURN, TURN_NAME, trace_id, new_span_id(), "", self.now_ms(),
                    conversation, attributes={ev.OPERATION_NAME: "invoke_agent",
                                              ev.AGENT_NAME: AGENT,
                                              "orion.turn.number": self.turns})
        self.turn = Turn(root, self.turns)
        carried, self._carried = self._carried, []
        for phase in carried:  # still in that state: the phase goes on in this turn
            self._open_phase(phase[P_ID], phase[P_LIFECYCLE], phase[P_STATE], root,
                             self.now_ms(), time.perf_counter())
        return self.turn

    def _close_turn(self) -> None:
        turn, self.turn = self.turn, None
        if turn is None:
            return
        for phase in list(self._phases.values()):
            self._finish_phase(phase, continues=True)
            self._carried.append(phase)
        self._phases.clear()
        if not turn.recorded:
            turn.recorded = True
            self._finish(turn.root)

    # -- spans ----------------------------------------------------------------------------

    def open(self, kind: str, name: str, attributes: Mapping[str, Any] | None = None, *,
             session_id: str = "", parent: Span | None = None) -> Span:
        """A span starting now, under ``parent`` (default: the span open now, else the turn).
        Record it with :meth:`finish`; :meth:`span` does both around a block."""
        if parent is None:
            turn = self._current_turn(self._conversation())
            parent = self._stack[-1] if self._stack else turn.root
        span = Span(kind, name, parent.trace_id, new_span_id(), parent.span_id, self.now_ms(),
                    parent.conversation_id, session_id, dict(attributes or {}))
        span.links = self._links(session_id, span.trace_id, span.span_id)
        return span

    @contextmanager
    def span(self, kind: str, name: str, attributes: Mapping[str, Any] | None = None, *,
             session_id: str = "") -> Iterator[Span]:
        """A span around a block: what is emitted inside nests under it. An exception that
        leaves the block marks it failed (``error.type``) and goes on."""
        span = self.open(kind, name, attributes, session_id=session_id)
        self._stack.append(span)
        try:
            yield span
        except BaseException as exc:
            span.fail(exc)
            raise
        finally:
            if span in self._stack:
                self._stack.remove(span)
            self._finish(span)

    def _finish(self, span: Span, ended_ago_ms: float = 0.0) -> None:
        duration = max(0.0, (time.perf_counter() - span.started) * 1000.0 - ended_ago_ms)
        self._record(TraceEvent(span.kind, span.name, span.at_ms, span.conversation_id,
                                span.session_id, span.attributes, duration, span.trace_id,
                                span.span_id, span.parent_id, span.links))

    def _links(self, session_id: str, trace_id: str, span_id: str) -> tuple[str, ...]:
        """The span where ``session_id`` began, when that was in another turn; the first span
        of a session is where it begins."""
        if not session_id:
            return ()
        origin = self._origins.get(session_id) or self._ended.get(session_id)
        if origin is None:
            if len(self._origins) >= MAX_SESSIONS:  # a safety bound: live sessions are few
                del self._origins[next(iter(self._origins))]
            self._origins[session_id] = link(trace_id, span_id)
            return ()
        return () if origin.startswith(trace_id) else (origin,)

    # -- events ---------------------------------------------------------------------------

    def emit(self, event: TraceEvent) -> None:
        """Record ``event`` as ending now (its ``duration_ms`` before), under the open span."""
        duration = event.duration_ms
        if type(duration) not in (int, float) or not math.isfinite(duration) or duration < 0:
            duration = 0.0
        turn = self._current_turn(self._conversation())
        parent = self._stack[-1] if self._stack else turn.root
        span_id = new_span_id()
        session_id = event.session_id if type(event.session_id) is str else ""
        links = self._links(session_id, parent.trace_id, span_id) if session_id else ()
        start = self.now_ms() - duration
        root = turn.root
        if not turn.recorded and start < root.at_ms:
            root.started -= (root.at_ms - start) / 1000.0  # the turn began with this event
            root.at_ms = start
        self._record(TraceEvent(event.kind, event.name, start,
                                event.conversation_id or parent.conversation_id,
                                event.session_id, event.attributes, duration, parent.trace_id,
                                span_id, parent.span_id, links))

    def transition(self, lifecycle: Any, record: Any) -> None:
        """A lifecycle transition: the phase it ends, the transition, the phase it starts.
        One tuple on the step (:data:`orion.trace.batch.Step`): its spans are built when the
        batch is read, its record when it is stored, both off this thread's path."""
        lifecycle_id = str(lifecycle.id)
        duration = record.duration_ms
        if type(duration) is not float or not 0.0 <= duration < _INF:
            duration = _duration(duration)
        perf = time.perf_counter()
        phase = self._phases.pop(lifecycle_id, None)
        phase_ms = 0.0
        if phase is not None:
            phase_ms = max(0.0, (perf - phase[P_STARTED]) * 1000.0 - duration)
        turn = self.turn
        conversation = self._conversation()
        if turn is None or (conversation and turn.root.conversation_id != conversation):
            turn = self._current_turn(conversation)
        root = turn.root
        parent = self._stack[-1] if self._stack else root
        trace_id = parent.trace_id
        span_id = getrandbits(64) or 1
        links = self._step_links(lifecycle_id, trace_id, span_id)
        now = self.now_ms()
        start = now - duration
        if not turn.recorded and start < root.at_ms:
            root.started -= (root.at_ms - start) / 1000.0  # the turn began with this step
            root.at_ms = start
        payload = record.payload
        if type(payload) is dict:  # the step's own, as it is now
            payload = dict(payload) if payload else _NO_PAYLOAD
        dest = record.dest
        name = lifecycle.name
        spans = 1 if phase is None else 2
        batch = self._batch
        if not batch:
            self._batch_started = perf
        batch.append((name, lifecycle_id, record.trigger, record.source, dest, payload, start,
                      duration, trace_id, parent.span_id, parent.conversation_id, span_id,
                      links, phase, phase_ms))
        self._spans += spans
        self.emitted += spans
        if dest:
            self._next_phase(lifecycle, lifecycle_id, name, dest, root, now, perf,
                             links if root.trace_id == trace_id else None)
        if perf - self._batch_started >= self.flush_interval:
            self.flush()

    def _next_phase(self, lifecycle: Any, lifecycle_id: str, name: str, dest: str, root: Span,
                    now: float, perf: float, links: tuple[str, ...] | None) -> None:
        """The phase a step starts, unless it rests in ``dest`` (initial, final, finished);
        ``links`` are the step's when it is in the root's trace (then they are the same)."""
        resting = self._resting.get(id(getattr(lifecycle, "definition", None)))
        if resting is None:
            resting = self._resting_states(lifecycle)
        if dest in resting or getattr(lifecycle, "finished", False):
            return
        phase_id = getrandbits(64) or 1
        trace_id = root.trace_id
        self._phases[lifecycle_id] = (
            name, dest, trace_id, phase_id, root.span_id, now, perf, root.conversation_id,
            self._step_links(lifecycle_id, trace_id, phase_id) if links is None else links,
            lifecycle_id)

    def _step_links(self, session_id: str, trace_id: str, span_id: int) -> tuple[str, ...]:
        """:meth:`_links` of a step's span, its id formatted only when it is the session's
        first."""
        origin = self._origins.get(session_id) or self._ended.get(session_id)
        if origin is None:
            return self._links(session_id, trace_id, span_hex(span_id))
        return () if origin.startswith(trace_id) else (origin,)

    def _resting_states(self, lifecycle: Any) -> frozenset[Any]:
        definition = getattr(lifecycle, "definition", None)
        resting = self._resting.get(id(definition))
        if resting is None:
            resting = self._resting[id(definition)] = frozenset(
                {getattr(definition, "initial_leaf", None), *getattr(definition, "finals", ())})
        return resting

    def lifecycle_finished(self, lifecycle: Any) -> None:
        lifecycle_id = str(lifecycle.id)
        phase = self._phases.pop(lifecycle_id, None)
        if phase is not None:
            self._finish_phase(phase)
        self._carried = [p for p in self._carried if p[P_ID] != lifecycle_id]
        origin = self._origins.pop(lifecycle_id, None)
        if origin is not None:  # its last spans (the write's report) may still come
            self._ended[lifecycle_id] = origin
            if len(self._ended) > MAX_ENDED:
                del self._ended[next(iter(self._ended))]

    def _open_phase(self, lifecycle_id: str, lifecycle: str, state: str, root: Span,
                    now: float, perf: float) -> None:
        span_id = getrandbits(64) or 1
        self._phases[lifecycle_id] = (
            lifecycle, state, root.trace_id, span_id, root.span_id, now, perf,
            root.conversation_id, self._step_links(lifecycle_id, root.trace_id, span_id),
            lifecycle_id)

    def _finish_phase(self, phase: Phase, continues: bool = False) -> None:
        """Record a phase that ends without a transition (its turn, its lifecycle or the run
        ended)."""
        duration = max(0.0, (time.perf_counter() - phase[P_STARTED]) * 1000.0)
        blobs = self._blobs if self.capture_content else None
        self._add(phase_event(phase, duration, self._shapes, blobs, continues), 1)

    # -- batches --------------------------------------------------------------------------

    def _record(self, event: TraceEvent) -> None:
        blobs = self._blobs if self.capture_content else None
        safe = encode_event(event, max_text=self.max_text, blobs=blobs)
        self._add(content_free(safe, blobs=blobs, max_text=self.max_text), 1)

    def _add(self, item: TraceEvent, spans: int) -> None:
        now = time.perf_counter()
        if not self._batch:
            self._batch_started = now
        self._batch.append(item)
        self._spans += spans
        self.emitted += spans
        if now - self._batch_started >= self.flush_interval:
            self.flush()

    def flush(self, *, wait: bool = False) -> None:
        """Hand the batch to the ``store_traces`` hook (a :class:`~orion.trace.batch.
        TraceBatch`). The SQLite store writes it on its writer thread; ``wait`` returns once
        it has (a reader in this process waits anyway)."""
        self._note_plugin_failures()
        if not self._batch:
            if wait:
                _settle_writers()
            return
        batch, blobs, spans = self._batch, self._blobs, self._spans
        self._batch, self._blobs, self._spans = [], {}, 0
        events = TraceBatch(batch, spans, self._shapes,
                            blobs if self.capture_content else None)
        self.plugins.hook.store_traces(events=events, blobs=blobs, state_dir=self.state_dir)
        if wait:
            _settle_writers()

    def prune(self) -> int:
        """Retention: the events more than :attr:`keep_days` older than the newest one (or
        than now, when the clock is behind it) removed through ``prune_traces``; how many
        went."""
        if self.keep_days <= 0:
            return 0
        found = self.plugins.hook.prune_traces(state_dir=self.state_dir,
                                               keep_ms=self.keep_days * DAY_MS,
                                               now_ms=self.now_ms())
        return sum(count for count in found if isinstance(count, int))

    def close(self) -> None:
        """The end of the run: the open phases and turn are recorded, and the batch flushed."""
        for phase in list(self._phases.values()):
            self._finish_phase(phase)
        self._phases.clear()
        self._carried.clear()
        self._close_turn()
        self.flush()
        self.plugins.hook.close_traces(state_dir=self.state_dir)

    def _note_plugin_failures(self) -> None:
        failures = getattr(self.plugins, "failures", None)
        if failures is None or len(failures) <= self._failures_seen:
            return
        new, self._failures_seen = failures[self._failures_seen:], len(failures)
        for failure in new:
            if failure.hook == "store_traces":
                continue  # a failing store is counted by the store; don't loop on it
            # The failure is recorded as "Type: message"; the type is what a trace keeps.
            kind = _ERROR_TYPE.match(str(failure.error))
            self.emit(ev.error("plugin", failure.error, attributes={
                "orion.plugin": failure.plugin, "orion.hook": failure.hook,
                ERROR_TYPE: kind.group(1) if kind else "str"}))
