"""Plan mode through the public hooks (ADR "work by plan"; docs/plan-mode.md).

The five invariants, and where each is held:

1. ``gate_tools`` withholds ``plan_set_content`` and ``plan_get`` unless plan work is active.
2. ``authorize_tool_call`` denies them when it is not (a policy failure: the handler never
   runs, so the plan store is untouched, and the runtime traces the denial). It reads the store
   at call time, so a tool advertised before another session ended plan work is still denied.
3. The only canonical content is ``Plan.markdown`` in the plan store; the tools and the
   lifecycle only carry a draft to it.
4. ``build_context`` puts a compact plan block into every request's system context while plan
   work is active: it is rebuilt for every request, so it survives compaction and restarts.
5. The store's unique index admits one active plan at most; ``/plan on`` while plan work is
   active changes nothing.

The tools only send their arguments to the ``plan_mode`` lifecycle; persisting a draft is the
job of the chart's ``finalize`` action (provided for ``plan_mode`` only, as its other actions
are), for the ``set_content`` transitions of the statechart. A ``plan_mode``
lifecycle without a runtime (the statechart on its own, as in docs/plugins.md) has no plan
store: its actions do nothing and ``finalize`` leaves it to other plugins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from orion.api import (ContextBlock, Decision, OrionError, RunReport, ToolSpec, hookimpl,
                       host_of)
from orion.plan.service import (
    LIFECYCLE,
    PlanCommandError,
    describe,
    plan_service_for,
    size_problem,
)
from orion.plan.store import Status
from .finalization import finalizer

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from orion.api import (ContextRequest, GateRequest, Host, Lifecycle, ParsedCall, ToolContext,
                           Transition)
    from orion.plan.service import PlanService
    from orion.plan.store import Plan

PLAN_TOOLS = ("plan_set_content", "plan_get")


class SetContentArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    plan_markdown: str = Field(min_length=1, pattern=r"\S", description=(
        "the whole plan, as one Markdown document; it replaces the stored draft"))
    title: str | None = Field(default=None, max_length=200, description="the plan's title")
    expected_revision: int | None = Field(
        default=None, ge=0, description="the revision your draft is based on (from plan_get); "
                                        "the call is refused if the plan changed since")


class GetArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


def set_content(args: SetContentArgs, context: ToolContext) -> dict[str, Any]:
    plan = plan_service_for(context.host).set_content(
        args.plan_markdown, args.title, expected_revision=args.expected_revision)
    return {"plan_id": plan.id, "title": plan.title, "status": plan.status.value,
            "revision": plan.revision, "bytes": plan.bytes}


def get(args: GetArgs, context: ToolContext) -> dict[str, Any]:
    service = plan_service_for(context.host)
    plan = service.saw(service.active_plan)
    if plan is None:  # authorization denies this first; kept for direct callers
        raise OrionError("plan work is not active")
    return {"plan_id": plan.id, "title": plan.title, "status": plan.status.value,
            "revision": plan.revision, "markdown": plan.markdown or ""}


# -- lifecycle actions and finalization ---------------------------------------------------------

def _service(lifecycle: Lifecycle) -> PlanService | None:
    host = host_of(lifecycle)
    return plan_service_for(host) if host is not None else None


def open_plan(lifecycle: Lifecycle, transition: Transition) -> None:
    service = _service(lifecycle)
    if service is not None:
        service.store.create(title=transition.payload.get("title") or "")


def approve_plan(lifecycle: Lifecycle, transition: Transition) -> None:
    service = _service(lifecycle)
    if service is not None:
        plan_id = service.active_plan_id
        if plan_id is None:
            raise OrionError("there is no active plan to approve")
        service.store.approve(plan_id)


def close_plan(lifecycle: Lifecycle, transition: Transition) -> None:
    service = _service(lifecycle)
    plan = service.active_plan if service is not None else None
    if service is not None and plan is not None:
        service.store.end(plan.id)


def cancel_plan(lifecycle: Lifecycle, transition: Transition) -> None:
    """``/reset``: the work was abandoned, so even an executing plan is CANCELLED, not
    COMPLETED."""
    service = _service(lifecycle)
    plan = service.active_plan if service is not None else None
    if service is not None and plan is not None:
        service.store.end(plan.id, cancel=True)


def store_draft(lifecycle: Lifecycle, transition: Transition) -> Any:
    """The ``finalize`` of plan mode: the draft, stored as the active plan's revision."""
    service = _service(lifecycle)
    if service is None:
        return None
    plan = service.active_plan
    if plan is None:
        raise PlanCommandError("plan work is not active (the user starts it with /plan on)")
    payload = transition.payload
    expected = payload.get("expected_revision")
    # The draft replaces the revision the conversation saw (PlanService.set_content), checked
    # in the store's transaction: a draft another session stored meanwhile is not lost.
    return service.store.set_content(plan.id, payload["plan_markdown"], payload.get("title"),
                                     expected_revision=expected if expected is not None
                                     else service.replacing)


@hookimpl
def register_actions(register: Callable[..., None]) -> None:
    for action in (open_plan, approve_plan, close_plan, cancel_plan):
        register(action.__name__, action, chart=LIFECYCLE)
    register("finalize", finalizer(store_draft), chart=LIFECYCLE)


# -- tools, gating and authorization --------------------------------------------------------------

@hookimpl
def register_tools(register: Callable[[ToolSpec], None]) -> None:
    register(ToolSpec("plan_set_content", "Store the plan: the whole Markdown document, which "
                      "replaces the current draft (while the plan is executing, it becomes a "
                      "new revision that the user approves again). Available while plan work "
                      "is active.", SetContentArgs, set_content))
    register(ToolSpec("plan_get", "Load the current plan: its Markdown, title, status and "
                      "revision. Available while plan work is active.", GetArgs, get))


def _state_is_active(request: GateRequest) -> bool:
    """Without a runtime (gating asked outside one): the ``plan_mode`` lifecycle's tags."""
    return "plan_on" in request.tags.get(LIFECYCLE, ())


@hookimpl
def gate_tools(tools: Sequence[ToolSpec], request: GateRequest) -> list[str] | None:
    runtime = request.host
    if runtime is not None:
        active = plan_service_for(runtime).plan_for_request() is not None
    else:
        active = _state_is_active(request)
    return None if active else list(PLAN_TOOLS)


@hookimpl
def authorize_tool_call(call: ParsedCall, request: GateRequest) -> Decision | None:
    if call.name not in PLAN_TOOLS:
        return None
    runtime = request.host
    if runtime is None:
        if _state_is_active(request):
            return None
        return Decision.deny(f"{call.name} needs plan work, which is not active (the user "
                             "starts it with /plan on)")
    service = plan_service_for(runtime)
    try:
        plan = service.active_plan  # now, not as the request saw it
    except PlanCommandError as exc:
        return Decision.deny(str(exc))
    if plan is None:
        return Decision.deny(f"{call.name} needs plan work, which is not active (the user "
                             "starts it with /plan on)")
    if call.name != "plan_set_content":
        return None
    expected = call.arguments.get("expected_revision")
    if expected is not None and expected != plan.revision:
        return Decision.deny(f"expected_revision {expected} does not match the plan's current "
                             f"revision {plan.revision}; load it with plan_get and try again")
    problem = size_problem(call.arguments.get("plan_markdown") or "",
                           service.settings["max_plan_bytes"])
    return Decision.deny(problem) if problem else None


# -- context, commands, reset -------------------------------------------------------------------

#: What the model should do next, by status (one sentence each: the block stays compact).
GUIDANCE = {
    Status.COLLECTING: "No draft is stored yet: investigate with any tool you need, then store "
                       "the whole plan.",
    Status.READY: "The draft waits for the user's approval (/plan approve); a new call "
                  "replaces it.",
    Status.EXECUTING: "The user approved it: carry it out. A new draft becomes a new revision "
                      "that the user approves again.",
}


def plan_block(plan: Plan, *, include_markdown: bool) -> ContextBlock:
    text = (f"Plan work is active: {describe(plan)}. The plan is stored outside this "
            "conversation: use `plan_get` to load it; to change it, call "
            f"`plan_set_content(plan_markdown=...)` with the whole new Markdown document "
            f"(pass expected_revision={plan.revision}). {GUIDANCE[plan.status]}")
    if include_markdown and plan.markdown:
        text += f"\n\nThe plan (revision {plan.revision}):\n\n{plan.markdown}"
    return ContextBlock("plan", text, order=10, volatile=True)


@hookimpl
def build_context(request: ContextRequest) -> ContextBlock | None:
    runtime = request.host
    if runtime is None:
        return None
    service = plan_service_for(runtime)
    plan = service.plan_for_request()
    if plan is None:
        return None
    return plan_block(plan, include_markdown=service.settings["context_includes_markdown"])


USAGE = ("use /plan on [TITLE], /plan approve, /plan done, /plan show [REVISION], /plan diff "
         "A B, or /plan alone for the status")


def plan_command(runtime: Host, args: str) -> str | None:
    try:
        return _plan_command(runtime, args)
    except PlanCommandError as exc:  # also a plan store that cannot be used: said, not raised
        return str(exc)


def _plan_command(runtime: Host, args: str) -> str | None:
    service = plan_service_for(runtime)
    action, _, rest = args.strip().partition(" ")
    action = action.lower()
    if action == "":
        return service.status()
    if action == "on":
        return service.on(title=rest.strip())
    if action in ("show", "diff"):
        return _revisions_command(service, action, rest.split())
    if rest.strip():
        return f"/plan {action} takes no arguments; {USAGE}."
    try:
        if action == "approve":
            return service.approve()
        if action == "done":
            return service.done()
    except PlanCommandError as exc:
        return str(exc)
    return f"Unknown /plan action {action!r}: {USAGE}."


def _revisions_command(service: PlanService, action: str, words: list[str]) -> str:
    """``/plan show [REVISION]`` and ``/plan diff A B``."""
    if action == "show":
        if len(words) > 1:
            return "/plan show takes one revision at most, e.g. /plan show 2."
        return service.show(words[0] if words else None)
    if len(words) != 2:
        return "/plan diff takes two revisions, e.g. /plan diff 1 2."
    return service.diff(*words)


@hookimpl
def register_slash_commands(register: Callable[..., None]) -> None:
    register("plan", plan_command, "work by plan: /plan on [TITLE] | approve | done | "
                                   "show [REVISION] | diff A B; /plan shows the status")


@hookimpl
def runtime_started(host: Host) -> None:
    """Every runtime has its plan service, closed with the runtime's services (the store it
    opens at first use with it); plan work goes on where the store says it was."""
    plan_service_for(host)


@hookimpl
def report_run(host: Host) -> RunReport:
    """``orion run --json``'s ``plan``: the active plan, else the newest, else null."""
    return RunReport(sections={"plan": plan_service_for(host).report()})


@hookimpl
def conversation_reset(host: Host) -> None:
    try:
        message = plan_service_for(host).done(reason="reset")
    except PlanCommandError as exc:
        message = str(exc)
    if message:
        host.reporter.notice(message)
