"""Migrations: a chart written for an older version of a contract, brought to the current one.

A contract's ``history`` says what each version added (:mod:`orion.statechart.model.contract`).
What a chart lacks of it, where the chart that declared it has it (a tag on the state of the
same path, a trigger's transitions between states of the same paths), is added to the chart's
own text: each tag to that state's ``tags``, each trigger's transitions as the declaring chart
writes them, placed after the transition that comes before them there, and
``contract: version:`` set to the version the chart now keeps. Everything else in the file
(comments, order, quoting, blank lines) stays as it was: the edits are made at the positions
the YAML loader gives (:mod:`orion.config.yamlsource`), never by writing the data out again, and the
result is read back and compared with what was meant before anything is written.
"""

from __future__ import annotations

import copy
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orion.errors import OrionError
from orion.statechart.io.overlay import transition_ids
from orion.statechart.model.contract import Requirement
from orion.workspace.files import write_atomically
from orion.statechart.model.schema import StatechartSpec
from orion.config.yamlsource import Loc, SourceDocument, YamlSourceError, load_yaml


class MigrationError(OrionError):
    """A chart could not be edited in place; nothing was written."""


@dataclass(frozen=True)
class Change:
    """One thing a migration adds, as the user is told it (``line`` in the original file)."""

    line: int
    what: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.what}"


@dataclass
class Migration:
    """What migrating a chart file changes: the new text, and each change."""

    path: Path
    text: str
    migrated: str
    version: int
    changes: list[Change] = field(default_factory=list)

    def write(self) -> None:
        """Replace the file with the migrated text, atomically, keeping its mode."""
        write_text(self.path, self.migrated)


@dataclass(frozen=True)
class Needed:
    """What a migration adds to one chart: the missing requirements, and the charts that
    declared them (whose states and transitions say where each goes)."""

    requirements: tuple[Requirement, ...]
    declaring: dict[str, StatechartSpec]  # by Requirement.declared_by
    version: int  # the version the chart keeps once migrated


@dataclass
class _Edit:
    start: int  # offsets in the text
    end: int
    text: str


def migrate(doc: SourceDocument, text: str, needed: Needed) -> Migration:
    """The migration of the file ``doc`` (read from ``text``): raises :class:`MigrationError`
    when the file cannot be edited in place to hold exactly what is needed."""
    editor = _Editor(doc, text)
    expected = copy.deepcopy(doc.data)
    tags: dict[Loc, list[str]] = {}
    inserts: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    settings: list[tuple[str, StatechartSpec]] = []
    for req in needed.requirements:
        if req.kind == "tag":
            tags.setdefault(_state_loc(doc, req), []).append(req.name)
        elif req.kind == "setting":
            settings.append((req.name, needed.declaring[req.declared_by]))
        else:
            inserts.setdefault(req.declared_by, []).extend(
                _handlers(needed.declaring[req.declared_by], req))
    for name, declaring in settings:
        editor.add_setting(name, declaring, expected)
    for loc, names in tags.items():
        editor.add_tags(loc, names, expected)
    for declared_by, new in inserts.items():
        editor.add_transitions(new, needed.declaring[declared_by], expected)
    editor.set_version(needed.version, expected)
    migrated = editor.apply()
    _verify(doc, migrated, expected)
    return Migration(Path(doc.path), text, migrated, needed.version, sorted(
        editor.changes, key=lambda c: c.line))


def write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    """``text`` as the whole of ``path``, atomically, with its mode (or ``mode`` when it does
    not exist yet): the file is the old text or the new, never half of each."""
    mode = path.stat().st_mode if path.exists() else mode
    write_atomically(path, text.encode("utf-8"), mode=None if mode is None else mode & 0o7777)


def _state_loc(doc: SourceDocument, req: Requirement) -> Loc:
    """Where the state that gets the tag is in ``doc``: the first of the declaring chart's
    carriers that the chart has, by path."""
    for path in req.carriers:
        loc: Loc = ()
        for name in path.split("."):
            loc = (*loc, "states", name)
        if loc in doc.positions:
            return loc
    raise MigrationError(f"{doc.path}: no state to carry tag {req.name!r}")


def _handlers(declaring: StatechartSpec, req: Requirement) -> list[tuple[int, dict[str, Any]]]:
    """The declaring chart's transitions of ``req``'s trigger, as it writes them (without the
    defaults it leaves out), each with its index there."""
    from orion.statechart.model.events import answers, descriptors

    found = []
    for j, t in enumerate(declaring.transitions):
        if answers(frozenset(descriptors(t.trigger)), req.name):
            data = t.model_dump(mode="json", exclude_defaults=True)
            order = ("id", "trigger", "description", "source", "dest", "type", "guards",
                     "unless", "actions")
            data = {k: data[k] for k in order if k in data}
            if isinstance(data.get("source"), list) and len(data["source"]) == 1:
                data["source"] = data["source"][0]
            for key in ("guards", "unless", "actions"):
                if isinstance(data.get(key), list) and len(data[key]) == 1:
                    data[key] = data[key][0]
            found.append((j, data))
    return found


def _verify(doc: SourceDocument, migrated: str, expected: Any) -> None:
    try:
        again = load_yaml(doc.path, text=migrated)
    except YamlSourceError as exc:
        raise MigrationError(f"{doc.path}: the file could not be edited in place (the edit "
                             f"would not be YAML: {exc.diagnostics[0].message}); nothing was "
                             "written") from None
    if again.data != expected:
        raise MigrationError(f"{doc.path}: the file could not be edited in place (its layout "
                             "is one the migration does not know); nothing was written. "
                             "`orion check` lists what to add by hand")


class _Editor:
    """Edits of one file's text, at the loader's positions, applied together."""

    def __init__(self, doc: SourceDocument, text: str):
        self.doc, self.text = doc, text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.edits: list[_Edit] = []
        self.changes: list[Change] = []
        self.indent = self._indent_unit()

    # -- positions -----------------------------------------------------------------------------

    def offset(self, line: int, column: int = 1) -> int:
        return self.starts[line - 1] + column - 1

    def line_text(self, line: int) -> str:
        return self.lines[line - 1] if 0 < line <= len(self.lines) else ""

    def _indent_unit(self) -> int:
        """How far the file indents a nested mapping (the first state under ``states:``)."""
        for loc, (_, col) in self.doc.key_positions.items():
            if len(loc) == 2 and loc[0] == "states":
                return max(1, col - 1)
        return 2

    def end_line(self, loc: Loc) -> int:
        """The last line of the value at ``loc``: before the next thing in the document, less
        the blank and comment lines that come before that thing."""
        inside = self.doc.under(loc)
        last = max(pos[0] for table in (self.doc.positions, self.doc.key_positions)
                   for here in inside if (pos := table.get(here)) is not None)
        own = set(inside)
        after = [pos[0] for table in (self.doc.positions, self.doc.key_positions)
                 for here, pos in table.items() if pos[0] > last and here not in own]
        end = (min(after) if after else len(self.lines) + 1) - 1
        while end > last and self.line_text(end).strip()[:1] in ("", "#"):
            end -= 1
        return end

    def above_comments(self, line: int) -> int:
        """``line``, or the first of the comment lines right above it (they belong to it)."""
        while line > 1 and self.line_text(line - 1).lstrip().startswith("#"):
            line -= 1
        return line

    def insert_lines(self, line: int, text: str) -> None:
        """``text`` (whole lines) before ``line`` (one past the end: at the end)."""
        if line > len(self.lines):
            prefix = "" if self.text.endswith("\n") or not self.text else "\n"
            self.edits.append(_Edit(len(self.text), len(self.text), prefix + text))
        else:
            at = self.offset(line)
            self.edits.append(_Edit(at, at, text))

    # -- tags -----------------------------------------------------------------------------------

    def add_tags(self, state: Loc, names: list[str], expected: dict[str, Any]) -> None:
        data = self._at(expected, state)
        line = self.doc.key_positions.get(state, self.doc.positions[state])[0]
        path = ".".join(str(p) for p in state[1::2])
        if "tags" in data:
            have = [data["tags"]] if isinstance(data["tags"], str) else list(data["tags"])
            self._extend_tags((*state, "tags"), have, names)
            data["tags"] = have + names
        else:
            self._new_tags(state, data, names)
            data["tags"] = names[0] if len(names) == 1 else list(names)
        for name in names:
            self.changes.append(Change(line, f"tag {name!r} added to state {path!r}"))

    def _extend_tags(self, loc: Loc, have: list[str], names: list[str]) -> None:
        line, col = self.doc.positions[loc]
        start = self.offset(line, col)
        if (*loc, 0) in self.doc.positions and self.text[start] != "[":  # a block list
            last_line, last_col = self.doc.positions[(*loc, len(have) - 1)]
            prefix = self.line_text(last_line)[:last_col - 1]
            self.insert_lines(last_line + 1, "".join(f"{prefix}{n}\n" for n in names))
            return
        if self.text[start] == "[":  # a flow list: before its closing bracket
            close = self.text.index("]", start)
            inner = self.text[start + 1:close].strip()
            added = ", ".join(names)
            self.edits.append(_Edit(close, close, f", {added}" if inner else added))
            return
        end = start  # one name: it becomes a list
        while end < len(self.text) and self.text[end] not in "\r\n #,}":
            end += 1
        self.edits.append(_Edit(start, end, f"[{', '.join([self.text[start:end], *names])}]"))

    def _new_tags(self, state: Loc, data: dict[str, Any], names: list[str]) -> None:
        tags = names[0] if len(names) == 1 else f"[{', '.join(names)}]"
        line, col = self.doc.positions[state]
        start = self.offset(line, col)
        if self.text[start] == "{":  # a flow mapping
            self.edits.append(_Edit(start + 1, start + 1,
                                    f"tags: {tags}" + (", " if data else "")))
            return
        keys = sorted((k for k in data if (*state, k) in self.doc.key_positions),
                      key=lambda k: self.doc.key_positions[(*state, k)])
        indent = " " * (col - 1)
        if keys and keys[0] == "description":  # after the description, as Orion's charts
            at = self.end_line((*state, "description")) + 1
        else:
            at = self.above_comments(self.doc.key_positions[(*state, keys[0])][0])
        self.insert_lines(at, f"{indent}tags: {tags}\n")

    # -- settings -------------------------------------------------------------------------------

    def add_setting(self, name: str, declaring: StatechartSpec, expected: dict[str, Any]) -> None:
        """The declaring chart's setting ``name``, after the setting that comes before it there
        (when the chart has it), else after the chart's last one."""
        settings = expected.get("settings")
        if not isinstance(settings, dict) or ("settings",) not in self.doc.key_positions \
                or (settings and self.text[self.offset(*self.doc.positions[("settings",)])]
                    == "{"):
            raise MigrationError(f"{self.doc.path}: 'settings' is not a block of settings the "
                                 "migration can add to; nothing was written")
        fields = _setting_fields(declaring, name)
        indent = self.doc.positions[("settings",)][1] - 1 if settings else \
            self.doc.key_positions[("settings",)][1] - 1 + self.indent
        unit = " " * self.indent
        text = f"{' ' * indent}{name}:\n" + "".join(
            f"{line}\n" for key, value in fields.items()
            for line in _value(f"{' ' * indent}{unit}{key}: ", value,
                               f"{' ' * indent}{unit * 2}", 100))
        line = self._setting_line(list(declaring.settings), name, settings)
        self.insert_lines(line, text)
        settings[name] = fields
        self.changes.append(Change(line, f"setting {name!r} added, as {declaring.statechart} "
                                         f"defines it"))

    def _setting_line(self, order: list[str], name: str, settings: dict[str, Any]) -> int:
        """Where a setting goes: after the one before it in the declaring chart, else before
        the one after it, else after the chart's last setting."""
        before = [s for s in order[:order.index(name)]
                  if s in settings and ("settings", s) in self.doc.key_positions]
        after = [s for s in order[order.index(name) + 1:]
                 if s in settings and ("settings", s) in self.doc.key_positions]
        if before:
            return self.end_line(("settings", before[-1])) + 1
        if after:
            return self.above_comments(self.doc.key_positions[("settings", after[0])][0])
        return self.end_line(("settings",)) + 1

    # -- transitions ----------------------------------------------------------------------------

    def add_transitions(self, new: list[tuple[int, dict[str, Any]]], declaring: StatechartSpec,
                        expected: dict[str, Any]) -> None:
        """The declaring chart's transitions ``new`` (each with its index there), each after
        the chart's transition with the id of the nearest one before it there (or one this
        migration placed), else at the end; written in the style of the chart's others."""
        transitions = expected.get("transitions")
        if not isinstance(transitions, list) or ("transitions", 0) not in self.doc.positions:
            raise MigrationError(f"{self.doc.path}: 'transitions' is not a list of "
                                 "transitions the migration can add to; nothing was written")
        base_ids = transition_ids([t.model_dump(mode="json") for t in declaring.transitions])
        #: For each transition of ``expected``: its index in the file, or the declaring
        #: chart's index of one this migration added.
        origin: list[tuple[str, int]] = [("file", i) for i in range(len(transitions))]
        for j, data in sorted(new, key=lambda item: item[0]):
            at = self._after(base_ids, j, transitions, origin)
            following = next((i for kind, i in origin[at:] if kind == "file"), None)
            line = self._insert_transition(following, data)
            transitions.insert(at, data)
            origin.insert(at, ("declared", j))
            self.changes.append(Change(line, f"transition on {data['trigger']!r} added ("
                                             + _route(data) + ")"))

    @staticmethod
    def _after(base_ids: list[str | None], j: int, transitions: list[Any],
               origin: list[tuple[str, int]]) -> int:
        own = transition_ids(transitions)
        for k in range(j - 1, -1, -1):
            if ("declared", k) in origin:
                return origin.index(("declared", k)) + 1
            if base_ids[k] is not None and base_ids[k] in own:
                return own.index(base_ids[k]) + 1
        return len(transitions)

    def _insert_transition(self, following: int | None, data: dict[str, Any]) -> int:
        """Write ``data`` as a list item before the file's transition ``following`` (and the
        comments above it), or after the last one; return the line it goes to."""
        count = len(self.doc.data["transitions"])
        first_line, first_col = self.doc.positions[("transitions", 0)]
        dash = self.line_text(first_line)[:first_col - 1].rstrip()
        dash = dash[:-1] if dash.endswith("-") else dash
        flow = self.text[self.offset(first_line, first_col)] == "{"
        spaced = count > 1 and not self.line_text(
            self.above_comments(self.doc.positions[("transitions", 1)][0]) - 1).strip()
        item = _render(data, dash, flow, width=100)
        if following is not None:
            line = self.above_comments(self.doc.positions[("transitions", following)][0])
            self.insert_lines(line, item + ("\n" if spaced else ""))
        else:
            line = self.end_line(("transitions",)) + 1
            self.insert_lines(line, ("\n" if spaced else "") + item)
        return line

    # -- the version ----------------------------------------------------------------------------

    def set_version(self, version: int, expected: dict[str, Any]) -> None:
        contract = expected.get("contract")
        unit = " " * self.indent
        if isinstance(contract, dict) and ("contract", "version") in self.doc.positions:
            line, col = self.doc.positions[("contract", "version")]
            start = self.offset(line, col)
            end = start
            while end < len(self.text) and self.text[end].isdigit():
                end += 1
            self.edits.append(_Edit(start, end, str(version)))
        elif isinstance(contract, dict) and ("contract",) in self.doc.positions:
            line, col = self.doc.positions[("contract",)]
            start = self.offset(line, col)
            if self.text[start] == "{":
                self.edits.append(_Edit(start + 1, start + 1,
                                        f"version: {version}" + (", " if contract else "")))
            else:
                self.insert_lines(line, f"{' ' * (col - 1)}version: {version}\n")
            line = self.doc.key_positions[("contract",)][0]
        else:
            keys = sorted((k for k in expected if (k,) in self.doc.key_positions
                           and k not in ("statechart", "extends", "version", "description")),
                          key=lambda k: self.doc.key_positions[(k,)])
            line = self.above_comments(self.doc.key_positions[(keys[0],)][0]) if keys \
                else len(self.lines) + 1
            self.insert_lines(line, (
                "# The version of the contract of the chart this one replaces that it keeps\n"
                "# (`orion check` names what later versions add; `orion migrate` adds it).\n"
                f"contract:\n{unit}version: {version}\n\n"))
            expected["contract"] = {}
        expected["contract"]["version"] = version
        self.changes.append(Change(line, f"contract version set to {version}"))

    # -- applying -------------------------------------------------------------------------------

    def apply(self) -> str:
        text = self.text
        # From the end, so that each edit's offsets still hold; of the inserts at one offset
        # the last made goes first, so that they read in the order they were made.
        ordered = sorted(enumerate(self.edits), key=lambda e: (e[1].start, e[1].end, e[0]),
                         reverse=True)
        for _, edit in ordered:
            text = text[:edit.start] + edit.text + text[edit.end:]
        return text

    @staticmethod
    def _at(data: Any, loc: Loc) -> Any:
        for part in loc:
            data = data[part]
        return data


def _setting_fields(declaring: StatechartSpec, name: str) -> dict[str, Any]:
    """A setting as the declaring chart defines it, in the order charts write its fields."""
    fields = declaring.settings[name].model_dump(mode="json", exclude_defaults=True)
    fields = {k: fields[k] for k in ("type", "default", "min", "max", "env", "description")
              if k in fields}
    for bound in ("min", "max"):  # bounds are floats in the model; an int's read as ints
        if fields.get("type") == "int" and float(fields.get(bound, 0.5)).is_integer():
            fields[bound] = int(fields[bound])
    return fields


def _route(data: dict[str, Any]) -> str:
    source = data.get("source")
    sources = ", ".join(source) if isinstance(source, list) else str(source)
    return f"from {sources} to {data['dest']}" if data.get("dest") else f"in {sources}"


def _render(data: dict[str, Any], indent: str, flow: bool, *, width: int) -> str:
    """One transition as a list item, ``- ...`` at ``indent``, as Orion's charts write them:
    a block mapping (or a flow mapping, when the chart writes its transitions so), lists in
    brackets wrapped under their first item, a long description folded (``>-``)."""
    if flow:
        return f"{indent}- {{" + ", ".join(f"{k}: {_flow(v)}" for k, v in data.items()) + "}\n"
    lines: list[str] = []
    for key, value in data.items():
        lead = f"{indent}{'- ' if not lines else '  '}{key}: "
        lines += _value(lead, value, f"{indent}    ", width)
    return "".join(f"{line}\n" for line in lines)


def _value(lead: str, value: Any, deeper: str, width: int) -> list[str]:
    if isinstance(value, list):
        items = [_flow(v) for v in value]
        lines, current = [], f"{lead}["
        for k, item in enumerate(items):
            piece = item + ("," if k < len(items) - 1 else "]")
            if current.endswith(("[", ",")) and len(current) + 1 + len(piece) > width \
                    and not current.endswith("["):
                lines.append(current)
                current = " " * len(lead) + " " + piece
            else:
                current += ("" if current.endswith("[") else " ") + piece
        return [*lines, current if items else f"{lead}[]"]
    plain = _flow(value)
    if len(lead) + len(plain) <= width or not isinstance(value, str):
        return [lead + plain]
    wrapped = textwrap.wrap(value, width - len(deeper), break_long_words=False,
                            break_on_hyphens=False)
    if " ".join(wrapped) != value or value[:1] in " #":  # folding would not give it back
        return [lead + plain]
    return [f"{lead}>-", *(deeper + line for line in wrapped)]


def _flow(value: Any) -> str:
    """A value as YAML writes it inside a line (quoted only where it must be)."""
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return yaml.safe_dump([value], default_flow_style=True, allow_unicode=True,
                          width=10**6).strip()[1:-1]
