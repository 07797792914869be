"""The write-session examples in ``examples/``: each one plays through the real runtime and
writes exactly the files it says it writes."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from orion.cli import cli
from orion.models.script import ModelEntry, load_script
from orion.hooks.manager import make_plugin_manager
from orion.runtime.report import Reporter
from orion.runtime.runner import play

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
WRITE_EXAMPLES = ["write_guide.yaml", "idle_prompt.yaml", "correction_round.yaml",
                  "operations.yaml", "rejected_path.yaml"]


class Notices(Reporter):
    def __init__(self) -> None:
        self.notices: list[str] = []

    def notice(self, text: str) -> None:
        self.notices.append(text)


def play_example(name: str, workspace: Path):
    script = load_script(EXAMPLES / name)
    reporter = Notices()
    result = asyncio.run(play(script, workspace=workspace, reporter=reporter,
                              plugins=make_plugin_manager(entrypoints=False, env={})))
    assert result.ok, result.errors
    return script, result, reporter


def texts(script) -> list[str]:
    return [e.model.text for e in script.entries
            if isinstance(e, ModelEntry) and e.model.text is not None]


@pytest.mark.parametrize("name", WRITE_EXAMPLES)
def test_each_example_has_a_description_and_a_header_comment(name):
    source = (EXAMPLES / name).read_text(encoding="utf-8")
    assert source.startswith("# ")
    assert f"orion run examples/{name} --workspace" in source.split("\ndescription:")[0]
    assert load_script(EXAMPLES / name).description


@pytest.mark.parametrize("name", WRITE_EXAMPLES)
def test_each_example_plays_with_orion_run(name, tmp_path):
    result = CliRunner().invoke(cli, ["run", str(EXAMPLES / name), "--workspace",
                                      str(tmp_path / "ws"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] and data["errors"] == []


def test_write_guide_writes_the_324_line_guide_exactly_once(tmp_path):
    script, result, reporter = play_example("write_guide.yaml", tmp_path)
    part1, part2 = [t for t in texts(script) if t.count("\n") > 100]
    # the continuation repeats the line that was cut: Orion drops the repeat
    cut_line = part1.rsplit("\n", 1)[1]
    assert part2.startswith(cut_line) and part2.endswith("\nDONE\n")
    expected = part1 + part2[len(cut_line):].removesuffix("DONE\n")
    guide = (tmp_path / "docs/operator-guide.md").read_text(encoding="utf-8")
    assert guide == expected
    assert guide.count("\n") == 324 and guide.startswith("# Orion operator guide\n")
    assert "DONE" not in guide.splitlines()
    assert [f.path for f in result.files] == ["docs/operator-guide.md"]
    [session] = result.sessions
    assert (session["status"], session["continuations"]) == ("written", 1)
    assert "part 1 saved (176 lines), continuing 1/3" in reporter.notices
    assert result.prompts[-1].startswith("Created docs/operator-guide.md (324 lines")
    assert not list((tmp_path / ".orion/write_sessions").iterdir())


def test_idle_prompt_appends_the_second_section_and_ends_on_done(tmp_path):
    script, result, _ = play_example("idle_prompt.yaml", tmp_path)
    first, second, done = texts(script)[:3]
    # the section sent after the idle prompt, without DONE, is added; DONE alone ends it
    assert done == "DONE"
    assert (tmp_path / "docs/release-notes.md").read_text(encoding="utf-8") == first + second
    prompt = "If you're finished, reply with DONE on its own line; otherwise continue."
    assert result.prompts[0].startswith(prompt)
    assert "Anything you write but DONE alone is added to the file" in result.prompts[0]
    assert result.prompts[1].startswith(prompt)
    assert result.sessions[0]["status"] == "written"


def test_correction_round_writes_the_corrected_yaml(tmp_path):
    _, result, _ = play_example("correction_round.yaml", tmp_path)
    written = (tmp_path / "config/service.yaml").read_text(encoding="utf-8")
    assert written == ("# Billing API: service configuration\nservice:\n  name: billing-api\n"
                       '  owner: "Zoë Ortega"\n  port: 8080\n'
                       "  hosts: [api.internal, api-backup.internal]\n  timeout_s: 30\n"
                       "  retries: 3\n")
    assert [p.split(":")[0] for p in result.prompts[:2]] == [
        "Correction round 1 of 3", "Correction round 2 of 3"]
    assert result.sessions[0]["corrections"] == 2


def test_operations_edits_every_seeded_file(tmp_path):
    _, result, _ = play_example("operations.yaml", tmp_path)

    def read(path: str) -> bytes:
        return (tmp_path / path).read_bytes()

    assert read("CONTRIBUTING.md") == (b"# Contributing\n\n"
                                       b"Run `orion check` before you send a change.\n")
    assert read("README.md") == b"# Billing service\n\nThe billing API and its tools.\n"
    assert read("CHANGELOG.md") == (b"# Changelog\n\n## 0.1.0\n- First release.\n\n## 0.2.0\n"
                                    b"- Write sessions.\n")
    assert read("src/app.py") == (b'import os\nimport sys\n\n\ndef main():\n'
                                  b'    """Run the billing tools."""\n    return 0\n')
    assert read("docs/install.md") == (b"# Install\n<!-- steps -->\n"
                                       b"1. `pip install orion-statecharts`\n"
                                       b"2. `orion check`\n<!-- /steps -->\n"
                                       b"Questions? Ask the team.\n")
    assert read("settings.toml") == (b'[database]\nprimary = "db.internal:5432"\n'
                                     b'replica = "db.internal:5433"\n')
    assert read("notes/windows.txt") == (b"\xef\xbb\xbffirst line\r\nsecond line\r\n"
                                         b"third line\r\n")
    sessions = result.sessions
    assert [s["operation"] for s in sessions] == [
        "create", "overwrite", "append", "insert", "insert", "replace_block", "replace_all",
        "append"]
    assert all(s["status"] == "written" and s["corrections"] == 0 for s in sessions)
    # every edit of an existing file kept its pre-image; an append, the range it added
    backups = tmp_path / ".orion" / "backups"
    for session in sessions[1:]:
        backup = backups / session["id"] / session["target_file"]
        if session["operation"] == "append":
            added = json.loads((tmp_path / ".orion" / "appends" / f"{session['id']}.json")
                               .read_text(encoding="utf-8"))
            assert added["length"] > 0, added
            assert not backup.exists(), session
        else:
            assert backup.is_file(), session
    assert (backups / sessions[1]["id"] / "README.md").read_bytes() == (
        b"# Old readme\nThis text is replaced.\n")
    assert not (backups / sessions[0]["id"] / "CONTRIBUTING.md").exists()


def test_rejected_path_writes_nothing_outside_and_then_the_good_file(tmp_path):
    workspace = tmp_path / "ws"
    targets = [tmp_path / "checklist.md", Path("/tmp/checklist.md")]

    def state(path: Path) -> str | None:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None

    before = [state(p) for p in targets]
    _, result, _ = play_example("rejected_path.yaml", workspace)
    assert [state(p) for p in targets] == before
    assert [f.path for f in result.files] == ["docs/checklist.md"]
    assert (workspace / "docs/notes.md").read_text() == "Existing notes.\n"
    assert (workspace / "docs/checklist.md").read_text().startswith("# Deployment checklist\n")
    assert [s["target_file"] for s in result.sessions] == ["docs/checklist.md"]
    assert sum("PlanRejected" in p or "escapes" in p for p in result.prompts) == 0
