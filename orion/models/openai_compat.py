"""The adapter for any OpenAI-compatible chat-completions endpoint (OpenAI, DeepSeek, Ollama,
vLLM, llama.cpp, LiteLLM and Gemini proxies...), through the official ``openai`` SDK.

It turns the provider's stream into the normalized events of :mod:`orion.models.events`:
text and reasoning deltas as they arrive, then each complete :class:`ToolCall`, then at most
one :class:`Usage`, then exactly one :class:`Finish`.

Decisions worth knowing:

* **Configuration.** ``base_url`` and ``api_key`` default to ``OPENAI_BASE_URL`` and
  ``OPENAI_API_KEY``. Without a key, the official OpenAI endpoint is refused up front with a
  :class:`ModelAuthError` that says what to set; any other ``base_url`` (Ollama, llama.cpp and
  other local servers accept anything) gets the placeholder key ``not-needed``.
* **Tool calls** are reassembled from fragments by ``index``. A fragment carrying an ``id``
  not seen before starts a new call even at an index already used (Ollama and some Gemini
  proxies send every call complete, each with its own id and index 0); a fragment without an
  ``id`` continues the most recent call with its index (or the most recent call at all when
  the index is missing), unless it names a different function, which starts a new call.
  Arguments are kept as the raw string the model produced, never parsed. Calls without an id
  get ``call_<request number>_<position>``.
* **One call, one form.** A server may send a call both as a ``tool_calls`` fragment and as
  the deprecated ``function_call`` (llama-cpp-python's server does, in every delta). The legacy
  form is read only while no ``tool_calls`` fragment has arrived in the stream; one that
  arrives later replaces what the legacy form gave. A call runs once.
* **Finish.** The provider's reason goes through :func:`normalize_finish`: ``stop`` with tool
  calls becomes ``tool_calls``; ``length``, ``insufficient_system_resource``,
  ``content_filter``, any unknown reason, and a stream that ends without a reason are
  ``truncated`` (``Finish.raw`` keeps what the provider said, ``None`` for nothing).
* **Retries.** 408/409/429/5xx answers and failed connections are retried by the SDK itself
  (``max_retries``, exponential backoff, honouring ``retry-after-ms`` / ``retry-after``)
  before anything was streamed. Once the stream has started nothing is replayed, because
  events were already handed to the runtime.
* **Error events inside a 200 stream.** Servers report a failure that happens after the
  stream started inside the stream: OpenAI (and Ollama, Together, DeepSeek...) with a
  ``data: {"error": {...}}`` event, OpenRouter with a chunk carrying ``error`` and
  ``finish_reason: "error"``, vLLM with a ``data: {"object": "error", "message": ...}``
  event, llama.cpp with an ``error: {...}`` line (not an SSE field), Ollama's OpenAI layer with
  a bare JSON error line (no ``data:``). The SDK raises for the first two and drops the last
  two without a word; the client here decodes those two as error events too (see
  :class:`_ErrorLineDecoder`). Once content has arrived, such an error (and data that is not
  JSON, and raw bytes that are not UTF-8, which the SDK's decoder would raise from inside its
  iterator) ends the stream as ``Finish("truncated", "error", error=<the server's message>)``:
  what arrived is kept and the message counts as cut off, like ``length``. An error before
  any content raises :class:`ModelError` with the server's message, as a refusal does.
* **A leading ``<think>`` block.** A reasoning model served without a reasoning parser (vLLM,
  llama.cpp, a Qwen3 or DeepSeek-R1 model) streams its reasoning in the content, as
  ``<think>...</think>`` before the answer. Such a block (leading white space allowed) is
  turned into reasoning deltas, and the line breaks after ``</think>`` are dropped: only the
  answer is text.
* **A stream cut mid-way.** If the transport breaks after the first chunk (connection reset,
  the body ends in the middle of a chunk, a read timeout), what arrived is kept and the
  stream finishes as ``Finish("truncated", "connection_lost")``, without the tool calls it
  had only begun: a cut-off like ``length``, which a write session continues. The next request
  of this model waits first (``cut_backoff`` seconds, doubled for every cut in a row, at most
  8 s), so a flapping network is not hammered. A break before the first chunk raises
  :class:`ModelConnectionError`. If the response instead ends *cleanly* without ``[DONE]`` or
  a finish reason, the stream finishes as ``Finish("truncated", None)``.
* **Gateways.** LiteLLM's proxy and some others turn an upstream stream that ended without a
  finish reason into ``finish_reason: "stop"``, send the role in a chunk of its own and the
  usage in a chunk with ``choices: [{index: 0, delta: {}}]``. Such a cut-off arrives as
  ``stop``; the write session tells it by the message ending in the middle of a line.
* **Settings.** ``max_tokens`` and ``temperature`` are sent when set (``orion.yaml``'s
  ``model:`` section); ``max_tokens`` is the output limit a cut-off with ``length`` is about.
* **Errors.** 401/403 raise :class:`ModelAuthError` naming the endpoint; connection refused,
  DNS failures and timeouts raise :class:`ModelConnectionError` naming the base URL; any
  other refusal raises :class:`ModelError` with the server's own message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from openai import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    AsyncOpenAI,
    OpenAIError,
)
from openai._streaming import SSEDecoder, ServerSentEvent
from openai.types.chat import ChatCompletionChunk

from orion.models.base import (
    OVERFLOW_HINT,
    ContextOverflowError,
    ModelAuthError,
    ModelConnectionError,
    ModelError,
    ModelRequest,
)
from orion.models.events import (
    CONNECTION_LOST,
    STREAM_ERROR,
    Finish,
    LeadingThink,
    ModelEvent,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    Usage,
    normalize_finish,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: The key sent to endpoints that do not check it (local servers) when none is configured.
PLACEHOLDER_API_KEY = "not-needed"
#: The longest wait before the request that follows a cut stream.
MAX_CUT_BACKOFF = 8.0


class OpenAICompatibleModel:
    """A :class:`~orion.models.base.Model` speaking the OpenAI chat-completions protocol.

    ``client`` lets a caller supply a configured :class:`AsyncOpenAI` (then its own
    ``base_url``, ``api_key``, ``max_retries`` and ``timeout`` apply, and the caller closes
    it). Otherwise the streams made inside :meth:`session` share one client, and any other
    :meth:`stream` creates a client and closes it when the stream ends.
    """

    #: ``gen_ai.provider.name`` in traces: the API spoken, as the OpenAI SDK's own
    #: instrumentation says; ``server.address`` tells which endpoint served it.
    provider = "openai"

    def __init__(self, *, model: str, base_url: str | None = None, api_key: str | None = None,
                 max_retries: int = 3, timeout: float = 120.0,
                 client: AsyncOpenAI | None = None, max_tokens: int | None = None,
                 temperature: float | None = None, cut_backoff: float = 0.5,
                 context_window: int | None = None) -> None:
        self.model = model
        #: The model's context window in tokens: configured, or read from the server's error
        #: when a request did not fit (the runtime compacts before a request would pass it).
        self.context_window = context_window
        self.name = model
        self.max_retries = max_retries
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.cut_backoff = cut_backoff
        self._cuts = 0  # streams cut by the network in a row
        self._given_client = client
        self._shared: AsyncOpenAI | None = None  # the client of the open session()
        self._key_missing = False
        if client is not None:
            # For the error messages: what the supplied client actually does.
            self.base_url = str(client.base_url).rstrip("/")
            self.max_retries = client.max_retries
            read = getattr(client.timeout, "read", client.timeout)
            self.timeout = float(read) if isinstance(read, (int, float)) else timeout
            self._api_key = client.api_key
            return
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if key is None:
            if base_url is None or _is_official(base_url):
                raise ModelAuthError(
                    f"no API key for the OpenAI endpoint at {base_url or DEFAULT_BASE_URL}: "
                    "set the OPENAI_API_KEY environment variable, or set `api_key_env` to the "
                    "name of the variable that holds the key")
            key = PLACEHOLDER_API_KEY
            self._key_missing = True
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = key

    def __repr__(self) -> str:
        return f"OpenAICompatibleModel(model={self.model!r}, base_url={self.base_url!r})"

    # -- streaming ---------------------------------------------------------------------------

    def _new_client(self) -> AsyncOpenAI:
        try:
            return _Client(api_key=self._api_key, base_url=self.base_url,
                           max_retries=self.max_retries, timeout=self.timeout)
        except OpenAIError as err:
            raise ModelError(f"cannot configure the model endpoint at {self.base_url}: "
                             f"{err}") from err

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[None]:
        """Inside it, every :meth:`stream` uses one client: one connection pool, kept alive
        between requests (one TLS handshake for a conversation, not one per request, and
        about 25 ms less CPU a request than building a client). It is closed at the end. Open
        it on the event loop the streams run on, as ``orion chat`` does for a conversation:
        a connection pool belongs to one loop."""
        if self._given_client is not None or self._shared is not None:
            yield
            return
        self._shared = self._new_client()
        try:
            yield
        finally:
            client, self._shared = self._shared, None
            await client.close()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        # Outside a session and without a supplied client, each stream gets its own, closed
        # when the stream ends: the Model protocol has no close, and a connection pool
        # belongs to one event loop.
        client = self._given_client or self._shared or self._new_client()
        try:
            async for event in self._stream(client, request):
                yield event
        finally:
            if client is not self._given_client and client is not self._shared:
                await client.close()

    async def _stream(self, client: AsyncOpenAI,
                      request: ModelRequest) -> AsyncIterator[ModelEvent]:
        # The messages and tool definitions go in as they are, through ``extra_body`` (which
        # the SDK merges into the body last): its typed-parameter transform walks every message
        # and definition of every request, about 200 us a message (0.8 s of CPU for a request
        # at turn 2,000) and 1.4 ms for the built-in tools, and returns Orion's plain-JSON
        # dicts unchanged.
        body: dict[str, Any] = {"messages": request.messages}
        if request.tools:
            body["tools"] = request.tools
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [],
            "stream": True,
            "stream_options": {"include_usage": True},
            "extra_body": body,
        }
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self._cuts:
            await asyncio.sleep(min(self.cut_backoff * 2 ** (self._cuts - 1), MAX_CUT_BACKOFF))
        try:
            response = await client.chat.completions.create(**kwargs)
        except APIStatusError as err:
            raise self._status_error(err) from err
        except APITimeoutError as err:
            raise ModelConnectionError(
                f"the model endpoint at {self.base_url} did not answer within "
                f"{self.timeout:g} s (after {self.max_retries} retries)") from err
        except APIConnectionError as err:
            raise ModelConnectionError(
                f"cannot connect to the model endpoint at {self.base_url}: {_cause(err)} "
                f"(after {self.max_retries} retries); check the base URL and that the "
                "server is running") from err
        except OpenAIError as err:
            raise ModelError(f"the request to {self.base_url} failed: {err}") from err

        state = _StreamState(request.number)
        fault: ModelError | None = None
        try:
            async for chunk in response:
                for event in state.feed(chunk):
                    yield event
        except (APIError, _ErrorEvent, _NotUtf8, json.JSONDecodeError) as err:
            fault = self._fault(err, state)
        finally:
            await response.close()
        if fault is not None:
            for event in self._cut_off(fault, state):
                yield event
            return
        if not state.chunks:
            raise ModelError(
                f"the endpoint at {self.base_url} answered but sent nothing: no text, no finish "
                "reason, no error. The server failed on the request without saying why; a "
                "prompt longer than its context window does this on some servers "
                f"(llama-cpp-python's): {OVERFLOW_HINT}")
        self._cuts = 0
        for event in state.finish():
            yield event

    def _fault(self, err: APIError | _ErrorEvent | _NotUtf8 | json.JSONDecodeError,
               state: _StreamState) -> ModelError:
        """What broke a stream that had started: the network (a ModelConnectionError), or the
        server (an error event, data that is not JSON)."""
        after = _chunks(state.chunks)
        if isinstance(err, APITimeoutError):
            fault: ModelError = ModelConnectionError(
                f"the model endpoint at {self.base_url} stopped sending for {self.timeout:g} s "
                f"in the middle of the response (after {after})")
        elif isinstance(err, APIConnectionError) and not state.chunks:
            # The answer's headers came, then the connection closed: the server gave up on
            # this request (a crash on a forced tool call, a failed prompt), not the network.
            fault = ModelConnectionError(
                f"the model server at {self.base_url} accepted the request and closed the "
                f"connection before sending any of the reply ({_cause(err)}): it failed on "
                "this request, and may have crashed; its log says why. Send the message "
                "again once it runs, or change the request (a shorter message, /compact)")
        elif isinstance(err, APIConnectionError):
            fault = ModelConnectionError(
                f"the connection to {self.base_url} broke in the middle of the response "
                f"(after {after}): {_cause(err)}")
        elif isinstance(err, json.JSONDecodeError):
            fault = ModelError(f"the endpoint at {self.base_url} sent an event that is not "
                               f"JSON (after {after}): {err}")
        elif isinstance(err, _NotUtf8):
            fault = ModelError(f"the endpoint at {self.base_url} sent bytes that are not UTF-8 "
                               f"(after {after}): {err}")
        else:
            fault = ModelError(f"the endpoint at {self.base_url} reported an error in the "
                               f"middle of the response: {_server_message(err)}")
        fault.__cause__ = err
        return fault

    def _cut_off(self, fault: ModelError, state: _StreamState) -> list[ModelEvent]:
        """The end of a stream ``fault`` broke: what arrived is kept, as a cut-off like
        ``length`` (tool calls it had only begun are dropped: their arguments would be cut
        too). Raises ``fault`` when nothing of the reply arrived (the request failed)."""
        dropped = isinstance(fault, ModelConnectionError)
        if not (state.chunks if dropped else state.received):
            raise fault
        if dropped:
            self._cuts += 1
            finish = Finish("truncated", CONNECTION_LOST)
        else:
            finish = Finish("truncated", STREAM_ERROR, error=_error_text(fault))
        usage = [state.usage] if state.usage is not None else []
        return [*state.flush(), *usage, state.identified(finish)]

    def _status_error(self, err: APIStatusError) -> ModelError:
        status = err.status_code
        message = _server_message(err)
        overflow = _overflow(err.body, message)
        if overflow is not None:
            window, asked = overflow
            if window:
                self.context_window = window
            size = f" of {window:,} tokens" if window else ""
            need = f" (the request needs {asked:,})" if asked else ""
            return ContextOverflowError(
                f"the conversation does not fit the model's context window{size}{need}: "
                f"{OVERFLOW_HINT}. The server said: {message}", window=window, asked=asked)
        if status in (401, 403):
            hint = (" (no API key is configured: set OPENAI_API_KEY, or `api_key_env` to the "
                    "variable that holds it)" if self._key_missing else "")
            return ModelAuthError(f"the endpoint at {self.base_url} rejected the API key "
                                  f"(HTTP {status}): {message}{hint}")
        if status == 429 or status >= 500:
            return ModelError(f"the endpoint at {self.base_url} answered HTTP {status} "
                              f"(after {self.max_retries} retries): {message}")
        if status == 404:
            return ModelError(f"the endpoint at {self.base_url} answered HTTP 404 for model "
                              f"{self.model!r}: {message}; check the model name and the base "
                              "URL (it usually ends in /v1)")
        return ModelError(f"the endpoint at {self.base_url} refused the request "
                          f"(HTTP {status}): {message}")


# -- stream reassembly -----------------------------------------------------------------------


@dataclass
class _Call:
    id: str | None
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    legacy: bool = False  # from the deprecated ``function_call`` form


class _ToolCalls:
    """Tool-call fragments put back together (see the module docstring for the rules)."""

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self.by_index: dict[int, _Call] = {}
        self.by_id: dict[str, _Call] = {}
        #: A ``tool_calls`` fragment arrived: ``function_call`` is a copy from then on.
        self.modern = False

    def seen_modern(self) -> None:
        """A ``tool_calls`` fragment arrived: what the legacy ``function_call`` form gave
        before (the same call, sent both ways) is dropped."""
        if not self.modern:
            self.modern = True
            if self.by_index.pop(-1, None) is not None:
                self.calls = [call for call in self.calls if not call.legacy]

    def add(self, index: int | None, id: str | None, name: str | None,
            arguments: str | None, legacy: bool = False) -> None:
        call = self._target(index, id, name)
        call.legacy = call.legacy or legacy
        if name and not call.name:
            call.name = name
        if arguments:
            call.arguments.append(arguments)

    def _target(self, index: int | None, id: str | None, name: str | None) -> _Call:
        if id:
            call = self.by_id.get(id)
            if call is None:
                current = self.by_index.get(index) if index is not None else None
                if current is not None and current.id is None and not _renames(current, name):
                    current.id = id  # the id came after the first fragment
                    call = current
                else:
                    call = self._new(id)
                self.by_id[id] = call
        else:
            if index is not None:
                call = self.by_index.get(index) or self._new(None)
            else:
                call = self.calls[-1] if self.calls else self._new(None)
            if _renames(call, name):
                call = self._new(None)  # a complete call without id or distinct index
        if index is not None:
            self.by_index[index] = call
        return call

    def _new(self, id: str | None) -> _Call:
        call = _Call(id)
        self.calls.append(call)
        return call


def _renames(call: _Call, name: str | None) -> bool:
    return bool(name) and bool(call.name) and call.name != name


class _ErrorEvent(Exception):
    """An error event the SDK passes on as a chunk (vLLM's ``{"object": "error"}``)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        super().__init__(str(body.get("message") or "an error event without a message"))


class _StreamState:
    def __init__(self, number: int) -> None:
        self.number = number
        self.chunks = 0
        #: Whether any of the reply arrived (text, reasoning or a tool-call fragment): an error
        #: event before that is a failed request, after it a cut-off.
        self.received = False
        self.tool_calls = _ToolCalls()
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.response_id: str | None = None
        self.response_model: str | None = None
        self.think = LeadingThink()

    def feed(self, chunk: Any) -> list[ModelEvent]:
        self.chunks += 1
        if getattr(chunk, "object", None) == "error":  # vLLM's error event
            raise _ErrorEvent(dict(getattr(chunk, "model_extra", None) or {}))
        events: list[ModelEvent] = []
        if self.response_id is None:  # the same in every chunk: read once, for the trace
            self.response_id = getattr(chunk, "id", None) or None
            self.response_model = getattr(chunk, "model", None) or None
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = Usage(
                prompt_tokens=getattr(usage, "prompt_tokens", None) or 0,
                completion_tokens=getattr(usage, "completion_tokens", None) or 0,
                total_tokens=getattr(usage, "total_tokens", None) or 0)
        for choice in getattr(chunk, "choices", None) or []:
            if (getattr(choice, "index", None) or 0) != 0:
                continue  # only the first choice (n > 1 is not requested)
            delta = getattr(choice, "delta", None)
            if delta is not None:
                events.extend(self._delta(delta))
            reason = getattr(choice, "finish_reason", None)
            if reason:
                self.finish_reason = str(reason)
        return events

    def _delta(self, delta: Any) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        reasoning = _extra(delta, "reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            self.received = True
            events.append(ReasoningDelta(reasoning))
        for attr in ("content", "refusal"):
            text = getattr(delta, attr, None)
            if isinstance(text, str) and text:
                self.received = True
                if attr == "content" and self.think.phase != "text":
                    events.extend(self.think.feed(text))
                else:
                    events.append(TextDelta(text))
        for fragment in getattr(delta, "tool_calls", None) or []:
            self.received = True
            self.tool_calls.seen_modern()
            function = getattr(fragment, "function", None)
            index = getattr(fragment, "index", None)
            self.tool_calls.add(
                index if isinstance(index, int) else None,
                getattr(fragment, "id", None) or None,
                getattr(function, "name", None) or None,
                getattr(function, "arguments", None) or None)
        legacy = getattr(delta, "function_call", None)  # the deprecated single-call form
        if legacy is not None and not self.tool_calls.modern:
            # llama-cpp-python's server sends each call twice in every delta, as a
            # ``tool_calls`` fragment and as ``function_call``: the legacy form is read only
            # from a server that sends nothing else, or a call would run twice.
            self.tool_calls.add(-1, None, getattr(legacy, "name", None) or None,
                                getattr(legacy, "arguments", None) or None, legacy=True)
        return events

    def flush(self) -> list[ModelEvent]:
        """What the leading-think reader still holds, at the end of the stream."""
        return self.think.end()

    def finish(self) -> list[ModelEvent]:
        events: list[ModelEvent] = self.flush()
        position = 0
        for call in self.tool_calls.calls:
            if not call.name and not call.arguments:
                continue  # a fragment that carried nothing
            position += 1
            events.append(ToolCall(call.id or f"call_{self.number}_{position}", call.name,
                                   "".join(call.arguments)))
        if self.usage is not None:
            events.append(self.usage)
        events.append(self.identified(normalize_finish(self.finish_reason,
                                                       saw_tool_calls=position > 0)))
        return events

    def identified(self, finish: Finish) -> Finish:
        """``finish`` with the response's id and model."""
        return replace(finish, response_id=self.response_id, response_model=self.response_model)


class _NotUtf8(Exception):
    """A line of the stream that is not UTF-8 (the SDK's decoder would raise
    :class:`UnicodeDecodeError` from deep inside its iterator)."""

    def __init__(self, line: bytes, err: UnicodeDecodeError) -> None:
        self.line = line
        super().__init__(f"byte 0x{line[err.start]:02x} at position {err.start} of an event "
                         f"line of {len(line)} bytes is not UTF-8")


class _ErrorLineDecoder(SSEDecoder):
    """The SDK's SSE decoder, plus the two error lines servers send outside the SSE format,
    which the SDK would drop: llama.cpp's ``error: {json}`` line and Ollama's bare JSON error
    object (a line ``{"error": ...}`` without ``data:``). Each becomes at once the event the SDK
    raises :class:`APIError` for (``data: {"error": ...}``). A line that is not UTF-8 raises
    :class:`_NotUtf8`, which ends the stream as a server's error does."""

    def _decode_lines(self, lines: Iterator[bytes]) -> Iterator[ServerSentEvent]:
        for raw_line in lines:
            try:
                line = raw_line.decode("utf-8")
            except UnicodeDecodeError as err:
                raise _NotUtf8(raw_line, err) from None
            sse = self.decode(line)
            if sse:
                yield sse

    def decode(self, line: str) -> ServerSentEvent | None:
        if line.startswith("error:") or line.startswith("{"):
            body = _error_body(line[6:] if line.startswith("error:") else line)
            if body is not None:
                return ServerSentEvent(data=json.dumps({"error": body}))
        return super().decode(line)


def _error_body(text: str) -> Any:
    """The error a non-SSE error line carries, or None when the line is something else."""
    try:
        value = json.loads(text)
    except ValueError:
        return text.strip() or None if not text.lstrip().startswith("{") else None
    if isinstance(value, dict) and "error" in value:
        return value["error"] or value
    return value if isinstance(value, dict) and ("message" in value or "code" in value) \
        else None


class _Client(AsyncOpenAI):
    """The SDK's client with :class:`_ErrorLineDecoder` for its streams (the client's own
    seam for the decoder), and each streamed chunk read as the JSON it is (:class:`_Fields`)."""

    def _make_sse_decoder(self) -> SSEDecoder:
        return _ErrorLineDecoder()

    def _process_response_data(self, *, data: object, cast_to: Any, response: Any) -> Any:
        if cast_to is ChatCompletionChunk and type(data) is dict:
            return _Fields(data)
        return super()._process_response_data(data=data, cast_to=cast_to, response=response)


class _Fields:
    """A streamed chunk (or a part of one) read by attribute, as the SDK's models are, from
    the parsed JSON; ``None`` for a field it lacks, ``model_extra`` the whole object. The SDK
    builds a pydantic model of every chunk, three quarters of its CPU per chunk
    (``bench/bench_stream.py``), for the few fields :class:`_StreamState` reads."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getattr__(self, name: str) -> Any:
        if name == "model_extra":
            return self._data
        return _view(self._data.get(name))


def _view(value: Any) -> Any:
    if type(value) is dict:
        return _Fields(value)
    if type(value) is list:
        return [_view(item) for item in value]
    return value


#: How servers name a request longer than the context window: OpenAI's code, llama.cpp's
#: type, and the words of vLLM, llama-cpp-python, Ollama and others.
_OVERFLOW_WORDS = ("context_length_exceeded", "exceed_context_size", "context window",
                   "context length", "context size", "maximum context")
_NUMBERS = re.compile(r"\d[\d,]*")


def _overflow(body: object, message: str) -> tuple[int | None, int | None] | None:
    """``(window, asked)`` when an error says the request did not fit the context window
    (each None when the server did not say it), else None."""
    details = body.get("error", body) if isinstance(body, dict) else None
    details = details if isinstance(details, dict) else {}
    said = " ".join(str(v) for v in (message, details.get("code"), details.get("type")))
    if not any(word in said.lower() for word in _OVERFLOW_WORDS):
        return None
    window = details.get("n_ctx")
    asked = details.get("n_prompt_tokens")
    if not isinstance(window, int):
        # "... maximum context length is 8192 tokens. However, you requested 9000 tokens",
        # "Requested tokens (9000) exceed context window of 2048": the window is the smaller.
        found = sorted({int(n.replace(",", "")) for n in _NUMBERS.findall(message)})
        window = found[0] if len(found) >= 2 else None
        asked = found[-1] if len(found) >= 2 else None
    return window, asked if isinstance(asked, int) else None


def _error_text(error: ModelError) -> str:
    """The server's own words in an error event, for the user."""
    cause = error.__cause__
    if isinstance(cause, (APIError, _ErrorEvent)):
        return _server_message(cause)
    return str(error)


def _extra(obj: Any, name: str) -> Any:
    """A field the SDK does not declare (it keeps them in ``model_extra``)."""
    value = getattr(obj, name, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(name)
    return value


def _chunks(n: int) -> str:
    return f"{n} chunk" if n == 1 else f"{n} chunks"


def _is_official(base_url: str) -> bool:
    return "api.openai.com" in base_url


def _cause(err: BaseException) -> str:
    """The lowest-level reason of a connection error (refused, DNS, reset...)."""
    cause: BaseException | None = err
    text = str(err)
    for _ in range(10):  # chains are short; never follow a cycle forever
        if cause is None:
            break
        if str(cause):
            text = str(cause)
        cause = cause.__cause__ or cause.__context__
    return text


def _server_message(err: APIError | _ErrorEvent) -> str:
    """The message the server put in its error body, else the SDK's."""
    if isinstance(err, _ErrorEvent):
        return str(err)
    body = err.body
    if isinstance(body, dict):
        message = body.get("message") or body.get("error") or body.get("detail")
        if isinstance(message, dict):
            message = message.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str) and body:
        return body
    return err.message


__all__ = ["OpenAICompatibleModel"]
