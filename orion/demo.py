"""``orion demo``: a scripted conversation through the runtime, then both built-in lifecycles
through their main paths, then a Mermaid diagram.

Time runs on a virtual clock, so the 2000 ms idle wait passes at once; the output says so.
The demo's own plugin observes every transition and finalizes both lifecycles, through the
same public hooks a team's plugin would use. The story goes to stderr; the diagram, which is
data, goes to stdout.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path

from rich.console import Console

from orion import hookimpl
from orion.clock import VirtualClock
from orion.models.script import load_script
from orion.plugins import make_plugin_manager
from orion.runtime.report import ConsoleReporter
from orion.runtime.runner import play
from orion.trace.store import TraceStore
from orion.statechart import builtin_statecharts, load_definition
from orion.statechart.diagram import mermaid

GUIDE = [f"## Step {i}\n\nDo step {i} and check its output.\n" for i in range(1, 41)]


class DemoPlugin:
    """Prints transitions and finalizes: writes the streamed file, stores the plan."""

    def __init__(self, console: Console, workspace: Path):
        self.console, self.workspace = console, workspace
        self.plan_revision = 0
        self.content: list[str] = []

    @hookimpl
    def lifecycle_transition(self, lifecycle, transition):
        arrow = "(stays)" if transition.dest == transition.source else f"→ {transition.dest}"
        self.console.print(f"  [cyan]{transition.trigger:<22}[/cyan] {arrow}")
        if transition.result:
            self.console.print(f"  {'':<22} [green]finalized:[/green] {transition.result['say']}")
        outbox = lifecycle.context.get("outbox")
        while outbox:
            first, *rest = outbox.pop(0).splitlines()
            self.console.print(f"  {'':<22} [magenta]prompt to model:[/magenta] {first}")
            for line in rest:
                self.console.print(f"  {'':<22}   {line}", markup=False)

    @hookimpl
    def finalize(self, lifecycle, transition):
        if lifecycle.name == "write_session":
            target = self.workspace / "docs" / "guide.md"
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(".md.tmp")
            tmp.write_text("".join(self.content), encoding="utf-8")
            os.replace(tmp, target)
            lines = sum(chunk.count("\n") for chunk in self.content)
            return {"say": f"wrote {target} ({lines} lines)"}
        if lifecycle.name == "plan_mode":
            self.plan_revision += 1
            title = transition.payload.get("title", "")
            return {"say": f"plan {title!r} stored as revision {self.plan_revision}"}
        return None


DEMO_SCRIPT = "demo.yaml"


def play_conversation(console: Console, root: Path) -> bool:
    """The bundled example conversation, through the real runtime and its built-in plugins."""
    script = load_script(Path(str(resources.files("orion_examples") / DEMO_SCRIPT)))
    console.print(f"[bold]A conversation[/bold]  (examples/{DEMO_SCRIPT}: {script.description})")
    result = asyncio.run(play(script, workspace=root / "conversation",
                              plugins=make_plugin_manager(),
                              reporter=ConsoleReporter(console)))
    for error in result.errors:
        console.print(f"  [red]error:[/red] {error}", markup=True)
    stats = TraceStore(root / "conversation" / ".orion" / "orion.db").stats()
    counts = ", ".join(f"{count} {kind}" for kind, count in sorted(stats["counts"].items()))
    console.print(f"  trace: {counts} (orion traces --workspace {root / 'conversation'})")
    console.print("")
    return result.ok


def run_demo(workspace: str | None = None) -> int:
    console = Console(stderr=True, highlight=False, soft_wrap=True)
    root = Path(workspace) if workspace else Path(tempfile.mkdtemp(prefix="orion-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    pm = make_plugin_manager()
    plugin = DemoPlugin(console, root)
    pm.register(plugin, "orion-demo")
    charts = {p.stem: p for p in builtin_statecharts()}
    clock = VirtualClock()

    console.print(f"[bold]Orion demo[/bold]  workspace: {root}")
    console.print("Time is virtual here: idle waits are compressed, not slept.\n")
    conversation_ok = play_conversation(console, root)

    ws = load_definition(charts["write_session"], plugins=pm)
    idle = ws.settings["idle_ms"]
    console.print(f"[bold]write_session[/bold]  ({charts['write_session'].name}, "
                  f"idle_ms={idle})")
    session = ws.create(clock=clock)
    session.trigger("begin", target_file="docs/guide.md", operation="create")
    plugin.content = GUIDE[:15]
    session.trigger("message_end")
    console.print(f"  {'':<22} … {idle} ms pass with no DONE (virtual)")
    clock.advance(idle)
    session.trigger("content")
    plugin.content += GUIDE[15:30]
    lines = sum(c.count("\n") for c in plugin.content)
    session.trigger("truncated", bytes=len("".join(plugin.content)), lines=lines,
                    last_lines=plugin.content[-1].splitlines()[-1:])
    session.trigger("content")
    plugin.content += GUIDE[30:]
    session.trigger("done")
    session.trigger("issues_found", issues=[{"line": 12, "context": "Do step 3 and\\x00 check",
                                             "message": "NUL character"}])
    session.trigger("corrections_received")
    session.trigger("valid")
    console.print(f"  final state: [bold]{session.state}[/bold], continuations "
                  f"{session.context['continuations']}/{ws.settings['max_continuations']}, "
                  f"corrections {session.context['corrections']}/"
                  f"{ws.settings['max_corrections']}\n")

    pmode = load_definition(charts["plan_mode"], plugins=pm)
    console.print(f"[bold]plan_mode[/bold]  ({charts['plan_mode'].name})")
    plan = pmode.create(clock=clock)
    plan.trigger("plan_on")
    plan.trigger("set_content", title="Ship the guide", plan_markdown="# Plan\n1. Draft\n")
    plan.trigger("set_content", title="Ship the guide", plan_markdown="# Plan\n1. Draft\n2. Review\n")
    plan.trigger("approve")
    plan.trigger("set_content", title="Ship the guide v2", plan_markdown="# Plan\n1. Draft\n")
    plan.trigger("plan_done")
    console.print(f"  final state: [bold]{plan.state}[/bold]\n")

    console.print("[bold]Mermaid diagram of write_session[/bold] (on stdout; paste it into any "
                  "Mermaid viewer):")
    sys.stderr.flush()
    print(mermaid(ws.spec, highlight=session.state, settings=dict(ws.settings)), end="")
    if pm.failures:
        console.print(f"[red]{len(pm.failures)} plugin failure(s)[/red]")
        return 1
    return 0 if conversation_ok else 1
