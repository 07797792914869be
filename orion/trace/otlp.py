"""Orion's own OpenTelemetry pipeline, set up from the standard ``OTEL_*`` variables.

When nothing in the process configured OpenTelemetry (no global tracer provider) and the
environment asks for traces (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_TRACES_EXPORTER``), the exporter plugin
builds this pipeline instead of doing nothing:

- an OTLP exporter for ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` (else
  ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``http/protobuf``, the specification's default): ``grpc``
  or ``http/protobuf``; ``OTEL_TRACES_EXPORTER=console`` prints the spans instead;
- a batch span processor: spans leave on a background thread, never on the conversation's;
- a resource naming the machine: ``service.name`` (``orion``), ``service.version``,
  ``host.name`` and ``service.instance.id``, each overridable with
  ``OTEL_RESOURCE_ATTRIBUTES`` (and ``OTEL_SERVICE_NAME``);
- a bounded end: when the process exits, the spans still queued get at most
  ``ORION_OTEL_SHUTDOWN_TIMEOUT_MS`` (default 1000) to leave. Spans that did not reach the
  backend (it was down, or slow) are counted in one notice on stderr; they are still in the
  SQLite store. The exporter's own retry warnings are kept for that notice instead of being
  printed in the middle of a conversation.
"""

from __future__ import annotations

import atexit
import logging
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO
from urllib.parse import urlsplit

import orion
from orion.errors import ConfigError

from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (BatchSpanProcessor, ConsoleSpanExporter,
                                            SpanExporter, SpanExportResult)

SHUTDOWN_ENV = "ORION_OTEL_SHUTDOWN_TIMEOUT_MS"
DEFAULT_SHUTDOWN_MS = 1000
PROTOCOLS = ("http/protobuf", "grpc")
#: The ports the OTLP specification gives each protocol, to catch a mismatch.
DEFAULT_PORTS = {"grpc": 4317, "http/protobuf": 4318}
_LOGGERS = ("opentelemetry.exporter.otlp", "opentelemetry.sdk._shared_internal",
            "opentelemetry.sdk.trace.export")


def _setting(env: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return name, value
    return None


def protocol(env: Mapping[str, str]) -> str:
    """The OTLP protocol asked for; a value Orion cannot send is a :class:`ConfigError`."""
    found = _setting(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
    if found is None:
        return "http/protobuf"
    name, value = found
    if value not in PROTOCOLS:
        raise ConfigError(f"environment variable {name}={value!r}: Orion sends OTLP as "
                          f"{' or '.join(PROTOCOLS)}")
    return value


def shutdown_ms(env: Mapping[str, str]) -> int:
    raw = env.get(SHUTDOWN_ENV, "").strip()
    if not raw:
        return DEFAULT_SHUTDOWN_MS
    try:
        value = int(raw)
        if value < 0:
            raise ValueError
    except ValueError:
        raise ConfigError(f"environment variable {SHUTDOWN_ENV}={raw!r}: expected a whole "
                          "number of milliseconds, 0 or more") from None
    return value


def resource() -> Resource:
    """Orion's resource: the service and the machine (``service.instance.id`` is a random
    UUID per process), with the process's ``OTEL_RESOURCE_ATTRIBUTES`` and
    ``OTEL_SERVICE_NAME`` on top."""
    defaults = {"service.name": "orion", "service.version": orion.__version__,
                "host.name": socket.gethostname()}
    return Resource.create(defaults).merge(OTELResourceDetector().detect())


def endpoint(env: Mapping[str, str], proto: str) -> str:
    """Where the spans go, as the exporters read the variables (for notices)."""
    found = _setting(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if found is not None:
        return found[1]
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if proto == "grpc":
        return base or "http://localhost:4317"
    return (base.rstrip("/") + "/v1/traces") if base else "http://localhost:4318/v1/traces"


def port_mismatch(url: str, proto: str) -> str | None:
    """A notice when the endpoint's port is the other protocol's default (``grpc`` sent to
    4318 reaches nothing, and so does ``http/protobuf`` sent to 4317)."""
    try:
        port = urlsplit(url if "//" in url else f"//{url}").port
    except ValueError:
        return None
    other = next(p for p in PROTOCOLS if p != proto)
    if port == DEFAULT_PORTS[other]:
        return (f"traces go to {url} as {proto}, but port {port} is OTLP's {other} port; "
                f"set OTEL_EXPORTER_OTLP_PROTOCOL={other} if the collector listens for {other} "
                "there")
    return None


class _LastProblem(logging.Handler):
    """Keeps the exporter's last warning for the final notice, instead of printing it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.message: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage().splitlines()[0]
            # Long ones keep their beginning (what failed) and end (the cause, last).
            self.message = message if len(message) <= 240 else (
                f"{message[:90]} … {message[-140:]}")
        except Exception:  # a record that cannot format itself: keep the previous one
            pass


class CountingExporter(SpanExporter):
    """The real exporter, counting the spans it delivered."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.delivered = 0
        self.failed = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        finally:
            with self._lock:
                if result is SpanExportResult.SUCCESS:
                    self.delivered += len(spans)
                else:
                    self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


@dataclass
class Pipeline:
    """Orion's tracer provider and what its end reports."""

    provider: TracerProvider
    exporter: CountingExporter
    destination: str
    shutdown_ms: int
    problems: _LastProblem = field(default_factory=_LastProblem)
    submitted: int = 0
    ended: bool = False

    def shutdown(self, out: TextIO | None = None) -> int:
        """Let the queued spans leave, for at most ``shutdown_ms``; returns how many spans did
        not reach the backend, and says so on ``out`` (stderr) when some did not."""
        if self.ended:
            return 0
        self.ended = True
        # The SDK's shutdown waits for the exporter's retries (10 s and more with a backend
        # down): it runs on a daemon thread, and the process does not wait past the bound.
        worker = threading.Thread(target=self._shutdown, name="orion-otel-shutdown",
                                  daemon=True)
        started = time.monotonic()
        worker.start()
        worker.join(self.shutdown_ms / 1000.0)
        waited = time.monotonic() - started
        lost = max(0, self.submitted - self.exporter.delivered)
        if lost:
            why = self.problems.message or ("it did not answer within "
                                            f"{self.shutdown_ms / 1000:g} s")
            print(f"orion: {lost} of {self.submitted} trace spans did not reach "
                  f"{self.destination} (waited {waited:.1f} s at exit; {why}). They are in the "
                  "workspace's trace store: `orion traces --tree`.", file=out or sys.stderr)
        return lost

    def _shutdown(self) -> None:
        try:
            self.provider.shutdown()
        except Exception:  # the process is ending; the count says what was lost
            pass


def build(env: Mapping[str, str]) -> Pipeline:
    """The pipeline the environment asks for (see the module documentation). Raises
    :class:`ConfigError` for a protocol or bound Orion cannot use, and ``ImportError`` when
    the exporter's package is not installed."""
    exporter_name = env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    bound = shutdown_ms(env)
    if exporter_name == "console":
        inner: SpanExporter = ConsoleSpanExporter()
        destination = "the console"
    elif exporter_name == "otlp":
        proto = protocol(env)
        destination = endpoint(env, proto)
        mismatch = port_mismatch(destination, proto)
        if mismatch:
            print(f"orion: {mismatch}", file=sys.stderr)
        if proto == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore
                OTLPSpanExporter)
        inner = OTLPSpanExporter()
    else:
        raise ConfigError(f"environment variable OTEL_TRACES_EXPORTER={exporter_name!r}: Orion "
                          "exports traces with otlp or console (or none)")
    exporter = CountingExporter(inner)
    provider = TracerProvider(resource=resource(), shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    pipeline = Pipeline(provider, exporter, destination, bound)
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        logger.addHandler(pipeline.problems)
        logger.propagate = False
    atexit.register(pipeline.shutdown)
    return pipeline


def install_failed(exc: BaseException) -> Any:
    """One line for a pipeline the environment asks for but Orion cannot build."""
    print(f"orion: traces are not exported: {exc}", file=sys.stderr)
    return None
