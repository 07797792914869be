"""The plan service of one runtime: plan work on or off, the active plan, its lifecycle.

``plan_work_active`` and ``active_plan_id`` are derived from the store (plan work is on exactly
while a plan is active), so a restart or a second ``orion chat`` in the same workspace resumes
plan mode where it was. The ``plan_mode`` lifecycle follows the active plan's status: it is
brought in line with the store whenever it is used.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import TYPE_CHECKING, Any

from orion.errors import ActionError, OrionError, TriggerNotAllowed
from orion.plan import history
from orion.plan.store import DB_NAME, DamagedPlan, Plan, PlanStore, RevisionConflict, Status
from orion.statechart.interpreter.lifecycle import SNAPSHOT_FORMAT

if TYPE_CHECKING:
    from orion.hooks.host import Host
    from orion.runtime.runtime import Runtime
    from orion.statechart.interpreter.definition import Definition
    from orion.statechart.interpreter.lifecycle import Lifecycle

SERVICE = "plan"
#: After the plan store failed to open, how long plan work stays unavailable before the next try.
REOPEN_AFTER_S = 30.0
LIFECYCLE = "plan_mode"
#: The tag of the state that each status of the active plan puts the lifecycle in (no plan:
#: ``plan_off``). The chart says which state that is, so a team may rename its states.
TAG_OF = {Status.COLLECTING: "collecting", Status.READY: "ready", Status.EXECUTING: "executing"}


class PlanCommandError(OrionError):
    """A plan command that cannot be carried out now; the message says why."""


class PlanStoreUnavailable(PlanCommandError):
    """The plan store cannot be opened or read (a damaged, locked or unwritable database, or a
    damaged active plan): plan work is unavailable, and only plan work: writes and the rest of
    a turn go on."""


class PlanChanged(PlanCommandError):
    """A draft based on a plan this conversation read, which another session (another
    ``orion chat`` in the workspace) changed since: the draft is not stored, so neither
    overwrites the other in silence. The message tells the model how to go on."""


class PlanService:
    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self._store: PlanStore | None = None
        self._failure: tuple[float, PlanStoreUnavailable] | None = None
        self._warned = False
        self._definition: Definition | None = None
        self._seen_key: tuple[int, int] | None = None
        self._seen: Plan | None = None
        #: The plan (id, revision) as this conversation last saw it: in a request's context
        #: block, from ``plan_get``, or as it stored it. A draft given without
        #: ``expected_revision`` is based on it, and refused when the plan moved on since.
        self.known: tuple[str, int] | None = None
        #: The revision the draft being stored must replace (compared in the store's
        #: transaction), while ``set_content`` runs.
        self.replacing: int | None = None

    # -- the store: opened at first use; its faults stop plan work only --------------------------

    @property
    def store(self) -> PlanStore:
        if self._store is None:
            # A store that could not be opened is not tried again on every request: opening
            # a locked database waits for its busy timeout each time.
            failed = self._failure
            if failed is not None and time.monotonic() - failed[0] < REOPEN_AFTER_S:
                raise failed[1]
            try:
                self._store = PlanStore.for_state_dir(self.runtime.state_dir)
            except (sqlite3.Error, OSError) as exc:
                error = self._unavailable(exc)
                self._failure = (time.monotonic(), error)
                raise error from exc
            if self._store.notice:  # plans moved from orion.db: said by the one that moved them
                self.runtime.reporter.notice(self._store.notice)
        return self._store

    def _unavailable(self, exc: BaseException) -> PlanStoreUnavailable:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return PlanStoreUnavailable(
            f"plan work is unavailable: the plan store {self.runtime.state_dir}/{DB_NAME} "
            f"cannot be used ({reason})")

    def _warn_once(self, error: PlanStoreUnavailable) -> None:
        if not self._warned:
            self._warned = True
            self.runtime.reporter.notice(f"{error}; everything else goes on")

    # -- state, derived from the store --------------------------------------------------------

    @property
    def active_plan(self) -> Plan | None:
        """The active plan, read from the store now (:class:`PlanStoreUnavailable` when the
        store cannot be read)."""
        try:
            return self.store.active()
        except sqlite3.Error as exc:
            raise self._unavailable(exc) from exc
        except DamagedPlan as exc:
            raise PlanStoreUnavailable(f"plan work is unavailable: the active {exc}; then "
                                       "/plan on starts a new plan") from exc

    def saw(self, plan: Plan | None) -> Plan | None:
        """Note that the conversation was shown ``plan`` (the active plan, or none)."""
        self.known = (plan.id, plan.revision) if plan is not None else None
        return plan

    def plan_for_request(self) -> Plan | None:
        """The active plan as the current model request sees it: read once per request (and
        again after this runtime changed it), so the context block and the tool gating of one
        request agree and share one read. Authorization does not use it: it reads now."""
        try:
            return self._plan_for_request()
        except PlanStoreUnavailable as error:
            # Gating and the context block ask here: without a store there is no plan work,
            # said once, and the turn goes on.
            self._warn_once(error)
            return None

    def _plan_for_request(self) -> Plan | None:
        key = (self.runtime.requests, self.store.writes)
        if key != self._seen_key:
            plan = self._seen = self.saw(self.active_plan)
            self._seen_key = key
            if plan is not None or LIFECYCLE in self.runtime.lifecycles:
                # What other plugins see in ``states`` follows the store (after a restart,
                # or a change made by another session), from this request on.
                self._lifecycle_for(plan)
        return self._seen

    @property
    def plan_work_active(self) -> bool:
        return self.active_plan is not None

    @property
    def active_plan_id(self) -> str | None:
        plan = self.active_plan
        return plan.id if plan else None

    @property
    def definition(self) -> Definition:
        """The compiled ``plan_mode`` statechart, with the workspace's settings (once)."""
        if self._definition is None:
            self._definition = self.runtime.definition(LIFECYCLE)
        return self._definition

    @property
    def settings(self):
        return self.definition.settings

    @property
    def lifecycle(self) -> Lifecycle:
        """The ``plan_mode`` lifecycle, in the state of the active plan (restored after a
        restart, or when another session in the workspace changed the plan)."""
        return self._lifecycle_for(self.active_plan)

    def _lifecycle_for(self, plan: Plan | None) -> Lifecycle:
        """``runtime.lifecycles["plan_mode"]``, brought in line with ``plan``: kept when its
        state matches, else replaced by an instance in the right state (restored, so no entry
        actions run and no ``lifecycle_started`` is announced for it)."""
        runtime = self.runtime
        lifecycle = runtime.lifecycles.get(LIFECYCLE)
        tag = TAG_OF[plan.status] if plan is not None else "plan_off"
        if lifecycle is not None and lifecycle.has_tag(tag) and lifecycle.host is runtime:
            return lifecycle
        definition = self.definition
        wanted = definition.state_tagged(tag)
        if wanted is None:  # `orion check` reports a chart without it (the contract's tags)
            raise OrionError(f"statechart {definition.name!r} has no state tagged {tag!r}")
        if wanted == definition.initial_leaf:
            lifecycle = definition.create(clock=runtime.lifecycle_clock, host=runtime)
        else:
            snapshot = {"format": SNAPSHOT_FORMAT, "definition": definition.name,
                        "definition_hash": definition.hash, "id": uuid.uuid4().hex,
                        "state": wanted, "finished": False,
                        "context": definition.initial_context, "timers": []}
            lifecycle = definition.restore(snapshot, clock=runtime.lifecycle_clock,
                                           host=runtime)
        runtime.lifecycles[LIFECYCLE] = lifecycle
        return lifecycle

    # -- commands -----------------------------------------------------------------------------

    def on(self, title: str = "") -> str:
        plan = self.active_plan
        if plan is not None:
            return f"Plan work is already active: {describe(plan)}. Nothing changed."
        self.lifecycle.trigger("plan_on", title=title)
        return f"Plan work is on: {describe(self.saw(self._active()))}."

    def approve(self) -> str:
        plan = self._active()
        try:
            self.lifecycle.trigger("approve")
        except TriggerNotAllowed:
            if plan.status is Status.EXECUTING:
                why = "it is already approved and EXECUTING"
            else:
                why = (f"it is {plan.status.value}, and approval needs READY: a draft stored "
                       "with plan_set_content")
            raise PlanCommandError(f"The plan cannot be approved: {why}.") from None
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
        return f"Plan work is active: {describe(plan)}{NEXT[plan.status]}"

    def show(self, revision: str | None = None) -> str:
        """The active plan, or revision ``revision`` of its line, with the Markdown."""
        plan = self.active_plan
        if plan is None:
            return "Plan work is not active. Start it with /plan on."
        if revision is not None:
            try:
                rev = history.revision(self.store, plan, revision)
            except history.PlanHistoryError as exc:
                return f"{exc}."
            return f"{history.label(rev)}:\n\n{rev.markdown}"
        if not plan.markdown:
            return f"{describe(plan)}: no draft yet."
        return f"{describe(plan)}:\n\n{plan.markdown}"

    def diff(self, old: str, new: str) -> str:
        """What changed from revision ``old`` to ``new`` of the active plan's line."""
        plan = self.active_plan
        if plan is None:
            return "Plan work is not active. Start it with /plan on."
        try:
            a, b = (history.revision(self.store, plan, ref) for ref in (old, new))
        except history.PlanHistoryError as exc:
            return f"{exc}."
        return history.diff(a, b) or f"{history.label(a)} and {history.label(b)} are the same."

    def set_content(self, markdown: str, title: str | None, *,
                    expected_revision: int | None = None) -> Plan:
        """Send the draft to the lifecycle; the ``finalize`` hook of the plan-mode plugin
        stores it (and checks ``expected_revision`` in the same transaction)."""
        problem = size_problem(markdown, self.settings["max_plan_bytes"])
        if problem:
            raise PlanCommandError(problem)
        active = self.active_plan
        lifecycle = self._lifecycle_for(active)
        if active is None or lifecycle.has_tag("plan_off"):
            raise PlanCommandError("plan work is not active (the user starts it with /plan on)")
        base = self.known if expected_revision is None else None
        if base is not None and base != (active.id, active.revision):
            raise self._changed(base, active)
        self.replacing = expected_revision if base is None else base[1]
        try:
            lifecycle.trigger("set_content", plan_markdown=markdown, title=title,
                              expected_revision=expected_revision)
        except ActionError as exc:
            if base is not None and isinstance(exc.cause, RevisionConflict):
                # Another session stored a draft between the check above and this one's
                # transaction: the store's compare-and-set caught it.
                raise self._changed(base, self.active_plan) from exc
            raise
        finally:
            self.replacing = None
        result = lifecycle.current.result if lifecycle.current else None
        if not isinstance(result, Plan):
            raise OrionError("the plan draft was not stored")
        self.saw(result)
        return result

    def _changed(self, base: tuple[str, int], now: Plan | None) -> PlanChanged:
        """The refusal of a draft based on ``base`` while the active plan is ``now``: the
        model is told to reload and merge, the user is told that two sessions met."""
        was = f"revision {base[1]} of plan {base[0][:8]}"
        if now is None:
            what = "plan work was ended since (by another session in this workspace)"
        elif now.id == base[0] or now.supersedes == base[0]:
            what = (f"another session in this workspace stored revision {now.revision} since "
                    f"({describe(now)})")
        else:
            what = f"another session in this workspace started a new plan since ({describe(now)})"
        self.runtime.reporter.notice(
            f"plan draft not stored: this conversation's model based it on {was}, but {what}; "
            "the model was told to load the plan again")
        return PlanChanged(
            f"the draft was not stored: it is based on {was}, and {what}. Nothing was "
            "overwritten. Load the plan with plan_get, merge your changes into it, and call "
            "plan_set_content again")

    def _active(self) -> Plan:
        plan = self.active_plan
        if plan is None:
            raise PlanCommandError("Plan work is not active. Start it with /plan on.")
        return plan

    def report(self) -> dict[str, Any] | None:
        """``orion run --json``'s ``plan``: the active plan, else the newest, else null (and
        ``{"error": ...}`` when the plan store cannot be read)."""
        try:
            plan = self.active_plan or next(iter(self.store.history(1)), None)
        except (PlanStoreUnavailable, sqlite3.Error) as exc:
            return {"error": str(exc)}
        if plan is None:
            return None
        return {"id": plan.id, "active": plan.active, "status": plan.status.value,
                "revision": plan.revision, "title": plan.title, "bytes": plan.bytes}

    def close(self) -> None:
        if self._store is not None:
            self._store.close()


#: What each status asks of the user, after ``/plan``'s status line.
NEXT = {
    Status.COLLECTING: ". The model stores the first draft with plan_set_content.",
    Status.READY: ". Approve it with /plan approve, or ask for changes.",
    Status.EXECUTING: ". End plan work with /plan done when the work is finished.",
}


def size_problem(markdown: str, limit: int) -> str | None:
    """Why ``markdown`` is too large for a plan (``max_plan_bytes``), or ``None``."""
    size = len(markdown.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return (f"plan_markdown is {size} bytes; the limit is {limit} bytes (setting "
            "plan_mode.max_plan_bytes). Shorten the plan and call plan_set_content again.")


def describe(plan: Plan | None) -> str:
    if plan is None:
        return "no plan"
    title = f"'{plan.title}'" if plan.title else "untitled"
    return f"plan {title}, {plan.status.value}, revision {plan.revision}"


def plan_service_for(host: Host | None) -> PlanService:
    """The PlanService of ``host``, made on first use. Plan mode run in Orion's runtime
    (they start lifecycles and read the stream), so a host of another kind (or none) is a TypeError."""
    from orion.runtime.runtime import Runtime

    if not isinstance(host, Runtime):
        raise TypeError(f"plan mode run in Orion's runtime, not in {type(host).__name__}")
    runtime = host
    service = runtime.services.get(SERVICE)
    if service is None:
        service = runtime.services[SERVICE] = PlanService(runtime)
    return service
