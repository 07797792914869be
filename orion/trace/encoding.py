"""JSON-safe, content-free encoding of trace values.

Trace persistence once crashed on values that were not JSON-serializable, and traces carried
whole file contents. :func:`json_safe` turns *any* value into plain JSON data (``dict`` with
``str`` keys, ``list``, ``str``, ``int``, finite ``float``, ``bool``, ``None``) and never raises
an :class:`Exception`:

* ``datetime``, ``date``, ``time`` become ISO 8601 strings; ``timedelta`` its seconds (a float);
  paths, ``UUID`` and ``Decimal`` their ``str()``; enums their value (encoded in turn); tuples,
  deques and dict value views lists; sets, frozensets and key/item views sorted lists (ordered
  by their encoded form, so the order is deterministic even for mixed types).
* pydantic models become ``model_dump(mode="python")`` (falling back to their fields), dataclass
  instances a dict of their fields, other mappings dicts. Keys that are not ``str`` are converted
  with ``str()``; every key is made surrogate-free and truncated to ``max_text`` characters, never
  summarized. Keys that collide after conversion get a deterministic suffix ``" (2)"``,
  ``" (3)"``, ... (the keys that were already plain strings keep their names; the suffixed
  name is cut to fit ``max_text`` when it can).
* an exception becomes ``{"$error": type name, "message": str(exc)}`` (an exception whose
  ``__str__`` raises still gives a message).
* ``bytes``, ``bytearray`` and ``memoryview`` become ``{"$bytes": length, "sha256": hex}``; the
  bytes themselves are never kept.
* non-finite floats become the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"`` (the
  tokens JavaScript and many JSON dialects use), so ``json.dumps(..., allow_nan=False)`` works.
  Integers stay integers unless they are too long to print (``sys.get_int_max_str_digits``):
  those become ``{"$bigint": bit length, "hex": hex(value)}``.
* in every string, each surrogate code point (``"\\ud800"``; Python strings may hold them, UTF-8
  cannot) is replaced with U+FFFD, so the result always encodes to UTF-8.
* a string longer than ``max_text`` characters is summarized as ``{"$text": length, "sha256":
  hex digest of its UTF-8 bytes}``, never kept, not even in part.
  With a ``blobs`` dict, the full text is also stored there under its sha256 (the
  ``capture_content`` setting: a store writes each blob once). The same rule applies to every
  string taken from the value: messages, reprs, paths, ISO dates, type names.
* a container met again inside itself becomes ``{"$cycle": type name}``; a container shared
  without a cycle is encoded each time it appears. Nesting deeper than :data:`MAX_DEPTH`
  containers is cut with ``{"$depth": MAX_DEPTH, "type": type name}``.
* anything else (including generators and iterators, which are never consumed) becomes
  ``{"$repr": repr(value), "type": qualified type name}``; an object whose ``__repr__`` raises
  still gives one.

The only strings in the output longer than ``max_text`` are therefore sha256 digests (64 hex
characters, under a ``"sha256"`` key), the tokens ``"NaN"``/``"Infinity"``/``"-Infinity"``, and
keys, which are at most ``max(max_text, len(" (N)"))`` characters.

:func:`dumps` serializes the result compactly and never raises; :func:`encode_event` makes a
:class:`~orion.trace.events.TraceEvent` safe.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import hashlib
import json
import math
import re
import sys
import uuid
from collections.abc import KeysView, ItemsView, Mapping, Set, ValuesView
from enum import Enum
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel

from orion.trace.events import TraceEvent, make_event

__all__ = ["MAX_DEPTH", "MAX_TEXT", "json_safe", "dumps", "encode_event"]

#: The default longest string kept whole.
MAX_TEXT = 1024
#: The deepest nesting of containers encoded; deeper ones become ``{"$depth": ...}``.
MAX_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")
#: Integers strictly within this bound are always printable, whatever the digit limit.
_SMALL_INT = 10**300
_FLOAT_TOKENS = {"NaN", "Infinity", "-Infinity"}


def json_safe(value: Any, *, max_text: int = MAX_TEXT, blobs: dict[str, str] | None = None) -> Any:
    """``value`` as plain JSON data, content-free (see the module documentation). Never raises
    an :class:`Exception`; an invalid ``max_text`` counts as :data:`MAX_TEXT`."""
    try:
        if type(max_text) is not int or max_text < 0:
            max_text = MAX_TEXT
        if type(value) is dict:
            fast = _fast_dict(value, max_text)
            if fast is not None:
                return fast
        return _Encoder(max_text, blobs).enc(value, 0)
    except Exception:
        return {"$error": "EncodingError", "message": "the value could not be encoded"}


def dumps(value: Any, *, max_text: int = MAX_TEXT, blobs: dict[str, str] | None = None) -> str:
    """``json_safe(value)`` as compact JSON text (UTF-8 ready, no ``NaN``). Never raises an
    :class:`Exception`."""
    try:
        return json.dumps(json_safe(value, max_text=max_text, blobs=blobs), ensure_ascii=False,
                          allow_nan=False, separators=(",", ":"))
    except Exception:  # not expected: json_safe's output always serializes
        return '{"$error":"EncodingError","message":"the value could not be encoded"}'


def encode_event(event: TraceEvent, *, max_text: int = MAX_TEXT,
                 blobs: dict[str, str] | None = None) -> TraceEvent:
    """A copy of ``event`` that is safe to store: its attributes pass through :func:`json_safe`
    (attributes that are not a mapping are kept under ``"orion.attributes"``), ``kind``,
    ``name``, ``conversation_id`` and ``session_id`` become plain strings (surrogate-free, cut
    to ``max_text``), and so do the span ids and links; a non-finite or non-numeric
    ``at_ms``/``duration_ms`` becomes 0.0."""
    if type(max_text) is not int or max_text < 0:
        max_text = MAX_TEXT
    if type(event) is TraceEvent:  # the runtime's events: plain fields, attributes usually plain
        raw = event.attributes
        attributes = _fast_dict(raw, max_text) if type(raw) is dict else None
        if attributes is None:
            attributes = json_safe(raw, max_text=max_text, blobs=blobs)
        return make_event(_label(event.kind, max_text), _label(event.name, max_text),
                          _number(event.at_ms), _label(event.conversation_id, max_text),
                          _label(event.session_id, max_text),
                          attributes if type(attributes) is dict
                          else {"orion.attributes": attributes},
                          _number(event.duration_ms), _label(event.trace_id, max_text),
                          _label(event.span_id, max_text), _label(event.parent_id, max_text),
                          _links(event.links, max_text))
    attributes = json_safe(getattr(event, "attributes", None), max_text=max_text, blobs=blobs)
    if type(attributes) is not dict:
        attributes = {"orion.attributes": attributes}
    fields: dict[str, Any] = {
        "kind": _label(getattr(event, "kind", ""), max_text),
        "name": _label(getattr(event, "name", ""), max_text),
        "at_ms": _number(getattr(event, "at_ms", 0.0)),
        "conversation_id": _label(getattr(event, "conversation_id", ""), max_text),
        "session_id": _label(getattr(event, "session_id", ""), max_text),
        "attributes": attributes,
        "duration_ms": _number(getattr(event, "duration_ms", 0.0)),
        "trace_id": _label(getattr(event, "trace_id", ""), max_text),
        "span_id": _label(getattr(event, "span_id", ""), max_text),
        "parent_id": _label(getattr(event, "parent_id", ""), max_text),
        "links": _links(getattr(event, "links", ()), max_text),
    }
    if type(event) is TraceEvent:
        return TraceEvent(**fields)
    try:
        return dataclasses.replace(event, **fields)
    except Exception:
        return TraceEvent(**fields)


# ---------------------------------------------------------------------------------------------
# Fast path: a flat dict of short ASCII strings, small ints, finite floats, bools and None
# (or lists of them): the usual trace attributes.


#: How deep the fast path follows dicts in dicts (a tool call's arguments, a payload); deeper
#: values, and cycles, take the encoder.
_FAST_DEPTH = 4


def _fast_dict(value: dict[Any, Any], max_text: int, depth: int = 0) -> dict[str, Any] | None:
    """A copy of ``value`` when it is already plain and short (its values scalars, lists of
    scalars or such dicts, a few levels deep), else ``None``."""
    out: dict[str, Any] = {}
    for k, v in value.items():
        if type(k) is not str or len(k) > max_text or not k.isascii():
            return None
        t = type(v)
        if t is str:  # the most common value, checked inline
            if len(v) > max_text or not v.isascii():
                return None
            out[k] = v
        elif t is dict:
            if depth >= _FAST_DEPTH:
                return None
            inner = _fast_dict(v, max_text, depth + 1)
            if inner is None:
                return None
            out[k] = inner
        elif t is list:
            for item in v:
                if not _fast_scalar(item, max_text):
                    return None
            out[k] = list(v)
        elif _fast_scalar(v, max_text):
            out[k] = v
        else:
            return None
    return out


def _fast_scalar(v: Any, max_text: int) -> bool:
    t = type(v)
    if t is str:
        return len(v) <= max_text and v.isascii()
    if t is int:
        return -_SMALL_INT < v < _SMALL_INT
    if t is float:
        return v - v == 0.0  # not nan nor an infinity
    return v is None or t is bool


# ---------------------------------------------------------------------------------------------
# The encoder


class _Encoder:
    __slots__ = ("max_text", "blobs", "active")

    def __init__(self, max_text: int, blobs: dict[str, str] | None) -> None:
        self.max_text = max_text
        self.blobs = blobs
        self.active: set[int] = set()  # ids of the containers being encoded (for cycles)

    def enc(self, v: Any, depth: int) -> Any:
        try:
            t = type(v)
            if t is str:
                return self.text(v)
            if v is None or t is bool:
                return v
            if t is int:
                return self.integer(v)
            if t is float:
                return _float(v)
            if t is dict:
                return self.container(v, depth, self.mapping)
            if t is list or t is tuple:
                return self.container(v, depth, self.sequence)
            return self.other(v, t, depth)
        except Exception:
            return self.fallback(v)

    def other(self, v: Any, t: type, depth: int) -> Any:
        if isinstance(v, BaseException):
            return {"$error": self.text(_name(t)), "message": self.text(_message(v))}
        if isinstance(v, Enum):
            return self.container(v, depth, self.enum)
        if isinstance(v, str):
            return self.text(str.__str__(v))
        if isinstance(v, int):  # bool cannot be subclassed
            return self.integer(int.__int__(v))
        if isinstance(v, float):
            return _float(float.__float__(v))
        if isinstance(v, BaseModel):
            return self.container(v, depth, self.model)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return self.container(v, depth, self.dataclass)
        if isinstance(v, Mapping):
            return self.container(v, depth, self.mapping)
        if isinstance(v, (list, tuple, collections.deque, ValuesView)):
            return self.container(v, depth, self.sequence)
        if isinstance(v, (Set, KeysView, ItemsView)):
            return self.container(v, depth, self.unordered)
        if isinstance(v, (bytes, bytearray)):
            return {"$bytes": len(v), "sha256": hashlib.sha256(v).hexdigest()}
        if isinstance(v, memoryview):
            data = v.tobytes()
            return {"$bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        if isinstance(v, datetime.timedelta):
            return _float(float(v.total_seconds()))
        if isinstance(v, (datetime.date, datetime.time)):  # datetime is a date
            return self.text(_plain(v.isoformat()))
        if isinstance(v, (PurePath, uuid.UUID, decimal.Decimal)):
            return self.text(_plain(str(v)))
        return self.fallback(v)

    # -- strings and numbers -----------------------------------------------------------------

    def text(self, s: str) -> Any:
        """A string, surrogate-free, or its summary when longer than ``max_text``."""
        if len(s) <= self.max_text:
            if s.isascii() or _SURROGATE.search(s) is None:
                return s
            return _SURROGATE.sub("\ufffd", s)
        safe = s if s.isascii() else _SURROGATE.sub("\ufffd", s)
        digest = hashlib.sha256(safe.encode("utf-8")).hexdigest()
        if self.blobs is not None:
            try:
                self.blobs[digest] = safe
            except Exception:
                pass
        return {"$text": len(s), "sha256": digest}

    def integer(self, v: int) -> Any:
        if -_SMALL_INT < v < _SMALL_INT:
            return v
        limit = sys.get_int_max_str_digits()
        # A number of b bits has at most b*log10(2) + 1 digits (log10(2) < 0.302).
        if limit == 0 or v.bit_length() * 0.302 + 2 <= limit:
            return v
        return {"$bigint": v.bit_length(), "hex": self.text(hex(v))}

    def key(self, k: Any) -> str:
        """A dict key as a plain string, surrogate-free, at most ``max_text`` characters."""
        if isinstance(k, str):
            s = str.__str__(k)
        else:
            try:
                s = _plain(str(k))
            except Exception:
                s = _plain(_repr(k))
        s = s[:self.max_text]
        return s if s.isascii() else _SURROGATE.sub("\ufffd", s)

    # -- containers --------------------------------------------------------------------------

    def container(self, v: Any, depth: int, build: Any) -> Any:
        if depth >= MAX_DEPTH:
            return {"$depth": MAX_DEPTH, "type": self.text(_name(type(v)))}
        i = id(v)
        if i in self.active:
            return {"$cycle": self.text(_name(type(v)))}
        self.active.add(i)
        try:
            return build(v, depth)
        finally:
            self.active.discard(i)

    def sequence(self, v: Any, depth: int) -> list[Any]:
        return [self.enc(x, depth + 1) for x in v]

    def unordered(self, v: Any, depth: int) -> list[Any]:
        items = [self.enc(x, depth + 1) for x in v]
        try:
            items.sort(key=_order)
        except Exception:
            pass
        return items

    def enum(self, v: Enum, depth: int) -> Any:
        return self.enc(v.value, depth)

    def model(self, v: BaseModel, depth: int) -> Any:
        try:
            dumped = v.model_dump(mode="python", warnings=False)
        except Exception:  # a cycle, a failing serializer: encode the fields themselves
            return self.pairs([(name, _attribute(v, name)) for name in type(v).model_fields],
                              depth)
        return self.enc(dumped, depth)

    def dataclass(self, v: Any, depth: int) -> Any:
        return self.pairs([(f.name, _attribute(v, f.name)) for f in dataclasses.fields(v)],
                          depth)

    def mapping(self, v: Mapping[Any, Any], depth: int) -> dict[str, Any]:
        return self.pairs(list(v.items()), depth)

    def pairs(self, items: list[tuple[Any, Any]], depth: int) -> dict[str, Any]:
        """A dict of the (key, value) pairs. Keys that are already plain, short strings keep
        their names; the others are converted and suffixed when they collide."""
        max_text = self.max_text
        names: dict[int, str] = {}  # by the index of the pair
        taken: set[str] = set()
        pending: list[int] = []
        for index, (k, _) in enumerate(items):
            if (type(k) is str and len(k) <= max_text and k not in taken
                    and (k.isascii() or _SURROGATE.search(k) is None)):
                names[index] = k
                taken.add(k)
            else:
                pending.append(index)
        for index in pending:
            base = name = self.key(items[index][0])
            number = 2
            while name in taken:
                suffix = f" ({number})"
                name = base[:max(0, max_text - len(suffix))] + suffix
                number += 1
            names[index] = name
            taken.add(name)
        return {names[index]: self.enc(v, depth + 1) for index, (_, v) in enumerate(items)}

    # -- everything else ---------------------------------------------------------------------

    def fallback(self, v: Any) -> Any:
        try:
            return {"$repr": self.text(_repr(v)), "type": self.text(_name(type(v)))}
        except Exception:
            return {"$repr": "<unrepresentable>", "type": "?"}


# ---------------------------------------------------------------------------------------------
# Helpers (each one guarded: they run user code)


def _float(v: float) -> Any:
    if v - v == 0.0:
        return v
    if v != v:
        return "NaN"
    return "Infinity" if v > 0 else "-Infinity"


def _plain(s: Any) -> str:
    """``s`` as an exact ``str`` (``str()`` and ``repr()`` may return a subclass)."""
    return s if type(s) is str else str.__str__(s)


def _name(t: type) -> str:
    """The qualified name of a type (without ``builtins.``)."""
    try:
        module, qualname = t.__module__, t.__qualname__
        if type(module) is not str or type(qualname) is not str:
            raise TypeError
        return qualname if module == "builtins" else f"{module}.{qualname}"
    except Exception:
        try:
            return _plain(type.__repr__(t))
        except Exception:
            return "?"


def _repr(v: Any) -> str:
    try:
        return _plain(repr(v))
    except Exception:
        try:
            return _plain(object.__repr__(v))
        except Exception:
            return "<unrepresentable>"


def _message(exc: BaseException) -> str:
    try:
        return _plain(str(exc))
    except Exception:
        try:
            message = _plain(BaseException.__str__(exc))
        except Exception:
            message = ""
        return message or f"<unprintable {_name(type(exc))}>"


def _attribute(v: Any, name: str) -> Any:
    """``getattr(v, name)``, or the exception it raised (encoded as an error)."""
    try:
        return getattr(v, name)
    except Exception as exc:
        return exc


def _order(x: Any) -> Any:
    """A sort key for encoded values that orders any mix of them: None, bools, numbers,
    strings, lists (element by element), dicts (by their JSON text)."""
    t = type(x)
    if x is None:
        return (0,)
    if t is bool:
        return (1, x)
    if t is int or t is float:
        return (2, x)
    if t is str:
        return (3, x)
    if t is list:
        return (4, [_order(i) for i in x])
    return (5, json.dumps(x, sort_keys=True))


def _label(value: Any, max_text: int) -> str:
    """A plain, surrogate-free string of at most ``max_text`` characters."""
    if type(value) is str and len(value) <= max_text and value.isascii():
        return value
    if isinstance(value, str):
        s = str.__str__(value)
    else:
        try:
            s = _plain(str(value))
        except Exception:
            s = _repr(value)
    s = s[:max_text]
    return s if s.isascii() else _SURROGATE.sub("\ufffd", s)


def _links(value: Any, max_text: int) -> tuple[str, ...]:
    """Span links as a tuple of plain strings (anything else: none)."""
    if type(value) is tuple and all(type(v) is str for v in value):
        return value
    try:
        return tuple(_label(v, max_text) for v in value) if isinstance(value, (list, tuple)) else ()
    except Exception:
        return ()


def _number(value: Any) -> float:
    """A finite int or float (float subclasses made plain), else 0.0."""
    t = type(value)
    if t is int and -_SMALL_INT < value < _SMALL_INT:
        return value
    if t is float and math.isfinite(value):
        return value
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
            if math.isfinite(number):
                return number
    except Exception:
        pass
    return 0.0
