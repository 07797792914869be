"""Load YAML with the position of every value, strictly.

PyYAML silently keeps the last of two duplicate keys and reads a plain ``on:`` key as the
boolean ``True`` (YAML 1.1). Both have broken real configuration files, so this loader reports
them, with the line and column, instead of guessing. Every other error also carries a position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orion.errors import Diagnostic

Loc = tuple[str | int, ...]

#: Plain scalars that YAML 1.1 resolves to booleans. As keys they are almost always a mistake.
YAML11_BOOLEANS = frozenset(
    "y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF".split()
)


@dataclass
class SourceDocument:
    """A parsed YAML document: the plain data and where each part of it came from."""

    path: str
    data: Any
    positions: dict[Loc, tuple[int, int]] = field(default_factory=dict)
    key_positions: dict[Loc, tuple[int, int]] = field(default_factory=dict)

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


def load_yaml(source: str | Path, *, text: str | None = None) -> SourceDocument:
    """Parse one YAML document from ``source`` (or from ``text``, reported as ``source``)."""
    path = str(source)
    if text is None:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise YamlSourceError([Diagnostic(path, 1, exc.start + 1,
                                              f"not valid UTF-8 at byte {exc.start}")]) from exc
        except OSError as exc:
            raise YamlSourceError([Diagnostic(path, 1, 1, f"cannot read file: {exc.strerror}")]) from exc
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = exc.problem or exc.context or "malformed YAML"
        raise YamlSourceError([Diagnostic(path, line, col, f"malformed YAML: {problem}")]) from exc
    except yaml.YAMLError as exc:  # pragma: no cover - PyYAML marks nearly everything
        raise YamlSourceError([Diagnostic(path, 1, 1, f"malformed YAML: {exc}")]) from exc
    finally:
        loader.dispose()
    if root is None:
        raise YamlSourceError([Diagnostic(path, 1, 1, "the file is empty")])
    builder = _Builder(path, loader)
    data = builder.build(root, ())
    if builder.problems:
        raise YamlSourceError(builder.problems)
    return SourceDocument(path, data, builder.positions, builder.key_positions)


class _Builder:
    def __init__(self, path: str, loader: yaml.SafeLoader):
        self.path = path
        self.loader = loader
        self.positions: dict[Loc, tuple[int, int]] = {}
        self.key_positions: dict[Loc, tuple[int, int]] = {}
        self.problems: list[Diagnostic] = []

    @staticmethod
    def _pos(node: yaml.Node) -> tuple[int, int]:
        return node.start_mark.line + 1, node.start_mark.column + 1

    def _problem(self, node: yaml.Node, message: str) -> None:
        line, col = self._pos(node)
        self.problems.append(Diagnostic(self.path, line, col, message))

    def build(self, node: yaml.Node, loc: Loc) -> Any:
        self.positions[loc] = self._pos(node)
        if isinstance(node, yaml.MappingNode):
            self.loader.flatten_mapping(node)
            result: dict[Any, Any] = {}
            first_seen: dict[Any, yaml.Node] = {}
            for key_node, value_node in node.value:
                key = self._key(key_node)
                if key in first_seen:
                    line, _ = self._pos(first_seen[key])
                    self._problem(key_node, f"duplicate key {key!r} (first defined on line {line}); "
                                            "YAML would silently keep only the last one")
                    continue
                first_seen[key] = key_node
                child = (*loc, key)
                self.key_positions[child] = self._pos(key_node)
                result[key] = self.build(value_node, child)
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*loc, i)) for i, item in enumerate(node.value)]
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            self._problem(node, f"invalid value: {exc.problem}")
            return None

    def _key(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            self._problem(node, "a mapping key must be a plain scalar")
            return f"<complex key at line {self._pos(node)[0]}>"
        if node.style is None and node.value in YAML11_BOOLEANS:
            self._problem(node, f"key {node.value!r} is read as a boolean by YAML 1.1; "
                                f"quote it ('{node.value}') or choose another name")
            return node.value
        value = self.loader.construct_object(node, deep=True)
        # Keys are looked up by name everywhere else, so numbers become their text.
        return value if isinstance(value, str) else node.value
