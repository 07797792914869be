"""The write plan (the arguments of WritePlanTool_begin) and its checks against real files.

Everything runs on real directories under ``tmp_path``: a workspace ``ws`` with a state
directory ``ws/.orion``, and a sibling ``outside`` directory whose files, bytes, modes and
mtimes are snapshotted before and after every escape attempt.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from orion.errors import OrionError
from orion.tools.arguments import ToolArgumentError, parse_arguments
from orion.tools.spec import ToolSpec
from orion.write_session.operations import execute
from orion.write_session.plan import (
    CheckedPlan,
    Operation,
    PlanRejected,
    WritePlan,
    check_plan,
    recheck,
)

# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".orion").mkdir(parents=True)
    (root / "src").mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    (out / "nested").mkdir(parents=True)
    (out / "secret.txt").write_text("do not touch\n")
    (out / "nested" / "deep.txt").write_text("deep\n")
    return out


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: kind, bytes, mode and mtime (ns)."""
    entries = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        entries[path.relative_to(root).as_posix()] = (
            path.is_dir(), path.is_symlink(), data, info.st_mode, info.st_mtime_ns)
    return entries


def plan(target: str, operation: str = "create", **fields) -> WritePlan:
    return WritePlan(intent="test write", target_file=target, operation=operation, **fields)


def check(ws: Path, target: str, operation: str = "create", **fields) -> CheckedPlan:
    return check_plan(plan(target, operation, **fields), workspace=ws, state_dir=ws / ".orion")


def rejected(ws: Path, target: str, operation: str = "create", **fields) -> PlanRejected:
    with pytest.raises(PlanRejected) as info:
        check(ws, target, operation, **fields)
    return info.value


APP_JS = "\n".join([
    "const a = 1;",                   # 1
    "",                               # 2
    "function f() {}",                # 3
    "module.exports = a;",            # 4
    *[f"// filler {i}" for i in range(5, 19)],
    "module.exports = f;",            # 19
    *[f"// more {i}" for i in range(20, 40)],
    "module.exports = {};",           # 40
]) + "\n"


# -- the model ---------------------------------------------------------------------------------


def test_operations_are_the_six_of_the_adr():
    assert [op.value for op in Operation] == [
        "create", "overwrite", "append", "insert", "replace_block", "replace_all"]
    assert Operation("replace_all") is Operation.REPLACE_ALL
    assert Operation.INSERT == "insert"


@pytest.mark.parametrize("operation, fields", [
    ("create", {}),
    ("overwrite", {}),
    ("append", {}),
    ("insert", {"location_marker": "def main", "position": "before"}),
    ("insert", {"location_marker": "def main", "position": "after"}),
    ("replace_block", {"start_marker": "# BEGIN", "end_marker": "# END"}),
    ("replace_all", {"search": "old_name"}),
])
def test_each_operation_accepts_exactly_its_fields(operation, fields):
    p = plan("a.py", operation, **fields)
    assert p.operation == operation
    for name, value in fields.items():
        assert getattr(p, name) == value


@pytest.mark.parametrize("operation, fields, missing", [
    ("insert", {"position": "after"}, "location_marker"),
    ("insert", {"location_marker": "x"}, "position"),
    ("replace_block", {"start_marker": "a"}, "end_marker"),
    ("replace_block", {"end_marker": "b"}, "start_marker"),
    ("replace_all", {}, "search"),
])
def test_a_missing_field_is_named_with_its_operation(operation, fields, missing):
    with pytest.raises(ValidationError) as info:
        plan("a.py", operation, **fields)
    text = str(info.value)
    assert f"operation '{operation}' requires {missing} (" in text


@pytest.mark.parametrize("operation, fields, stray, owner", [
    ("create", {"search": "x"}, "search", "replace_all"),
    ("append", {"location_marker": "x"}, "location_marker", "insert"),
    ("overwrite", {"position": "after"}, "position", "insert"),
    ("insert", {"location_marker": "x", "position": "after", "end_marker": "y"},
     "end_marker", "replace_block"),
    ("replace_all", {"search": "x", "start_marker": "y"}, "start_marker", "replace_block"),
])
def test_a_field_of_another_operation_is_rejected_by_name(operation, fields, stray, owner):
    with pytest.raises(ValidationError) as info:
        plan("a.py", operation, **fields)
    assert (f"{stray} belongs to operation '{owner}', not to '{operation}'; leave it out"
            in str(info.value))


def test_field_rules_intent_length_blank_markers_and_unknown_fields():
    with pytest.raises(ValidationError, match="intent"):
        WritePlan(intent="", target_file="a", operation="create")
    with pytest.raises(ValidationError, match="intent"):
        WritePlan(intent="x" * 501, target_file="a", operation="create")
    assert WritePlan(intent="x" * 500, target_file="a", operation="create")
    with pytest.raises(ValidationError, match="intent is blank"):
        WritePlan(intent="   ", target_file="a", operation="create")
    with pytest.raises(ValidationError, match="search must contain visible text"):
        plan("a", "replace_all", search=" \n")
    with pytest.raises(ValidationError, match="position"):
        plan("a", "insert", location_marker="x", position="middle")
    with pytest.raises(ValidationError, match="operation"):
        plan("a", "delete")
    with pytest.raises(ValidationError, match="content"):
        WritePlan(intent="x", target_file="a", operation="create", content="no content here")


def test_every_field_has_a_description_for_the_model():
    schema = WritePlan.model_json_schema()
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"intent", "target_file", "operation"}
    for name, prop in schema["properties"].items():
        described = prop.get("description") or ""
        assert len(described) > 30, name
    ops = schema["properties"]["operation"]["description"]
    for op in Operation:
        assert f"{op.value}:" in ops


def test_the_tool_loop_sends_the_field_problems_back_to_the_model():
    spec = ToolSpec("WritePlanTool_begin", "Start a write session.", WritePlan)
    assert spec.openai_definition()["function"]["parameters"]["properties"]["intent"]
    raw = json.dumps({"intent": "add helper", "target_file": "a.js", "operation": "insert",
                      "search": "x"})
    with pytest.raises(ToolArgumentError) as info:
        parse_arguments(raw, spec)
    text = info.value.for_model
    assert "operation 'insert' requires location_marker" in text
    assert "operation 'insert' requires position" in text
    assert "search belongs to operation 'replace_all', not to 'insert'" in text
    assert "Value error" not in text


def test_plan_rejected_is_an_orion_error_with_the_field():
    err = PlanRejected("bad", field="search")
    assert isinstance(err, OrionError)
    assert err.field == "search" and str(err) == "bad"


# -- check_plan: paths -------------------------------------------------------------------------


def test_create_checks_a_new_file_and_reports_its_relative_path(ws):
    checked = check(ws, "docs/guide.md")
    assert checked.target == (ws / "docs" / "guide.md").resolve()
    assert checked.relative == "docs/guide.md"
    assert checked.workspace == ws.resolve()
    assert (checked.exists, checked.mode) == (False, None)
    assert not (ws / "docs").exists()  # checking creates nothing


def test_absolute_path_inside_the_workspace_is_fine(ws):
    (ws / "src" / "a.py").write_text("x = 1\n")
    checked = check(ws, str(ws / "src" / "a.py"), "overwrite")
    assert checked.relative == "src/a.py" and checked.exists


def test_existing_file_records_its_mode(ws):
    script = ws / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    checked = check(ws, "run.sh", "append")
    assert checked.exists and checked.mode == 0o755


def test_escapes_are_rejected_and_nothing_outside_changes(ws, outside, tmp_path):
    (ws / "link_out.txt").symlink_to(outside / "secret.txt")
    (ws / "dangling").symlink_to(outside / "not_there.txt")
    (ws / "outdir").symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    attempts = [
        (str(outside / "secret.txt"), "overwrite", "is an absolute path outside the workspace"),
        (str(outside / "new.txt"), "create", "is an absolute path outside the workspace"),
        ("/etc/passwd", "append", "is an absolute path outside the workspace"),
        ("../outside/secret.txt", "overwrite", "escapes the workspace with '..'"),
        ("../escape.txt", "create", "escapes the workspace with '..'"),
        ("src/../../outside/x.txt", "create", "escapes the workspace with '..'"),
        ("link_out.txt", "overwrite", "through a symbolic link"),
        ("link_out.txt", "append", "through a symbolic link"),
        ("dangling", "create", "through a symbolic link"),
        ("outdir/secret.txt", "overwrite", "through a symbolic link"),
        ("outdir/brand_new.txt", "create", "through a symbolic link"),
        ("outdir/nested/deep.txt", "append", "through a symbolic link"),
    ]
    for target, op, why in attempts:
        err = rejected(ws, target, op)
        assert why in str(err), (target, str(err))
        assert err.field == "target_file"
        assert "Give a path inside the workspace" in str(err)
    assert snapshot(outside) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "ws"]


def test_execute_rechecks_a_parent_swapped_for_a_symlink_after_begin(ws, outside):
    (ws / "sub").mkdir()
    (ws / "sub" / "secret.txt").write_text("inside\n")
    checked = check(ws, "sub/secret.txt", "overwrite")
    before = snapshot(outside)
    (ws / "sub" / "secret.txt").unlink()
    (ws / "sub").rmdir()
    (ws / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(PlanRejected, match="through a symbolic link"):
        execute(checked, b"pwned\n", state_dir=ws / ".orion", session_id="s1")
    assert snapshot(outside) == before
    assert not (ws / ".orion" / "backups").exists()


def test_git_and_the_state_directory_are_off_limits(ws, tmp_path):
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "vendor" / "lib" / ".git").mkdir(parents=True)
    (ws / ".orion" / "orion.db").write_bytes(b"db")
    (ws / "to_git").symlink_to(ws / ".git" / "config")
    (ws / "to_state").symlink_to(ws / ".orion", target_is_directory=True)
    before = snapshot(ws)
    for target, op in [(".git/config", "overwrite"), (".git/hooks/pre-commit", "create"),
                       ("vendor/lib/.git/HEAD", "create"), ("to_git", "append"),
                       ("./src/../.git/config", "append")]:
        err = rejected(ws, target, op)
        assert "inside a .git directory" in str(err) and err.field == "target_file"
    for target, op in [(".orion/orion.db", "overwrite"), (".orion/backups/x", "create"),
                       ("to_state/notes.md", "create")]:
        err = rejected(ws, target, op)
        assert "inside Orion's state directory" in str(err), str(err)
    assert snapshot(ws) == before


def test_a_state_directory_elsewhere_is_compared_resolved(tmp_path):
    ws = tmp_path / "ws"
    state = ws / "var" / "state"
    state.mkdir(parents=True)
    (ws / "alias").symlink_to(ws / "var", target_is_directory=True)
    with pytest.raises(PlanRejected, match="state directory"):
        check_plan(plan("alias/state/x.json"), workspace=ws, state_dir=ws / "alias" / "state")
    assert check_plan(plan("var/other.txt"), workspace=ws, state_dir=state).relative == \
        "var/other.txt"


def test_directories_and_special_files_are_not_targets(ws):
    err = rejected(ws, "src", "overwrite")
    assert "src is a directory" in str(err)
    err = rejected(ws, "src/", "create")
    assert "is a directory" in str(err)
    err = rejected(ws, ".", "overwrite")
    assert "workspace root" in str(err)
    os.mkfifo(ws / "pipe")
    err = rejected(ws, "pipe", "append")
    assert "not a regular file" in str(err)


def test_create_under_a_file_is_rejected(ws):
    (ws / "notes").write_text("a file\n")
    err = rejected(ws, "notes/today.md", "create")
    assert "notes is a file, not a directory" in str(err)


def test_create_requires_a_new_file_and_the_others_an_existing_one(ws):
    (ws / "a.md").write_text("hello\n")
    err = rejected(ws, "a.md", "create")
    assert str(err).startswith("a.md already exists; create only makes new files. Use "
                               "overwrite")
    assert err.field == "operation"
    for op, fields in [("overwrite", {}), ("append", {}),
                       ("insert", {"location_marker": "x", "position": "after"}),
                       ("replace_block", {"start_marker": "a", "end_marker": "b"}),
                       ("replace_all", {"search": "x"})]:
        err = rejected(ws, "missing.md", op, **fields)
        assert str(err).startswith(f"missing.md does not exist; operation '{op}' edits an "
                                   "existing file. Use create")


# -- check_plan: content of the target ---------------------------------------------------------


@pytest.mark.parametrize("data", [
    b"PNG\x00\x01\x02",
    b"text" * 100 + b"\x00" + b"more",
    b"caf\xe9 latin-1\n",
    b"\xff\xfe\x00h\x00i",  # UTF-16
])
def test_binary_targets_are_rejected(ws, data):
    (ws / "blob").write_bytes(data)
    for op in ("overwrite", "append"):
        err = rejected(ws, "blob", op)
        assert "blob is a binary file" in str(err)
    assert (ws / "blob").read_bytes() == data


def test_only_the_first_8_kib_decide_text_or_binary(ws):
    # A character cut at the 8 KiB boundary is fine; a bad byte past 8 KiB does not count.
    head = b"a" * 8190 + "é".encode() + b"\n"  # the "é" straddles byte 8192
    (ws / "cut.txt").write_bytes(head + b"\xff late garbage\n")
    assert check(ws, "cut.txt", "append").exists
    (ws / "bom.txt").write_bytes(b"\xef\xbb\xbfhello\n")
    assert check(ws, "bom.txt", "append").exists
    (ws / "empty.txt").write_bytes(b"")
    assert check(ws, "empty.txt", "overwrite").exists
    (ws / "short_cut.txt").write_bytes("é".encode()[:1])
    assert "binary" in str(rejected(ws, "short_cut.txt", "overwrite"))


def test_marker_counts_are_reported_with_line_numbers(ws):
    (ws / "app.js").write_text(APP_JS)
    err = rejected(ws, "app.js", "insert", location_marker="module.exports =",
                   position="after")
    assert str(err).startswith("location_marker 'module.exports =' occurs 3 times in app.js "
                               "(lines 4, 19, 40); it must occur exactly once. Pick a longer")
    assert err.field == "location_marker"
    err = rejected(ws, "app.js", "insert", location_marker="export default",
                   position="before")
    assert str(err).startswith("location_marker 'export default' occurs 0 times in app.js; "
                               "it must occur exactly once. Read the file and copy")
    checked = check(ws, "app.js", "insert", location_marker="module.exports = f;",
                    position="before")
    assert checked.exists


def test_many_occurrences_list_ten_lines(ws):
    (ws / "many.txt").write_text("x = 1\n" * 25)
    err = rejected(ws, "many.txt", "replace_block", start_marker="x = 1", end_marker="y")
    assert ("start_marker 'x = 1' occurs 25 times in many.txt (lines 1, 2, 3, 4, 5, 6, 7, 8, "
            "9, 10 and 15 more)") in str(err)


def test_overlapping_occurrences_count_for_markers(ws):
    (ws / "a.txt").write_text("aaa\n")
    err = rejected(ws, "a.txt", "insert", location_marker="aa", position="after")
    assert "occurs 2 times in a.txt (line 1)" in str(err)


def test_replace_block_markers_each_once_and_in_order(ws):
    (ws / "b.py").write_text("# BEGIN\nold\n# END\n# BEGIN\n")
    err = rejected(ws, "b.py", "replace_block", start_marker="# BEGIN", end_marker="# END")
    assert "start_marker '# BEGIN' occurs 2 times in b.py (lines 1, 4)" in str(err)
    (ws / "c.py").write_text("# END\nold\n# BEGIN\n")
    err = rejected(ws, "c.py", "replace_block", start_marker="# BEGIN", end_marker="# END")
    assert str(err).startswith("end_marker '# END' (line 1) must be on a later line than "
                               "start_marker '# BEGIN' (line 3) in c.py")
    assert err.field == "end_marker"
    (ws / "d.py").write_text("# BEGIN # END\n")
    err = rejected(ws, "d.py", "replace_block", start_marker="# BEGIN", end_marker="# END")
    assert "(line 1) must be on a later line" in str(err)
    (ws / "e.py").write_text("# BEGIN\n# END\n")  # adjacent lines: an empty block is fine
    assert check(ws, "e.py", "replace_block", start_marker="# BEGIN", end_marker="# END")


def test_replace_all_search_must_occur(ws):
    (ws / "r.py").write_text("old_name()\nold_name()\n")
    assert check(ws, "r.py", "replace_all", search="old_name")
    err = rejected(ws, "r.py", "replace_all", search="new_name")
    assert str(err).startswith("search 'new_name' occurs 0 times in r.py; it must occur at "
                               "least once.")


def test_markers_match_line_breaks_in_the_files_convention(ws):
    (ws / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    assert check(ws, "w.txt", "insert", location_marker="one\ntwo", position="after")
    assert check(ws, "w.txt", "replace_all", search="two\r\nthree")


def test_long_markers_are_shortened_in_messages(ws):
    (ws / "s.txt").write_text("short\n")
    err = rejected(ws, "s.txt", "replace_all", search="z" * 100)
    assert f"'{'z' * 60}...'" in str(err)


def test_recheck_sees_changes_since_begin(ws):
    (ws / "app.js").write_text("a\nmodule.exports = a;\n")
    checked = check(ws, "app.js", "insert", location_marker="module.exports", position="after")
    assert recheck(checked) == checked
    (ws / "app.js").write_text("module.exports = b;\nmodule.exports = a;\n")
    with pytest.raises(PlanRejected, match="occurs 2 times in app.js"):
        recheck(checked)
    (ws / "app.js").unlink()
    with pytest.raises(PlanRejected, match="does not exist"):
        recheck(checked)
    created = check(ws, "new.md")
    (ws / "new.md").write_text("someone else\n")
    with pytest.raises(PlanRejected, match="already exists"):
        recheck(created)
    (ws / "mode.sh").write_text("x\n")
    checked = check(ws, "mode.sh", "overwrite")
    (ws / "mode.sh").chmod(0o700)
    assert recheck(checked).mode == 0o700
