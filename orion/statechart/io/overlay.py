"""Overlays: a chart written as the changes to another (``extends: write_session``).

The merge rules, the same for every part of the file:

* a field the overlay gives replaces the base's; a field it omits is kept (``description``,
  ``initial``, ``version``; each setting's ``default`` or ``max``; each state's ``tags``,
  ``entry`` or ``after``: a list is replaced whole, never appended to);
* ``states`` merge by name, recursively: a name the base has changes that state, a new name
  adds one (a new child of a compound state is written inside it);
* ``context`` merges by key; ``contract`` entries are added to the base's;
* ``transitions`` are edited by id, as the pipeline's systems are by name, and in the same
  order: ``remove``, then ``replace`` (the fields given replace the transition's, the others are
  kept), then ``insert`` (``before`` or ``after`` a transition, or at the end).

A transition's id is its ``id:``, or its trigger when no other transition of the chart has that
trigger. The merged chart is checked like any other; each finding points at the file and line
where the offending part was written, in the overlay or in the chart it extends.
"""

from __future__ import annotations

import copy
import difflib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from orion.errors import Diagnostic
from orion.statechart.checks.sources import OVERLAY
from orion.statechart.model.schema import OverlaySpec
from orion.yamlsource import Loc, SourceDocument


@dataclass
class MergedDocument(SourceDocument):
    """A document assembled from several files: each position remembers its file."""

    paths: dict[tuple[bool, Loc], str] = field(default_factory=dict)

    def locate(self, loc: Loc, *, key: bool = False) -> tuple[str, int, int]:
        table = self.key_positions if key else self.positions
        loc = tuple(loc)
        while loc:
            if loc in table:
                return (self.paths.get((key, loc), self.path), *table[loc])
            if not key and loc in self.key_positions:
                return (self.paths.get((True, loc), self.path), *self.key_positions[loc])
            loc = loc[:-1]
        return (self.path, *self.positions.get((), (1, 1)))

    def diagnostic(self, loc: Loc, message: str, *, key: bool = False,
                   code: str = "error") -> Diagnostic:
        path, line, col = self.locate(loc, key=key)
        return Diagnostic(path, line, col, message, code)


def path_at(doc: SourceDocument, loc: Loc, *, key: bool = False) -> str:
    """The file that ``loc`` of ``doc`` was written in."""
    return doc.locate(loc, key=key)[0] if isinstance(doc, MergedDocument) else doc.path


def is_overlay(data: Any) -> bool:
    return isinstance(data, dict) and "extends" in data


def transition_ids(transitions: list[Any]) -> list[str | None]:
    """The id of each transition (raw data): its ``id``, else its trigger when unique."""
    triggers = Counter(t.get("trigger") for t in transitions if isinstance(t, dict))
    ids: list[str | None] = []
    for t in transitions:
        if not isinstance(t, dict):
            ids.append(None)
        elif isinstance(t.get("id"), str):
            ids.append(t["id"])
        elif triggers[t.get("trigger")] == 1 and isinstance(t.get("trigger"), str):
            ids.append(t["trigger"])
        else:
            ids.append(None)
    return ids


class _LocTree:
    """Every location of a document's position tables, by its parent: what lies under a
    location is found by walking it, not by a scan of the tables, so a merge costs about the
    size of what it moves (a scan per edit made an overlay of N states cost N\u00b2)."""

    def __init__(self, *tables: dict[Loc, Any]) -> None:
        self.children: dict[Loc, dict[Loc, None]] = {}
        for table in tables:
            for loc in table:
                self.add(loc)

    def add(self, loc: Loc) -> None:
        while loc:
            kids = self.children.setdefault(loc[:-1], {})
            if loc in kids:
                return  # its parents are known already
            kids[loc] = None
            loc = loc[:-1]

    def under(self, top: Loc) -> list[Loc]:
        """``top`` and every location below it."""
        found, pending = [top], [top]
        while pending:
            for child in self.children.get(pending.pop(), ()):
                found.append(child)
                pending.append(child)
        return found

    def cut(self, top: Loc) -> None:
        """Forget every location below ``top``."""
        for loc in self.under(top):
            self.children.pop(loc, None)


class _Builder:
    """The merged data and, for every value in it, where it was written."""

    def __init__(self, base: SourceDocument, path: str):
        self.doc = MergedDocument(path, copy.deepcopy(base.data))
        self._tree = _LocTree()
        self._sources: dict[int, tuple[SourceDocument, _LocTree]] = {}
        self._graft(base, (), ())

    def _source_tree(self, source: SourceDocument) -> _LocTree:
        known = self._sources.get(id(source))
        if known is None:  # the document is kept with its tree, so its id is not reused
            known = self._sources[id(source)] = (
                source, _LocTree(source.positions, source.key_positions))
        return known[1]

    def _graft(self, source: SourceDocument, src: Loc, dst: Loc) -> None:
        n = len(src)
        locs = self._source_tree(source).under(src)
        for key, table, target in ((False, source.positions, self.doc.positions),
                                   (True, source.key_positions, self.doc.key_positions)):
            for loc in locs:
                pos = table.get(loc)
                if pos is not None:
                    new = dst + loc[n:]
                    target[new] = pos
                    self._tree.add(new)
                    self.doc.paths[(key, new)] = path_at(source, loc, key=key)

    def _drop(self, dst: Loc, *, keep_key: bool = True) -> None:
        locs = self._tree.under(dst)
        for key, table in ((False, self.doc.positions), (True, self.doc.key_positions)):
            for loc in locs:
                if loc not in table or (key and keep_key and loc == dst):
                    continue
                del table[loc]
                self.doc.paths.pop((key, loc), None)
        self._tree.cut(dst)

    def put(self, source: SourceDocument, src: Loc, dst: Loc, value: Any) -> None:
        """Set ``dst`` to ``value`` (written at ``src`` of ``source``)."""
        self._drop(dst, keep_key=False)
        parent = self.doc.data
        for part in dst[:-1]:
            parent = parent[part]
        parent[dst[-1]] = copy.deepcopy(value)
        self._graft(source, src, dst)


def merge(base: SourceDocument, overlay: SourceDocument) -> tuple[MergedDocument | None,
                                                                   list[Diagnostic]]:
    """``overlay`` applied to ``base`` (a checked chart's document): the merged document, or the
    overlay's findings (each with its position in the overlay)."""
    data = overlay.data
    try:
        OverlaySpec.model_validate(data)
    except ValidationError as exc:
        return None, [_schema_diagnostic(overlay, e) for e in exc.errors()]
    builder = _Builder(base, overlay.path)
    name = data.get("statechart") or data["extends"]
    builder.put(overlay, ("statechart",) if "statechart" in data else ("extends",),
                ("statechart",), name)
    for key in ("version", "description", "initial"):
        if key in data:
            builder.put(overlay, (key,), (key,), data[key])
    for section in ("settings", "context"):
        if section in data:
            _merge_values(builder, overlay, section, data[section])
    if "contract" in data:
        _merge_contract(builder, overlay, data["contract"])
    _merge_states(builder, overlay, ("states",), ("states",), data.get("states") or {})
    problems = _edit_transitions(builder, base, overlay, data.get("transitions") or {})
    builder.doc.positions.setdefault((), overlay.positions.get((), (1, 1)))
    return (None if problems else builder.doc), problems


def _merge_values(builder: _Builder, overlay: SourceDocument, section: str,
                  values: dict[str, Any]) -> None:
    """``settings`` and ``context`` merge by key; a setting the base has, field by field."""
    merged = builder.doc.data.setdefault(section, {})
    for key, value in values.items():
        here = (section, key)
        if section == "settings" and isinstance(merged.get(key), dict):
            for field_name, field_value in value.items():
                builder.put(overlay, (*here, field_name), (*here, field_name), field_value)
        else:
            builder.put(overlay, here, here, value)


def _merge_contract(builder: _Builder, overlay: SourceDocument,
                    contract: dict[str, Any]) -> None:
    """Contract entries are added to the base's."""
    merged = builder.doc.data.setdefault("contract", {})
    for key, values in contract.items():
        values = [values] if isinstance(values, str) else values
        have = merged.get(key) or []
        have = [have] if isinstance(have, str) else list(have)
        builder.put(overlay, ("contract", key), ("contract", key),
                    have + [v for v in values if v not in have])


def _merge_states(builder: _Builder, overlay: SourceDocument, src: Loc, dst: Loc,
                  states: dict[str, Any]) -> None:
    parent = builder.doc.data
    for part in dst[:-1]:
        parent = parent[part]
    parent.setdefault(dst[-1], {})
    existing = parent[dst[-1]]
    for name, patch in states.items():
        here_src, here_dst = (*src, name), (*dst, name)
        if not isinstance(existing.get(name), dict):
            builder.put(overlay, here_src, here_dst, patch)
            continue
        for key, value in patch.items():
            if key == "states":
                _merge_states(builder, overlay, (*here_src, "states"), (*here_dst, "states"),
                              value or {})
            else:
                builder.put(overlay, (*here_src, key), (*here_dst, key), value)


def _edit_transitions(builder: _Builder, base: SourceDocument, overlay: SourceDocument,
                      edits: dict[str, Any]) -> list[Diagnostic]:
    """The base's transitions with the overlay's ``remove``, ``replace`` and ``insert`` applied,
    in that order, put back into the merged document; or the findings of edits naming no
    transition (then nothing is put back)."""
    editing = _TransitionEdits(builder, base, overlay)
    for k, tid in enumerate(edits.get("remove") or []):
        editing.remove(k, tid)
    for tid, patch in (edits.get("replace") or {}).items():
        editing.replace(tid, patch)
    for k, insert in enumerate(edits.get("insert") or []):
        editing.insert(k, insert)
    if not editing.problems:
        editing.write_back()
    return editing.problems


#: Where each part of an edited transition was written: (document, location, parts).
_Origins = list[tuple[SourceDocument, Loc, tuple[str, ...]]]


class _TransitionEdits:
    """The transitions being edited: each one's data and where each of its parts was written,
    and its id (by which the edits name it)."""

    def __init__(self, builder: _Builder, base: SourceDocument, overlay: SourceDocument):
        self.builder, self.base, self.overlay = builder, base, overlay
        self.problems: list[Diagnostic] = []
        original = list(builder.doc.data.get("transitions") or [])
        # The base's positions, as they are before the transitions are put back.
        before = MergedDocument(builder.doc.path, None, dict(builder.doc.positions),
                                dict(builder.doc.key_positions), dict(builder.doc.paths))
        self.items: list[tuple[dict[str, Any], _Origins]] = [
            (dict(t), [(before, ("transitions", i), ())]) for i, t in enumerate(original)]
        self.ids = transition_ids(original)

    def find(self, tid: str, loc: Loc, *, key: bool = False) -> int | None:
        if tid in self.ids:
            return self.ids.index(tid)
        known = [i for i in self.ids if i]
        hint = difflib.get_close_matches(tid, known, n=1)
        self.problems.append(self.overlay.diagnostic(loc, (
            f"{tid!r} is not the id of a transition of {self.base.data.get('statechart')!r} "
            f"(ids: {', '.join(known) or 'none'}; a transition's id is its 'id:', or its trigger "
            "when no other transition has that trigger)"
            + (f"; did you mean {hint[0]!r}?" if hint else "")), key=key, code=OVERLAY))
        return None

    def remove(self, k: int, tid: str) -> None:
        at = self.find(tid, ("transitions", "remove", k))
        if at is not None:
            del self.items[at], self.ids[at]

    def replace(self, tid: str, patch: dict[str, Any]) -> None:
        at = self.find(tid, ("transitions", "replace", tid), key=True)
        if at is None:
            return
        data, origins = self.items[at]
        self.items[at] = ({**data, **patch}, [
            *origins, *((self.overlay, ("transitions", "replace", tid, key), (key,))
                        for key in patch)])
        self.ids[at] = patch.get("id", tid)

    def insert(self, k: int, insert: dict[str, Any]) -> None:
        here = ("transitions", "insert", k)
        transition = {key: v for key, v in insert.items() if key not in ("before", "after")}
        anchor_key = "before" if "before" in insert else "after" if "after" in insert else None
        if anchor_key is None:
            at = len(self.items)
        else:
            found = self.find(insert[anchor_key], (*here, anchor_key))
            if found is None:
                return
            at = found + (1 if anchor_key == "after" else 0)
        self.items.insert(at, (transition, [(self.overlay, here, ())]))
        self.ids.insert(at, transition.get("id") or transition.get("trigger"))

    def write_back(self) -> None:
        builder, overlay = self.builder, self.overlay
        builder._drop(("transitions",))
        if ("transitions",) in overlay.key_positions:  # a finding about the whole list: here
            builder.doc.key_positions[("transitions",)] = overlay.key_positions[("transitions",)]
            builder._tree.add(("transitions",))
            builder.doc.paths[(True, ("transitions",))] = overlay.path
        builder.doc.data["transitions"] = [data for data, _ in self.items]
        for i, (_, origins) in enumerate(self.items):
            for source, loc, parts in origins:
                if parts:
                    builder._drop(("transitions", i, *parts), keep_key=False)
                builder._graft(source, loc, ("transitions", i, *parts))


def _schema_diagnostic(doc: SourceDocument, error: Any) -> Diagnostic:
    loc = tuple(error["loc"])
    if error["type"] == "extra_forbidden":
        fields = ", ".join(OverlaySpec.model_fields) if len(loc) == 1 else ""
        return doc.diagnostic(loc, f"unknown field {str(loc[-1])!r} in an overlay"
                                   + (f" (an overlay has: {fields})" if fields else ""), key=True,
                              code=OVERLAY)
    where = ".".join(map(str, loc)) or "overlay"
    hint = ""
    if loc == ("transitions",) and error["type"] == "model_type":
        hint = (" (an overlay edits the transitions it extends: `remove: [id, ...]`, "
                "`replace: {id: fields}`, `insert: [transition, ...]`)")
    return doc.diagnostic(loc, f"{where}: {error['msg']}{hint}", code=OVERLAY)
