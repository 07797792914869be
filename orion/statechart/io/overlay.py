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
from orion.statechart.checks.document import (LIMITS, MAX_STATES, MAX_TRANSITIONS, limits,
                                              state_count)
from orion.statechart.checks.contract import EDITS
from orion.statechart.checks.sources import OVERLAY
from orion.statechart.model.schema import OverlaySpec
from orion.config.yamlsource import Loc, LocTree, SourceDocument


@dataclass
class MergedDocument(SourceDocument):
    """A document assembled from several files: each position remembers its file.

    ``path`` is the overlay's. A finding at a part written in the chart it extends is still
    reported in the overlay, since the base was checked without it: at the overlay's edit of
    a transition that led to or from the state found (or of the trigger's transitions), else
    at the nearest part the overlay wrote, else at its ``extends``; the message names the base
    line too."""

    paths: dict[tuple[bool, Loc], str] = field(default_factory=dict)
    #: Each transition the overlay removed or replaced, as it was, and where the edit is.
    edits: list[tuple[dict[str, Any], tuple[int, int]]] = field(default_factory=list)
    #: The overlay's ``extends``: where a finding the overlay caused, but wrote nothing near, is.
    anchor: tuple[int, int] | None = None

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
        if path == self.path or self.anchor is None:
            return Diagnostic(path, line, col, message, code)
        here = self._blame(tuple(loc))
        return Diagnostic(self.path, *here, f"{message} (at {path}:{line}:{col}, in the chart "
                                            "it extends)", code)

    def _blame(self, loc: Loc) -> tuple[int, int]:
        """Where in the overlay a finding at ``loc``, written in the base, comes from."""
        related = self._related(loc)
        ranked = sorted((rank, i) for i, (data, _) in enumerate(self.edits)
                        if (rank := related(data)) is not None)
        if ranked:
            return self.edits[ranked[0][1]][1]
        for end in range(len(loc), 0, -1):
            for key, table in ((False, self.positions), (True, self.key_positions)):
                if loc[:end] in table and self.paths.get((key, loc[:end])) == self.path:
                    return table[loc[:end]]
        assert self.anchor is not None
        return self.anchor

    def _related(self, loc: Loc) -> Any:
        """How closely an edited transition is related to a finding at ``loc`` (lower is
        closer; ``None``: not at all): one that led to or from the state it names (from a state
        inside it, from an ancestor of it), or one of the transition's trigger."""
        if loc[:1] == ("states",):
            names = []
            for i in range(0, len(loc) - 1, 2):
                if loc[i] != "states":
                    break
                names.append(str(loc[i + 1]))
            path = ".".join(names)

            def touches(data: dict[str, Any]) -> int | None:
                sources = data.get("source")
                ends = [*([sources] if isinstance(sources, str) else sources or []),
                        data.get("dest")]
                ranks = [0 if end == path else 1 if end.startswith(path + ".")
                         else 2 if path.startswith(end + ".") else None
                         for end in ends if isinstance(end, str)]
                return min((r for r in ranks if r is not None), default=None)
            return touches
        if loc[:1] == ("transitions",) and len(loc) > 1 and isinstance(loc[1], int):
            trigger = self.data["transitions"][loc[1]].get("trigger")
            return lambda data: 0 if data.get("trigger") == trigger else None
        return lambda data: None


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


class _Builder:
    """The merged data and, for every value in it, where it was written."""

    def __init__(self, base: SourceDocument, path: str):
        self.doc = MergedDocument(path, copy.deepcopy(base.data), tree=LocTree())
        self._graft(base, (), ())

    def _graft(self, source: SourceDocument, src: Loc, dst: Loc) -> None:
        """Take the positions of ``src`` of ``source``, and of everything inside it, to
        ``dst``: in time proportional to what moves, whatever the documents' size."""
        n = len(src)
        doc, tree = self.doc, self.doc.tree
        assert tree is not None
        origins = source.paths if isinstance(source, MergedDocument) else None
        for loc in source.under(src):
            new = dst + loc[n:]
            for key, table, target in ((False, source.positions, doc.positions),
                                       (True, source.key_positions, doc.key_positions)):
                pos = table.get(loc)
                if pos is not None:
                    target[new] = pos
                    doc.paths[(key, new)] = source.path if origins is None \
                        else origins.get((key, loc), source.path)
                    tree.add(new)

    def _drop(self, dst: Loc, *, keep_key: bool = True) -> None:
        doc = self.doc
        assert doc.tree is not None
        for loc in doc.under(dst):
            if doc.positions.pop(loc, None) is not None:
                doc.paths.pop((False, loc), None)
            if not (keep_key and loc == dst) and doc.key_positions.pop(loc, None) is not None:
                doc.paths.pop((True, loc), None)
        doc.tree.prune(dst, keep=keep_key and dst in doc.key_positions)

    def put(self, source: SourceDocument, src: Loc, dst: Loc, value: Any) -> None:
        """Set ``dst`` to ``value`` (written at ``src`` of ``source``)."""
        self._drop(dst, keep_key=False)
        parent = self.doc.data
        for part in dst[:-1]:
            parent = parent[part]
        parent[dst[-1]] = copy.deepcopy(value)
        self._graft(source, src, dst)

    def place(self, source: SourceDocument, src: Loc, dst: Loc) -> None:
        """``dst`` (already in the data) was written at ``src`` of ``source``: its position,
        and nothing inside it."""
        doc = self.doc
        assert doc.tree is not None
        for key, table, target in ((False, source.positions, doc.positions),
                                   (True, source.key_positions, doc.key_positions)):
            if src in table:
                target[dst] = table[src]
                doc.paths[(key, dst)] = path_at(source, src, key=key)
                doc.tree.add(dst)


def merge(base: SourceDocument, overlay: SourceDocument) -> tuple[MergedDocument | None,
                                                                   list[Diagnostic]]:
    """``overlay`` applied to ``base`` (a checked chart's document): the merged document, or the
    overlay's findings (each with its position in the overlay)."""
    data = overlay.data
    too_big = _beyond_limits(base.data, overlay) or _misspelled_settings(base.data, overlay)
    if too_big:
        return None, too_big
    try:
        OverlaySpec.model_validate(data)
    except ValidationError as exc:
        return None, [_schema_diagnostic(overlay, e) for e in exc.errors()]
    builder = _Builder(base, overlay.path)
    name = data.get("statechart") or data["extends"]
    builder.put(overlay, ("statechart",) if "statechart" in data else ("extends",),
                ("statechart",), name)
    for key in ("version", "description", "initial", "model_methods"):
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
    builder.doc.anchor = overlay.position(("extends",), key=True)
    _own_version(builder, data)
    return (None if problems else builder.doc), problems


def _beyond_limits(base: dict[str, Any], overlay: SourceDocument) -> list[Diagnostic]:
    """The limits of docs/statecharts.md#limits, counted before anything is merged: the
    overlay's own states and nesting, then what it adds to its base."""
    found = limits(overlay)
    if found:
        return found
    data = overlay.data
    added, pending = 0, [(data.get("states"), base.get("states"))]
    while pending:
        states, below = pending.pop()
        if not isinstance(states, dict):
            continue
        below = below if isinstance(below, dict) else {}
        for name, state in states.items():
            if isinstance(below.get(name), dict):
                pending.append((state.get("states") if isinstance(state, dict) else None,
                                below[name].get("states")))
            else:
                added += 1 + state_count(state.get("states") if isinstance(state, dict) else None)
    total = state_count(base.get("states")) + added
    if total > MAX_STATES:
        return [overlay.diagnostic(("states",), f"the overlay adds {added:,} states to the "
                                                f"{total - added:,} of the chart it extends: "
                                                f"more than {MAX_STATES:,}", key=True,
                                   code=LIMITS)]
    edits = data.get("transitions")
    inserts = edits.get("insert") if isinstance(edits, dict) else None
    inserts = inserts if isinstance(inserts, list) else []
    if len(base.get("transitions") or []) + len(inserts) > MAX_TRANSITIONS:
        return [overlay.diagnostic(("transitions", "insert"), (
            f"the overlay inserts {len(inserts):,} transitions into the "
            f"{len(base.get('transitions') or []):,} of the chart it extends: more than "
            f"{MAX_TRANSITIONS:,}"), key=True, code=LIMITS)]
    return []


def _misspelled_settings(base: dict[str, Any], overlay: SourceDocument) -> list[Diagnostic]:
    """A setting the overlay adds under a name close to one of its base's (``idle_msec`` for
    ``idle_ms``) is a typo, not a new setting: nothing would read it, and the setting meant
    would silently keep its value. Each is an error naming the setting meant."""
    given, known = overlay.data.get("settings"), base.get("settings")
    if not isinstance(given, dict) or not isinstance(known, dict):
        return []
    found = []
    for name in given:
        meant = difflib.get_close_matches(str(name), [str(k) for k in known], n=1, cutoff=0.75)
        if name in known or not meant:
            continue
        found.append(overlay.diagnostic(("settings", name), (
            f"settings.{name}: {base.get('statechart')!r} has no setting {name!r}; did you "
            f"mean {meant[0]!r}? An overlay changes a setting under its own name "
            f"({meant[0]}: {{default: ...}}); a new setting needs a name no setting is close "
            "to, or nothing reads it"), key=True, code=OVERLAY))
    return found


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
    """Contract entries are added to the base's (each keeps the position it was written at);
    a ``version`` given replaces the base's."""
    merged = builder.doc.data.setdefault("contract", {})
    for key, values in contract.items():
        here = ("contract", key)
        if not isinstance(values, list | str):  # a scalar such as the version
            builder.put(overlay, here, here, values)
            continue
        values = [values] if isinstance(values, str) else values
        have = merged.get(key) or []
        if isinstance(have, str):
            # The base wrote one bare name: its position becomes the first entry's.
            builder.place(builder.doc, here, (*here, 0))
        have = [have] if isinstance(have, str) else list(have)
        merged[key] = have
        builder.place(overlay, here, here)
        for k, value in enumerate(values):
            if value not in have:
                have.append(value)
                at = (*here, k) if (*here, k) in overlay.positions else here
                builder.place(overlay, at, (*here, len(have) - 1))


def _own_version(builder: _Builder, data: dict[str, Any]) -> None:
    """The contract version an overlay was written for is its own (1 without it), never its
    base's: what the base's contract gained since is what the overlay may lack."""
    contract = builder.doc.data.get("contract")
    given = data.get("contract")
    if isinstance(contract, dict) and not (isinstance(given, dict) and "version" in given):
        contract.pop("version", None)
        builder._drop(("contract", "version"), keep_key=False)


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


class _Edited:
    """One transition in the edited list: its data, where each of its parts was written, its
    id, and its neighbours (a linked list: an edit costs the same in a list of any length)."""

    __slots__ = ("data", "origins", "tid", "prev", "next", "alive")

    def __init__(self, data: dict[str, Any], origins: _Origins, tid: str | None):
        self.data, self.origins, self.tid = data, origins, tid
        self.prev: _Edited | None = None
        self.next: _Edited | None = None
        self.alive = True


class _TransitionEdits:
    """The transitions being edited, in order, and an index of them by id (by which the edits
    name them)."""

    def __init__(self, builder: _Builder, base: SourceDocument, overlay: SourceDocument):
        self.builder, self.base, self.overlay = builder, base, overlay
        self.problems: list[Diagnostic] = []
        original = list(builder.doc.data.get("transitions") or [])
        # The base's positions, as they are before the transitions are put back.
        before = MergedDocument(builder.doc.path, None, dict(builder.doc.positions),
                                dict(builder.doc.key_positions), paths=dict(builder.doc.paths))
        self.head = self.tail = None  # type: _Edited | None
        self.by_id: dict[str, list[_Edited]] = {}
        for i, (t, tid) in enumerate(zip(original, transition_ids(original))):
            self._link(_Edited(dict(t), [(before, ("transitions", i), ())], tid), after=self.tail)

    # -- the list -------------------------------------------------------------------------------

    def _link(self, node: _Edited, *, after: _Edited | None = None,
              before: _Edited | None = None) -> None:
        if before is not None:
            after = before.prev
        node.prev = after
        node.next = after.next if after is not None else self.head
        if node.prev is None:
            self.head = node
        else:
            node.prev.next = node
        if node.next is None:
            self.tail = node
        else:
            node.next.prev = node
        if node.tid is not None:
            self.by_id.setdefault(node.tid, []).append(node)

    def _unlink(self, node: _Edited) -> None:
        if node.prev is None:
            self.head = node.next
        else:
            node.prev.next = node.next
        if node.next is None:
            self.tail = node.prev
        else:
            node.next.prev = node.prev
        node.alive = False

    def _in_order(self) -> list[_Edited]:
        found, node = [], self.head
        while node is not None:
            found.append(node)
            node = node.next
        return found

    # -- the edits ------------------------------------------------------------------------------

    def find(self, tid: str, loc: Loc, *, key: bool = False) -> _Edited | None:
        """The first transition (in the list's order) whose id is ``tid``."""
        named = [n for n in self.by_id.get(tid, ()) if n.alive and n.tid == tid]
        if len(named) > 1:  # ids repeat only among inserted transitions: rare, so a walk
            named = [n for n in self._in_order() if n in named]
        if named:
            return named[0]
        known = [n.tid for n in self._in_order() if n.tid]
        hint = difflib.get_close_matches(tid, known, n=1)
        self.problems.append(self.overlay.diagnostic(loc, (
            f"{tid!r} is not the id of a transition of {self.base.data.get('statechart')!r} "
            f"(ids: {', '.join(known) or 'none'}; a transition's id is its 'id:', or its trigger "
            "when no other transition has that trigger)"
            + (f"; did you mean {hint[0]!r}?" if hint else "")), key=key, code=OVERLAY))
        return None

    def remove(self, k: int, tid: str) -> None:
        node = self.find(tid, ("transitions", "remove", k))
        if node is not None:
            self._unlink(node)
            self._edited(node.data, ("transitions", "remove", k), key=False)

    def _edited(self, data: dict[str, Any], loc: Loc, *, key: bool) -> None:
        """The overlay removes or changes ``data`` at ``loc``: findings about what it led to
        or from, or about its trigger, are the overlay's there."""
        position = self.overlay.position(loc, key=key)
        self.builder.doc.edits.append((data, position))
        trigger = data.get("trigger")
        if isinstance(trigger, str):
            for name in trigger.split():
                where = (EDITS, name)
                if where not in self.builder.doc.positions:
                    self.builder.doc.positions[where] = position
                    self.builder.doc.paths[(False, where)] = self.overlay.path

    def replace(self, tid: str, patch: dict[str, Any]) -> None:
        node = self.find(tid, ("transitions", "replace", tid), key=True)
        if node is None:
            return
        self._edited(node.data, ("transitions", "replace", tid), key=True)
        node.data = {**node.data, **patch}
        node.origins = [*node.origins, *((self.overlay, ("transitions", "replace", tid, key),
                                          (key,)) for key in patch)]
        if patch.get("id", tid) != tid:
            node.tid = patch["id"]
            self.by_id.setdefault(node.tid, []).append(node)

    def insert(self, k: int, insert: dict[str, Any]) -> None:
        here = ("transitions", "insert", k)
        transition = {key: v for key, v in insert.items() if key not in ("before", "after")}
        node = _Edited(transition, [(self.overlay, here, ())],
                       transition.get("id") or transition.get("trigger"))
        anchor_key = "before" if "before" in insert else "after" if "after" in insert else None
        if anchor_key is None:
            self._link(node, after=self.tail)
            return
        anchor = self.find(insert[anchor_key], (*here, anchor_key))
        if anchor is not None:
            self._link(node, **{anchor_key: anchor})

    def write_back(self) -> None:
        builder, overlay = self.builder, self.overlay
        builder._drop(("transitions",))
        if ("transitions",) in overlay.key_positions:  # a finding about the whole list: here
            builder.doc.key_positions[("transitions",)] = overlay.key_positions[("transitions",)]
            builder.doc.paths[(True, ("transitions",))] = overlay.path
        edited = self._in_order()
        builder.doc.data["transitions"] = [node.data for node in edited]
        for i, node in enumerate(edited):
            for source, loc, parts in node.origins:
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
