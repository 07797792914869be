"""What a trace may hold: sizes, counts, hashes, ids and enums. Everything else is content.

Every event passes through :func:`content_free` before any store or exporter sees it, so a
plugin (or Orion itself) cannot put a plan, a title, a user's message, a file's text or an
error message quoting them into ``orion.db`` or a backend by mistake:

- numbers, booleans and ``None`` are kept: they are sizes, counts, flags and durations;
- a string is kept only under an attribute that holds an id, an enum or a hash (see
  :data:`STRINGS`, :data:`SUFFIXES`) and only when it has that shape (an id has no spaces, a
  hash is hex); any other string is content and becomes ``{"$text": length, "sha256": hex}``;
- lists and mappings are walked the same way (a mapping's keys must look like names; one that
  does not is replaced by the hash of its text);
- the event's name keeps its words only when they are plain words or the kept value of one of
  its attributes (``chat gpt-4.1``, ``execute_tool read_file``); a word that is part of a
  content value, or looks like a path or a sentence, becomes ``…``;
- the conversation and session ids are kept when they look like ids, else hashed.

A sha256 lets a team match a value it already has (``sha256sum``) without the trace holding
it. With content capture on (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, see
:func:`capture_from_env`) the texts go to the ``blobs`` of the batch, by sha256: the SQLite
store keeps them in ``trace_blobs`` and the OpenTelemetry exporter puts them back on the
spans. The events themselves are the same either way.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Mapping
from typing import Any

from orion.errors import ConfigError
from orion.trace.events import TraceEvent, make_event

#: Shapes of the strings a trace keeps.
ID = "id"        # an id, a model or plugin name: no spaces
TOKEN = "token"  # an enum value: one word, no paths
LABEL = "label"  # a name from a statechart or from Orion's code: a few words, no paths
HASH = "hash"    # a hex digest

_SHAPES = {
    ID: re.compile(r"[A-Za-z0-9_.:@+\-]+(?:/[A-Za-z0-9_.:@+\-]+)*"),
    TOKEN: re.compile(r"[A-Za-z0-9_.:\-]{1,80}"),
    LABEL: re.compile(r"[A-Za-z0-9_.:\-']+(?: [A-Za-z0-9_.:\-'()]+){0,7}"),
    HASH: re.compile(r"[0-9a-f]{8,128}"),
}

#: Attributes whose strings are ids, enums or hashes (the others hold content).
STRINGS: dict[str, str] = {
    "gen_ai.conversation.id": ID, "session.id": ID, "gen_ai.tool.call.id": ID,
    "gen_ai.response.id": ID, "gen_ai.request.model": ID, "gen_ai.response.model": ID,
    "gen_ai.provider.name": ID, "server.address": ID, "gen_ai.agent.name": ID,
    "gen_ai.operation.name": TOKEN, "gen_ai.tool.name": TOKEN,
    "gen_ai.response.finish_reasons": TOKEN, "error.type": TOKEN,
    "openinference.span.kind": TOKEN,
    "orion.finish": TOKEN, "orion.tool.outcome": TOKEN, "orion.lifecycle": TOKEN,
    "orion.event": TOKEN, "orion.source": TOKEN, "orion.dest": TOKEN, "orion.state": TOKEN,
    "orion.phase": TOKEN, "orion.hook": TOKEN, "orion.plugin": ID, "orion.policy.plugin": ID,
    "orion.action": TOKEN, "orion.status": TOKEN, "orion.operation": TOKEN,
    "orion.code": TOKEN, "orion.kind": TOKEN,
    # Orion's own phrases: where an error happened, why the engine set a trigger aside
    "orion.where": LABEL, "orion.reason": LABEL,
    "orion.sha256": HASH,
}
#: Name endings that say what a string is, for attributes not in :data:`STRINGS` (a plugin's
#: own ``myteam.review.id``) and for the keys inside mappings (``orion.payload.operation``):
#: one word at most, so a sentence (which may quote anything) never passes for an enum.
SUFFIXES: dict[str, str] = {
    "id": ID, "ids": ID, "sha256": HASH, "model": ID,
    "kind": TOKEN, "state": TOKEN, "status": TOKEN, "outcome": TOKEN, "code": TOKEN,
    "operation": TOKEN, "phase": TOKEN, "action": TOKEN, "type": TOKEN,
    "$error": TOKEN, "$cycle": TOKEN,
}

_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_.\-$]{0,63}")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]{0,39}|[0-9]{1,9}")
#: Content values of one word (a path, a name: what an event's name may be built from) are
#: also compared part by part with the event's name; others (a title, a message, a file) whole.
_SHORT = 200
_SPLIT = re.compile(r"[\s/\\.,:;'\"()\[\]{}]+")
_GAP = "…"

#: The environment variable of the OpenTelemetry GenAI conventions that turns content capture on.
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Its values that turn capture on (``true``; with the newer conventions, the modes that
#: record content on spans) and off. ``EVENT_ONLY`` asks for log events, which Orion does not
#: send: it captures nothing.
CAPTURE_ON = frozenset({"true", "span_only", "span_and_event"})
CAPTURE_OFF = frozenset({"", "false", "no_content", "event_only"})


class CaptureSettingError(ConfigError):
    """``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` has a value Orion does not know."""


def capture_from_env(env: Mapping[str, str] | None = None) -> bool | None:
    """Content capture as the environment asks: ``True``, ``False``, or ``None`` when the
    variable is not set. Raises :class:`CaptureSettingError` for a value it does not know."""
    env = os.environ if env is None else env
    raw = env.get(CAPTURE_ENV)
    if raw is None:
        return None
    value = raw.strip().lower()
    if value in CAPTURE_ON:
        return True
    if value in CAPTURE_OFF:
        return False
    raise CaptureSettingError(
        f"environment variable {CAPTURE_ENV}={raw!r}: expected true or false (or, with the "
        "newer GenAI conventions, NO_CONTENT, SPAN_ONLY, EVENT_ONLY or SPAN_AND_EVENT)")


#: Entries each of the caches below keeps. What repeats (keys, states, tool names, models) is a
#: few hundred strings; what does not (a session's, a span's or a call's id) only misses, and a
#: larger cache would keep a few of those per write for thousands of writes of a long chat.
CACHED = 256


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@functools.lru_cache(maxsize=CACHED)
def shape_of(key: str) -> str | None:
    """What the strings of attribute ``key`` are, or ``None`` (content)."""
    shape = STRINGS.get(key)
    if shape is None:
        shape = SUFFIXES.get(key.rsplit(".", 1)[-1])
    return shape


@functools.lru_cache(maxsize=CACHED)
def _fits(shape: str, value: str) -> bool:
    # Cached: the same enums (states, tool names, models) come back all the time.
    return _SHAPES[shape].fullmatch(value) is not None


@functools.lru_cache(maxsize=CACHED)
def _plain_name(name: str) -> bool:
    return bool(name) and all(_is_word(word) for word in name.split(" "))


@functools.lru_cache(maxsize=CACHED)
def _is_word(word: str) -> bool:
    return _WORD.fullmatch(word) is not None


@functools.lru_cache(maxsize=CACHED)
def _plain_key(key: str) -> bool:
    return _KEY.fullmatch(key) is not None


class _Filter:
    """One event's walk: what was kept and what was content (for the name)."""

    __slots__ = ("blobs", "max_text", "kept", "content")

    def __init__(self, blobs: dict[str, str] | None, max_text: int):
        self.blobs = blobs
        self.max_text = max_text
        self.kept: set[str] = set()
        self.content: list[str] = []

    def text(self, value: str) -> dict[str, Any]:
        """A content string: its length and hash (and the text in the blobs, when capturing)."""
        self.content.append(value)
        sha = digest(value)
        if self.blobs is not None:
            self.blobs[sha] = value
        return {"$text": len(value), "sha256": sha}

    def string(self, value: str, shape: str | None) -> Any:
        if shape is not None and len(value) <= self.max_text and _fits(shape, value):
            self.kept.add(value)
            return value
        return self.text(value)

    def value(self, value: Any, shape: str | None) -> Any:
        t = type(value)
        if t is str:
            return self.string(value, shape)
        if t is dict:
            if "$text" in value and "sha256" in value:  # already summarized (json_safe)
                return {"$text": value["$text"], "sha256": value["sha256"]}
            return self.mapping(value)
        if t is list:
            return [self.value(item, shape) for item in value]
        return value  # numbers, booleans, None (json_safe made everything JSON data)

    def mapping(self, value: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not _plain_key(key):
                key = f"$key.{digest(key)[:16]}"
            out[key] = self.value(item, SUFFIXES.get(key.rsplit(".", 1)[-1]))
        return out

    def attributes(self, attributes: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in attributes.items():
            if not _plain_key(key):
                key = f"$key.{digest(key)[:16]}"
            out[key] = self.value(item, shape_of(key))
        return out

    def ident(self, value: str) -> str:
        if not value or (len(value) <= 128 and _fits(ID, value)):
            return value
        return "sha256:" + self.text(value)["sha256"]

    def _words(self) -> set[str]:
        words = set(self.content)
        for value in self.content:
            if len(value) <= _SHORT and not any(c.isspace() for c in value):
                words.update(_SPLIT.split(value))
        return words

    def name(self, name: str, kind: str) -> str:
        if _plain_name(name) and not (self.content and set(name.split(" ")) & self._words()):
            return name  # the usual case: plain words, none of them content
        words: list[str] = []
        content = self._words() if self.content else frozenset()
        for word in name.split(" "):
            if not word:
                continue
            if not (word in self.kept or (_is_word(word) and word not in content)):
                word = _GAP
            if word == _GAP and words and words[-1] == _GAP:
                continue
            words.append(word)
        return " ".join(words) or kind or _GAP


def content_free(event: TraceEvent, *, blobs: dict[str, str] | None = None,
                 max_text: int = 1024) -> TraceEvent:
    """``event`` (already JSON-safe, see :func:`orion.trace.encoding.encode_event`) with only
    what a trace may hold (see the module documentation). With ``blobs``, the texts left out
    are added to it by sha256."""
    walk = _Filter(blobs, max_text)
    attributes = walk.attributes(event.attributes)
    return make_event(
        event.kind if _fits(TOKEN, event.kind or "-") else "custom",
        walk.name(event.name, event.kind),
        event.at_ms, walk.ident(event.conversation_id), walk.ident(event.session_id),
        attributes, event.duration_ms, event.trace_id, event.span_id, event.parent_id,
        event.links)
