"""Mermaid ``stateDiagram-v2`` text for a statechart, optionally highlighting one state."""

from __future__ import annotations

from orion.statechart.model.schema import WILDCARD, StatechartSpec
from orion.statechart.model.tree import SEPARATOR, StateNode, flatten


def _id(path: str) -> str:
    # Mermaid ids cannot contain dots, and child names must be unique across the diagram.
    return path.replace(SEPARATOR, "__").replace("-", "_")


def _label(trigger: str, guards: list[str], unless: list[str], actions: list[str]) -> str:
    label = trigger
    conditions = guards + [f"not {u}" for u in unless]
    if conditions:
        label += f" [{' and '.join(conditions)}]"
    if actions:
        label += f" / {', '.join(actions)}"
    return label.replace(":", "#58;")


def mermaid(spec: StatechartSpec, *, highlight: str | None = None,
            settings: dict | None = None) -> str:
    """The diagram. ``highlight`` (a state path) and its ancestors are styled as active."""
    nodes = flatten(spec)
    if highlight is not None and highlight not in nodes:
        raise KeyError(highlight)
    settings = settings or {name: s.default for name, s in spec.settings.items()}
    out = ["stateDiagram-v2"]
    if spec.description:
        out.append(f"    %% {spec.statechart}: {spec.description}")

    def emit_state(node: StateNode, indent: str) -> None:
        sid = _id(node.path)
        if node.compound:
            out.append(f'{indent}state "{node.name}" as {sid} {{')
            out.append(f"{indent}    [*] --> {_id(node.path + SEPARATOR + node.spec.initial)}"
                       if node.spec.initial else f"{indent}    %% no initial child")
            for child in node.children:
                emit_state(nodes[child], indent + "    ")
            out.append(f"{indent}}}")
        else:
            out.append(f'{indent}state "{node.name}" as {sid}')
        if node.spec.final:
            out.append(f"{indent}{sid} --> [*]")

    out.append(f"    [*] --> {_id(spec.initial)}")
    for node in nodes.values():
        if node.parent is None:
            emit_state(node, "    ")

    for t in spec.transitions:
        sources = [p for p in nodes if nodes[p].parent is None] if WILDCARD in t.source \
            else t.source
        for source in sources:
            dest = t.dest or source
            out.append(f"    {_id(source)} --> {_id(dest)}: "
                       f"{_label(t.trigger, t.guards, t.unless, t.actions)}")
    for node in nodes.values():
        for a in node.spec.after:
            delay = f"{a.ms} ({settings.get(a.ms)} ms)" if isinstance(a.ms, str) else f"{a.ms} ms"
            label = _label(f"after {delay} {a.trigger}", a.guards, a.unless, a.actions)
            out.append(f"    {_id(node.path)} --> {_id(a.dest or node.path)}: {label}")

    if highlight is not None:
        out.append("    classDef active fill:#ffd54f,stroke:#e65100,stroke-width:3px")
        parts = highlight.split(SEPARATOR)
        for i in range(len(parts)):
            out.append(f"    class {_id(SEPARATOR.join(parts[: i + 1]))} active")
    return "\n".join(out) + "\n"
