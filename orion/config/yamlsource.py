"""Load YAML with the position of every value, strictly.

PyYAML silently keeps the last of two duplicate keys and reads a plain ``on:`` key as the
boolean ``True`` (YAML 1.1). Both have broken real configuration files, so this loader reports
them, with the line and column, instead of guessing. Every other error also carries a position.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orion.errors import Diagnostic
from orion.config.sourcefile import CONFIG_LIMIT, NotReadable, read_regular

Loc = tuple[str | int, ...]

#: Plain scalars that YAML 1.1 resolves to booleans. As keys they are almost always a mistake.
YAML11_BOOLEANS = frozenset(
    "y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF".split()
)


class LocTree:
    """Locations as a tree, each under its parent (``("states", "a")`` under ``("states",)``):
    the locations inside one are found in time proportional to their number, not to the
    document's size."""

    __slots__ = ("children",)

    def __init__(self, locs: Iterable[Loc] = ()):
        self.children: dict[Loc, dict[Loc, None]] = {}
        for loc in locs:
            self.add(loc)

    def add(self, loc: Loc) -> None:
        while loc:
            parent = loc[:-1]
            siblings = self.children.setdefault(parent, {})
            if loc in siblings:
                return
            siblings[loc] = None
            loc = parent

    def under(self, loc: Loc) -> list[Loc]:
        """``loc`` and every location inside it, parents before children."""
        found, pending = [], [loc]
        while pending:
            here = pending.pop()
            found.append(here)
            pending.extend(reversed(self.children.get(here, ())))
        return found

    def prune(self, loc: Loc, *, keep: bool = False) -> None:
        """Forget every location inside ``loc``, and ``loc`` itself unless ``keep``."""
        for inner in self.under(loc)[1:]:
            self.children.pop(inner, None)
        self.children.pop(loc, None)
        if not keep and loc:
            self.children.get(loc[:-1], {}).pop(loc, None)


@dataclass
class SourceDocument:
    """A parsed YAML document: the plain data and where each part of it came from."""

    path: str
    data: Any
    positions: dict[Loc, tuple[int, int]] = field(default_factory=dict)
    key_positions: dict[Loc, tuple[int, int]] = field(default_factory=dict)
    #: The locations of both tables as a tree, built on first use (documents are not changed
    #: once read; a document being assembled keeps its own up to date).
    tree: LocTree | None = field(default=None, repr=False, compare=False)

    def under(self, loc: Loc) -> list[Loc]:
        """``loc`` and every location inside it that has a position (of a value or a key)."""
        if self.tree is None:
            self.tree = LocTree([*self.positions, *self.key_positions])
        return self.tree.under(tuple(loc))

    def position(self, loc: Loc, *, key: bool = False) -> tuple[int, int]:
        """Line and column (1-based) of ``loc``, or of its nearest ancestor that has one."""
        table = self.key_positions if key else self.positions
        loc = tuple(loc)
        while loc:
            if loc in table:
                return table[loc]
            if not key and loc in self.key_positions:
                return self.key_positions[loc]
            loc = loc[:-1]
        return self.positions.get((), (1, 1))

    def diagnostic(self, loc: Loc, message: str, *, key: bool = False,
                   code: str = "error") -> Diagnostic:
        line, col = self.position(loc, key=key)
        return Diagnostic(self.path, line, col, message, code)


class YamlSourceError(Exception):
    """Raised by :func:`load_yaml` with every problem found, each as a :class:`Diagnostic`."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = diagnostics
        super().__init__("\n".join(map(str, diagnostics)))


def load_yaml(source: str | Path, *, text: str | None = None,
              limit: int = CONFIG_LIMIT) -> SourceDocument:
    """Parse one YAML document from ``source`` (or from ``text``, reported as ``source``).
    ``source`` is read only when it is a regular file of at most ``limit`` bytes
    (:mod:`orion.config.sourcefile`); anything else is a :class:`YamlSourceError` at 1:1."""
    path = str(source)
    if text is None:
        raw = _read_bytes(path, limit)
        # libyaml reads UTF-8 bytes itself: a large file is not also held as a str (up to 4
        # bytes a character) and encoded back for the parser. Anything it refuses is read
        # again below, decoded first, for the messages and positions of the slower path.
        fast = _libyaml_loader(raw) if not raw.startswith(_UTF16_BOMS) else None
        if fast is not None:
            return _document(path, fast)
        text = _decode(path, raw)
        del raw
    fast = _libyaml_loader(text)
    if fast is not None:
        return _document(path, fast)
    try:
        loader = yaml.SafeLoader(text)  # the reader rejects unprintable characters here
    except yaml.reader.ReaderError as exc:
        line, col = _text_position(text, exc.position)
        message = f"malformed YAML: {exc.reason}: {_character(exc.character)}"
        raise YamlSourceError([Diagnostic(path, line, col, message)]) from exc
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise YamlSourceError([Diagnostic(path, line, col,
                                          f"malformed YAML: {_yaml_message(exc)}")]) from exc
    except yaml.YAMLError as exc:  # pragma: no cover - PyYAML marks nearly everything
        raise YamlSourceError([Diagnostic(path, 1, 1, f"malformed YAML: {exc}")]) from exc
    except RecursionError:
        # PyYAML composes nested collections recursively; report where it gave up.
        mark = loader.get_mark()
        raise YamlSourceError([Diagnostic(path, mark.line + 1, mark.column + 1,
                                          "YAML nested too deeply to read")]) from None
    finally:
        loader.dispose()
    return _document(path, loader, root)


#: Deeper nesting than this never reaches libyaml's composer, which recurses in C with no limit
#: (a few hundred thousand ``[`` end the process); the Python parser handles such text.
_LIBYAML_DEPTH = 100


#: libyaml would read UTF-16 with a byte-order mark; an Orion file is UTF-8 (see _decode).
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def _libyaml_loader(text: str | bytes) -> yaml.SafeLoader | None:
    """A loader whose single node libyaml has composed, or ``None`` when libyaml is missing,
    the text is not valid YAML, or it nests deeper than :data:`_LIBYAML_DEPTH`: the Python
    loader then parses it, with its own messages and positions. libyaml reads a large script
    or chart tens of times faster than PyYAML's Python scanner."""
    cloader = getattr(yaml, "CSafeLoader", None)
    if cloader is None:
        return None
    try:
        # The event pass keeps no state on the C stack, whatever the nesting.
        depth = 0
        starts = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
        ends = (yaml.MappingEndEvent, yaml.SequenceEndEvent)
        for event in yaml.parse(text, Loader=cloader):
            if isinstance(event, starts):
                depth += 1
                if depth > _LIBYAML_DEPTH:
                    return None
            elif isinstance(event, ends):
                depth -= 1
        loader = cloader(text)
        try:
            loader.root = loader.get_single_node()
        finally:
            loader.dispose()
        return loader
    except yaml.YAMLError:
        return None


def _document(path: str, loader: Any, root: yaml.Node | None = None) -> SourceDocument:
    if root is None:
        root = getattr(loader, "root", None)
    if root is None or _is_empty(root):
        raise YamlSourceError([Diagnostic(path, 1, 1, "the file is empty")])
    builder = _Builder(path, loader)
    try:
        data = builder.build(root, ())
    except RecursionError:
        line, col = next(reversed(builder.positions.values()), (1, 1))  # the last one reached
        raise YamlSourceError([Diagnostic(path, line, col,
                                          "YAML nested too deeply to read")]) from None
    except _AliasesExpandTooFar as exc:
        line, col = _Builder._pos(exc.node)
        raise YamlSourceError([Diagnostic(
            path, line, col, f"aliases expand this document by more than {MAX_ALIAS_VALUES:,} "
                             "values (an alias of an alias multiplies them); write the values "
                             "out or use fewer aliases")]) from None
    if builder.problems:
        raise YamlSourceError(builder.problems)
    return SourceDocument(path, data, builder.positions, builder.key_positions)


def _read_bytes(path: str, limit: int) -> bytes:
    try:
        return read_regular(path, limit)
    except NotReadable as exc:
        raise YamlSourceError([Diagnostic(path, 1, 1, f"cannot read file: it {exc}")]) from exc
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise YamlSourceError([Diagnostic(path, 1, 1, f"cannot read file: {reason}")]) from exc


def _decode(path: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Report where the bad byte is, as an editor shows it: line, and column in characters.
        before = raw[: exc.start]
        line = before.count(b"\n") + 1
        start_of_line = before.rfind(b"\n") + 1
        col = len(before[start_of_line:].decode("utf-8", errors="replace")) + 1
        raise YamlSourceError([Diagnostic(
            path, line, col, f"not valid UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
                             "(save the file as UTF-8)")]) from exc


def _text_position(text: str, index: int) -> tuple[int, int]:
    before = text[:index]
    return before.count("\n") + 1, index - (before.rfind("\n") + 1) + 1


def _character(char: object) -> str:
    if isinstance(char, str) and len(char) == 1:
        char = ord(char)
    return f"U+{char:04X}" if isinstance(char, int) else repr(char)


def _yaml_message(exc: yaml.MarkedYAMLError) -> str:
    problem, context, mark = exc.problem, exc.context, exc.context_mark
    if not problem:
        return context or "malformed YAML"
    if not context:
        return problem
    if problem.startswith("but "):  # "expected a single document in the stream, but found ..."
        return f"{context}, {problem}"
    if mark is not None and mark is not exc.problem_mark:
        return f"{problem} ({context} started at line {mark.line + 1}, column {mark.column + 1})"
    return f"{problem} ({context})"


def _is_empty(node: yaml.Node) -> bool:
    """A document with nothing in it, such as a lone ``---``."""
    # libyaml marks a plain scalar with the style "", PyYAML with None.
    return (isinstance(node, yaml.ScalarNode) and node.value == "" and not node.style
            and node.tag == "tag:yaml.org,2002:null")


_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"


#: How many values aliases may add to a document (each use of an alias builds its node again):
#: real files use a few; nested aliases of aliases grow exponentially (a 450-byte "billion
#: laughs" document would build 10**9 values).
MAX_ALIAS_VALUES = 100_000


class _AliasesExpandTooFar(Exception):
    def __init__(self, node: yaml.Node):
        self.node = node


class _Builder:
    def __init__(self, path: str, loader: yaml.SafeLoader):
        self.path = path
        self.loader = loader
        self.positions: dict[Loc, tuple[int, int]] = {}
        self.key_positions: dict[Loc, tuple[int, int]] = {}
        self.problems: list[Diagnostic] = []
        self._open: set[int] = set()  # ids of the collections being built, to catch cycles
        self._seen: set[int] = set()  # ids of the nodes built so far
        self._repeats = 0  # values built again through an alias

    @staticmethod
    def _pos(node: yaml.Node) -> tuple[int, int]:
        return node.start_mark.line + 1, node.start_mark.column + 1

    def _problem(self, node: yaml.Node, message: str) -> None:
        line, col = self._pos(node)
        self.problems.append(Diagnostic(self.path, line, col, message))

    def build(self, node: yaml.Node, loc: Loc) -> Any:
        if id(node) in self._seen:
            self._repeats += 1
            if self._repeats > MAX_ALIAS_VALUES:
                raise _AliasesExpandTooFar(node)
        else:
            self._seen.add(id(node))
        self.positions[loc] = self._pos(node)
        if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            if id(node) in self._open:
                # The alias has no position of its own; its key has, if it is a mapping value.
                line, col = self.key_positions.get(loc) or self._pos(node)
                self.problems.append(Diagnostic(
                    self.path, line, col, "an alias refers to a collection that contains it; "
                                          "recursive data is not allowed"))
                return None
            expected = _MAP_TAG if isinstance(node, yaml.MappingNode) else _SEQ_TAG
            if node.tag != expected:
                self._problem(node, f"unsupported tag {node.tag!r}")
                return None
            self._open.add(id(node))
            try:
                if isinstance(node, yaml.MappingNode):
                    return self._mapping(node, loc)
                return [self.build(item, (*loc, i)) for i, item in enumerate(node.value)]
            finally:
                self._open.discard(id(node))
        return self._construct(node)

    def _construct(self, node: yaml.Node) -> Any:
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            self._problem(node, f"invalid value: {exc.problem}")
        except (ValueError, OverflowError) as exc:  # e.g. a timestamp such as 2024-13-01
            self._problem(node, f"invalid value {node.value!r}: {exc}")
        return None

    def _mapping(self, node: yaml.MappingNode, loc: Loc) -> dict[Any, Any]:
        # Keys written in this mapping override keys merged in with ``<<`` (as YAML defines);
        # only a key written twice in the mapping itself is a duplicate.
        own = [(k, v) for k, v in node.value if k.tag != _MERGE_TAG]
        try:
            self.loader.flatten_mapping(node)
        except yaml.constructor.ConstructorError as exc:
            mark = exc.problem_mark or node.start_mark
            self.problems.append(Diagnostic(self.path, mark.line + 1, mark.column + 1,
                                            f"invalid merge: {exc.problem}"))
            return {}
        merged = node.value[: len(node.value) - len(own)]
        result: dict[Any, Any] = {}
        for key_node, value_node in merged:  # later merged mappings lose, as in PyYAML
            key = self._key(key_node)
            child = (*loc, key)
            self.key_positions[child] = self._pos(key_node)
            result[key] = self.build(value_node, child)
        first_seen: dict[Any, yaml.Node] = {}
        for key_node, value_node in own:
            key = self._key(key_node)
            if key in first_seen:
                line, _ = self._pos(first_seen[key])
                self._problem(key_node, f"duplicate key {key!r} (first defined on line {line}); "
                                        "YAML would silently keep only the last one")
                continue
            first_seen[key] = key_node
            child = (*loc, key)
            if key in result:  # overrides a merged key: forget the merged value's positions
                self._forget(child)
            self.key_positions[child] = self._pos(key_node)
            result[key] = self.build(value_node, child)
        return result

    def _forget(self, loc: Loc) -> None:
        for table in (self.positions, self.key_positions):
            for stale in [k for k in table if k[: len(loc)] == loc]:
                del table[stale]

    def _key(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            self._problem(node, "a mapping key must be a plain scalar")
            return f"<complex key at line {self._pos(node)[0]}>"
        if not node.style and node.value in YAML11_BOOLEANS:
            self._problem(node, f"key {node.value!r} is read as a boolean by YAML 1.1; "
                                f"quote it ('{node.value}') or choose another name")
            return node.value
        value = self._construct(node)
        # Keys are looked up by name everywhere else, so numbers become their text.
        return value if isinstance(value, str) else node.value
