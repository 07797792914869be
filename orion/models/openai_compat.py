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
* **Finish.** The provider's reason goes through :func:`normalize_finish`: ``stop`` with tool
  calls becomes ``tool_calls``; ``length``, ``insufficient_system_resource``,
  ``content_filter``, any unknown reason, and a stream that ends without a reason are
  ``truncated`` (``Finish.raw`` keeps what the provider said, ``None`` for nothing).
* **Retries.** 408/409/429/5xx answers and failed connections are retried by the SDK itself
  (``max_retries``, exponential backoff, honouring ``retry-after-ms`` / ``retry-after``)
  before anything was streamed. Once the stream has started nothing is replayed, because
  events were already handed to the runtime.
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
from collections.abc import AsyncIterator
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

from orion.models.base import ModelAuthError, ModelConnectionError, ModelError, ModelRequest
from orion.models.events import (
    CONNECTION_LOST,
    Finish,
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
                 temperature: float | None = None, cut_backoff: float = 0.5) -> None:
        self.model = model
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
            return AsyncOpenAI(api_key=self._api_key, base_url=self.base_url,
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
        cut: ModelConnectionError | None = None
        try:
            async for chunk in response:
                for event in state.feed(chunk):
                    yield event
        except APITimeoutError as err:
            cut = ModelConnectionError(
                f"the model endpoint at {self.base_url} stopped sending for {self.timeout:g} s "
                f"in the middle of the response (after {_chunks(state.chunks)})")
            cut.__cause__ = err
        except APIConnectionError as err:
            cut = ModelConnectionError(
                f"the connection to {self.base_url} broke in the middle of the response "
                f"(after {_chunks(state.chunks)}): {_cause(err)}")
            cut.__cause__ = err
        except APIError as err:
            raise ModelError(f"the endpoint at {self.base_url} reported an error in the "
                             f"middle of the response: {_server_message(err)}") from err
        except json.JSONDecodeError as err:
            raise ModelError(f"the endpoint at {self.base_url} sent an event that is not "
                             f"JSON (after {_chunks(state.chunks)}): {err}") from err
        finally:
            await response.close()
        if cut is not None:
            if not state.chunks:
                raise cut  # nothing arrived: a connection error like any other
            # What arrived is kept: a cut-off, like `length`. Tool calls it had only begun are
            # dropped (their arguments would be cut too).
            self._cuts += 1
            if state.usage is not None:
                yield state.usage
            yield state.identified(Finish("truncated", CONNECTION_LOST))
            return
        self._cuts = 0
        for event in state.finish():
            yield event

    def _status_error(self, err: APIStatusError) -> ModelError:
        status = err.status_code
        message = _server_message(err)
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


class _ToolCalls:
    """Tool-call fragments put back together (see the module docstring for the rules)."""

    def __init__(self) -> None:
        self.calls: list[_Call] = []
        self.by_index: dict[int, _Call] = {}
        self.by_id: dict[str, _Call] = {}

    def add(self, index: int | None, id: str | None, name: str | None,
            arguments: str | None) -> None:
        call = self._target(index, id, name)
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


class _StreamState:
    def __init__(self, number: int) -> None:
        self.number = number
        self.chunks = 0
        self.tool_calls = _ToolCalls()
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.response_id: str | None = None
        self.response_model: str | None = None

    def feed(self, chunk: Any) -> list[ModelEvent]:
        self.chunks += 1
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
            events.append(ReasoningDelta(reasoning))
        for attr in ("content", "refusal"):
            text = getattr(delta, attr, None)
            if isinstance(text, str) and text:
                events.append(TextDelta(text))
        for fragment in getattr(delta, "tool_calls", None) or []:
            function = getattr(fragment, "function", None)
            index = getattr(fragment, "index", None)
            self.tool_calls.add(
                index if isinstance(index, int) else None,
                getattr(fragment, "id", None) or None,
                getattr(function, "name", None) or None,
                getattr(function, "arguments", None) or None)
        legacy = getattr(delta, "function_call", None)  # the deprecated single-call form
        if legacy is not None:
            self.tool_calls.add(-1, None, getattr(legacy, "name", None) or None,
                                getattr(legacy, "arguments", None) or None)
        return events

    def finish(self) -> list[ModelEvent]:
        events: list[ModelEvent] = []
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


def _server_message(err: APIError) -> str:
    """The message the server put in its error body, else the SDK's."""
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
