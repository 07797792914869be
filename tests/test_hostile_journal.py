"""Names read from a journal are data, never paths (FS-15).

A repository can ship a ``.orion`` directory: a write session's journal whose text set aside
is indexed under a part "number" that climbs out of the directory, with a ``.resume`` mark so
the next ``orion run`` takes it over. Orion refuses such a part by name; it never reads a file
outside the session directory for it (``orion sessions show``), nor writes one (the archive
the write leaves).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from write_harness import begin, make_runner, say

from orion.cli import cli
from orion.write_session.orphan_commands import mark_resume
from orion.write_session.orphans import scan


@pytest.fixture
def run(tmp_path, monkeypatch):
    return make_runner(tmp_path, monkeypatch)


def _open_session_with_a_part(run) -> tuple[Path, Path, str]:
    """A session left open with part 1 set aside: the workspace, its journal, its short id."""
    played = run({"conversation": [
        {"user": "Write notes.md."}, begin("notes.md"),
        {"model": {"text": "Let me look first.", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "README.md"}}]}},
        {"expect": "set aside as part 1"},
        say("alpha\n"),
    ], "files": {"README.md": "readme\n"}})
    [orphan] = scan(played.state_dir)
    return played.workspace, orphan.directory, orphan.id[:8]


def _forge(journal: Path, number: object) -> None:
    index = journal / "set_aside" / "index.json"
    data = json.loads(index.read_text())
    data["parts"][0]["number"] = number
    index.write_text(json.dumps(data))


def test_sessions_show_never_prints_a_file_outside_for_a_forged_part(run, tmp_path):
    workspace, journal, short = _open_session_with_a_part(run)
    secret = workspace.parent / "secret.txt"
    secret.write_text("a file outside the workspace\n")
    _forge(journal, "../../../../../secret")
    result = CliRunner().invoke(cli, ["sessions", "show", short, "--workspace", str(workspace)])
    assert "a file outside the workspace" not in result.output
    assert "../../../../../secret" in result.output  # the forged entry is named, not followed
    as_json = CliRunner().invoke(cli, ["sessions", "show", short, "--json", "--workspace",
                                       str(workspace)])
    assert "a file outside the workspace" not in as_json.output


def test_orion_run_never_writes_outside_the_workspace_for_a_forged_part(run, tmp_path):
    workspace, journal, short = _open_session_with_a_part(run)
    (workspace / "payload.txt").write_text("shipped with the repository\n")
    _forge(journal, "../../../../payload")
    mark_resume(workspace / ".orion", short)
    second = run({"conversation": [
        {"expect": "continue"}, say("beta\nDONE\n"), say("Done."),
    ]}, workspace=workspace)
    assert not (workspace.parent / "payload.txt").exists()
    assert second.text("notes.md") == "alpha\nbeta\n"


def _undo(workspace: Path, short: str):
    return CliRunner().invoke(cli, ["sessions", "undo", short, "--workspace", str(workspace)])


def test_a_damaged_append_record_never_makes_undo_write_its_bytes_into_the_file(run):
    played = run({"conversation": [
        {"user": "Add to the log."}, begin("log.txt", "append"), say("new entry\nDONE\n"),
        say("Done."),
    ], "files": {"log.txt": "old entry\n"}})
    assert played.text("log.txt") == "old entry\nnew entry\n"
    [session_id] = [p.stem for p in (played.state_dir / "undo").glob("*.json")]
    ranges = played.state_dir / "appends" / f"{session_id}.json"
    ranges.write_bytes(b"not json at all\n")
    result = _undo(played.workspace, session_id[:8])
    assert result.exit_code != 0
    assert str(ranges) in " ".join(result.output.split()), result.output
    assert played.text("log.txt") == "old entry\nnew entry\n"


def _undo_record_with_a_forged_backup(run, tmp_path, text: str):
    """A real overwrite's undo record, edited to name a backup outside the workspace (holding
    ``text``): what was played, the record's path and the forged backup's."""
    played = run({"conversation": [
        {"user": "Rewrite it."}, begin("config.txt", "overwrite"), say("mode = fast\nDONE\n"),
        say("Done."),
    ], "files": {"config.txt": "mode = slow\n"}})
    [record] = list((played.state_dir / "undo").glob("*.json"))
    forged = tmp_path / "elsewhere.txt"
    forged.write_text(text)
    data = json.loads(record.read_text())
    data["backup"] = str(forged)
    record.write_text(json.dumps(data))
    return played, record, forged


def test_a_forged_backup_path_in_an_undo_record_is_neither_printed_nor_followed(run, tmp_path):
    played, record, forged = _undo_record_with_a_forged_backup(run, tmp_path,
                                                                "not the user's file\n")
    history = CliRunner().invoke(cli, ["sessions", "history", "--json", "--workspace",
                                       str(played.workspace)])
    assert str(forged) not in history.output
    assert _undo(played.workspace, record.stem[:8]).exit_code == 0
    assert played.text("config.txt") == "mode = slow\n"


def test_recover_finalize_keeps_the_text_set_aside_and_says_so(run):
    workspace, journal, short = _open_session_with_a_part(run)
    result = CliRunner().invoke(cli, ["sessions", "recover", short, "--finalize",
                                      "--workspace", str(workspace)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "1 line set aside, not written: part 1 (1 line, first line 'Let me look first.')" \
        in said, said
    assert (workspace / "notes.md").read_text() == "alpha\n"
    shown = CliRunner().invoke(cli, ["sessions", "show", short, "--workspace", str(workspace)])
    assert "1 line set aside" in shown.output and "Let me look first." in shown.output, \
        shown.output


def test_an_orphan_holding_only_text_set_aside_without_its_state_is_kept_and_listed(run):
    played = run({"conversation": [
        {"user": "Write notes.md."}, begin("notes.md"),
        {"model": {"text": "Let me look first.", "tool_calls": [
            {"name": "read_file", "arguments": {"path": "README.md"}}]}},
        {"expect": "set aside as part 1"},
    ], "files": {"README.md": "readme\n"}})
    [orphan] = scan(played.state_dir)
    for name in ("state.json", "state.log"):
        (orphan.directory / name).unlink(missing_ok=True)
    [again] = scan(played.state_dir)
    assert again.bytes == 0 and again.has_content  # only the part: not "held nothing"
    listed = CliRunner().invoke(cli, ["sessions", "list", "--json", "--workspace",
                                      str(played.workspace)])
    assert json.loads(listed.output)[0]["set_aside_lines"] == 1


def test_a_forged_backup_path_is_not_what_sessions_diff_compares_with(run, tmp_path):
    played, record, forged = _undo_record_with_a_forged_backup(
        run, tmp_path, "a secret\noutside\nthe workspace\n")
    diff = CliRunner().invoke(cli, ["sessions", "diff", record.stem[:8], "--workspace",
                                    str(played.workspace)])
    assert diff.exit_code == 0, diff.output
    assert "secret" not in diff.output
    # Compared with Orion's own backup (one line), not the forged file (three lines).
    assert "config.txt: +1 -1 lines" in diff.output
