"""Scripted conversations: the YAML format, its loader and the cursor that plays it.

A script is a list of entries, each a mapping with exactly one key::

    conversation:
      - user: "/plan on"            # the runner sends a user line
      - model: {text: "Hello"}      # the reply to the next model request
      - expect: "continue"          # the next model request's newest Orion message has this
      - wait_ms: 2500               # the runner lets (virtual) time pass

The runner (``user``, ``wait_ms``) and the scripted model (``expect``, ``model``) consume the
same :class:`ScriptCursor`, in order, so the script reads as the conversation happened.
docs/scripts.md documents the format in full.
"""

from __future__ import annotations

import codecs
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from orion.errors import ConfigError, Diagnostic
from orion.models.base import ScriptError
from orion.config.sourcefile import SCRIPT_LIMIT, NotReadable, open_regular
from orion.config.yamlsource import Loc, SourceDocument, YamlSourceError, load_yaml

#: The keys of a conversation entry; every entry has exactly one of them.
ENTRY_KEYS = ("user", "model", "expect", "wait_ms")
#: The top-level keys of a script file.
SCRIPT_KEYS = ("conversation", "description", "settings", "files")
DEFAULT_CHUNK_SIZE = 16


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


# -- the reply of a model entry ----------------------------------------------------------------


class ScriptToolCall(_Strict):
    """One tool call of a scripted reply."""

    name: str = Field(min_length=1)
    #: A mapping (sent as ``json.dumps(arguments)``) or a string, sent verbatim: it may be
    #: invalid or truncated JSON, to test how the runtime copes.
    arguments: Any = Field(default_factory=dict)
    #: Default: ``call_<request number>_<n>``, n counting the calls of this reply from 1.
    id: str | None = Field(default=None, min_length=1)

    @field_validator("arguments", mode="before")
    @classmethod
    def _mapping_or_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            return value
        if not isinstance(value, dict):
            raise PydanticCustomError(
                "script_arguments",
                "must be a mapping (sent as JSON) or a string (sent verbatim), not {kind}", {"kind": _kind(value)})
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise PydanticCustomError(
                "script_arguments",
                "cannot be sent as JSON ({reason}); quote the value, or write the arguments "
                "as a string", {"reason": str(exc)}) from None
        return value

    def arguments_text(self) -> str:
        """The ``arguments`` string the model sends."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


class ScriptUsage(_Strict):
    prompt_tokens: int = Field(0, ge=0)
    completion_tokens: int = Field(0, ge=0)
    #: Default: ``prompt_tokens + completion_tokens``.
    total_tokens: int | None = Field(default=None, ge=0)

    @property
    def total(self) -> int:
        if self.total_tokens is not None:
            return self.total_tokens
        return self.prompt_tokens + self.completion_tokens


class ModelReply(_Strict):
    """What a ``model`` entry streams: reasoning, text (or explicit chunks), tool calls, usage
    and a finish reason, in that order."""

    text: str | None = None
    #: A UTF-8 file whose content is the text, streamed ``chunk_size`` characters at a time as
    #: it is read (a block at a time, never held whole); relative to the script's directory.
    #: The loader checks it and stores its absolute path.
    text_file: str | None = Field(default=None, min_length=1)
    chunks: list[str] | None = None
    chunk_size: int = Field(DEFAULT_CHUNK_SIZE, ge=1)
    chunk_delay_ms: float = Field(0, ge=0, allow_inf_nan=False)
    reasoning: str | None = None
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    usage: ScriptUsage | None = None
    #: Any string; unknown reasons pass through and the runtime treats them as truncation.
    #: ``null`` is a stream that ended without a reason. Default: ``tool_calls`` when there are
    #: tool calls, else ``stop`` (see :meth:`raw_finish_reason`).
    finish_reason: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ModelReply:
        fields = self.model_fields_set
        given = [key for key in ("text", "text_file", "chunks") if getattr(self, key) is not None]
        if len(given) > 1:
            raise PydanticCustomError(
                "script_conflict", "{given} are mutually exclusive; give one of them",
                {"key": given[1], "given": " and ".join(given)})
        if self.chunks is not None and "chunk_size" in fields:
            raise PydanticCustomError(
                "script_conflict", "chunk_size applies to text (and reasoning), not to explicit "
                "chunks", {"key": "chunk_size"})
        if self.chunks == []:
            raise PydanticCustomError(
                "script_conflict", "chunks is empty; give at least one chunk or leave it out",
                {"key": "chunks"})
        if not given and not self.tool_calls:
            raise PydanticCustomError(
                "script_conflict", "a model reply needs at least one of text, text_file, "
                "chunks or tool_calls", {})
        return self

    def raw_finish_reason(self) -> str | None:
        """The finish reason as the provider would send it (before normalization)."""
        if "finish_reason" in self.model_fields_set:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"

    def text_chunks(self) -> Iterator[str]:
        """The text deltas, in order: the explicit chunks, or the text cut every
        ``chunk_size`` characters (code points), one at a time as they are streamed (a reply
        can be megabytes)."""
        if self.chunks is not None:
            return iter(self.chunks)
        if self.text_file is not None:
            return read_chunks(Path(self.text_file), self.chunk_size)
        return split_chunks(self.text or "", self.chunk_size)

    def reasoning_chunks(self) -> Iterator[str]:
        return split_chunks(self.reasoning or "", self.chunk_size)


#: How much of a text file is checked at a time.
_CHECK_BLOCK = 1 << 20


def _unreadable_text(path: Path) -> str | None:
    """Why ``path`` cannot be a reply's text (it cannot be read, or is not UTF-8), or None.
    Read in blocks: a large file is not held whole."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, line = 0, 1
    try:
        with open_regular(path) as handle:
            while block := handle.read(_CHECK_BLOCK):
                pending = len(decoder.getstate()[0])  # the start of a character cut by a block
                try:
                    decoder.decode(block)
                except UnicodeDecodeError as exc:
                    seen = exc.object  # the pending bytes, then the block
                    line += seen.count(b"\n", 0, exc.start)
                    return (f"not valid UTF-8: byte 0x{seen[exc.start]:02x} at offset "
                            f"{offset - pending + exc.start} (line {line}); save the file as "
                            "UTF-8")
                offset += len(block)
                line += block.count(b"\n")
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return "not valid UTF-8: the file ends in the middle of a character"
    except NotReadable as exc:
        return str(exc)
    except OSError as exc:
        return f"cannot read it: {exc.strerror or type(exc).__name__}"
    return None


#: About how many characters of a ``text_file`` are read at a time (a whole number of chunks).
_READ_BLOCK = 1 << 16


def read_chunks(path: Path, size: int) -> Iterator[str]:
    """The text of the UTF-8 file ``path``, ``size`` characters at a time, as it is read (line
    breaks as they are in the file). Read a block of whole chunks at a time: a read costs
    more than the 16 characters a chunk holds."""
    block = size * max(1, _READ_BLOCK // size)
    with io.TextIOWrapper(open_regular(path), encoding="utf-8", newline="") as handle:
        while text := handle.read(block):  # ``block`` characters unless the file ends
            if len(text) <= size:
                yield text
                continue
            for start in range(0, len(text), size):
                yield text[start:start + size]


def split_chunks(text: str, size: int) -> Iterator[str]:
    """``text`` cut every ``size`` characters, a chunk at a time; none for the empty string."""
    if size < 1:
        raise ValueError(f"chunk size must be at least 1, not {size}")
    return (text[i:i + size] for i in range(0, len(text), size))


# -- entries ---------------------------------------------------------------------------------


class _Entry(_Strict):
    #: The entry's key in the script (``user``, ``model``, ``expect`` or ``wait_ms``).
    kind: ClassVar[str]
    #: 1-based position in the conversation, and the line it starts on (0 when unknown).
    index: int = 0
    line: int = 0

    @property
    def where(self) -> str:
        """``entry 7 (line 23)``, as errors name an entry."""
        if self.line:
            return f"entry {self.index} (line {self.line})"
        return f"entry {self.index}"


class UserEntry(_Entry):
    """A line the user types: a message or a slash command. Driven by the runner."""

    kind: ClassVar[str] = "user"
    user: str


class ModelEntry(_Entry):
    """The reply to the next model request. Consumed by the scripted model."""

    kind: ClassVar[str] = "model"
    model: ModelReply


class ExpectEntry(_Entry):
    """The next model request's newest Orion message must contain ``expect``
    (case-insensitively). Consumed by the scripted model."""

    kind: ClassVar[str] = "expect"
    expect: str = Field(min_length=1)


class WaitEntry(_Entry):
    """Let this much (virtual) time pass. Driven by the runner."""

    kind: ClassVar[str] = "wait_ms"
    wait_ms: float = Field(ge=0, allow_inf_nan=False)


Entry = UserEntry | ModelEntry | ExpectEntry | WaitEntry
ENTRY_TYPES: dict[str, type[Entry]] = {
    "user": UserEntry, "model": ModelEntry, "expect": ExpectEntry, "wait_ms": WaitEntry,
}


# -- the script ------------------------------------------------------------------------------


class Script(BaseModel):
    """A loaded script. ``entries`` is the ``conversation`` list, in order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    entries: tuple[Entry, ...]
    description: str | None = None
    #: statechart name -> setting overrides, applied like orion.yaml's ``settings``.
    settings: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: workspace-relative path -> initial text, written before the run.
    files: dict[str, str] = Field(default_factory=dict)
    #: The file the script was read from (``None`` when built in code).
    source: str | None = None

    def cursor(self) -> ScriptCursor:
        """A fresh cursor at the first entry."""
        return ScriptCursor(self)

    def __len__(self) -> int:
        return len(self.entries)


class ScriptCursor:
    """The one position in a script that the runner and the scripted model share.

    The runner consumes ``user`` and ``wait_ms`` entries, the model consumes ``expect`` and
    ``model`` entries; both look at :meth:`peek` to see whose turn it is.
    """

    def __init__(self, script: Script):
        self.script = script
        self._position = 0

    @property
    def position(self) -> int:
        """How many entries have been consumed: the 0-based index of the next entry."""
        return self._position

    @property
    def done(self) -> bool:
        return self._position >= len(self.script.entries)

    @property
    def remaining(self) -> tuple[Entry, ...]:
        return self.script.entries[self._position:]

    @property
    def consumed(self) -> tuple[Entry, ...]:
        return self.script.entries[:self._position]

    def peek(self) -> Entry | None:
        """The next entry, without consuming it; ``None`` at the end."""
        if self.done:
            return None
        return self.script.entries[self._position]

    def next(self) -> Entry:
        """Consume and return the next entry; :class:`ScriptError` at the end."""
        entry = self.peek()
        if entry is None:
            count = len(self.script.entries)
            raise ScriptError(f"the script has no entries left (all {count} were used)")
        self._position += 1
        return entry

    def __iter__(self) -> Iterator[Entry]:
        """Consume entries one by one (lazily, so another consumer may take some between)."""
        while not self.done:
            yield self.next()

    def __repr__(self) -> str:
        return (f"<ScriptCursor {self._position}/{len(self.script.entries)} "
                f"of {self.script.source or 'a script'}>")


# -- loading ---------------------------------------------------------------------------------


def load_script(path: str | Path, *, text: str | None = None) -> Script:
    """Read and check a script (from ``text`` if given, reported as ``path``). Every problem is
    reported at once, as ``path:line:col: message`` lines of one :class:`ConfigError`."""
    try:
        doc = load_yaml(path, text=text, limit=SCRIPT_LIMIT)
    except YamlSourceError as exc:
        raise ConfigError("\n".join(map(str, exc.diagnostics))) from exc
    return _Loader(doc).load()


class _Loader:
    def __init__(self, doc: SourceDocument):
        self.doc = doc
        self.problems: list[Diagnostic] = []

    def problem(self, loc: Loc, message: str, *, key: bool = False) -> None:
        self.problems.append(self.doc.diagnostic(loc, message, key=key))

    def load(self) -> Script:
        data = self.doc.data
        if not isinstance(data, dict):
            self.problem((), f"a script is a mapping with a 'conversation' list, not {_kind(data)}")
            self.fail()
        for key in data:
            if key not in SCRIPT_KEYS:
                self.problem((key,), f"unknown top-level key {key!r} (a script has: "
                                     f"{', '.join(SCRIPT_KEYS)})", key=True)
        self.surrogates(data, ())
        description = self.description(data.get("description"))
        settings = self.settings(data.get("settings"))
        files = self.files(data.get("files"))
        entries: list[Entry] = []
        if "conversation" not in data:
            self.problem((), "the script has no 'conversation' list")
        elif not isinstance(data["conversation"], list):
            self.problem(("conversation",), "conversation must be a list of entries, not "
                                            f"{_kind(data['conversation'])}")
        elif not data["conversation"]:
            self.problem(("conversation",), "conversation is empty; a script needs at least "
                                            "one entry")
        else:
            for i, item in enumerate(data["conversation"]):
                entry = self.entry(i, item)
                if entry is not None:
                    entries.append(entry)
        if self.problems:
            self.fail()
        return Script(entries=tuple(entries), description=description, settings=settings,
                      files=files, source=self.doc.path)

    def fail(self) -> None:
        problems = sorted(self.problems, key=lambda d: (d.line, d.column))
        raise ConfigError("\n".join(map(str, problems)))

    def surrogates(self, value: Any, loc: Loc) -> None:
        """Strings with lone surrogates cannot be sent as UTF-8. YAML does not join escaped
        pairs such as ``"\\ud83d\\udc4b"`` (as JSON does), so name the right escape."""
        if isinstance(value, dict):
            for key, item in value.items():
                self.surrogates(item, (*loc, key))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self.surrogates(item, (*loc, i))
        elif isinstance(value, str) and _SURROGATE.search(value):
            pair = _SURROGATE_PAIR.search(value)
            if pair:
                char = pair.group().encode("utf-16", "surrogatepass").decode("utf-16")
                hint = (f"write the character itself, or \\U{ord(char):08X} instead of "
                        f"\\u{ord(pair.group()[0]):04x}\\u{ord(pair.group()[1]):04x}")
            else:
                hint = "write the character itself, or a \\UXXXXXXXX escape"
            where = _dotted(loc)
            if len(loc) >= 2 and loc[0] == "conversation" and isinstance(loc[1], int):
                where = f"entry {loc[1] + 1}: {_dotted(loc[2:])}"
            self.problem(loc, f"{where}: contains a UTF-16 surrogate, which cannot be "
                              f"sent as text (YAML does not join \\u escape pairs); {hint}")

    # top-level parts

    def description(self, value: Any) -> str | None:
        if value is not None and not isinstance(value, str):
            self.problem(("description",), f"description must be text, not {_kind(value)}")
            return None
        return value

    def settings(self, value: Any) -> dict[str, dict[str, Any]]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(("settings",), "settings must map statechart names to setting "
                                        f"overrides, not {_kind(value)}")
            return {}
        result = {}
        for name, overrides in value.items():
            if not isinstance(overrides, dict):
                self.problem(("settings", name), f"settings.{name} must map setting names to "
                                                 f"values, not {_kind(overrides)}")
                continue
            result[name] = dict(overrides)
        return result

    def files(self, value: Any) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(("files",), "files must map workspace-relative paths to their text, "
                                     f"not {_kind(value)}")
            return {}
        result = {}
        for name, content in value.items():
            reason = _bad_relative_path(name)
            if reason:
                self.problem(("files", name), f"files: {name!r} {reason}", key=True)
            if not isinstance(content, str):
                self.problem(("files", name), f"files.{name} must be text (use a quoted or "
                                              f"block string), not {_kind(content)}")
                continue
            result[name] = content
        return result

    # entries

    def entry(self, i: int, item: Any) -> Entry | None:
        loc: Loc = ("conversation", i)
        index = i + 1
        line = self.doc.position(loc)[0]
        label = f"entry {index}"
        if not isinstance(item, dict) or not item:
            what = "an empty mapping" if item == {} else _kind(item)
            hint = " (for a user line write '- user: ...')" if isinstance(item, str) else ""
            self.problem(loc, f"{label}: an entry is a mapping with one of "
                              f"{', '.join(ENTRY_KEYS)}, not {what}{hint}")
            return None
        keys = [k for k in item if k in ENTRY_KEYS]
        if not self.keys_ok(loc, label, item, keys) or not keys:
            return None
        (kind,) = keys
        value = item[kind]
        if kind == "model" and value is None:
            self.problem((*loc, kind), f"{label}: model needs a mapping with text, "
                                       "text_file, chunks or tool_calls", key=True)
            return None
        cls = ENTRY_TYPES[kind]
        try:
            entry = cls.model_validate({kind: value, "index": index, "line": line})
        except ValidationError as exc:
            for error in exc.errors():
                self.validation_problem(loc, label, error)
            return None
        if isinstance(entry, ModelEntry) and entry.model.text_file is not None:
            return self.text_file(loc, label, entry)
        return entry

    def keys_ok(self, loc: Loc, label: str, item: dict[str, Any], keys: list[str]) -> bool:
        """Whether the entry ``item`` has no key but its one kind (``keys``: those of its keys
        that name a kind); each other key is reported."""
        ok = True
        if len(keys) > 1:
            ok = False
            for extra in keys[1:]:
                self.problem((*loc, extra), f"{label}: has both {keys[0]!r} and {extra!r}; an "
                                            "entry has exactly one key, so put each in its own "
                                            "list item ('- ')", key=True)
        for key in item:
            if key in ENTRY_KEYS:
                continue
            ok = False
            if keys == ["model"] and key in ModelReply.model_fields:
                hint = "; indent it under 'model:' (it is a key of the reply)"
            else:
                hint = f" (an entry has exactly one of: {', '.join(ENTRY_KEYS)})"
            self.problem((*loc, key), f"{label}: unknown key {key!r}{hint}", key=True)
        return ok

    def text_file(self, loc: Loc, label: str, entry: ModelEntry) -> ModelEntry | None:
        """The entry with its ``text_file`` resolved (against the script's directory), once
        the file is known to be readable UTF-8: a bad one is reported with the script."""
        given = entry.model.text_file
        assert given is not None
        path = Path(self.doc.path).parent / given
        try:
            path = path.resolve()
        except RuntimeError:  # a link loop (Python 3.11's resolve raises it): read to say so
            path = Path(os.path.abspath(path))
        problem = _unreadable_text(path)
        if problem:
            self.problem((*loc, "model", "text_file"), f"{label}: model.text_file {given!r} "
                                                       f"({path}): {problem}")
            return None
        reply = entry.model.model_copy(update={"text_file": str(path)})
        return entry.model_copy(update={"model": reply})

    def validation_problem(self, loc: Loc, label: str, error: Any) -> None:
        where_loc = tuple(error["loc"])
        doc_loc = (*loc, *where_loc)
        where = _dotted(where_loc)
        kind = error["type"]
        ctx = error.get("ctx") or {}
        if kind == "extra_forbidden":
            allowed = _allowed_keys(where_loc[:-1])
            hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
            self.problem(doc_loc, f"{label}: {_dotted(where_loc[:-1])}: unknown key "
                                  f"{str(where_loc[-1])!r}{hint}", key=True)
        elif kind == "missing":
            self.problem(doc_loc[:-1], f"{label}: {_dotted(where_loc[:-1])}: "
                                       f"{str(where_loc[-1])!r} is required")
        elif kind == "script_conflict":
            key = ctx.get("key")
            if key and key in _lookup(self.doc.data, doc_loc):
                self.problem((*doc_loc, key), f"{label}: {where}: {error['msg']}", key=True)
            else:
                self.problem(doc_loc, f"{label}: {where}: {error['msg']}")
        elif kind in ("greater_than_equal", "greater_than"):
            bound = ctx.get("ge", ctx.get("gt"))
            relation = "at least" if kind == "greater_than_equal" else "more than"
            self.problem(doc_loc, f"{label}: {where} must be {relation} {_number(bound)} "
                                  f"(got {error['input']!r})")
        elif kind == "script_arguments":
            self.problem(doc_loc, f"{label}: {where} {error['msg']}")
        elif kind == "string_too_short":
            self.problem(doc_loc, f"{label}: {where} must not be empty")
        elif kind == "finite_number":
            self.problem(doc_loc, f"{label}: {where} must be a finite number "
                                  f"(got {error['input']!r})")
        elif kind.endswith("_type") or kind == "model_type":
            self.problem(doc_loc, f"{label}: {where} must be {_expected(kind)}, not "
                                  f"{_kind(error['input'])}")
        else:
            self.problem(doc_loc, f"{label}: {where}: {error['msg']}")


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


_CHILD_MODELS: dict[str, type[BaseModel]] = {
    "model": ModelReply, "tool_calls": ScriptToolCall, "usage": ScriptUsage,
}


def _allowed_keys(loc: Loc) -> list[str]:
    names = [p for p in loc if isinstance(p, str)]
    model = _CHILD_MODELS.get(names[-1]) if names else None
    return list(model.model_fields) if model else []


def _lookup(data: Any, loc: Loc) -> Any:
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return {}
    return data if isinstance(data, dict) else {}


_EXPECTED = {
    "string_type": "text", "int_type": "a whole number", "float_type": "a number",
    "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
    "bool_type": "true or false",
}


def _expected(kind: str) -> str:
    return _EXPECTED.get(kind, kind.removesuffix("_type"))


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return f"a string ({value!r})" if len(value) <= 40 else "a string"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _bad_relative_path(name: str) -> str | None:
    """Why ``name`` is not a usable workspace-relative file path (``None`` if it is)."""
    if not name.strip():
        return "is empty"
    if "\x00" in name:
        return "contains a NUL character"
    if PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute() \
            or PureWindowsPath(name).drive or name.startswith("~"):
        return "must be relative to the workspace"
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if ".." in parts:
        return "must stay inside the workspace (no '..')"
    if name.endswith(("/", "\\")):
        return "names a directory; give a file path"
    return None


__all__ = [
    "DEFAULT_CHUNK_SIZE", "ENTRY_KEYS", "Entry", "ExpectEntry", "ModelEntry", "ModelReply",
    "Script", "ScriptCursor", "ScriptToolCall", "ScriptUsage", "UserEntry", "WaitEntry",
    "load_script", "split_chunks",
]
