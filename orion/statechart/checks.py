"""Static checks of a statechart file. Each finding is a :class:`Diagnostic` with a position."""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from orion.errors import Diagnostic
from orion.statechart import schema
from orion.statechart.schema import StatechartSpec
from orion.statechart.settings import coerce
from orion.statechart.tree import StateNode, flatten, lineage, settle
from orion.yamlsource import SourceDocument


@dataclass(frozen=True)
class Names:
    """The guard and action names that the loaded plugins provide."""

    guards: Collection[str]
    actions: Collection[str]


def check(doc: SourceDocument, names: Names | None = None) -> tuple[StatechartSpec | None,
                                                                    list[Diagnostic]]:
    """Validate ``doc``; return the spec (``None`` when the schema fails) and every finding.

    ``names`` enables the check that every guard and action is provided by a plugin.
    """
    if not isinstance(doc.data, dict):
        return None, [doc.diagnostic((), "a statechart file must be a mapping "
                                          "with 'statechart', 'initial' and 'states'")]
    try:
        spec = StatechartSpec.model_validate(doc.data)
    except ValidationError as exc:
        return None, sorted(_schema_diagnostics(doc, exc), key=lambda d: (d.line, d.column))
    findings = list(_semantic(doc, spec, names))
    return spec, sorted(findings, key=lambda d: (d.line, d.column))


#: The model that a mapping at ``(..., field, name_or_index)`` is validated against.
_NESTED: dict[tuple[type[BaseModel], str], type[BaseModel]] = {
    (schema.StatechartSpec, "states"): schema.StateSpec,
    (schema.StatechartSpec, "transitions"): schema.TransitionSpec,
    (schema.StatechartSpec, "settings"): schema.SettingSpec,
    (schema.StateSpec, "states"): schema.StateSpec,
    (schema.StateSpec, "after"): schema.DelayedTransition,
}


def _model_at(loc: tuple) -> type[BaseModel] | None:
    """The model that validates the mapping at ``loc`` (``None`` for free-form data)."""
    model: type[BaseModel] | None = schema.StatechartSpec
    parts = list(loc)
    while parts and model is not None:
        if len(parts) < 2:
            return None
        model = _NESTED.get((model, str(parts[0])))
        parts = parts[2:]
    return model


def _doc_loc(doc: SourceDocument, loc: tuple) -> tuple:
    """The part of a pydantic error location that exists in the document. Union members add
    their type (``int``, ``constrained-str``) and bare names become one-item lists; neither
    is in the document, so both are dropped."""
    kept: tuple = ()
    for part in loc:
        candidate = (*kept, part)
        if candidate in doc.positions or candidate in doc.key_positions:
            kept = candidate
    return kept


def _where(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "document"


def _yaml_type(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"{type(value).__name__} {value!r}"


def _schema_diagnostics(doc: SourceDocument, exc: ValidationError) -> Iterator[Diagnostic]:
    grouped: dict[tuple, list[dict]] = {}
    for err in exc.errors():
        full = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            loc = _doc_loc(doc, full)
            field = str(full[-1])
            model = _model_at(loc[:-1])
            fields = list(model.model_fields) if model is not None else []
            hint = difflib.get_close_matches(field, fields, n=1)
            message = f"unknown field {field!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")
            grouped.setdefault((loc, message, True), [])
        elif err["type"] == "missing":
            loc = _doc_loc(doc, full[:-1])
            message = f"missing required field {str(full[-1])!r}"
            grouped.setdefault((loc, f"{_where(loc)}: {message}" if loc else message, False), [])
        elif "[key]" in full and _doc_loc(doc, full[: full.index("[key]")]):
            loc = _doc_loc(doc, full[: full.index("[key]")])
            message = f"invalid name {str(loc[-1])!r} in {_where(loc[:-1])}: {err['msg']}"
            grouped.setdefault((loc, message, True), [])
        else:
            loc = _doc_loc(doc, full)
            grouped.setdefault((loc, "", False), []).append(err)
    for (loc, message, key), errors in grouped.items():
        if errors:
            message = f"{_where(loc)}: {_describe(errors)}"
        yield doc.diagnostic(loc, message, key=key)


def _describe(errors: list[dict]) -> str:
    """One message for the errors at one place (several when a union's members all failed)."""
    if all(e["type"] in ("model_type", "model_attributes_type", "dict_type") for e in errors):
        return f"expected a mapping, got {_yaml_type(errors[0]['input'])}"
    # When a union member accepted the type but not the value (``ms: -5``), that is the
    # member the author meant; the other members' "should be a valid ..." only add noise.
    specific = [e for e in errors if not e["type"].endswith("_type")]
    messages = list(dict.fromkeys(e["msg"] for e in (specific or errors)))
    if len(messages) == 1:
        return messages[0]
    return f"{_yaml_type(errors[0]['input'])} is not valid: " + ", or ".join(
        m[:1].lower() + m[1:] for m in messages)


def _semantic(doc: SourceDocument, spec: StatechartSpec,
              names: Names | None) -> Iterator[Diagnostic]:
    nodes = flatten(spec)
    d = doc.diagnostic

    if spec.initial not in spec.states:
        hint = difflib.get_close_matches(spec.initial, spec.states, n=1)
        yield d(("initial",), f"initial state {spec.initial!r} is not a top-level state "
                              f"(top-level states: {', '.join(spec.states) or 'none'})"
                              + (f"; did you mean {hint[0]!r}?" if hint else ""))
    for node in nodes.values():
        st = node.spec
        if node.compound and st.initial is None:
            yield d(node.loc, f"compound state {node.path!r} needs an 'initial' child", key=True)
        elif st.initial is not None and not node.compound:
            yield d((*node.loc, "initial"), f"state {node.path!r} has no child states, "
                                            "so it cannot have an 'initial'")
        elif st.initial is not None and st.initial not in st.states:
            yield d((*node.loc, "initial"), f"initial {st.initial!r} is not a child of "
                                            f"{node.path!r} (children: {', '.join(st.states)})")
        if st.final and (node.compound or st.after or st.exit):
            yield d(node.loc, f"final state {node.path!r} cannot have child states, "
                              "'after' timers or exit actions", key=True)

    def unknown_state(loc: tuple, path: str, role: str) -> Diagnostic:
        hint = difflib.get_close_matches(path, nodes, n=1)
        return d(loc, f"{role} state {path!r} does not exist"
                      + (f"; did you mean {hint[0]!r}?" if hint else ""))

    for i, t in enumerate(spec.transitions):
        for j, src in enumerate(t.source):
            loc = ("transitions", i, "source", j)  # a bare name falls back to 'source' itself
            if src != schema.WILDCARD and src not in nodes:
                yield unknown_state(loc, src, "source")
            elif src in nodes and nodes[src].spec.final:
                yield d(loc, f"final state {src!r} cannot have transitions out of it")
        if t.dest is not None and t.dest not in nodes:
            yield unknown_state(("transitions", i, "dest"), t.dest, "destination")
    for node in nodes.values():
        for k, a in enumerate(node.spec.after):
            loc = (*node.loc, "after", k)
            if a.dest is not None and a.dest not in nodes:
                yield unknown_state((*loc, "dest"), a.dest, "destination")
            if isinstance(a.ms, str):
                setting = spec.settings.get(a.ms)
                if setting is None:
                    yield d((*loc, "ms"), f"'after' delay names setting {a.ms!r}, "
                                          "which is not in 'settings'")
                elif setting.type != "int":
                    yield d((*loc, "ms"), f"'after' delay setting {a.ms!r} must be an int, "
                                          f"not {setting.type}")

    for name, setting in spec.settings.items():
        for bound in ("min", "max"):
            if getattr(setting, bound) is not None and setting.type not in ("int", "float"):
                yield d(("settings", name, bound), f"setting {name!r} is a {setting.type}; only "
                                                   f"int and float settings can have a {bound!r}")
        if setting.min is not None and setting.max is not None and setting.min > setting.max:
            yield d(("settings", name, "max"), f"setting {name!r} has max {setting.max:g} "
                                               f"below its min {setting.min:g}")
        try:
            coerce(setting, setting.default, f"settings.{name}.default", strict=True)
        except ValueError as exc:
            yield d(("settings", name, "default"), str(exc))
    try:
        json.dumps(spec.context, allow_nan=False)
    except (TypeError, ValueError) as exc:
        yield d(("context",), f"context values must be JSON data: {exc}")

    structural_ok = spec.initial in nodes and all(
        (not n.compound) or (n.spec.initial in n.spec.states) for n in nodes.values())
    if structural_ok:
        yield from _flow(doc, spec, nodes)
    if names is not None:
        yield from _plugin_names(doc, spec, nodes, names)


def _outgoing(spec: StatechartSpec, nodes: dict[str, StateNode], leaf: str) -> Iterator[str | None]:
    """Destinations of everything that can leave ``leaf``: its own and its ancestors'
    transitions and timers, and wildcard transitions."""
    active = set(lineage(leaf))
    for t in spec.transitions:
        if schema.WILDCARD in t.source or active.intersection(t.source):
            yield t.dest
    for path in active:
        for a in nodes[path].spec.after:
            yield a.dest


def _flow(doc: SourceDocument, spec: StatechartSpec,
          nodes: dict[str, StateNode]) -> Iterator[Diagnostic]:
    start = settle(nodes, spec.initial)
    reached: set[str] = set(lineage(start))
    queue = [start]
    while queue:
        leaf = queue.pop()
        for dest in _outgoing(spec, nodes, leaf):
            if dest is None or dest not in nodes:
                continue
            target = settle(nodes, dest)
            if target not in reached:
                queue.append(target)
            reached.update(lineage(target))
    for node in nodes.values():
        if node.path not in reached:
            yield doc.diagnostic(node.loc, f"state {node.path!r} is unreachable from the "
                                           f"initial state {spec.initial!r}", key=True)
        elif not node.compound and not node.spec.final:
            # Internal transitions and transitions that settle back into this very leaf
            # run actions but never leave it.
            exits = [dest for dest in _outgoing(spec, nodes, node.path)
                     if dest is not None and (dest not in nodes
                                              or settle(nodes, dest) != node.path)]
            if not exits:
                yield doc.diagnostic(node.loc, f"state {node.path!r} is not final but has no "
                                               "transition or timer that leaves it", key=True)


def _plugin_names(doc: SourceDocument, spec: StatechartSpec, nodes: dict[str, StateNode],
                  names: Names) -> Iterator[Diagnostic]:
    def check_list(loc: tuple, values: list[str], known: Collection[str], kind: str):
        for j, value in enumerate(values):
            if value not in known:
                hint = difflib.get_close_matches(value, list(known), n=1)
                at = (*loc, j) if (*loc, j) in doc.positions else loc
                yield doc.diagnostic(at, f"{kind} {value!r} is not provided by any loaded plugin"
                                         + (f"; did you mean {hint[0]!r}?" if hint else ""))

    for i, t in enumerate(spec.transitions):
        loc = ("transitions", i)
        yield from check_list((*loc, "guards"), t.guards, names.guards, "guard")
        yield from check_list((*loc, "unless"), t.unless, names.guards, "guard")
        yield from check_list((*loc, "actions"), t.actions, names.actions, "action")
    for node in nodes.values():
        yield from check_list((*node.loc, "entry"), node.spec.entry, names.actions, "action")
        yield from check_list((*node.loc, "exit"), node.spec.exit, names.actions, "action")
        for k, a in enumerate(node.spec.after):
            loc = (*node.loc, "after", k)
            yield from check_list((*loc, "guards"), a.guards, names.guards, "guard")
            yield from check_list((*loc, "unless"), a.unless, names.guards, "guard")
            yield from check_list((*loc, "actions"), a.actions, names.actions, "action")
