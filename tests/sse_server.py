"""A real loopback HTTP server that plays an OpenAI-compatible chat-completions endpoint.

Tests talk to it through the real ``openai`` SDK (or ``orion chat``), so nothing is mocked:
requests cross a socket, responses are real HTTP with chunked server-sent events.

Usage::

    from sse_server import SSEServer, error, stream, text_chunk, finish_chunk

    with SSEServer([stream([text_chunk("Hel"), text_chunk("lo"), finish_chunk("stop")])]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")
        ...
        assert server.requests[0].body["stream"] is True

or, as a pytest fixture (import it into a test module or ``conftest.py``)::

    from sse_server import sse_server  # noqa: F401  (the fixture)

    def test_something(sse_server):
        sse_server.enqueue(stream([...]))

API
---

``SSEServer(responses=())``
    Binds ``127.0.0.1`` (only) on an ephemeral port when entered (``with`` or :meth:`start`)
    and stops on exit (:meth:`close`). Attributes and methods:

    - ``base_url``: ``http://127.0.0.1:<port>/v1``, what ``base_url=`` / ``OPENAI_BASE_URL``
      expect; ``url`` is the same without ``/v1``; ``port`` is the port.
    - ``enqueue(*responses)``: append scripted responses. Each ``POST /v1/chat/completions``
      consumes the next one, in order. When none is left the server answers ``400`` with
      ``x-should-retry: false`` and a message saying the script is exhausted.
    - ``requests``: every request received, in order, as :class:`Recorded` (``method``,
      ``path``, ``headers`` with lower-case names, ``body`` parsed from JSON or the raw text,
      ``peer``, the client's address and port: one per connection).
    - ``remaining``: how many scripted responses are still queued.

    Any other path answers ``404`` (and is recorded too).

Responses (build them with the helpers):

``stream(items, *, done=True, cut=False, chunked=True, status=200, headers=None)``
    A ``text/event-stream`` response. ``items`` are written in order, each in its own flush
    (its own HTTP chunk): a ``dict`` is written as ``data: <json>\\n\\n``; a ``str`` is written
    verbatim (use :data:`KEEP_ALIVE` for ``: keep-alive\\n\\n`` comment lines, or any raw SSE
    text), and so are ``bytes`` (raw invalid UTF-8, say). ``done`` appends
    ``data: [DONE]\\n\\n``. ``cut`` ends the response abruptly: the socket is closed without
    the final zero-length chunk, so the client sees a broken body (``incomplete chunked
    read``). ``chunked=False`` sends no length and ends the body by
    closing the connection, which the client sees as a normal end of the response. A
    ``Pause(seconds)`` item waits before the next piece (a model still writing); a
    ``Reached(event)`` item sets the ``threading.Event`` once the pieces before it were
    sent (a test acts then, without a timed wait).

``drop()``
    No response at all: the connection is closed right after the request was read, a
    connection error before the first byte (the SDK retries it).

``error(status, body=None, *, message=..., headers=None)``
    A plain JSON response with that status (``body`` defaults to the OpenAI error shape
    ``{"error": {"message": message, "type": ..., "code": ...}}``). Add
    ``headers={"retry-after-ms": "1"}`` to 429/5xx answers so the SDK retries at once
    (:func:`retryable` does that for you).

Chunk builders (each returns a ``chat.completion.chunk`` dict):

- ``text_chunk(text)``: ``delta.content``.
- ``reasoning_chunk(text)``: ``delta.reasoning_content`` (DeepSeek style).
- ``tool_call_chunk(index=0, id=None, name=None, arguments=None)``: one tool-call fragment;
  pass ``index=OMIT`` to leave the index out, and only the given fields are sent.
  ``tool_calls_chunk(*fragments)`` puts several :func:`tool_call_fragment` dicts in one chunk.
- ``finish_chunk(reason)``: an empty delta with ``finish_reason`` (any string, or ``None``).
- ``usage_chunk(prompt, completion, total=None)``: the usage-only final chunk
  (``choices: []``) sent when ``stream_options.include_usage`` is set.
- ``chunk(delta=None, finish_reason=None, *, choices=None, usage=None, **extra)``: anything
  else.
- ``text_stream(*texts, finish="stop", usage=None)``: the chunk list of a plain answer.
"""

from __future__ import annotations

import json
import time
import socket
import sys
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

CHAT_PATH = "/v1/chat/completions"
KEEP_ALIVE = ": keep-alive\n\n"
#: Pass as ``index`` to :func:`tool_call_chunk` / :func:`tool_call_fragment` to leave it out.
OMIT: Any = object()

# -- responses -------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamResponse:
    items: tuple[dict[str, Any] | str | bytes, ...]
    done: bool = True
    cut: bool = False
    chunked: bool = True
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ErrorResponse:
    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DropResponse:
    """The connection is closed right after the request is read, before any byte of a
    response: what a dropped connection looks like to the client (the SDK retries it)."""


Response = StreamResponse | ErrorResponse | DropResponse


def drop() -> DropResponse:
    """Close the connection before answering (a connection error before the first byte)."""
    return DropResponse()


def stream(items: Iterable[dict[str, Any] | str], *, done: bool = True, cut: bool = False,
           chunked: bool = True, status: int = 200,
           headers: Mapping[str, str] | None = None) -> StreamResponse:
    """An SSE response writing ``items`` (chunk dicts or raw SSE text) one flush each."""
    if cut and not chunked:
        raise ValueError("cut=True needs chunked=True (an unchunked body ends at close)")
    return StreamResponse(tuple(items), done, cut, chunked, status, dict(headers or {}))


_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error",
                403: "permission_denied", 404: "not_found_error", 429: "rate_limit_exceeded"}


def error(status: int, body: Any = None, *, message: str | None = None,
          headers: Mapping[str, str] | None = None) -> ErrorResponse:
    """A JSON error response; ``body`` defaults to OpenAI's ``{"error": {...}}`` shape."""
    if body is None:
        body = {"error": {"message": message or f"scripted error {status}",
                          "type": _ERROR_TYPES.get(status, "server_error"),
                          "param": None, "code": None}}
    return ErrorResponse(status, body, dict(headers or {}))


def retryable(status: int, *, message: str | None = None) -> ErrorResponse:
    """An error the SDK retries (429, 5xx) that asks it to wait only 1 ms."""
    return error(status, message=message, headers={"retry-after-ms": "1"})


# -- chunk builders --------------------------------------------------------------------------


def chunk(delta: dict[str, Any] | None = None, finish_reason: str | None = None, *,
          choices: list[dict[str, Any]] | None = None, usage: dict[str, Any] | None = None,
          model: str = "test-model", **extra: Any) -> dict[str, Any]:
    """A ``chat.completion.chunk``; ``choices`` overrides the single choice built from
    ``delta`` and ``finish_reason``."""
    if choices is None:
        choices = [{"index": 0, "delta": delta or {}, "logprobs": None,
                    "finish_reason": finish_reason}]
    body: dict[str, Any] = {"id": "chatcmpl-test", "object": "chat.completion.chunk",
                            "created": 1700000000, "model": model, "choices": choices}
    if usage is not None:
        body["usage"] = usage
    body.update(extra)
    return body


def text_chunk(text: str) -> dict[str, Any]:
    return chunk({"content": text})


def reasoning_chunk(text: str) -> dict[str, Any]:
    return chunk({"reasoning_content": text})


def tool_call_fragment(index: Any = 0, id: str | None = None, name: str | None = None,
                       arguments: str | None = None) -> dict[str, Any]:
    """One entry of ``delta.tool_calls``: only the given fields are present."""
    fragment: dict[str, Any] = {}
    if index is not OMIT:
        fragment["index"] = index
    if id is not None:
        fragment["id"] = id
        fragment["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    if function:
        fragment["function"] = function
    return fragment


def tool_call_chunk(index: Any = 0, id: str | None = None, name: str | None = None,
                    arguments: str | None = None) -> dict[str, Any]:
    return tool_calls_chunk(tool_call_fragment(index, id, name, arguments))


def tool_calls_chunk(*fragments: dict[str, Any]) -> dict[str, Any]:
    return chunk({"tool_calls": list(fragments)})


def finish_chunk(reason: str | None) -> dict[str, Any]:
    return chunk({}, reason)


def usage_chunk(prompt: int, completion: int, total: int | None = None) -> dict[str, Any]:
    return chunk(choices=[], usage={
        "prompt_tokens": prompt, "completion_tokens": completion,
        "total_tokens": prompt + completion if total is None else total})


def text_stream(*texts: str, finish: str | None = "stop",
                usage: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """The chunks of a plain text answer: a role chunk, one chunk per text, the finish chunk
    and, with ``usage=(prompt, completion)``, a usage-only chunk."""
    items = [chunk({"role": "assistant", "content": ""})]
    items += [text_chunk(t) for t in texts]
    items.append(finish_chunk(finish))
    if usage is not None:
        items.append(usage_chunk(*usage))
    return items


# -- the stream shapes of real servers ---------------------------------------------------------
#
# Each server streams a chat completion its own way: a role chunk or not, where the finish
# reason and the usage go, which field holds reasoning, keep-alive comments, extra fields, and
# how it reports an error after the stream started (inside the 200 response). ``SERVERS`` holds
# one ``ServerShape`` per server, built from their documentation and source:
#
# - OpenAI: a role chunk, content chunks, an empty-delta finish chunk, the usage in a chunk with
#   ``choices: []``; an error as ``data: {"error": {...}}``, then the stream ends.
# - Azure OpenAI: a first chunk with ``choices: []`` and ``prompt_filter_results``, every chunk
#   with ``content_filter_results``; errors as OpenAI's.
# - OpenRouter: ``: OPENROUTER PROCESSING`` comments, ``provider`` and ``native_finish_reason``
#   fields, reasoning in ``delta.reasoning``; an error as a chunk with a top-level ``error`` and
#   ``finish_reason: "error"``.
# - vLLM: reasoning in ``delta.reasoning_content``, the usage chunk with ``choices: []``; an
#   error as ``data: {"object": "error", "message": ...}``, then ``[DONE]``.
# - llama.cpp: a first delta ``{"role": "assistant", "content": null}``, ``timings`` and the
#   usage in the last chunk; an error as an ``error: {json}`` line (not an SSE field).
# - Ollama: the role in every delta, the finish reason on the last content chunk; reasoning in
#   ``delta.reasoning``; an error (from its OpenAI layer's error writer) as a bare JSON line
#   ``{"error": {...}}`` without ``data:``.
# - LM Studio, DeepSeek (``reasoning_content``, ``: keep-alive`` comments, usage in the last
#   chunk), Groq (``x_groq``, reasoning in ``delta.reasoning``), Together (``text`` and
#   ``token_id`` beside the delta), Fireworks, Mistral (usage in the finish chunk) and Gemini's
#   OpenAI-compatible endpoint (the finish reason on the last content chunk): errors as OpenAI's.
#
# A server without a reasoning field here (``reasoning=None``) streams a reasoning model's
# thoughts as a ``<think>...</think>`` block at the start of the content.


@dataclass(frozen=True)
class ServerShape:
    name: str
    reasoning: str | None  # the delta field of reasoning, or None: a <think> block in content
    role_chunk: Any = "openai"  # "openai", "null" (content null), "none" or "every"
    usage_apart: bool = True  # the usage in a chunk of its own (choices: [])
    finish_on_last_text: bool = False  # the finish reason on the last content chunk
    comments: tuple[str, ...] = ()  # keep-alive comment lines it sends first
    extra: dict[str, Any] = field(default_factory=dict)  # fields every chunk carries
    error_shape: str = "openai"  # openai | openrouter | vllm | llamacpp | ollama
    choice_text: bool = False  # Together: the text in the choice too, a token_id in the delta

    def _chunk(self, delta: dict[str, Any] | None = None, finish: str | None = None,
               **more: Any) -> dict[str, Any]:
        if self.role_chunk == "every" and delta is not None and "content" in delta:
            delta = {"role": "assistant", **delta}
        return chunk(delta, finish, **{**self.extra, **more})

    def _head(self) -> list[dict[str, Any] | str]:
        items: list[dict[str, Any] | str] = [f": {c}\n\n" for c in self.comments]
        if self.name == "azure":
            items.append(chunk(choices=[], prompt_filter_results=[{"prompt_index": 0}]))
        if self.role_chunk == "openai":
            items.append(self._chunk({"role": "assistant", "content": "", "refusal": None}))
        elif self.role_chunk == "null":
            items.append(self._chunk({"role": "assistant", "content": None}))
        return items

    def _text(self, texts: Iterable[str]) -> list[dict[str, Any]]:
        items = [self._chunk({"content": t}) for t in texts]
        if self.choice_text:
            items = [{**c, "choices": [{**c["choices"][0], "text": t, "seed": None,
                                        "delta": {**c["choices"][0]["delta"], "token_id": n}}]}
                     for n, (c, t) in enumerate(zip(items, texts))]
        if self.name == "azure":
            items = [{**c, "choices": [{**c["choices"][0],
                                        "content_filter_results": {"hate": {"filtered": False}}}]}
                     for c in items]
        return items

    def _end(self, finish: str | None, items: list[dict[str, Any] | str]) -> list:
        usage = {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
        if self.finish_on_last_text and items and isinstance(items[-1], dict) \
                and items[-1].get("choices"):
            items[-1]["choices"][0]["finish_reason"] = finish
        else:
            items.append(self._chunk({}, finish))
        if self.usage_apart:
            items.append(chunk(choices=[], usage=usage, **self.extra))
        else:
            last = items[-1]
            assert isinstance(last, dict)  # both branches above end the list with a chunk
            last["usage"] = usage
        return items

    def reply(self, *texts: str, finish: str | None = "stop",
              reasoning: str | None = None) -> StreamResponse:
        """A reply of ``texts`` (one chunk each), with ``reasoning`` first if given."""
        items = self._head()
        if reasoning is not None:
            if self.reasoning is None:
                texts = (f"<think>\n{reasoning}</think>\n\n", *texts)
            else:
                items.append(self._chunk({self.reasoning: reasoning}))
        items += self._text(texts)
        return stream(self._end(finish, items))

    def failed(self, *texts: str, message: str = "the upstream model failed") -> StreamResponse:
        """``texts``, then the server's own error event inside the 200 stream."""
        items = self._head() + self._text(texts)
        shape = self.error_shape
        if shape == "openrouter":
            items.append(self._chunk({"content": ""}, "error", native_finish_reason="error",
                                     error={"code": 502, "message": message}))
            return stream(items, done=False)
        if shape == "vllm":
            items.append({"object": "error", "message": message, "type": "InternalServerError",
                          "param": None, "code": 500})
            return stream(items)
        if shape == "llamacpp":
            items.append("error: " + json.dumps({"code": 500, "message": message,
                                                 "type": "server_error"}) + "\n\n")
            return stream(items, done=False)
        if shape == "ollama":
            items.append(json.dumps({"error": {"message": message, "type": "api_error",
                                               "param": None, "code": None}}) + "\n")
            return stream(items, done=False)
        items.append({"error": {"message": message, "type": "server_error", "param": None,
                                "code": None}})
        return stream(items, done=False)


SERVERS: dict[str, ServerShape] = {shape.name: shape for shape in (
    ServerShape("openai", None, extra={"system_fingerprint": "fp_1"}),
    ServerShape("azure", None, extra={"system_fingerprint": "fp_az"}),
    ServerShape("openrouter", "reasoning", usage_apart=False,
                comments=("OPENROUTER PROCESSING",),
                extra={"provider": "Example", "native_finish_reason": None},
                error_shape="openrouter"),
    ServerShape("vllm", "reasoning_content", error_shape="vllm"),
    ServerShape("llamacpp", "reasoning_content", role_chunk="null", usage_apart=False,
                extra={"timings": {"predicted_n": 20}}, error_shape="llamacpp"),
    ServerShape("ollama", "reasoning", role_chunk="every", finish_on_last_text=True,
                error_shape="ollama"),
    ServerShape("lmstudio", "reasoning_content", extra={"system_fingerprint": "qwen3"}),
    ServerShape("deepseek", "reasoning_content", usage_apart=False, comments=("keep-alive",)),
    ServerShape("groq", "reasoning", usage_apart=False, extra={"x_groq": {"id": "req_1"}}),
    ServerShape("together", None, usage_apart=False, choice_text=True),
    ServerShape("fireworks", None, usage_apart=False),
    ServerShape("mistral", None, role_chunk="none", usage_apart=False),
    ServerShape("gemini", None, role_chunk="every", finish_on_last_text=True,
                usage_apart=False),
)}


def begin_write(target: str, operation: str = "create") -> StreamResponse:
    """A reply that opens a write session: one ``WritePlanTool_begin`` call for ``target``."""
    return stream([tool_call_chunk(0, id="call_1", name="WritePlanTool_begin",
                                   arguments=json.dumps({"intent": "notes",
                                                         "target_file": target,
                                                         "operation": operation})),
                   finish_chunk("tool_calls")])


# -- the server ------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that goes away in the middle of a response (one that stopped reading at a
        # cut-off, a process a test killed) is what many tests do, not a fault of the server.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    #: The client's address and port: requests with the same one came over one connection.
    peer: tuple[str, int] = ("", 0)


class SSEServer:
    """See the module docstring."""

    def __init__(self, responses: Iterable[Response] = ()) -> None:
        self._script: deque[Response] = deque(responses)
        self._lock = threading.Lock()
        self.requests: list[Recorded] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> SSEServer:
        if self._httpd is not None:
            return self
        httpd = _Server(("127.0.0.1", 0), _handler_for(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="sse-server",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        assert self._thread is not None
        self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> SSEServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # script

    def enqueue(self, *responses: Response) -> None:
        with self._lock:
            self._script.extend(responses)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not running")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def _next(self, recorded: Recorded) -> Response | None:
        with self._lock:
            self.requests.append(recorded)
            return self._script.popleft() if self._script else None


def _handler_for(server: SSEServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        owner = server
    return Handler


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # chunked bodies and keep-alive, like real endpoints
    timeout = 10  # idle keep-alive connections do not keep handler threads forever
    owner: SSEServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep test output clean

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._record(b"")
        self._json(404, {"error": {"message": f"no route for GET {self.path}"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        recorded = self._record(raw)
        if self.path.split("?")[0] != CHAT_PATH:
            self._json(404, {"error": {"message": f"no route for POST {self.path}"}})
            return
        response = self.owner._next(recorded)
        if response is None:
            n = len(self.owner.requests)
            self._json(400, {"error": {"message": f"sse_server: no scripted response left "
                                                  f"for request #{n}"}},
                       {"x-should-retry": "false"})
        elif isinstance(response, ErrorResponse):
            self._json(response.status, response.body, response.headers)
        elif isinstance(response, DropResponse):
            self._abort()
        else:
            self._stream(response)

    # helpers

    def _record(self, raw: bytes) -> Recorded:
        text = raw.decode("utf-8", "replace")
        try:
            body: Any = json.loads(text) if text else None
        except ValueError:
            body = text
        headers = {k.lower(): v for k, v in self.headers.items()}
        host, port = self.client_address[:2]
        return Recorded(self.command, self.path, headers, body, (host, port))

    def _json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _stream(self, response: StreamResponse) -> None:
        self.send_response(response.status)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        if response.chunked:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.send_header("connection", "close")
            self.close_connection = True
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.flush()
        try:
            for piece in _sse_pieces(response):
                self._write(piece, response.chunked)
            if response.cut:
                self._abort()
                return
            if response.chunked:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _write(self, text: str | bytes, chunked: bool) -> None:
        data = text if isinstance(text, bytes) else text.encode()
        if chunked:
            data = b"%x\r\n%s\r\n" % (len(data), data)
        self.wfile.write(data)
        self.wfile.flush()

    def _abort(self) -> None:
        """Close the socket in the middle of the chunked body."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


@dataclass(frozen=True)
class Pause:
    """A stream item: the server waits ``seconds`` before the next piece (a model that is
    still writing, for a test that interrupts it)."""

    seconds: float


@dataclass(frozen=True)
class Reached:
    """A stream item: the server sets ``event`` when it gets there, after the pieces before it
    were sent (a test that must act once the client has them, without a timed wait)."""

    event: threading.Event


def _sse_pieces(response: StreamResponse) -> Iterator[str | bytes]:
    for item in response.items:
        if isinstance(item, Pause):
            time.sleep(item.seconds)
            continue
        if isinstance(item, Reached):
            item.event.set()
            continue
        yield item if isinstance(item, str | bytes) else f"data: {json.dumps(item)}\n\n"
    if response.done:
        yield "data: [DONE]\n\n"


@pytest.fixture
def sse_server() -> Iterator[SSEServer]:
    """A running :class:`SSEServer` with an empty script; ``enqueue`` responses on it."""
    with SSEServer() as server:
        yield server
