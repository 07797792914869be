"""The plan service of one runtime: plan work on or off, the active plan, its lifecycle.

``plan_work_active`` and ``active_plan_id`` are derived from the store (plan work is on exactly
while a plan is active), so a restart or a second ``orion chat`` in the same workspace resumes
plan mode where it was. The ``plan_mode`` lifecycle follows the active plan's status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from orion.errors import OrionError, TriggerNotAllowed
from orion.plan.store import Plan, PlanStore, Status

if TYPE_CHECKING:
    from orion.runtime.runtime import Runtime
    from orion.statechart.lifecycle import Lifecycle

SERVICE = "plan"
LIFECYCLE = "plan_mode"
STATE_OF = {Status.COLLECTING: "active.collecting", Status.READY: "active.ready",
            Status.EXECUTING: "active.executing"}


class PlanCommandError(OrionError):
    """A plan command that cannot be carried out now; the message says why."""


class PlanService:
    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self.store = PlanStore.for_state_dir(runtime.state_dir)

    # -- state, derived from the store --------------------------------------------------------

    @property
    def active_plan(self) -> Plan | None:
        return self.store.active()

    @property
    def plan_work_active(self) -> bool:
        return self.active_plan is not None

    @property
    def active_plan_id(self) -> str | None:
        plan = self.active_plan
        return plan.id if plan else None

    @property
    def lifecycle(self) -> Lifecycle:
        """The ``plan_mode`` lifecycle, in the state of the active plan (restored on first use
        after a restart)."""
        lifecycle = self.runtime.lifecycles.get(LIFECYCLE)
        plan = self.active_plan
        wanted = STATE_OF[plan.status] if plan is not None else "inactive"
        if lifecycle is None or lifecycle.state != wanted:
            definition = self.runtime.definition(LIFECYCLE)
            fresh = definition.create(clock=self.runtime.lifecycle_clock, owner=self.runtime)
            if wanted != fresh.state:
                fresh = definition.restore({**fresh.snapshot(), "state": wanted},
                                           clock=self.runtime.lifecycle_clock,
                                           owner=self.runtime)
            self.runtime.lifecycles[LIFECYCLE] = lifecycle = fresh
        return lifecycle

    # -- commands -----------------------------------------------------------------------------

    def on(self) -> str:
        plan = self.active_plan
        if plan is not None:
            return f"Plan work is already active: {describe(plan)}. Nothing changed."
        self.lifecycle.trigger("plan_on")
        return f"Plan work is on: {describe(self._active())}."

    def approve(self) -> str:
        plan = self._active()
        try:
            self.lifecycle.trigger("approve")
        except TriggerNotAllowed:
            raise PlanCommandError(
                f"The plan cannot be approved: it is {plan.status.value} (approval needs "
                "READY: a draft stored with plan_set_content).") from None
        return f"Plan approved: {describe(self._active())}."

    def done(self, *, reason: str = "done") -> str | None:
        plan = self.active_plan
        if plan is None:
            return None if reason == "reset" else "Plan work is not active."
        self.lifecycle.trigger("plan_done" if reason == "done" else "reset")
        ended = self.store.get(plan.id)
        return f"Plan work ended: {describe(ended)}."

    def status(self) -> str:
        plan = self.active_plan
        if plan is None:
            return "Plan work is not active. Start it with /plan on."
        return f"Plan work is active: {describe(plan)}."

    def set_content(self, markdown: str, title: str | None) -> Plan:
        """Send the draft to the lifecycle; the ``finalize`` plugin stores it."""
        lifecycle = self.lifecycle
        lifecycle.trigger("set_content", plan_markdown=markdown, title=title)
        result = lifecycle.current.result if lifecycle.current else None
        if not isinstance(result, Plan):
            raise OrionError("the plan draft was not stored")
        return result

    def _active(self) -> Plan:
        plan = self.active_plan
        if plan is None:
            raise PlanCommandError("Plan work is not active. Start it with /plan on.")
        return plan

    def report(self) -> dict[str, Any] | None:
        """``orion run --json``'s ``plan``: the active plan, else the newest, else null."""
        plan = self.active_plan or next(iter(self.store.history(1)), None)
        if plan is None:
            return None
        return {"active": plan.active, "status": plan.status.value, "revision": plan.revision,
                "title": plan.title}


def describe(plan: Plan | None) -> str:
    if plan is None:
        return "no plan"
    title = f"'{plan.title}'" if plan.title else "untitled"
    return f"plan {title}, {plan.status.value}, revision {plan.revision}"


def plan_service_for(runtime: Runtime) -> PlanService:
    service = runtime.services.get(SERVICE)
    if service is None:
        service = runtime.services[SERVICE] = PlanService(runtime)
    return service
