"""The JSON-safe, content-free trace encoder: one test per rule, cycles, a whole document, and
a property test over arbitrary nested values."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import hashlib
import json
import math
import re
import uuid
from enum import Enum, IntEnum, StrEnum
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from orion.trace import events
from orion.trace.encoding import MAX_DEPTH, dumps, encode_event, json_safe
from orion.trace.events import TraceEvent


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Color(Enum):
    RED = "red"
    PAIR = (1, 2)
    WHEN = datetime.date(2024, 5, 6)


class Level(IntEnum):
    LOW = 1


class Mode(StrEnum):
    FAST = "fast"


@dataclasses.dataclass
class Point:
    x: Any
    y: Any = None


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: Any


class Model(BaseModel):
    a: Any = None
    b: Any = None


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str")


# ---------------------------------------------------------------------------------------------
# One rule each


def test_plain_json_passes_through_as_a_copy():
    attributes = {"gen_ai.tool.name": "read_file", "n": 3, "ok": True, "none": None, "f": 1.5}
    safe = json_safe(attributes)
    assert safe == attributes
    assert safe is not attributes
    reasons = {"gen_ai.response.finish_reasons": ["stop"], "n": 1}
    safe = json_safe(reasons)
    assert safe == reasons and safe["gen_ai.response.finish_reasons"] is not reasons[
        "gen_ai.response.finish_reasons"]
    assert json_safe({"a": [1, math.nan]}) == {"a": [1, "NaN"]}


def test_dates_times_and_durations():
    moment = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.UTC)
    assert json_safe(moment) == "2024-05-06T07:08:09.123456+00:00"
    assert json_safe(datetime.date(2024, 5, 6)) == "2024-05-06"
    assert json_safe(datetime.time(7, 8)) == "07:08:00"
    assert json_safe(datetime.timedelta(minutes=1, milliseconds=500)) == 60.5


def test_paths_uuids_and_decimals_become_strings():
    assert json_safe(Path("/tmp/x.txt")) == "/tmp/x.txt"
    assert json_safe(PurePosixPath("a/b")) == "a/b"
    assert json_safe(uuid.UUID(int=1)) == "00000000-0000-0000-0000-000000000001"
    assert json_safe(decimal.Decimal("1.10")) == "1.10"
    assert json_safe(decimal.Decimal("NaN")) == "NaN"


def test_enums_become_their_values_made_safe():
    assert json_safe(Color.RED) == "red"
    assert json_safe(Color.PAIR) == [1, 2]
    assert json_safe(Color.WHEN) == "2024-05-06"
    assert json_safe(Level.LOW) == 1 and type(json_safe(Level.LOW)) is int
    assert json_safe(Mode.FAST) == "fast" and type(json_safe(Mode.FAST)) is str
    assert json_safe({"kind": events.Kind.TOOL_CALL}) == {"kind": "tool_call"}


def test_sets_become_sorted_lists_deterministically():
    assert json_safe({3, 1, 2}) == [1, 2, 3]
    assert json_safe(frozenset({"b", "a"})) == ["a", "b"]
    mixed = {"a", 2, None, (1, "x"), b"z", 1.5}
    assert json_safe(mixed) == [None, 1.5, 2, "a", [1, "x"],
                                {"$bytes": 1, "sha256": hashlib.sha256(b"z").hexdigest()}]
    # The order does not depend on the set's iteration order.
    assert json_safe(set(reversed(list(mixed)))) == json_safe(mixed)
    assert json_safe({1: 0, 2: 0}.keys()) == [1, 2]


def test_tuples_and_other_sequences_become_lists():
    assert json_safe((1, (2, 3))) == [1, [2, 3]]
    assert json_safe(collections.deque([1, 2])) == [1, 2]
    assert json_safe({"a": 1}.values()) == [1]
    point = collections.namedtuple("point", "x y")(1, 2)
    assert json_safe(point) == [1, 2]


def test_pydantic_models_are_dumped_and_made_safe():
    model = Model(a=Model(a=datetime.date(2024, 1, 2), b={1, 2}), b=b"xy")
    assert json_safe(model) == {
        "a": {"a": "2024-01-02", "b": [1, 2]},
        "b": {"$bytes": 2, "sha256": hashlib.sha256(b"xy").hexdigest()}}


def test_dataclass_instances_become_their_fields_but_classes_do_not():
    assert json_safe(Point(Path("p"), (1, 2))) == {"x": "p", "y": [1, 2]}
    assert json_safe(Frozen(float("inf"))) == {"x": "Infinity"}
    encoded = json_safe(Point)
    assert set(encoded) == {"$repr", "type"}
    assert encoded["type"] == "type"


def test_non_string_keys_are_converted_and_collisions_are_suffixed():
    assert json_safe({1: "a", None: "b", (1, 2): "c", Mode.FAST: "d"}) == {
        "1": "a", "None": "b", "(1, 2)": "c", "fast": "d"}
    # The key that was already a string keeps its name, whatever the order.
    assert json_safe({1: "int", "1": "str"}) == {"1 (2)": "int", "1": "str"}
    assert json_safe({"1": "str", 1: "int"}) == {"1": "str", "1 (2)": "int"}
    assert json_safe({1: "a", 1.0 + 1e-15: "b", "1 (2)": "c", "1": "d"}) == {
        "1 (3)": "a", "1.000000000000001": "b", "1 (2)": "c", "1": "d"}
    # Keys are never summarized, only truncated.
    assert json_safe({"k" * 50: 1, "k" * 51: 2}, max_text=10) == {"k" * 10: 1,
                                                                  "kkkkkk (2)": 2}


def test_exceptions_become_errors_even_when_str_raises():
    assert json_safe(ValueError("bad value")) == {"$error": "ValueError", "message": "bad value"}
    assert json_safe(KeyboardInterrupt()) == {"$error": "KeyboardInterrupt", "message": ""}
    assert json_safe(BadStr("why")) == {
        "$error": f"{__name__}.BadStr", "message": "why"}
    assert json_safe(BadStr()) == {
        "$error": f"{__name__}.BadStr",
        "message": f"<unprintable {__name__}.BadStr>"}


def test_bytes_become_a_length_and_a_hash_never_the_bytes():
    data = b"secret file contents\n" * 10
    expected = {"$bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert json_safe(data) == expected
    assert json_safe(bytearray(data)) == expected
    assert json_safe(memoryview(data)) == expected
    assert json_safe(memoryview(data)[::2]) == {
        "$bytes": len(data[::2]), "sha256": hashlib.sha256(data[::2]).hexdigest()}
    assert "secret" not in dumps([data, bytearray(data)])


def test_non_finite_floats_become_strings_and_huge_ints_stay_ints():
    assert json_safe([math.nan, math.inf, -math.inf, 1.5, -0.0]) == [
        "NaN", "Infinity", "-Infinity", 1.5, -0.0]
    assert json_safe(10**400) == 10**400
    assert json.loads(dumps(-(10**400))) == -(10**400)
    # Too long to print at all (sys.get_int_max_str_digits): a bit length and the hex digits.
    huge = json_safe(10**5000, max_text=20)
    assert huge["$bigint"] == (10**5000).bit_length()
    assert huge["hex"]["$text"] == len(hex(10**5000))
    json.loads(dumps(10**5000))


def test_lone_surrogates_are_replaced():
    assert json_safe("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert json_safe({"\udc80key": "\ud83d\ude00"}) == {"\ufffdkey": "\ufffd\ufffd"}
    dumps("\ud800" * 5000).encode("utf-8")


def test_long_strings_are_summarized_and_kept_in_blobs():
    text = "x" * 1000 + "\ud800" + "é"
    safe_text = "x" * 1000 + "\ufffd" + "é"
    blobs: dict[str, str] = {}
    assert json_safe(text, max_text=100, blobs=blobs) == {"$text": 1002, "sha256": sha(safe_text)}
    assert blobs == {sha(safe_text): safe_text}
    # Not even the first characters are kept.
    assert json_safe("abcdef", max_text=3) == {"$text": 6, "sha256": sha("abcdef")}
    assert json_safe("abc", max_text=3) == "abc"


def test_deep_nesting_is_cut():
    nested: Any = "leaf"
    for _ in range(10_000):
        nested = [nested]
    encoded = json_safe(nested)
    depth = 0
    while isinstance(encoded, list):
        [encoded] = encoded
        depth += 1
    assert depth == MAX_DEPTH
    assert encoded == {"$depth": MAX_DEPTH, "type": "list"}
    deep_dict: Any = {}
    for _ in range(5_000):
        deep_dict = {"d": deep_dict}
    json.loads(dumps(deep_dict))


def test_anything_else_is_its_repr():
    assert json_safe(complex(1, 2)) == {"$repr": "(1+2j)", "type": "complex"}
    encoded = json_safe(BadRepr())
    assert encoded["type"] == f"{__name__}.BadRepr"
    assert encoded["$repr"].startswith(f"<{__name__}.BadRepr object at ")
    assert json_safe(object(), max_text=5)["$repr"]["$text"] > 5


def test_generators_and_iterators_are_not_consumed():
    generator = (i for i in range(3))
    iterator = iter([1, 2, 3])
    assert json_safe(generator)["type"] == "generator"
    assert json_safe({"it": iterator})["it"]["type"] == "list_iterator"
    assert list(generator) == [0, 1, 2]
    assert list(iterator) == [1, 2, 3]


def test_an_invalid_max_text_counts_as_the_default():
    assert json_safe("x" * 1000, max_text=-1) == "x" * 1000  # type: ignore[arg-type]
    assert json_safe("x" * 1000, max_text="10") == "x" * 1000  # type: ignore[arg-type]


def test_dumps_is_compact_and_never_raises():
    assert dumps({"a": [1, "é"], "b": math.nan}) == '{"a":[1,"é"],"b":"NaN"}'

    class Hostile(dict):
        def items(self):
            raise RuntimeError("no items")

        def __repr__(self):
            raise RuntimeError("no repr")

    assert json.loads(dumps(Hostile(a=1)))["$repr"].startswith("<")


# ---------------------------------------------------------------------------------------------
# Cycles


def test_cycles_are_marked_where_they_recur():
    items: list[Any] = [1]
    items.append(items)
    assert json_safe(items) == [1, {"$cycle": "list"}]

    mapping: dict[str, Any] = {"name": "root"}
    mapping["child"] = {"parent": mapping}
    assert json_safe(mapping) == {"name": "root", "child": {"parent": {"$cycle": "dict"}}}

    a: list[Any] = []
    b: dict[str, Any] = {"a": a}
    a.append(b)
    assert json_safe(a) == [{"a": {"$cycle": "list"}}]
    assert json_safe(b) == {"a": [{"$cycle": "dict"}]}

    point = Point(1)
    point.y = [point]
    assert json_safe(point) == {"x": 1, "y": [{"$cycle": f"{__name__}.Point"}]}

    model = Model(a=1)
    model.b = [model]
    # pydantic's own dump may expand the model once more before it gives the model back.
    assert f'{{"$cycle":"{__name__}.Model"}}' in dumps(model)


def test_shared_references_are_encoded_each_time():
    shared = [1, {"k": "v"}]
    assert json_safe([shared, shared, {"again": shared}]) == [
        [1, {"k": "v"}], [1, {"k": "v"}], {"again": [1, {"k": "v"}]}]


# ---------------------------------------------------------------------------------------------
# Content


DOCUMENT = "".join(f"line {n}: some file content that must not be traced\n" for n in range(200))


def test_a_document_is_never_traced_whole():
    value = {"path": "notes.md", "content": DOCUMENT, "again": [DOCUMENT]}
    out = dumps(value)
    assert DOCUMENT not in out
    assert "line 0" not in out  # not even its first line
    assert json.loads(out)["content"] == {"$text": len(DOCUMENT), "sha256": sha(DOCUMENT)}

    blobs: dict[str, str] = {}
    with_blobs = dumps(value, blobs=blobs)
    assert with_blobs == out
    assert blobs == {sha(DOCUMENT): DOCUMENT}


def test_encode_event_makes_an_event_safe():
    blobs: dict[str, str] = {}
    event = TraceEvent(events.Kind.TOOL_CALL, "execute_tool \ud800read", math.nan, 42,  # type: ignore[arg-type]
                       "s" * 2000,
                       {"orion.tool.arguments": {"path": Path("a"), "content": DOCUMENT},
                        7: {1, 2}},
                       math.inf)
    safe = encode_event(event, blobs=blobs)
    assert safe is not event and type(safe) is TraceEvent
    assert type(safe.kind) is str and safe.kind == "tool_call"
    assert safe.name == "execute_tool \ufffdread"
    assert safe.conversation_id == "42" and safe.session_id == "s" * 1024
    assert safe.at_ms == 0.0 and safe.duration_ms == 0.0
    assert safe.attributes == {
        "orion.tool.arguments": {"path": "a", "content": {
            "$text": len(DOCUMENT), "sha256": sha(DOCUMENT)}},
        "7": [1, 2]}
    assert blobs == {sha(DOCUMENT): DOCUMENT}
    json.dumps(safe.as_dict(), allow_nan=False).encode("utf-8")

    plain = events.model_request(
        "m", 1, type("F", (), {"raw": "stop", "reason": "stop"})(), None, at_ms=1.0,
        duration_ms=2.0, conversation_id="c")
    assert encode_event(plain) == dataclasses.replace(plain, kind="model_request")


def test_encode_event_wraps_attributes_that_are_not_a_mapping():
    event = TraceEvent("k", "n", 1.0, attributes=[1, 2])  # type: ignore[arg-type]
    assert encode_event(event).attributes == {"orion.attributes": [1, 2]}


# ---------------------------------------------------------------------------------------------
# Property: any nested value encodes to plain, bounded, round-tripping JSON


TEXT = st.text(st.characters(exclude_categories=()), max_size=120)  # surrogates included
SCALARS = (st.none() | st.booleans() | st.integers() | st.floats() | TEXT | st.binary(max_size=20)
           | st.datetimes() | st.dates() | st.times() | st.timedeltas()
           | st.builds(Path, TEXT.filter(lambda s: "\x00" not in s))
           | st.sampled_from([*Color, *Level, *Mode]) | st.uuids()
           | st.decimals(allow_nan=True, allow_infinity=True)
           | st.builds(ValueError, TEXT) | st.builds(BadStr) | st.builds(BadRepr)
           | st.integers(min_value=10**4400, max_value=10**4500))
HASHABLES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT | st.binary(max_size=5)
    | st.dates() | st.sampled_from([*Color, *Level, *Mode]),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3)
    | st.builds(Frozen, inner),
    max_leaves=5)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (st.lists(children, max_size=4) | st.lists(children, max_size=4).map(tuple)
            | st.dictionaries(TEXT, children, max_size=4)
            | st.dictionaries(HASHABLES, children, max_size=4)
            | st.sets(HASHABLES, max_size=4) | st.frozensets(HASHABLES, max_size=4)
            | st.builds(Point, children, children) | st.builds(Model, a=children, b=children))


VALUES = st.recursive(SCALARS, _extend, max_leaves=20)
FLOAT_TOKENS = {"NaN", "Infinity", "-Infinity"}
SHA256 = re.compile("[0-9a-f]{64}")
#: Keys are at most max(max_text, KEY_BOUND) characters: a suffixed key " (N)" may be longer
#: than a tiny max_text.
KEY_BOUND = 12


def check_plain(value: Any, max_text: int, key: str | None = None) -> None:
    """``value`` is plain JSON data: exact dict/list/str/int/float/bool/None types, str keys,
    finite floats, strings that encode to UTF-8. Every string value is at most ``max_text``
    characters, except a sha256 hex digest under a "sha256" key and the three float tokens;
    every key is at most ``max(max_text, KEY_BOUND)`` characters."""
    t = type(value)
    if t is dict:
        for k, v in value.items():
            assert type(k) is str
            k.encode("utf-8")
            assert len(k) <= max(max_text, KEY_BOUND)
            check_plain(v, max_text, k)
    elif t is list:
        for item in value:
            check_plain(item, max_text)
    elif t is str:
        value.encode("utf-8")
        assert (len(value) <= max_text or value in FLOAT_TOKENS
                or (key == "sha256" and SHA256.fullmatch(value))), (key, value)
    elif t is float:
        assert math.isfinite(value)
    else:
        assert value is None or t is bool or t is int, value


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=VALUES, max_text=st.sampled_from([0, 5, 64, 100, 1024]))
def test_any_value_encodes_to_plain_bounded_json(value, max_text):
    blobs: dict[str, str] = {}
    safe = json_safe(value, max_text=max_text, blobs=blobs)
    check_plain(safe, max_text)
    text = json.dumps(safe, allow_nan=False)
    assert json.loads(text) == safe
    compact = dumps(value, max_text=max_text)
    assert compact == json.dumps(safe, ensure_ascii=False, allow_nan=False,
                                 separators=(",", ":"))
    compact.encode("utf-8")
    assert json_safe(value, max_text=max_text) == safe  # deterministic
    for digest, full in blobs.items():
        assert len(full) > max_text and sha(full) == digest
    if max_text >= 64:  # idempotent once sha256 digests fit
        assert json_safe(safe, max_text=max_text) == safe


_plain_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                           st.floats(allow_nan=True, allow_infinity=True),
                           st.text(max_size=20), st.text(alphabet="abc", max_size=1100))
_plain_values = st.recursive(
    st.one_of(_plain_scalars, st.lists(_plain_scalars, max_size=3)),
    lambda inner: st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@pytest.mark.slow
@given(st.dictionaries(st.text(max_size=8), _plain_values, max_size=6))
def test_the_fast_path_for_nested_attributes_encodes_as_the_encoder_does(value):
    # Trace attributes are usually small dicts of scalars with a nested dict or two (a tool
    # call's arguments, a payload): the fast path must give exactly the encoder's result.
    from orion.trace.encoding import MAX_TEXT, _Encoder

    assert json_safe(value) == _Encoder(MAX_TEXT, None).enc(value, 0)
