"""The operations of a write plan, the atomic write, backups and reports, on real files.

``apply_operation`` is checked byte for byte (BOM, CRLF, whole lines); ``write_atomically`` is
made to fail for real (a file size limit in a child process, a directory in the way, a file
where the directory should be) and must leave the old content and no temp file.
"""

from __future__ import annotations

import hashlib
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orion.write_session.operations import (
    TEMP_MARK,
    WriteResult,
    apply_operation,
    backup_path,
    count_lines,
    describe,
    execute,
    save_backup,
    write_atomically,
)
from orion.write_session.plan import CheckedPlan, PlanRejected, WritePlan, check_plan

BOM = b"\xef\xbb\xbf"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / ".orion").mkdir(parents=True)
    return root


def check(ws: Path, target: str, operation: str, **fields) -> CheckedPlan:
    plan = WritePlan(intent="test", target_file=target, operation=operation, **fields)
    return check_plan(plan, workspace=ws, state_dir=ws / ".orion")


def apply(ws: Path, existing: bytes | None, content: bytes, operation: str,
          name: str = "f.txt", **fields) -> bytes:
    """Write ``existing`` (if any) to ``name``, check the plan and apply it (no write)."""
    if existing is not None:
        (ws / name).write_bytes(existing)
    return apply_operation(check(ws, name, operation, **fields), existing, content)


def run(ws: Path, target: str, operation: str, content: bytes, session: str = "s1",
        **fields) -> WriteResult:
    return execute(check(ws, target, operation, **fields), content,
                   state_dir=ws / ".orion", session_id=session)


def temp_files(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if TEMP_MARK in p.name]


# -- create and overwrite ----------------------------------------------------------------------


def test_create_keeps_the_contents_own_line_endings_but_no_bom(ws):
    assert apply(ws, None, b"a\r\nb\r\n", "create") == b"a\r\nb\r\n"
    assert apply(ws, None, b"a\nb", "create") == b"a\nb"
    assert apply(ws, None, BOM + b"a\n", "create") == b"a\n"
    assert apply(ws, None, b"", "create") == b""


def test_create_writes_the_file_and_its_parent_directories(ws):
    old = os.umask(0o022)
    try:
        result = run(ws, "docs/guide/intro.md", "create", b"# Intro\n\nHello.\n")
    finally:
        os.umask(old)
    target = ws / "docs" / "guide" / "intro.md"
    assert target.read_bytes() == b"# Intro\n\nHello.\n"
    assert (target.stat().st_mode & 0o777) == 0o644
    assert result == WriteResult(
        path=target.resolve(), relative="docs/guide/intro.md", bytes=16, lines=3,
        sha256=hashlib.sha256(b"# Intro\n\nHello.\n").hexdigest(), backup=None,
        report="Created docs/guide/intro.md (3 lines, 16 B)")
    assert temp_files(target.parent) == []


def test_create_rejects_a_file_that_appeared_since_begin(ws):
    checked = check(ws, "new.md", "create")
    (ws / "new.md").write_text("theirs\n")
    with pytest.raises(PlanRejected, match="already exists"):
        execute(checked, b"mine\n", state_dir=ws / ".orion", session_id="s")
    assert (ws / "new.md").read_text() == "theirs\n"
    with pytest.raises(PlanRejected, match="exists now"):
        apply_operation(checked, b"theirs\n", b"mine\n")


def test_overwrite_follows_the_files_line_endings_and_bom(ws):
    assert apply(ws, b"old\r\nold\r\n", b"a\nb\n", "overwrite") == b"a\r\nb\r\n"
    assert apply(ws, b"old\nold\n", b"a\r\nb\r\n", "overwrite") == b"a\nb\n"
    assert apply(ws, BOM + b"old\n", b"new\n", "overwrite") == BOM + b"new\n"
    assert apply(ws, BOM + b"old\n", BOM + b"new\n", "overwrite") == BOM + b"new\n"
    assert apply(ws, b"old\n", BOM + b"new\n", "overwrite") == b"new\n"
    # a mixed file counts its majority: 2 CRLF against 1 LF
    assert apply(ws, b"a\r\nb\r\nc\n", b"x\ny\r\n", "overwrite") == b"x\r\ny\r\n"
    # a tie (or no line break at all) means LF
    assert apply(ws, b"a\r\nb\n", b"x\r\n", "overwrite") == b"x\n"
    assert apply(ws, b"single line", b"x\r\n", "overwrite") == b"x\n"


def test_overwrite_keeps_an_executable_script_executable(ws):
    script = ws / "run.sh"
    script.write_text("#!/bin/sh\necho old\n")
    script.chmod(0o755)
    result = run(ws, "run.sh", "overwrite", b"#!/bin/sh\necho new\n")
    assert script.read_text() == "#!/bin/sh\necho new\n"
    assert (script.stat().st_mode & 0o7777) == 0o755
    assert result.report == "Overwrote run.sh (2 lines, 19 B); backup saved"
    assert result.backup == ws / ".orion" / "backups" / "s1" / "run.sh"
    assert result.backup.read_text() == "#!/bin/sh\necho old\n"
    assert (result.backup.stat().st_mode & 0o7777) == 0o755


def test_overwrite_keeps_odd_modes_too(ws):
    secret = ws / "secret.env"
    secret.write_text("A=1\n")
    secret.chmod(0o600)
    run(ws, "secret.env", "overwrite", b"A=2\n")
    assert (secret.stat().st_mode & 0o7777) == 0o600


def test_writing_through_an_inside_symlink_keeps_the_link(ws):
    (ws / "real.txt").write_text("old\n")
    (ws / "alias.txt").symlink_to("real.txt")
    result = run(ws, "alias.txt", "overwrite", b"new\n")
    assert result.relative == "real.txt"
    assert (ws / "alias.txt").is_symlink()
    assert (ws / "real.txt").read_text() == "new\n"


# -- append ------------------------------------------------------------------------------------


def test_append_adds_exactly_one_line_break_when_missing(ws):
    assert apply(ws, b"one\ntwo", b"three\n", "append") == b"one\ntwo\nthree\n"
    assert apply(ws, b"one\ntwo\n", b"three\n", "append") == b"one\ntwo\nthree\n"
    assert apply(ws, b"one\r\ntwo", b"three\n", "append") == b"one\r\ntwo\r\nthree\r\n"
    assert apply(ws, b"one\n\n", b"three\n", "append") == b"one\n\nthree\n"
    assert apply(ws, b"", b"three\n", "append") == b"three\n"
    assert apply(ws, BOM, b"three\n", "append") == BOM + b"three\n"
    assert apply(ws, BOM + b"x", BOM + b"y", "append") == BOM + b"x\ny"
    assert apply(ws, b"one", b"", "append") == b"one"


def test_append_reports_the_lines_added(ws):
    (ws / "notes.md").write_text("# Notes\n- first")
    content = "".join(f"- item {i}\n" for i in range(15)).encode()
    result = run(ws, "notes.md", "append", content)
    assert result.report == "Appended 15 lines to notes.md; backup saved"
    assert (ws / "notes.md").read_bytes() == b"# Notes\n- first\n" + content
    assert result.lines == 17


# -- insert ------------------------------------------------------------------------------------

CODE = b"import os\n\ndef main():\n    run()  # entry\n    return 0\n"


def test_insert_before_and_after_the_whole_marker_line(ws):
    fields = {"location_marker": "run()"}
    assert apply(ws, CODE, b"    log()\n", "insert", position="before", **fields) == (
        b"import os\n\ndef main():\n    log()\n    run()  # entry\n    return 0\n")
    assert apply(ws, CODE, b"    log()\n", "insert", position="after", **fields) == (
        b"import os\n\ndef main():\n    run()  # entry\n    log()\n    return 0\n")
    # content without a final line break still gets a line of its own
    assert apply(ws, CODE, b"    log()", "insert", position="after", **fields) == (
        b"import os\n\ndef main():\n    run()  # entry\n    log()\n    return 0\n")


def test_insert_at_the_edges_of_the_file(ws):
    assert apply(ws, b"first\nlast", b"new\n", "insert", location_marker="last",
                 position="after") == b"first\nlast\nnew\n"
    assert apply(ws, b"first\nlast\n", b"new\n", "insert", location_marker="last",
                 position="after") == b"first\nlast\nnew\n"
    assert apply(ws, b"first\nlast\n", b"new", "insert", location_marker="last",
                 position="after") == b"first\nlast\nnew"
    assert apply(ws, b"first\nlast\n", b"new", "insert", location_marker="first",
                 position="before") == b"new\nfirst\nlast\n"
    assert apply(ws, BOM + b"first\n", b"new\n", "insert", location_marker="first",
                 position="before") == BOM + b"new\nfirst\n"


def test_insert_with_a_marker_over_two_lines_uses_its_first_and_last_line(ws):
    text = b"a\nb = 1\nc = 2\nd\n"
    marker = {"location_marker": "1\nc ="}
    assert apply(ws, text, b"X\n", "insert", position="before", **marker) == \
        b"a\nX\nb = 1\nc = 2\nd\n"
    assert apply(ws, text, b"X\n", "insert", position="after", **marker) == \
        b"a\nb = 1\nc = 2\nX\nd\n"


def test_insert_in_a_crlf_file_with_bom(ws):
    text = BOM + b"<root>\r\n  <item/>\r\n</root>\r\n"
    out = apply(ws, text, BOM + b"  <new/>\n  <more/>\n", "insert", location_marker="<item/>",
                position="after")
    assert out == BOM + b"<root>\r\n  <item/>\r\n  <new/>\r\n  <more/>\r\n</root>\r\n"


def test_insert_report_and_marker_changed_since_begin(ws):
    (ws / "app.py").write_bytes(CODE)
    checked = check(ws, "app.py", "insert", location_marker="return 0", position="after")
    content = b"".join(b"# line %d\n" % i for i in range(15))
    result = execute(checked, content, state_dir=ws / ".orion", session_id="s")
    assert result.report == "Inserted 15 lines after marker in app.py; backup saved"
    again = check(ws, "app.py", "insert", location_marker="# line 3\n", position="before")
    assert "Inserted 1 line before marker" in describe(again, b"", b"", b"x\n", None)
    with pytest.raises(PlanRejected, match=r"occurs 2 times in app.py \(lines 1, 2\)"):
        apply_operation(checked, b"return 0\nreturn 0\n", b"x\n")
    with pytest.raises(PlanRejected, match="occurs 0 times in app.py"):
        apply_operation(checked, b"", b"x\n")


# -- replace_block -----------------------------------------------------------------------------

BLOCK = b"head\n# BEGIN generated\nold 1\nold 2\n# END generated\ntail\n"


def test_replace_block_keeps_the_marker_lines(ws):
    markers = {"start_marker": "BEGIN generated", "end_marker": "END generated"}
    assert apply(ws, BLOCK, b"new\n", "replace_block", **markers) == (
        b"head\n# BEGIN generated\nnew\n# END generated\ntail\n")
    assert apply(ws, BLOCK, b"new", "replace_block", **markers) == (
        b"head\n# BEGIN generated\nnew\n# END generated\ntail\n")
    assert apply(ws, BLOCK, b"", "replace_block", **markers) == (
        b"head\n# BEGIN generated\n# END generated\ntail\n")
    adjacent = b"<!-- a -->\n<!-- b -->"
    assert apply(ws, adjacent, b"x\r\ny\r\n", "replace_block", start_marker="<!-- a",
                 end_marker="<!-- b") == b"<!-- a -->\nx\ny\n<!-- b -->"


def test_replace_block_in_a_crlf_file(ws):
    crlf = BLOCK.replace(b"\n", b"\r\n")
    out = apply(ws, crlf, b"n1\nn2\n", "replace_block", start_marker="BEGIN",
                end_marker="END")
    assert out == b"head\r\n# BEGIN generated\r\nn1\r\nn2\r\n# END generated\r\ntail\r\n"


def test_replace_block_report_and_markers_gone_at_finalization(ws):
    (ws / "app.py").write_bytes(BLOCK)
    checked = check(ws, "app.py", "replace_block", start_marker="# BEGIN", end_marker="# END")
    content = b"".join(b"v%d = %d\n" % (i, i) for i in range(15))
    result = execute(checked, content, state_dir=ws / ".orion", session_id="s")
    assert result.report == "Replaced block between markers in app.py (15 lines); backup saved"
    (ws / "app.py").write_bytes(b"# BEGIN\n")
    with pytest.raises(PlanRejected, match="end_marker '# END' occurs 0 times in app.py"):
        execute(checked, content, state_dir=ws / ".orion", session_id="s2")
    assert (ws / "app.py").read_bytes() == b"# BEGIN\n"


# -- replace_all -------------------------------------------------------------------------------


def test_replace_all_replaces_every_occurrence(ws):
    text = b"old_name(1)\nx = old_name\nold_nameold_name\n"
    assert apply(ws, text, b"new_name\n", "replace_all", search="old_name") == (
        b"new_name(1)\nx = new_name\nnew_namenew_name\n")
    # the streamed content's final line break is kept when search ends with one
    assert apply(ws, b"a\nb\na\n", b"c\n", "replace_all", search="a\n") == b"c\nb\nc\n"
    # and only one line break is dropped
    assert apply(ws, b"a-b", b"x\n\n", "replace_all", search="-") == b"ax\nb"
    # non-overlapping, as str.replace
    assert apply(ws, b"aaaa\n", b"b", "replace_all", search="aa") == b"bb\n"


def test_replace_all_over_lines_in_a_crlf_file(ws):
    text = b"if x:\r\n    pass\r\nif y:\r\n    pass\r\n"
    out = apply(ws, text, b"    return\n", "replace_all", search="    pass\n")
    assert out == b"if x:\r\n    return\r\nif y:\r\n    return\r\n"
    out = apply(ws, text, b"...\r\n", "replace_all", search="pass")
    assert out == b"if x:\r\n    ...\r\nif y:\r\n    ...\r\n"


def test_replace_all_report(ws):
    (ws / "app.py").write_text("a = 1\nb = a\nc = a\n")
    result = run(ws, "app.py", "replace_all", b"alpha\n", search="a")
    assert result.report == "Replaced 3 occurrences in app.py; backup saved"
    assert (ws / "app.py").read_text() == "alpha = 1\nb = alpha\nc = alpha\n"


def test_bytes_outside_the_edit_are_kept_exactly(ws):
    # mixed line breaks and a stray invalid byte far down: untouched unless edited
    text = b"a\r\nb\nMARK\r\n" + b"x" * 9000 + b"\xff\r\nend\n"
    out = apply(ws, text, b"new\n", "insert", location_marker="MARK", position="after")
    assert out == b"a\r\nb\nMARK\r\nnew\r\n" + b"x" * 9000 + b"\xff\r\nend\n"


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(lines=st.lists(st.text(alphabet="abc é\t", max_size=12), max_size=8),
       crlf=st.booleans(), bom=st.booleans(), content=st.text(alphabet="xyz\n\r", max_size=20),
       position=st.sampled_from(["before", "after"]))
def test_insert_and_replace_block_change_nothing_else(tmp_path_factory, lines, crlf, bom,
                                                      content, position):
    ws = tmp_path_factory.mktemp("prop")
    (ws / ".orion").mkdir()
    eol = b"\r\n" if crlf else b"\n"
    body = eol.join([b"<<S>>"] + [s.encode() for s in lines] + [b"<<E>>"]) + eol
    existing = (BOM if bom else b"") + body
    data = content.encode()
    out = apply(ws, existing, data, "insert", location_marker="<<E>>", position=position)
    assert out.startswith(existing[:len(existing) - len(b"<<E>>") - len(eol)])
    assert out.count(BOM) == (1 if bom else 0)
    if crlf:
        assert out.count(b"\n") == out.count(b"\r\n")
    out = apply(ws, existing, data, "replace_block", start_marker="<<S>>", end_marker="<<E>>")
    head = (BOM if bom else b"") + b"<<S>>" + eol
    assert out.startswith(head) and out.endswith(eol + b"<<E>>" + eol) or \
        out == head + b"<<E>>" + eol
    middle = out[len(head):len(out) - len(b"<<E>>") - len(eol)]
    normalized = data.replace(b"\r\n", b"\n").replace(b"\n", eol)
    assert middle in (normalized, normalized + eol)


# -- write_atomically --------------------------------------------------------------------------


def test_write_atomically_uses_the_umask_or_the_given_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_atomically(tmp_path / "a.txt", b"a")
        write_atomically(tmp_path / "b.sh", b"b", mode=0o751)
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o7777 == 0o640
    assert (tmp_path / "b.sh").stat().st_mode & 0o7777 == 0o751
    write_atomically(tmp_path / "a.txt", b"again")
    assert (tmp_path / "a.txt").read_bytes() == b"again"
    assert temp_files(tmp_path) == []


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    # A real failure half way: a file size limit of 64 KiB in a child process makes the
    # temp file's write fail with EFBIG after the first 64 KiB.
    target = tmp_path / "big.md"
    target.write_bytes(b"old content\n")
    target.chmod(0o640)
    before = target.stat()
    script = ("import sys; from pathlib import Path\n"
              "from orion.write_session.operations import write_atomically\n"
              "write_atomically(Path(sys.argv[1]), b'x' * (1 << 20), mode=0o600)\n")

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))

    proc = subprocess.run([sys.executable, "-c", script, str(target)], cwd=ROOT,
                          preexec_fn=limit, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "File too large" in proc.stderr
    assert target.read_bytes() == b"old content\n"
    after = target.stat()
    assert (after.st_ino, after.st_mode, after.st_mtime_ns) == \
        (before.st_ino, before.st_mode, before.st_mtime_ns)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.md"]


def test_a_failed_rename_leaves_no_temp(tmp_path):
    # The temp file is complete and fsynced, but a directory is in the way of the rename.
    (tmp_path / "dir.txt").mkdir()
    (tmp_path / "dir.txt" / "keep").write_text("kept\n")
    with pytest.raises(IsADirectoryError):
        write_atomically(tmp_path / "dir.txt", b"data\n")
    assert (tmp_path / "dir.txt" / "keep").read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.txt"]


def test_a_file_where_the_directory_should_be(tmp_path):
    (tmp_path / "notes").write_text("a file\n")
    with pytest.raises(NotADirectoryError):
        write_atomically(tmp_path / "notes" / "today.md", b"data\n")
    assert (tmp_path / "notes").read_text() == "a file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]


def test_wrong_data_leaves_no_temp(tmp_path):
    (tmp_path / "t.txt").write_text("old\n")
    with pytest.raises(TypeError):
        write_atomically(tmp_path / "t.txt", "not bytes")  # type: ignore[arg-type]
    assert (tmp_path / "t.txt").read_text() == "old\n"
    assert temp_files(tmp_path) == []


def test_a_long_file_name_still_gets_a_temp_name(tmp_path):
    name = "n" * 255
    write_atomically(tmp_path / name, b"ok")
    assert (tmp_path / name).read_bytes() == b"ok"
    assert temp_files(tmp_path) == []


# -- backups -----------------------------------------------------------------------------------


def test_save_backup_copies_the_pre_image_with_its_mode(tmp_path):
    state = tmp_path / "state"
    target = tmp_path / "ws" / "src" / "tool.py"
    target.parent.mkdir(parents=True)
    target.write_text("v1\n")
    target.chmod(0o750)
    saved = save_backup(target, state_dir=state, session_id="abc", relative="src/tool.py")
    assert saved == state / "backups" / "abc" / "src" / "tool.py"
    assert saved == backup_path(state_dir=state, session_id="abc", relative="src/tool.py")
    assert saved.read_text() == "v1\n"
    assert saved.stat().st_mode & 0o7777 == 0o750
    target.write_text("v2\n")
    # the first pre-image of a session is the one to undo to
    assert save_backup(target, state_dir=state, session_id="abc", relative="src/tool.py") == saved
    assert saved.read_text() == "v1\n"
    assert save_backup(tmp_path / "ws" / "none.txt", state_dir=state, session_id="abc",
                       relative="none.txt") is None
    assert temp_files(saved.parent) == []


@pytest.mark.parametrize("session, relative", [
    ("", "a.txt"), ("..", "a.txt"), ("a/b", "a.txt"), ("s", "../a.txt"), ("s", "/etc/x"),
    ("s", ""),
])
def test_backup_path_refuses_to_leave_the_backup_directory(tmp_path, session, relative):
    with pytest.raises(ValueError):
        backup_path(state_dir=tmp_path, session_id=session, relative=relative)


def test_no_backup_and_no_write_when_the_plan_no_longer_fits(ws):
    (ws / "app.js").write_text("module.exports = a;\n")
    checked = check(ws, "app.js", "insert", location_marker="module.exports", position="after")
    (ws / "app.js").write_text("module.exports = a;\nmodule.exports = b;\n")
    with pytest.raises(PlanRejected, match=r"occurs 2 times in app.js \(lines 1, 2\)"):
        execute(checked, b"x\n", state_dir=ws / ".orion", session_id="s")
    assert not (ws / ".orion" / "backups").exists()
    assert temp_files(ws) == []


# -- reports -----------------------------------------------------------------------------------


def test_describe_lines(ws):
    guide = b"".join(b"line %03d of the guide, with some words\n" % i for i in range(243))
    created = check(ws, "docs/guide.md", "create")
    assert describe(created, None, guide, guide, None) == \
        "Created docs/guide.md (243 lines, 9.3 KiB)"
    (ws / "config.yaml").write_bytes(b"x: 1\n")
    over = check(ws, "config.yaml", "overwrite")
    config = b"k: v\n" * 12
    bak = Path("/b")
    assert describe(over, b"x: 1\n", config, config, bak) == \
        "Overwrote config.yaml (12 lines, 60 B); backup saved"
    assert describe(over, b"x: 1\n", b"", b"", None) == "Overwrote config.yaml (0 lines, 0 B)"
    big = b"x" * (3 * 1024 * 1024 + 200_000)
    assert describe(over, b"", big, big, None) == "Overwrote config.yaml (1 line, 3.2 MiB)"
    (ws / "app.py").write_text("a\n")
    one = check(ws, "app.py", "replace_all", search="a")
    assert describe(one, b"a\n", b"b\n", b"b", bak) == \
        "Replaced 1 occurrence in app.py; backup saved"


def test_count_lines():
    assert [count_lines(d) for d in (b"", b"a", b"a\n", b"a\nb", b"\n\n", b"a\r\nb\r\n")] == \
        [0, 1, 1, 2, 2, 2]


def test_large_content_is_hashed_while_it_is_written(ws):
    data = "Ünïcode line, with text enough to matter\n".encode() * 40_000  # about 1.7 MB
    result = run(ws, "big/handbook.md", "create", data)
    assert result.sha256 == hashlib.sha256(data).hexdigest()
    assert (result.bytes, result.lines) == (len(data), 40_000)
    assert result.report == "Created big/handbook.md (40000 lines, 1.6 MiB)"
    assert (ws / "big" / "handbook.md").read_bytes() == data
