"""Reading a plan's history: its revisions, one by number, and the difference between two.

A *line* of revisions is a plan and the plans it superseded or was superseded by (a revision
made while executing is a new plan row, whose revision number continues the count), so within
a line a revision number names one draft. ``orion plan show|diff|revisions`` and the chat's
``/plan show N`` and ``/plan diff A B`` read it through these functions.
"""

from __future__ import annotations

import difflib

from orion.errors import OrionError
from orion.plan.store import Plan, PlanStore, PlanStoreError, Revision


class PlanHistoryError(OrionError):
    """A plan or revision that does not exist; the message names it."""


def line_plan(store: PlanStore, plan_id: str | None = None) -> Plan:
    """The plan whose line a command reads: the one ``plan_id`` names (its id or the start of
    it), else the active plan, else the newest."""
    if plan_id is not None:
        try:
            return store.find(plan_id)
        except PlanStoreError as exc:
            raise PlanHistoryError(str(exc)) from None
    plan = store.active() or next(iter(store.history(1)), None)
    if plan is None:
        raise PlanHistoryError("no plans yet")
    return plan


#: Plan ids are shown with this many characters (``orion plan history``); a reference this long
#: is an id even when it happens to be all digits.
ID_SHOWN = 8


def revision(store: PlanStore, plan: Plan, ref: str | int) -> Revision:
    """The revision ``ref`` names: a number (shorter than a shown plan id) is a revision of
    ``plan``'s line; anything else is a plan id or its start, meaning that plan's newest
    draft."""
    if isinstance(ref, int) or (ref.isdecimal() and len(ref) < ID_SHOWN):
        number = int(ref)
        found = store.revision(plan.id, number)
        if found is None:
            numbers = [r.revision for r in store.revisions(plan.id)]
            have = (f"revisions {', '.join(map(str, numbers))}" if numbers
                    else "no stored drafts")
            raise PlanHistoryError(f"plan {plan.id[:8]} has no revision {number} ({have})")
        return found
    return newest(store, line_plan(store, ref))


def newest(store: PlanStore, plan: Plan) -> Revision:
    """``plan``'s current draft, as a revision."""
    found = store.revision(plan.id, plan.revision) if plan.revision else None
    if found is None:
        raise PlanHistoryError(f"plan {plan.id[:8]} has no draft yet")
    return found


def label(rev: Revision) -> str:
    title = f" '{rev.title}'" if rev.title else ""
    return f"revision {rev.revision} (plan {rev.plan_id[:8]}{title})"


def diff(old: Revision, new: Revision) -> str:
    """A unified diff of two drafts' Markdown, labelled with their revisions; ``""`` when they
    are the same."""
    lines = difflib.unified_diff(old.markdown.splitlines(keepends=True),
                                 new.markdown.splitlines(keepends=True),
                                 fromfile=label(old), tofile=label(new))
    # A draft without a final newline would run into the next line of the diff.
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines)
