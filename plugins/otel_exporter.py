"""Export trace events as OpenTelemetry spans (the optional extra ``otel``).

Every event of a ``store_traces`` batch becomes one finished span with the event's own trace
id, span id, parent and links, so a turn arrives in the backend as one nested trace (the
``invoke_agent orion`` root, its ``chat`` LLM spans, ``execute_tool`` TOOL spans, lifecycle
transitions and phases, the write) and the turns of a conversation share ``session.id``. Spans
carry the event's start and duration, its attributes (``gen_ai.*`` names follow the semantic
conventions pinned by :data:`orion.trace.events.SEMCONV_VERSION`, the tracer carries the
matching schema URL), ``openinference.span.kind`` (``AGENT``, ``LLM``, ``TOOL``, ``GUARDRAIL``,
``CHAIN``), ``gen_ai.conversation.id``, ``orion.session.id`` and ``orion.kind``. A span whose
event failed (``error.type``) has status ``ERROR`` and an ``exception`` event.

Where spans go: a tracer provider given to :class:`OtelExporter`; else the global one, when
the application set it (``trace.set_tracer_provider``, ``opentelemetry-instrument``); else
Orion's own pipeline when the ``OTEL_*`` variables ask for traces (:mod:`orion.trace.otlp`:
OTLP over HTTP or gRPC on a background thread, the machine named, a bounded exit); else
nowhere, at the cost of one check per batch. See ``docs/otel.md``.

Spans hold what the events hold: sizes, counts, hashes, ids and enums. With content capture on
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``), the texts a batch carries in its
``blobs`` take the place of their hashes.

Without OpenTelemetry installed, importing this module raises
:class:`~orion.hooks.manager.PluginUnavailable`, and Orion runs without it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orion
from orion import hookimpl
from orion.api import OrionError
from orion.trace.events import (CONVERSATION_ID, ERROR_TYPE, SEMCONV_SCHEMA_URL, Kind,
                                TraceEvent)

try:
    from orion.hooks.manager import PluginUnavailable
except ImportError:  # an Orion whose plugin loader does not know optional built-ins yet
    class PluginUnavailable(ImportError):  # type: ignore[no-redef]
        """A built-in plugin whose optional dependency is not installed."""

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import (Link, NonRecordingSpan, SpanContext, SpanKind, Status,
                                     StatusCode, TraceFlags)
except ModuleNotFoundError as exc:
    # Only a missing OpenTelemetry makes the plugin unavailable; any other import error (a
    # broken installation) stays an error that names this plugin.
    if (exc.name or "").split(".")[0] != "opentelemetry":
        raise
    raise PluginUnavailable(
        "opentelemetry-sdk is not installed; install Orion with its otel extra") from exc

logger = logging.getLogger(__name__)

#: The instrumentation scope of every span.
SCOPE = "orion"
SESSION_ID = "orion.session.id"
KIND = "orion.kind"
TOOL_OUTCOME = "orion.tool.outcome"
#: What Phoenix, Langfuse and other LLM backends group a conversation's traces by.
OPENINFERENCE_SESSION = "session.id"
SPAN_KIND = "openinference.span.kind"

_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_SPAN_KINDS: dict[str, SpanKind] = {Kind.MODEL_REQUEST: SpanKind.CLIENT}
#: ``openinference.span.kind`` by event kind; every other kind is a ``CHAIN``.
OPENINFERENCE_KINDS: dict[str, str] = {
    Kind.TURN: "AGENT", Kind.MODEL_REQUEST: "LLM", Kind.TOOL_CALL: "TOOL",
    Kind.POLICY_DENIAL: "GUARDRAIL", Kind.VALIDATION_ISSUE: "EVALUATOR"}
#: Content attributes that OpenInference backends show as a span's input and output (present
#: only with content capture on).
_INPUT_OUTPUT = {"orion.turn.input": "input.value", "gen_ai.input.messages": "input.value",
                 "gen_ai.output.messages": "output.value",
                 "gen_ai.tool.call.arguments": "input.value",
                 "gen_ai.tool.call.result": "output.value"}
# The global provider before the application configures OpenTelemetry (or when it turns it off).
_UNCONFIGURED = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def to_ns(ms: float) -> int:
    """Milliseconds since the epoch (a float) as integer nanoseconds, rounded to the
    microsecond: a float of milliseconds since the epoch holds no more than that."""
    whole = math.floor(ms)
    return int(whole) * 1_000_000 + round((ms - whole) * 1_000) * 1_000


def _primitive(value: Any) -> str | bool | int | float | None:
    """``value`` as an OpenTelemetry primitive, or ``None`` when it is not one."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value) if _INT64[0] <= value <= _INT64[1] else None
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)  # a plain str, also for StrEnum members
    return None


def _homogeneous(values: Sequence[Any]) -> tuple[Any, ...] | None:
    """A sequence of one primitive type as a tuple, or ``None``."""
    items = tuple(_primitive(v) for v in values)
    if any(item is None for item in items):
        return None
    types = {type(item) for item in items}
    return items if len(types) <= 1 else None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def flatten(attributes: Mapping[str, Any], prefix: str = "",
            blobs: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Event attributes as OpenTelemetry attributes.

    - ``str``, ``bool``, ``int`` and ``float`` are kept (integers outside 64 bits become
      strings);
    - ``None`` is dropped;
    - a mapping is flattened into dotted keys (``{"orion.payload": {"operation": "create"}}``
      becomes ``orion.payload.operation = "create"``), recursively; an empty one leaves no
      attribute;
    - a text left out of the trace (``{"$text": length, "sha256": hex}``) becomes
      ``<key>.length`` and ``<key>.sha256``, or the text itself under ``<key>`` when ``blobs``
      (content capture) holds it; any other value of the trace encoder (a mapping with a ``$``
      key: bytes, an error, a ``repr``) is kept whole, as a JSON string;
    - a list of one primitive type is kept as a sequence; any other list (mixed types,
      ``None``, nested lists or mappings) is encoded as a JSON string;
    - anything else becomes its ``str``.
    """
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        name = f"{prefix}{key}"
        if value is None:
            continue
        if isinstance(value, Mapping):
            if "$text" in value and "sha256" in value:
                text = blobs.get(value["sha256"]) if blobs else None
                if text is not None:
                    out[name] = text
                else:
                    out[f"{name}.length"] = value["$text"]
                    out[f"{name}.sha256"] = value["sha256"]
            elif _encoded(value):
                out[name] = _json(value)
            else:
                out.update(flatten(value, name + ".", blobs))
            continue
        primitive = _primitive(value)
        if primitive is not None:
            out[name] = primitive
        elif isinstance(value, int):  # too large for OpenTelemetry
            out[name] = str(value)
        elif isinstance(value, (list, tuple)):
            items = _homogeneous(value)
            out[name] = items if items is not None else _json(list(value))
        else:
            out[name] = str(value)
    return out


def _encoded(value: Mapping[Any, Any]) -> bool:
    """Whether ``value`` is a special value of the trace encoder (``{"$bytes": ...}``)."""
    return any(isinstance(key, str) and key.startswith("$") for key in value)


def _text(value: Any, blobs: Mapping[str, str] | None) -> str | None:
    """The captured text of a value left out of the trace, if the batch carries it."""
    if isinstance(value, Mapping) and blobs and "sha256" in value:
        return blobs.get(value["sha256"])
    return value if isinstance(value, str) else None


def span_attributes(event: TraceEvent, blobs: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The attributes of ``event``'s span: its own, flattened, the ids, the kinds, and with
    content capture the input and output an OpenInference backend shows."""
    attributes = flatten(event.attributes, blobs=blobs)
    if event.conversation_id:
        attributes[CONVERSATION_ID] = str(event.conversation_id)
        attributes[OPENINFERENCE_SESSION] = str(event.conversation_id)
    if event.session_id:
        attributes[SESSION_ID] = str(event.session_id)
    attributes[KIND] = str(event.kind)
    attributes[SPAN_KIND] = OPENINFERENCE_KINDS.get(event.kind, "CHAIN")
    if blobs:
        for key, target in _INPUT_OUTPUT.items():
            text = _text(event.attributes.get(key), blobs)
            if text is not None:
                attributes[target] = text
    return attributes


def failure(event: TraceEvent) -> str | None:
    """What ``event`` failed with (its ``error.type``), or ``None`` when it did not fail."""
    error = event.attributes.get(ERROR_TYPE)
    if error is not None:
        return str(error)
    if event.kind == Kind.ERROR:
        return event.name
    outcome = event.attributes.get(TOOL_OUTCOME)
    if event.kind == Kind.TOOL_CALL and outcome not in (None, "ok"):
        return str(outcome)
    return None


def span_status(event: TraceEvent, blobs: Mapping[str, str] | None = None) -> Status | None:
    """``ERROR`` for a failed event, described by its error type (or, with content capture,
    its message); ``None`` (unset) otherwise."""
    error = failure(event)
    if error is None:
        return None
    message = _text(event.attributes.get("orion.error"), blobs) if blobs else None
    return Status(StatusCode.ERROR, message or error)


def _context(trace_id: str, span_id: str) -> SpanContext | None:
    try:
        context = SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=False,
                              trace_flags=_SAMPLED)
    except (TypeError, ValueError):
        return None
    return context if context.is_valid else None


class _PresetIds:
    """The ids of the next span: the event's own, so a trace's spans, exported in any order
    and batch, nest as the recorder placed them. Without one, the provider's generator."""

    def __init__(self, fallback: Any) -> None:
        self.fallback = fallback
        self.trace_id: int | None = None
        self.span_id: int | None = None

    def generate_trace_id(self) -> int:
        value, self.trace_id = self.trace_id, None
        return value if value else self.fallback.generate_trace_id()

    def generate_span_id(self) -> int:
        value, self.span_id = self.span_id, None
        return value if value else self.fallback.generate_span_id()

    def is_trace_id_random(self) -> bool:
        return True


class OtelExporter:
    """A ``store_traces`` plugin that turns each trace event into one OpenTelemetry span.

    ``tracer_provider`` defaults to the global one, else Orion's own pipeline when the
    environment asks for one (``env``, default ``os.environ``), looked up at the first batch.
    Nesting needs the OpenTelemetry SDK's tracer (any SDK ``TracerProvider``): its spans take
    the events' ids."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None,
                 env: Mapping[str, str] | None = None):
        self.tracer_provider = tracer_provider
        self.env = env
        self.pipeline: Any = None  # Orion's own (orion.trace.otlp.Pipeline), when it built one
        self._tracer: trace.Tracer | None = None
        self._ids: _PresetIds | None = None
        self._lock = threading.Lock()
        self._checked = False

    @property
    def tracer(self) -> trace.Tracer:
        if self._tracer is None:
            provider = self.tracer_provider or trace.get_tracer_provider()
            tracer = provider.get_tracer(SCOPE, orion.__version__,
                                         schema_url=SEMCONV_SCHEMA_URL)
            if hasattr(tracer, "id_generator"):  # the SDK's tracer: our ids, for this tracer only
                self._ids = _PresetIds(tracer.id_generator)
                tracer.id_generator = self._ids
            self._tracer = tracer
        return self._tracer

    def export(self, event: TraceEvent, blobs: Mapping[str, str] | None = None) -> None:
        """One finished span for ``event``."""
        start = to_ns(event.at_ms) if math.isfinite(event.at_ms) else None
        duration = event.duration_ms if math.isfinite(event.duration_ms) else 0.0
        end = None if start is None else start + max(0, round(duration * 1_000_000))
        tracer = self.tracer
        own = _context(event.trace_id, event.span_id)
        parent = _context(event.trace_id, event.parent_id) if event.parent_id else None
        # Without a parent: a root span, whatever span is current when the batch is flushed.
        context = Context() if parent is None else trace.set_span_in_context(
            NonRecordingSpan(parent), Context())
        links = [Link(c) for c in (_context(*ref.split("-", 1)) for ref in event.links
                                   if "-" in ref) if c is not None]
        with self._lock:
            if own is not None and self._ids is not None:
                self._ids.trace_id, self._ids.span_id = own.trace_id, own.span_id
            span = tracer.start_span(
                str(event.name) or str(event.kind), context=context,
                kind=_SPAN_KINDS.get(event.kind, SpanKind.INTERNAL),
                attributes=span_attributes(event, blobs), links=links, start_time=start)
            if self._ids is not None:
                self._ids.trace_id = self._ids.span_id = None
        status = span_status(event, blobs)
        if status is not None:
            exception = {"exception.type": failure(event) or "error"}
            if blobs and status.description != exception["exception.type"]:
                exception["exception.message"] = status.description or ""
            span.add_event("exception", exception, timestamp=end)
            span.set_status(status)
        span.end(end_time=end)
        if self.pipeline is not None:
            self.pipeline.submitted += 1

    def configured(self) -> bool:
        """Whether spans go anywhere: a provider was given, the application set a global
        one, or the environment asked for Orion's own pipeline (built here, once). Until then
        OpenTelemetry would drop every span, so nothing is built for it; the check is per
        batch, so a provider set later receives the batches after it."""
        if self.tracer_provider is not None:
            return True
        if not isinstance(trace.get_tracer_provider(), _UNCONFIGURED):
            return True
        if not self._checked:
            self._checked = True
            self._build_pipeline()
        return self.tracer_provider is not None

    def _build_pipeline(self) -> None:
        from orion.trace.otel_env import wanted

        env = os.environ if self.env is None else self.env
        if not wanted(env):
            return
        from orion.trace import otlp
        try:
            self.pipeline = otlp.build(env)
        except (OrionError, ImportError) as exc:
            otlp.install_failed(exc)
            return
        self.tracer_provider = self.pipeline.provider

    @hookimpl
    def store_traces(self, events: Iterable[TraceEvent],
                     blobs: Mapping[str, str] | None = None) -> None:
        """Export every event; one that cannot be exported does not stop the others, and the
        first such error is raised at the end (the hook isolates and reports it)."""
        if not self.configured():
            return
        failed: Exception | None = None
        for event in events:
            try:
                self.export(event, blobs)
            except Exception as exc:
                logger.debug("cannot export trace event %r", event, exc_info=True)
                failed = failed or exc
        if failed is not None:
            raise failed


#: The exporter of the built-in plugin: to the global tracer provider, else Orion's own.
default_exporter = OtelExporter()


@hookimpl
def store_traces(events: Iterable[TraceEvent], blobs: Mapping[str, str]) -> None:
    default_exporter.store_traces(events, blobs)
