"""``orion demo``: the bundled conversation through the real runtime, then a Mermaid diagram.

Time runs on a virtual clock, so the 2000 ms idle wait passes at once; the output says so. The
demo's plugin only observes transitions, through the same public hook a team's plugin would
use. The story goes to stderr; the diagram, which is data, goes to stdout.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from orion import hookimpl
from orion.models.script import load_script
from orion.hooks.manager import make_plugin_manager
from orion.runtime.report import ConsoleReporter
from orion.runtime.runner import play
from orion.statechart import builtin_statecharts, load_definition
from orion.statechart.io.diagrams import mermaid
from orion.trace.store import TraceStore

DEMO_SCRIPT = "demo.yaml"
INDENT = " " * 7


class ShowTransitions:
    """Prints each lifecycle transition as it happens."""

    def __init__(self, console: Console):
        self.console = console

    @hookimpl
    def lifecycle_transition(self, lifecycle, transition):
        dest = "(stays)" if transition.dest == transition.source else f"→ {transition.dest}"
        self.console.print(f"{INDENT}[blue]{lifecycle.name}[/blue] {transition.trigger} {dest}")


def play_conversation(console: Console, root: Path) -> bool:
    """The bundled example conversation, through the real runtime and its built-in plugins."""
    script = load_script(Path(str(resources.files("orion_examples") / DEMO_SCRIPT)))
    console.print(f"[bold]1. A conversation[/bold]  (examples/{DEMO_SCRIPT})")
    console.print(f"{INDENT}{escape(script.description or '')}")
    plugins = make_plugin_manager()
    plugins.register(ShowTransitions(console), "orion-demo-transitions")
    workspace = root / "conversation"
    result = asyncio.run(play(script, workspace=workspace, plugins=plugins,
                              reporter=ConsoleReporter(console)))
    for error in result.errors:
        console.print(f"{INDENT}[red]error:[/red] {escape(error)}")
    for report in result.files:
        console.print(f"{INDENT}[green]file[/green] {report.path}: {report.bytes} bytes, "
                      f"sha256 {report.sha256[:12]}")
    for session in result.sessions:
        console.print(f"{INDENT}[green]session[/green] {session['id'][:8]} "
                      f"{session['target_file']}: {session['status']}, continuations "
                      f"{session['continuations']}, correction rounds {session['corrections']}")
    stats = TraceStore(workspace / ".orion" / "orion.db").stats()
    counts = ", ".join(f"{count} {kind}" for kind, count in sorted(stats["counts"].items()))
    console.print(f"{INDENT}[green]trace[/green] {counts}")
    console.print(f"{INDENT}(see them: orion traces --workspace {workspace})\n")
    return result.ok


def run_demo(workspace: str | None = None) -> int:
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    root = Path(workspace) if workspace else Path(tempfile.mkdtemp(prefix="orion-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    console.print(f"[bold]Orion demo[/bold]  workspace: {root}")
    console.print("Time is virtual here: the 2000 ms idle wait is compressed, not slept.\n")
    ok = play_conversation(console, root)

    chart = next(p for p in builtin_statecharts() if p.stem == "write_session")
    definition = load_definition(chart, plugins=make_plugin_manager())
    console.print("[bold]2. The write-session statechart[/bold] as a Mermaid diagram, on stdout "
                  "(paste it into any Mermaid viewer)")
    sys.stderr.flush()
    print(mermaid(definition.spec, highlight="done", settings=dict(definition.settings)), end="")
    return 0 if ok else 1
