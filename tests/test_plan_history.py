"""Plan history (docs/plan-mode.md, "Revisions and history"): every ``plan_set_content`` is kept
as a revision, Variant B included; ``orion plan show ID|--revision N``, ``orion plan diff A
B``, ``orion plan revisions``; ``/plan show N`` and ``/plan diff A B`` in a conversation; and a
database from before revisions were kept. A real runtime, real plugins, a real ``orion.db``.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from click.testing import CliRunner
from sqlite_utils import Database, Migrations

from orion.cli import cli
from orion.plan.store import DB_NAME, PlanStore, Status, _m001_plans
from test_plan_mode import DRAFT, DRAFT_2, DRAFT_3, draft, session, workspace  # noqa: F401


def three_drafts(session):  # noqa: F811
    """A plan drafted twice before approval (Variant B) and revised once while executing:
    revisions 1 and 2 in the first plan, 3 in the plan that superseded it."""
    s = session(draft(DRAFT, title="Release"), draft(DRAFT_2), draft(DRAFT_3))
    s("/plan on")
    s("Plan.")
    s("Add the notes.")
    s("/plan approve")
    s("Hotfix first.")
    return s


def cli_run(workspace, *args: str):  # noqa: F811
    return CliRunner().invoke(cli, [*args, "--workspace", str(workspace)])


# == The store keeps every draft ==================================================================

def test_variant_b_no_longer_loses_the_draft_it_replaces(session):  # noqa: F811
    s = three_drafts(session)
    active = s.store.active()
    assert (active.markdown, active.revision, active.status) == (DRAFT_3, 3, Status.READY)
    revisions = s.store.revisions(active.id)
    assert [(r.revision, r.markdown) for r in revisions] == [(1, DRAFT), (2, DRAFT_2),
                                                           (3, DRAFT_3)]
    first = s.store.get(active.supersedes)
    assert [r.plan_id for r in revisions] == [first.id, first.id, active.id]
    assert all(r.title == "Release" for r in revisions)
    # The line is the same whichever of its plans it is asked from.
    assert s.store.revisions(first.id) == revisions
    assert s.store.revision(first.id, 3) == revisions[2]
    assert s.store.revision(active.id, 1) == revisions[0]
    assert s.store.revision(active.id, 4) is None
    # The model and the user still see one plan: the active one, at its newest draft.
    assert s.service.show() == f"plan 'Release', READY, revision 3:\n\n{DRAFT_3}"


def test_a_refused_draft_is_not_a_revision(session):  # noqa: F811
    s = three_drafts(session)
    plan = s.store.active()
    before = s.store.revisions(plan.id)
    with pytest.raises(Exception, match="current revision 3"):
        s.store.set_content(plan.id, "# Another\n", None, expected_revision=2)
    assert s.store.revisions(plan.id) == before


def test_separate_plans_have_separate_lines(session):  # noqa: F811
    s = session(draft(DRAFT), draft(DRAFT_2))
    s("/plan on First")
    s("Plan.")
    s("/plan done")
    s("/plan on Second")
    s("Plan.")
    second, first = s.store.history()
    assert [r.markdown for r in s.store.revisions(first.id)] == [DRAFT]
    assert [r.markdown for r in s.store.revisions(second.id)] == [DRAFT_2]


# == In the conversation: /plan show N, /plan diff A B ============================================

def test_plan_show_n_and_plan_diff_in_the_conversation(session):  # noqa: F811
    s = three_drafts(session)
    first_id = s.store.active().supersedes[:8]
    assert s("/plan show 1") == f"revision 1 (plan {first_id} 'Release'):\n\n{DRAFT}"
    assert s("/plan show") == f"plan 'Release', READY, revision 3:\n\n{DRAFT_3}"
    diff = s("/plan diff 1 2")
    assert diff.startswith(f"--- revision 1 (plan {first_id} 'Release')\n"
                           f"+++ revision 2 (plan {first_id} 'Release')\n")
    assert "+2. Write the notes\n" in diff and "-2. Announce it\n" in diff
    assert s("/plan diff 2 2") == (f"revision 2 (plan {first_id} 'Release') and revision 2 "
                                   f"(plan {first_id} 'Release') are the same.")
    rows = s.store.rows()
    assert s("/plan show 7") == (f"plan {s.store.active().id[:8]} has no revision 7 "
                                 "(revisions 1, 2, 3).")
    assert s("/plan diff 1") == "/plan diff takes two revisions, e.g. /plan diff 1 2."
    assert s("/plan show 1 2") == "/plan show takes one revision at most, e.g. /plan show 2."
    assert s.store.rows() == rows  # reading changes nothing
    s("/plan done")
    assert s("/plan show 1") == "Plan work is not active. Start it with /plan on."


# == On the command line ==========================================================================

def test_orion_plan_show_a_revision_and_a_plan_by_id(session, workspace):  # noqa: F811
    s = three_drafts(session)
    active = s.store.active()
    first = s.store.get(active.supersedes)
    s("/plan done")  # nothing active: the newest plan's line is read
    shown = cli_run(workspace, "plan", "show", "--revision", "2")
    assert shown.exit_code == 0, shown.output
    assert shown.stdout == DRAFT_2  # exactly the draft: `orion plan show ... > plan.md`
    assert f"revision 2 (plan {first.id[:8]} 'Release')" in shown.stderr
    by_id = cli_run(workspace, "plan", "show", first.id[:8])
    assert (by_id.exit_code, by_id.stdout) == (0, DRAFT_2)  # its newest draft
    both = cli_run(workspace, "plan", "show", first.id, "--revision", "1", "--json")
    assert json.loads(both.stdout) == {
        "plan_id": first.id, "revision": 1, "title": "Release", "markdown": DRAFT,
        "bytes": len(DRAFT), "created_ms": s.store.revision(first.id, 1).created_ms}


def test_orion_plan_diff_and_revisions(session, workspace):  # noqa: F811
    s = three_drafts(session)
    active = s.store.active()
    first = s.store.get(active.supersedes)
    result = cli_run(workspace, "plan", "diff", "2", "3")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"--- revision 2 (plan {first.id[:8]} 'Release')",
        f"+++ revision 3 (plan {active.id[:8]} 'Release')",
        "@@ -1,5 +1,4 @@",
        " # Release",
        " ",
        "-1. Tag v1.2",
        "-2. Write the notes",
        "-3. Announce it",
        "+1. Tag v1.2.1 (hotfix first)",
        "+2. Announce it",
    ]
    # A plan id names that plan's newest draft.
    by_id = cli_run(workspace, "plan", "diff", first.id[:8], active.id[:8])
    assert by_id.stdout == result.stdout
    same = cli_run(workspace, "plan", "diff", "1", "1")
    assert (same.exit_code, same.stdout) == (0, "")
    assert "are the same" in same.stderr
    listed = cli_run(workspace, "plan", "revisions", "--json")
    assert [(r["revision"], r["plan_id"]) for r in json.loads(listed.stdout)] == [
        (1, first.id), (2, first.id), (3, active.id)]


@pytest.mark.parametrize(("args", "message"), [
    (("plan", "show", "--revision", "9"), "has no revision 9 (revisions 1, 2, 3)"),
    (("plan", "show", "ffffffffff"), "no plan 'ffffffffff'"),
    (("plan", "diff", "1", "9"), "has no revision 9"),
    (("plan", "diff", "1", "2", "--plan", "zz"), "no plan 'zz'"),
    (("plan", "revisions", "zz"), "no plan 'zz'"),
])
def test_unknown_plans_and_revisions_are_usage_errors_that_name_them(session, workspace,  # noqa: F811
                                                                       args, message):
    three_drafts(session)
    result = cli_run(workspace, *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_without_a_database_the_commands_say_so_and_create_nothing(tmp_path):
    for args in (("plan", "show", "--revision", "1"), ("plan", "diff", "1", "2"),
                 ("plan", "revisions")):
        result = cli_run(tmp_path, *args)
        assert result.exit_code == 2 and "no plans yet" in result.stderr
    assert list(tmp_path.iterdir()) == []


# == A database from before revisions were kept ===================================================

def test_an_older_database_keeps_each_plans_last_draft_as_its_revision(tmp_path):
    state = tmp_path / ".orion"
    state.mkdir()
    db = Database(state / DB_NAME)
    old = Migrations("orion.plans")  # the migrations as they were: 001 only
    old(name="001_plans")(_m001_plans)
    old.apply(db)
    db.execute("INSERT INTO plans (id, title, markdown, status, revision, supersedes, active, "
               "created_ms, updated_ms) VALUES ('a1', 'Old', ?, 'COMPLETED', 2, NULL, NULL, "
               "1.0, 2.0), ('b2', 'Empty', NULL, 'CANCELLED', 0, NULL, NULL, 3.0, 3.0)",
               (DRAFT_2,))
    db.conn.commit()
    db.close()
    store = PlanStore.for_state_dir(state)  # applies 002_plan_revisions
    [revision] = store.revisions("a1")
    assert (revision.revision, revision.markdown, revision.title, revision.created_ms) == (
        2, DRAFT_2, "Old", 2.0)
    assert store.revisions("b2") == []
    store.close()
    # Opening it again changes nothing (the migration ran once).
    again = PlanStore.for_state_dir(state)
    assert len(again.revisions("a1")) == 1
    again.close()
    with sqlite3.connect(state / DB_NAME) as conn:
        names = [n for (n,) in conn.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = 'orion.plans' ORDER BY id")]
    assert names == ["001_plans", "002_plan_revisions"]


def test_the_revisions_are_read_by_a_second_process(session, workspace):  # noqa: F811
    three_drafts(session)
    proc = subprocess.run([sys.executable, "-m", "orion", "plan", "diff", "1", "3",
                           "--workspace", str(workspace)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "+1. Tag v1.2.1 (hotfix first)" in proc.stdout
