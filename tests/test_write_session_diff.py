"""What a write changed: `orion sessions diff ID` and the chat's one-line summary, on real
writes made by `orion run`, checked with `patch`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orion.write_session.diff import changes

ORION = str(Path(sys.executable).parent / "orion")

lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "", "d", "\n", "é\n", "a\r\n"]),
                 max_size=30).map("".join).map(str.encode)


@settings(max_examples=300, deadline=None)
@given(lines, lines)
def test_the_edit_turns_the_old_lines_into_the_new_ones(before, after):
    found = changes(before, after)
    rebuilt = []
    for tag, i1, i2, j1, j2 in found.opcodes:
        if tag == "equal":
            assert found.before[i1:i2] == found.after[j1:j2]
            rebuilt += found.before[i1:i2]
        else:
            rebuilt += found.after[j1:j2]
    assert b"".join(rebuilt) == after
    assert found.added - found.removed == len(found.after) - len(found.before)
    if before == after:
        assert found.summary() == "no line changed"
        assert list(found.unified("a", "b")) == []


def test_counts_and_the_unified_form():
    found = changes(b"one\ntwo\nthree\nfour\n", b"one\n2\nthree\nfour\nfive")
    assert (found.added, found.removed) == (2, 1)
    assert found.summary() == "+2 -1 lines"
    assert b"".join(found.unified("a/x", "b/x")) == (
        b"--- a/x\n+++ b/x\n@@ -1,4 +1,5 @@\n one\n-two\n+2\n three\n four\n+five\n"
        b"\\ No newline at end of file\n")


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    """A workspace where `orion run operations` made one write of every operation."""
    workspace = tmp_path_factory.mktemp("ops")
    proc = subprocess.run([ORION, "run", "operations", "--workspace", str(workspace)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return workspace


def history(workspace: Path) -> list[dict]:
    proc = subprocess.run([ORION, "sessions", "history", "--json", "--workspace",
                           str(workspace)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def diff(workspace: Path, write_id: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([ORION, "sessions", "diff", write_id, "--workspace", str(workspace)],
                          capture_output=True, timeout=60)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("patch") is None, reason="patch is not installed")
def test_each_write_s_diff_applied_to_its_backup_gives_the_file(written, tmp_path):
    records = history(written)
    assert {r["operation"] for r in records} >= {"create", "overwrite", "append", "insert",
                                                 "replace_block", "replace_all"}
    for record in records:
        proc = diff(written, record["id"][:8])
        assert proc.returncode == 0, proc.stderr
        before = tmp_path / "before"
        before.write_bytes(Path(record["backup"]).read_bytes() if record["backup"] else b"")
        patched = subprocess.run(["patch", "--quiet", "--binary", str(before)],
                                 input=proc.stdout, capture_output=True, timeout=60)
        assert patched.returncode == 0, (record, proc.stdout, patched.stdout)
        target = written / record["target_file"]
        assert before.read_bytes() == target.read_bytes(), record
        assert f"{record['target_file']}: +".encode() in proc.stderr or \
            b"no line changed" in proc.stderr


@pytest.mark.slow
def test_the_diff_says_when_the_file_changed_since_or_is_gone(written):
    record = next(r for r in history(written) if r["operation"] == "overwrite")
    target = written / record["target_file"]
    kept = target.read_bytes()
    try:
        target.write_bytes(kept + b"a line added by hand\n")
        proc = diff(written, record["id"])
        assert proc.returncode == 0
        assert b"changed since write" in b" ".join(proc.stderr.split())
        assert b"+a line added by hand\n" in proc.stdout
        target.unlink()
        proc = diff(written, record["id"])
        assert proc.returncode == 0
        assert b"was deleted since write" in b" ".join(proc.stderr.split())
    finally:
        target.write_bytes(kept)


@pytest.mark.slow
def test_an_unknown_or_ambiguous_id_is_an_error_that_names_what_exists(written):
    proc = diff(written, "zzzz")
    said = b" ".join(proc.stderr.split())
    assert proc.returncode == 1
    assert b"no finished write 'zzzz'" in said and b"`orion sessions history` lists them" in said
    record = history(written)[0]
    twin = Path(record["record"]).with_name(record["id"][:4] + "f" * 28 + ".json")
    twin.write_bytes(Path(record["record"]).read_bytes())
    try:
        proc = diff(written, record["id"][:4])
        assert proc.returncode == 1 and b"is ambiguous" in proc.stderr
        assert diff(written, record["id"][:5]).returncode == 0 or \
            record["id"][4] == "f"  # one more character tells them apart
    finally:
        twin.unlink()
