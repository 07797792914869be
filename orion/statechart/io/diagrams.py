"""Diagrams of a statechart, drawn with ``transitions``' diagrams extension.

A chart becomes a :class:`DiagramMachine` (a ``HierarchicalGraphMachine`` with the chart's
states, ``.`` paths and transitions, each labelled ``trigger [guards] / actions``), and the
extension draws it: Mermaid ``stateDiagram-v2`` text with no extra installed, or a Graphviz
picture (SVG, PNG, ...) with the ``diagrams`` extra (``pip install
'orion-statecharts[diagrams]'``, which brings the ``graphviz`` package; Graphviz's ``dot``
program draws). The highlighted state and its ancestors are styled as active.

The Mermaid graph class keeps Orion's own layout of the text (ids without dots, one edge per
transition in file order, every ``*`` transition drawn from each top-level state), which
``orion diagram`` has always printed and docs embed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from transitions.extensions.diagrams import HierarchicalGraphMachine, NestedGraphTransition
from transitions.extensions.diagrams_mermaid import DigraphMock
from transitions.extensions.diagrams_mermaid import NestedGraph as MermaidGraph
from transitions.extensions.nesting import NestedState

from orion.statechart.model.schema import StatechartSpec
from orion.statechart.model.tree import SEPARATOR, edges, flatten, lineage

__all__ = ["DiagramMachine", "DiagramUnavailable", "Engine", "diagram_machine", "label",
           "mermaid", "picture"]


#: What draws a diagram: the Mermaid text, or Graphviz for a picture.
Engine = Literal["graphviz", "mermaid"]


class DiagramUnavailable(RuntimeError):
    """A picture needs Graphviz: the ``graphviz`` package and its ``dot`` program."""


def label(trigger: str, guards: list[str], unless: list[str], actions: list[str]) -> str:
    """``trigger [guard and not other] / action, action``."""
    text = trigger
    conditions = guards + [f"not {u}" for u in unless]
    if conditions:
        text += f" [{' and '.join(conditions)}]"
    if actions:
        text += f" / {', '.join(actions)}"
    return text


class _State(NestedState):
    separator = SEPARATOR  # the chart's paths

    def __init__(self, name: str, *, tags: list[str] | None = None, **kwargs: Any):
        super().__init__(name, **kwargs)
        self.tags = tags or []


class _Transition(NestedGraphTransition):
    def __init__(self, *args: Any, order: int = 0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        #: Position in the file (1-based; the extension's markup drops falsy attributes).
        self.order = order


class _Mermaid(MermaidGraph):
    """Mermaid text in Orion's layout: ``a.b`` is the id ``a__b``, every transition is its own
    edge in file order, and the active states get the ``active`` class."""

    def get_graph(self, title: str | None = None, roi_state: Any = None) -> DigraphMock:
        machine = self.machine
        assert isinstance(machine, DiagramMachine)  # the graph class of no other machine
        # A chart has an initial state (the schema requires one), so the machine has too.
        assert machine.initial is not None
        states, transitions = self._get_elements()
        out = ["stateDiagram-v2"]
        if machine.description:
            out.append(f"    %% {machine.chart}: {machine.description}")
        out.append(f"    [*] --> {_id(machine.initial)}")
        self._add_nested_nodes(states, out, prefix="", default_style="    ")
        self._add_edges(transitions, out)
        active = sorted((name for name, style in self.custom_styles["node"].items()
                         if style == "active"), key=lambda name: name.count(SEPARATOR))
        if active:
            out.append("    classDef active fill:#ffd54f,stroke:#e65100,stroke-width:3px")
            out.extend(f"    class {_id(name)} active" for name in active)
        for state, text in machine.notes:  # beside the state it is about, else a comment
            text = text.replace("\n", " ")
            out.append(f"    note right of {_id(state)} : {text.replace(':', '#58;')}"
                       if state is not None else f"    %% {text}")
        return DigraphMock("\n".join(out) + "\n")

    def _add_nested_nodes(self, states: list[dict[str, Any]], container: list[str],
                          prefix: str, default_style: str) -> None:
        indent = default_style  # this layout's "style" of a level is its indentation
        for state in states:
            path = prefix + state["name"]
            if state.get("children"):
                container.append(f'{indent}state "{state["name"]}" as {_id(path)} {{')
                initial = state.get("initial")
                container.append(f"{indent}    [*] --> {_id(path + SEPARATOR + initial)}"
                                 if initial else f"{indent}    %% no initial child")
                self._add_nested_nodes(state["children"], container, path + SEPARATOR,
                                       indent + "    ")
                container.append(f"{indent}}}")
            else:
                container.append(f'{indent}state "{state["name"]}" as {_id(path)}')
            if state.get("final"):
                container.append(f"{indent}{_id(path)} --> [*]")

    def _add_edges(self, transitions: list[dict[str, Any]], container: list[str]) -> None:
        for t in sorted((t for t in transitions if t["trigger"]), key=_order):
            source = t["source"]
            text = t.get("label", t["trigger"]).replace(":", "#58;")
            container.append(f"    {_id(source)} --> {_id(t.get('dest', source))}: {text}")


def _graphviz_graph() -> type:
    """The Graphviz graph class, or :class:`DiagramUnavailable` naming what is missing."""
    # ``pgv`` is the module's optional import of the graphviz package, None without it; the
    # stubs leave it out.
    from transitions.extensions.diagrams_graphviz import (  # type: ignore[attr-defined]
        NestedGraph, pgv)

    if pgv is None:
        raise DiagramUnavailable("drawing a picture needs the Graphviz extra: pip install "
                                 "'orion-statecharts[diagrams]' (and Graphviz's dot program)")

    class Graphviz(NestedGraph):
        def _transition_label(self, tran: dict[str, Any]) -> str:
            return tran.get("label", tran["trigger"])  # the label already says it all

        def _get_elements(self) -> tuple[list[Any], list[Any]]:
            states, transitions = super()._get_elements()
            return states, sorted(transitions, key=_order)

    return Graphviz


class DiagramMachine(HierarchicalGraphMachine):
    """A chart as ``transitions``' graph machine: only for drawing, never for running."""

    state_cls = _State
    transition_cls = _Transition
    transition_attributes = [*HierarchicalGraphMachine.transition_attributes, "order"]
    # Top to bottom: a lifecycle reads from its initial state down to its final ones.
    machine_attributes = {**HierarchicalGraphMachine.machine_attributes, "rankdir": "TB"}

    # The stubs type each style group as ``str | dict`` (no group is a str), hence the ignores.
    style_attributes = {
        **HierarchicalGraphMachine.style_attributes,
        # Final states are drawn twice outlined and grey; the active leaf stands out; its
        # ancestors' clusters get a red outline only.
        "node": {**HierarchicalGraphMachine.style_attributes["node"],  # type: ignore[dict-item]
                 "final": {"fillcolor": "gainsboro", "color": "black", "peripheries": "2"}},
        "graph": {**HierarchicalGraphMachine.style_attributes["graph"],  # type: ignore[dict-item]
                  "active": {"color": "red", "fillcolor": "white", "style": "bold,rounded"}},
    }

    def __init__(self, *, chart: str, description: str, engine: Engine,
                 notes: Sequence[tuple[str | None, str]] = (), **kwargs: Any):
        self.chart, self.description = chart, description
        #: What to write beside the chart (``orion check``'s findings): ``(state, text)``,
        #: ``state`` ``None`` for the chart as a whole.
        self.notes = list(notes)
        #: The final states by path (a Mermaid diagram marks them itself, a picture by style).
        self.finals: dict[str, _State] = {}
        super().__init__(model=None, auto_transitions=False, show_conditions=False,
                         show_state_attributes=engine != "mermaid", title=chart,
                         graph_engine=engine,
                         model_attribute="diagram_state", **kwargs)

    def _init_graphviz_engine(self, graph_engine: str) -> type:
        return _graphviz_graph() if graph_engine == "graphviz" else _Mermaid

    def graph(self, highlight: str | None = None) -> Any:
        """The extension's graph object (``.source`` for the text, ``.draw(...)`` for a file),
        with ``highlight`` and its ancestors styled as active."""
        graph = self.graph_cls(self)
        for path, state in self.finals.items():
            graph.set_node_style(path, "final")
        if highlight is not None:
            for path in lineage(highlight):
                graph.set_node_style(path, "active")
        title = self.chart
        if self.notes:  # a picture has them under its title, left-aligned
            title += "\n" + "".join(f"{f'{state}: ' if state else ''}{text}\\l"
                                     for state, text in self.notes)
        return graph.get_graph(title=title)


def diagram_machine(spec: StatechartSpec, *, settings: Mapping[str, Any] | None = None,
                    engine: Engine = "mermaid",
                    notes: Sequence[tuple[str | None, str]] = ()) -> DiagramMachine:
    """The chart as a :class:`DiagramMachine`; timer labels read the delays in ``settings``
    (default: the chart's defaults); ``notes`` go beside their states."""
    settings = settings or {name: s.default for name, s in spec.settings.items()}
    nodes = flatten(spec)
    states: dict[str, _State] = {}
    for path in reversed(nodes):  # children before their parents
        node = nodes[path]
        state = _State(node.name, tags=list(node.spec.tags), final=node.spec.final,
                       initial=node.spec.initial, on_enter=list(node.spec.entry),
                       on_exit=list(node.spec.exit))
        state.add_substates([states[child] for child in node.children])
        states[path] = state
    machine = DiagramMachine(chart=spec.statechart, description=spec.description, engine=engine,
                             notes=notes,
                             states=[states[p] for p, n in nodes.items() if n.parent is None],
                             initial=spec.initial)
    machine.finals.update((p, states[p]) for p, n in nodes.items() if n.spec.final)
    for edge in edges(spec, nodes):
        t = edge.spec
        trigger = edge.trigger
        if edge.timer is not None:
            ms = t.ms  # type: ignore[union-attr]
            delay = f"{ms} ({settings.get(ms)} ms)" if isinstance(ms, str) else f"{ms} ms"
            trigger = f"after {delay} {edge.trigger}"
        machine.add_transition(edge.trigger, "*" if edge.owner is None else edge.owner, t.dest,
                               conditions=list(t.guards), unless=list(t.unless),
                               before=list(t.actions), order=edge.index + 1,
                               label=label(trigger, t.guards, t.unless, t.actions))
    return machine


def mermaid(spec: StatechartSpec, *, highlight: str | None = None,
            settings: Mapping[str, Any] | None = None,
            notes: Sequence[tuple[str | None, str]] = ()) -> str:
    """The Mermaid ``stateDiagram-v2`` text. ``highlight`` (a state path) and its ancestors
    are styled as active; an unknown path raises ``KeyError``. ``notes`` (``orion check``'s
    findings) are notes beside their states, or comments."""
    if highlight is not None and highlight not in flatten(spec):
        raise KeyError(highlight)
    return diagram_machine(spec, settings=settings, notes=notes).graph(highlight).source


def picture(spec: StatechartSpec, *, format: str = "svg", highlight: str | None = None,
            settings: Mapping[str, Any] | None = None,
            notes: Sequence[tuple[str | None, str]] = ()) -> bytes:
    """The chart drawn by Graphviz as ``format`` (``svg``, ``png``, ``pdf``...), ``notes``
    under its title. Raises :class:`DiagramUnavailable` without the ``graphviz`` package or
    the ``dot`` program."""
    if highlight is not None and highlight not in flatten(spec):
        raise KeyError(highlight)
    graph = diagram_machine(spec, settings=settings, engine="graphviz",
                            notes=notes).graph(highlight)
    try:
        return graph.pipe(format=format)
    except Exception as exc:  # graphviz.ExecutableNotFound, or dot failing on the format
        raise DiagramUnavailable(f"Graphviz could not draw the {format} picture: {exc}") from exc


def _id(path: str) -> str:
    # Mermaid ids cannot contain dots, and child names must be unique across the diagram.
    return path.replace(SEPARATOR, "__").replace("-", "_")


def _order(transition: dict[str, Any]) -> int:
    return int(transition.get("order", 0))
