"""Plan mode through the public hooks (ADR "work by plan").

The five invariants, each held here by construction:

1. ``gate_tools`` withholds ``plan_set_content`` and ``plan_get`` unless plan work is active.
2. ``authorize_tool_call`` denies them when it is not (a policy failure: the handler never
   runs, so the plan store is untouched, and the runtime traces the denial).
3. The only canonical content is ``Plan.markdown`` in the plan store.
4. ``build_context`` puts a compact plan block into every request's system context while plan
   work is active: it is rebuilt each time, so it survives compaction and restarts.
5. The store's unique index admits one active plan at most.

The tools only send their arguments to the ``plan_mode`` lifecycle; persisting a draft is the
``finalize`` hook's job, for the ``set_content`` transitions of the statechart.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from orion import hookimpl
from orion.context import ContextBlock
from orion.errors import OrionError
from orion.plan.service import LIFECYCLE, PlanCommandError, describe, plan_service_for
from orion.plan.store import Status
from orion.tools.gating import Decision
from orion.tools.spec import ToolSpec

PLAN_TOOLS = ("plan_set_content", "plan_get")


class SetContentArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    plan_markdown: str = Field(min_length=1, description="the whole plan, as one Markdown "
                               "document; it replaces the stored draft")
    title: str | None = Field(default=None, max_length=200, description="the plan's title")
    expected_revision: int | None = Field(
        default=None, ge=0, description="the revision your draft is based on (from plan_get); "
                                        "the call is refused if the plan changed since")


class GetArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


def set_content(args: SetContentArgs, context) -> dict[str, Any]:
    service = plan_service_for(context.runtime)
    limit = service.lifecycle.settings["max_plan_bytes"]
    size = len(args.plan_markdown.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise OrionError(f"plan_markdown is {size} bytes; the limit is {limit} bytes "
                         "(setting plan_mode.max_plan_bytes). Shorten the plan.")
    plan = service.set_content(args.plan_markdown, args.title)
    return {"plan_id": plan.id, "title": plan.title, "status": plan.status.value,
            "revision": plan.revision}


def get(args: GetArgs, context) -> dict[str, Any]:
    plan = plan_service_for(context.runtime).active_plan
    if plan is None:  # authorization denies this first; kept for direct callers
        raise OrionError("plan work is not active")
    return {"plan_id": plan.id, "title": plan.title, "status": plan.status.value,
            "revision": plan.revision, "markdown": plan.markdown or ""}


# -- lifecycle actions and finalization ---------------------------------------------------------

def _service(lifecycle):
    if lifecycle.owner is None:
        raise OrionError("the plan_mode lifecycle needs a runtime (its owner)")
    return plan_service_for(lifecycle.owner)


def open_plan(lifecycle, transition) -> None:
    _service(lifecycle).store.create(title=transition.payload.get("title") or "")


def approve_plan(lifecycle, transition) -> None:
    service = _service(lifecycle)
    service.store.set_status(service.active_plan_id, Status.EXECUTING)


def close_plan(lifecycle, transition) -> None:
    service = _service(lifecycle)
    plan = service.active_plan
    if plan is None:
        return
    ended = Status.COMPLETED if plan.status is Status.EXECUTING else Status.CANCELLED
    service.store.set_status(plan.id, ended, deactivate=True)


@hookimpl
def finalize(lifecycle, transition):
    if lifecycle.name != LIFECYCLE:
        return None
    service = _service(lifecycle)
    payload = transition.payload
    return service.store.set_content(service.active_plan_id, payload["plan_markdown"],
                                     payload.get("title"))


@hookimpl
def register_actions(register):
    register("open_plan", open_plan)
    register("approve_plan", approve_plan)
    register("close_plan", close_plan)


# -- tools, gating and authorization --------------------------------------------------------------

@hookimpl
def register_tools(register):
    register(ToolSpec("plan_set_content", "Store the plan: the whole Markdown document, which "
                      "replaces the current draft. Available while plan work is active.",
                      SetContentArgs, set_content))
    register(ToolSpec("plan_get", "Load the current plan: its Markdown, title, status and "
                      "revision. Available while plan work is active.", GetArgs, get))


def _active(request) -> bool:
    runtime = request.extra.get("runtime")
    return runtime is not None and plan_service_for(runtime).plan_work_active


@hookimpl
def gate_tools(tools, request):
    return None if _active(request) else list(PLAN_TOOLS)


@hookimpl
def authorize_tool_call(call, request):
    if call.name not in PLAN_TOOLS:
        return None
    runtime = request.extra.get("runtime")
    plan = plan_service_for(runtime).active_plan if runtime is not None else None
    if plan is None:
        return Decision.deny(f"{call.name} needs plan work, which is not active (the user "
                             "starts it with /plan on)")
    expected = call.arguments.get("expected_revision")
    if call.name == "plan_set_content" and expected is not None and expected != plan.revision:
        return Decision.deny(f"expected_revision {expected} does not match the plan's current "
                             f"revision {plan.revision}; load it with plan_get and try again")
    return None


# -- context, commands, reset -------------------------------------------------------------------

@hookimpl
def build_context(request):
    runtime = request.extra.get("runtime")
    if runtime is None:
        return None
    service = plan_service_for(runtime)
    plan = service.active_plan
    if plan is None:
        return None
    text = (f"Plan work is active: {describe(plan)}. Use `plan_get` to load the plan; call "
            "`plan_set_content(plan_markdown=...)` with a new draft.")
    if service.lifecycle.settings["context_includes_markdown"] and plan.markdown:
        text += f"\n\nThe plan:\n\n{plan.markdown}"
    return ContextBlock("plan", text, order=10)


def plan_command(runtime, args: str) -> str:
    service = plan_service_for(runtime)
    action = args.strip().lower()
    if action == "":
        return service.status()
    if action == "on":
        return service.on()
    if action == "approve":
        try:
            return service.approve()
        except PlanCommandError as exc:
            return str(exc)
    if action == "done":
        return service.done()
    return f"Unknown /plan action {args.strip()!r}: use /plan on, /plan approve, /plan done, or /plan."


@hookimpl
def register_slash_commands(register):
    register("plan", plan_command, "plan work: /plan on | approve | done; /plan shows the plan")


@hookimpl
def conversation_reset(runtime):
    plan_service_for(runtime).done(reason="reset")
