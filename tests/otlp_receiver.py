"""A real loopback OTLP trace receiver, over HTTP (``/v1/traces``, protobuf) or gRPC.

Orion's exporters send to it over a socket, and it decodes what arrives with
``opentelemetry-proto``, so tests see spans as a collector would. Usage::

    with OTLPReceiver("http") as receiver:          # or "grpc"
        run orion with OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint
        spans = receiver.spans                     # decoded, in arrival order

Each span is a dict: ``trace_id``, ``span_id``, ``parent_id`` (hex, ``""`` for a root),
``name``, ``kind`` (the proto's number), ``start_ns``, ``end_ns``, ``attributes``,
``events`` (name and attributes), ``links`` (``"<trace>-<span>"``), ``status`` (code,
message), ``resource`` (its attributes) and ``scope``. ``raw`` holds every request body,
for scanning.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as service
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def value(any_value: AnyValue) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(value(v) for v in any_value.array_value.values)
    if kind == "kvlist_value":
        return {kv.key: value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


def attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in pairs}


class OTLPReceiver:
    def __init__(self, protocol: str = "http") -> None:
        self.protocol = protocol
        self.spans: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self._lock = threading.Lock()
        self._http: ThreadingHTTPServer | None = None
        self._grpc: Any = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def take(self, body: bytes) -> None:
        request = service.ExportTraceServiceRequest.FromString(body)
        found = []
        for resource_spans in request.resource_spans:
            resource = attributes(resource_spans.resource.attributes)
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append({
                        "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                        "parent_id": span.parent_span_id.hex(), "name": span.name,
                        "kind": span.kind, "start_ns": span.start_time_unix_nano,
                        "end_ns": span.end_time_unix_nano,
                        "attributes": attributes(span.attributes),
                        "events": [{"name": e.name, "attributes": attributes(e.attributes)}
                                   for e in span.events],
                        "links": [f"{link.trace_id.hex()}-{link.span_id.hex()}"
                                  for link in span.links],
                        "status": (span.status.code, span.status.message),
                        "resource": resource, "scope": scope_spans.scope.name})
        with self._lock:
            self.raw.append(body)
            self.spans.extend(found)

    def __enter__(self) -> OTLPReceiver:
        if self.protocol == "grpc":
            self._start_grpc()
        else:
            self._start_http()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._grpc is not None:
            self._grpc.stop(grace=None)
            self._grpc = None

    def _start_http(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - stdlib naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                encoding = self.headers.get("Content-Encoding")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                receiver.take(body)
                reply = service.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._http.server_address[1]
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def _start_grpc(self) -> None:
        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc as rpc

        receiver = self

        class Servicer(rpc.TraceServiceServicer):
            def Export(self, request, context):  # noqa: N802 - the service's name
                receiver.take(request.SerializeToString())
                return service.ExportTraceServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        rpc.add_TraceServiceServicer_to_server(Servicer(), server)
        self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._grpc = server
