"""Export trace events as OpenTelemetry spans (the optional extra ``otel``).

Every event of a ``store_traces`` batch becomes one finished span, named like the event
(``execute_tool read_file``, ``chat gpt-4o``), with the event's start and duration, its
attributes (``gen_ai.*`` names follow the semantic conventions pinned by
:data:`orion.trace.events.SEMCONV_VERSION`, the tracer carries the matching schema URL), plus
``gen_ai.conversation.id``, ``orion.session.id`` and ``orion.kind``. Errors and tool calls that
did not end ``ok`` get status ``ERROR``.

This module exports to the global tracer provider, so an application configures the SDK (its
exporters, resource and sampler) the standard way, with ``trace.set_tracer_provider``; until it
does, the spans go to OpenTelemetry's no-op tracer. To export to a provider of your own,
register ``OtelExporter(provider)`` and block this built-in. See ``docs/otel.md``.

Without OpenTelemetry installed, importing this module raises
:class:`~orion.plugins.PluginUnavailable`, and Orion runs without it.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orion
from orion import hookimpl
from orion.trace.events import CONVERSATION_ID, SEMCONV_SCHEMA_URL, Kind, TraceEvent

try:
    from orion.plugins import PluginUnavailable
except ImportError:  # an Orion whose plugin loader does not know optional built-ins yet
    class PluginUnavailable(ImportError):  # type: ignore[no-redef]
        """A built-in plugin whose optional dependency is not installed."""

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.trace import SpanKind, Status, StatusCode
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
ERROR_TYPE = "error.type"

_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_SPAN_KINDS = {Kind.MODEL_REQUEST: SpanKind.CLIENT}
# The global provider before the application configures OpenTelemetry (or when it turns it off).
_UNCONFIGURED = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


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


def flatten(attributes: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Event attributes as OpenTelemetry attributes.

    - ``str``, ``bool``, ``int`` and ``float`` are kept (integers outside 64 bits become
      strings);
    - ``None`` is dropped;
    - a mapping is flattened into dotted keys (``{"orion.payload": {"path": "a"}}`` becomes
      ``orion.payload.path = "a"``), recursively; an empty one leaves no attribute. A mapping
      with a ``$`` key is one of the trace encoder's values (a long string's summary
      ``{"$text": length, "sha256": ..., "head": ...}``, bytes, an error, a ``repr``) and is
      kept whole, as a JSON string;
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
            if _encoded(value):
                out[name] = _json(value)
            else:
                out.update(flatten(value, name + "."))
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
    """Whether ``value`` is a special value of the trace encoder (``{"$text": ...}``)."""
    return any(isinstance(key, str) and key.startswith("$") for key in value)


def _describe(value: Any) -> str:
    """``value`` as a status description: a string as it is, a long string's summary as its
    head, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and "$text" in value and isinstance(value.get("head"), str):
        return f"{value['head']}… ({value['$text']} characters)"
    return _json(value)


def span_attributes(event: TraceEvent) -> dict[str, Any]:
    """The attributes of ``event``'s span: its own, flattened, and the ids and kind."""
    attributes = flatten(event.attributes)
    if event.conversation_id:
        attributes[CONVERSATION_ID] = str(event.conversation_id)
    if event.session_id:
        attributes[SESSION_ID] = str(event.session_id)
    attributes[KIND] = str(event.kind)
    outcome = event.attributes.get(TOOL_OUTCOME)
    if event.kind == Kind.TOOL_CALL and outcome not in (None, "ok"):
        attributes.setdefault(ERROR_TYPE, _describe(outcome))
    return attributes


def span_status(event: TraceEvent) -> Status | None:
    """``ERROR`` for error events (with the error message) and for tool calls that did not end
    ``ok`` (with the outcome); ``None`` (unset) otherwise."""
    if event.kind == Kind.ERROR:
        message = event.attributes.get("orion.error")
        return Status(StatusCode.ERROR, _describe(message) if message is not None
                      else event.name)
    outcome = event.attributes.get(TOOL_OUTCOME)
    if event.kind == Kind.TOOL_CALL and outcome not in (None, "ok"):
        return Status(StatusCode.ERROR, _describe(outcome))
    return None


class OtelExporter:
    """A ``store_traces`` plugin that turns each trace event into one OpenTelemetry span.

    ``tracer_provider`` defaults to the global one (``trace.get_tracer_provider()``), looked up
    at the first export; OpenTelemetry's proxy provider forwards to a provider set later."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None):
        self.tracer_provider = tracer_provider
        self._tracer: trace.Tracer | None = None

    @property
    def tracer(self) -> trace.Tracer:
        if self._tracer is None:
            provider = self.tracer_provider or trace.get_tracer_provider()
            self._tracer = provider.get_tracer(SCOPE, orion.__version__,
                                               schema_url=SEMCONV_SCHEMA_URL)
        return self._tracer

    def export(self, event: TraceEvent) -> None:
        """One finished span for ``event``."""
        start = to_ns(event.at_ms) if math.isfinite(event.at_ms) else None
        duration = event.duration_ms if math.isfinite(event.duration_ms) else 0.0
        end = None if start is None else start + max(0, round(duration * 1_000_000))
        attributes = span_attributes(event)
        status = span_status(event)
        span = self.tracer.start_span(
            str(event.name) or str(event.kind),
            # An empty context: a root span, whatever span is current when the batch is
            # flushed. Spans of one conversation share gen_ai.conversation.id.
            context=Context(),
            kind=_SPAN_KINDS.get(event.kind, SpanKind.INTERNAL),
            attributes=attributes, start_time=start)
        if status is not None:
            span.set_status(status)
        span.end(end_time=end)

    def configured(self) -> bool:
        """Whether spans go anywhere: a provider was given, or the application set a global
        one. Until then OpenTelemetry would drop every span, so nothing is built for it; the
        check is per batch, so a provider set later receives the batches after it."""
        if self.tracer_provider is not None:
            return True
        return not isinstance(trace.get_tracer_provider(), _UNCONFIGURED)

    @hookimpl
    def store_traces(self, events: Iterable[TraceEvent]) -> None:
        """Export every event; one that cannot be exported does not stop the others, and the
        first such error is raised at the end (the hook isolates and reports it)."""
        if not self.configured():
            return
        failed: Exception | None = None
        for event in events:
            try:
                self.export(event)
            except Exception as exc:
                logger.debug("cannot export trace event %r", event, exc_info=True)
                failed = failed or exc
        if failed is not None:
            raise failed


#: The exporter of the built-in plugin, to the global tracer provider.
default_exporter = OtelExporter()


@hookimpl
def store_traces(events: Iterable[TraceEvent]) -> None:
    default_exporter.store_traces(events)
