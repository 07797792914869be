"""Every file configuration names is read only when it is a regular file under its size cap,
never blocking: ``statecharts: [/dev/zero]``, a FIFO, an oversized chart and a FIFO as a
script's ``text_file`` are located errors, not an out-of-memory kill or a hang; and a pipeline
that never asks a model is refused before ``orion run`` starts.

The FIFOs and devices are real (``os.mkfifo``, ``/dev/zero``), and each command runs in a
subprocess with a timeout: a hang fails the test instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orion.config.sourcefile import CONFIG_LIMIT

#: Generous for a loaded machine; a command that blocks on a FIFO never ends.
HANG_S = 120


def orion(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ORION_", "WRITE_SESSION_"))}
    return subprocess.run([sys.executable, "-m", "orion", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=HANG_S, env={**env, "COLUMNS": "400"}, input="")


def workspace(tmp_path: Path, orion_yaml: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "orion.yaml").write_text(orion_yaml)
    return ws


@pytest.mark.slow
@pytest.mark.parametrize("command", [["check"], ["run", "hello"], ["statechart", "list"]])
def test_a_chart_that_is_dev_zero_is_a_located_error(tmp_path, command):
    ws = workspace(tmp_path, "settings: {}\nstatecharts:\n  - /dev/zero\n")
    done = orion(*command, "--workspace", str(ws), cwd=ws)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"error: {ws / 'orion.yaml'}:3:5: statecharts[0]: /dev/zero is not a regular file (a "
        "character device); Orion reads configuration only from regular files")


@pytest.mark.slow
@pytest.mark.parametrize("command", [["check"], ["run", "hello"], ["check", "--json"]])
def test_a_chart_that_is_a_fifo_never_blocks(tmp_path, command):
    ws = workspace(tmp_path, "statecharts: [lifecycles/review.yaml]\n")
    (ws / "lifecycles").mkdir()
    os.mkfifo(ws / "lifecycles" / "review.yaml")  # nobody ever writes into it
    done = orion(*command, "--workspace", str(ws), cwd=ws)
    assert done.returncode == 2, done.stderr
    message = (f"{ws / 'orion.yaml'}:1:15: statecharts[0]: lifecycles/review.yaml is not a "
               "regular file (a FIFO)")
    if "--json" in command:
        [entry] = json.loads(done.stdout)  # --json is JSON, also for a bad orion.yaml
        assert entry["ok"] is False and entry["errors"][0]["line"] == 1
        assert entry["errors"][0]["column"] == 15
        assert "review.yaml is not a regular file (a FIFO)" in entry["errors"][0]["message"]
    else:
        assert message in done.stderr


@pytest.mark.slow
def test_a_fifo_or_device_given_to_orion_check_is_a_finding(tmp_path):
    os.mkfifo(tmp_path / "chart.yaml")
    done = orion("check", str(tmp_path / "chart.yaml"), "/dev/zero", cwd=tmp_path)
    assert done.returncode == 1
    assert (f"{tmp_path / 'chart.yaml'}:1:1: cannot read file: it is not a regular file (a "
            "FIFO)") in done.stdout
    assert "/dev/zero:1:1: cannot read file: it is not a regular file (a character device)" \
        in done.stdout


def test_an_oversized_chart_is_refused_before_it_is_read(tmp_path):
    ws = workspace(tmp_path, "statecharts: [huge.yaml]\n")
    with open(ws / "huge.yaml", "wb") as handle:
        handle.write(b"# " + b"x" * (CONFIG_LIMIT + 1024) + b"\n")
    done = orion("check", "--workspace", str(ws), cwd=ws)
    assert done.returncode == 2
    assert (f"{ws / 'orion.yaml'}:1:15: statecharts[0]: huge.yaml is 16.0 MiB, over the 16.0 MiB "
            "Orion reads at most from such a file") in done.stderr


def test_orion_yaml_that_is_a_fifo_is_a_located_error(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    os.mkfifo(ws / "orion.yaml")
    done = orion("run", "hello", "--workspace", str(ws), cwd=ws)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"error: {ws / 'orion.yaml'}:1:1: cannot read file: it is not "
                                   "a regular file (a FIFO); Orion reads configuration only "
                                   "from regular files")


def test_a_chart_swapped_for_a_fifo_after_the_check_is_still_never_waited_for(tmp_path):
    """The read itself opens without blocking and checks what it opened: a FIFO in place of a
    file that was regular a moment before is reported, not waited on."""
    os.mkfifo(tmp_path / "chart.yaml")
    code = ("from orion.config.yamlsource import YamlSourceError, load_yaml\n"
            "try:\n    load_yaml('chart.yaml')\n"
            "except YamlSourceError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=HANG_S)
    assert done.stdout.strip() == ("chart.yaml:1:1: cannot read file: it is not a regular file "
                                   "(a FIFO); Orion reads configuration only from regular files")


@pytest.mark.slow
def test_a_reply_text_file_that_is_a_fifo_is_a_located_script_error(tmp_path):
    os.mkfifo(tmp_path / "reply.md")
    (tmp_path / "s.yaml").write_text("conversation:\n  - user: hi\n"
                                     "  - model: {text_file: reply.md}\n")
    done = orion("run", str(tmp_path / "s.yaml"), "--workspace", str(tmp_path / "ws"),
                 cwd=tmp_path)
    assert done.returncode == 2
    assert (f"{tmp_path / 's.yaml'}:3:24: entry 2: model.text_file 'reply.md' "
            f"({tmp_path / 'reply.md'}): is not a regular file (a FIFO)") in done.stderr


def test_a_script_that_is_a_fifo_or_over_its_cap_is_a_located_error(tmp_path):
    """Scripts have a cap of their own (``SCRIPT_LIMIT``, 256 MiB: replies may be inline); the
    test lowers it to 1,000 bytes, in a process of its own, rather than write 256 MiB."""
    os.mkfifo(tmp_path / "fifo.yaml")
    (tmp_path / "long.yaml").write_text("conversation:\n" + "  - user: hello there\n" * 100)
    code = ("import orion.models.script as script\n"
            "from orion.errors import ConfigError\n"
            "script.SCRIPT_LIMIT = 1000\n"
            "for name in ('fifo.yaml', 'long.yaml'):\n"
            "    try:\n        script.load_script(name)\n"
            "    except ConfigError as exc:\n        print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=HANG_S)
    assert done.stdout.splitlines() == [
        "fifo.yaml:1:1: cannot read file: it is not a regular file (a FIFO); Orion reads "
        "configuration only from regular files",
        "long.yaml:1:1: cannot read file: it is 2,214 bytes, over the 1,000 bytes Orion reads "
        "at most from such a file"], done.stderr


# -- a pipeline that never asks a model ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("config,said", [
    ("pipeline: []\n", "1:11: the pipeline is empty, so no message would ever be answered"),
    ("pipeline: [context, tools]\n", "1:11: the pipeline (context, tools) has no system that "
                                     "replies"),
    ("runtime: {max_messages: 0}\npipeline:\n  remove: [model]\n",
     "3:3: the pipeline (context, write_session, tools, trace) has no system that replies"),
])
def test_a_pipeline_without_a_model_is_refused_by_check_and_run(tmp_path, config, said):
    ws = workspace(tmp_path, config)
    where = f"{ws / 'orion.yaml'}:{said}"
    check = orion("check", "--workspace", str(ws), cwd=ws)
    assert check.returncode == 1 and where in check.stdout, check.stdout
    run = orion("run", "hello", "--workspace", str(ws), cwd=ws)
    assert run.returncode == 2 and f"error: {where}" in run.stderr, run.stderr
    assert "Hello" not in run.stdout + run.stderr  # the conversation never started
    as_json = orion("run", "hello", "--workspace", str(ws), "--json", cwd=ws)
    result = json.loads(as_json.stdout)
    assert as_json.returncode == 2 and not result["ok"] and where in result["errors"][0]


@pytest.mark.parametrize("leads_to,said", [("orion.yaml", "Too many levels of symbolic links"),
                                           ("config/missing.yaml", "No such file or directory")],
                         ids=["loop", "dangling"])
def test_orion_yaml_that_is_a_link_leading_nowhere_is_a_located_error(tmp_path, leads_to, said):
    """A link that cannot be followed is not a workspace without ``orion.yaml``: the team's
    configuration (its charts, its disabled plugins) would be ignored without a word."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "orion.yaml").symlink_to(leads_to)
    for command in (["run", "hello"], ["check"]):
        done = orion(*command, "--workspace", str(ws), cwd=ws)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert done.stderr.strip() == f"error: {ws / 'orion.yaml'}:1:1: cannot read file: {said}"
        assert "Hello" not in done.stdout  # nothing was run with the defaults instead


def test_a_reply_text_file_that_is_a_link_loop_is_a_located_script_error(tmp_path):
    (tmp_path / "reply.md").symlink_to("reply.md")
    (tmp_path / "s.yaml").write_text("conversation:\n  - user: hi\n"
                                     "  - model: {text_file: reply.md}\n")
    done = orion("run", str(tmp_path / "s.yaml"), "--workspace", str(tmp_path / "ws"),
                 cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert (f"{tmp_path / 's.yaml'}:3:24: entry 2: model.text_file 'reply.md' "
            f"({tmp_path / 'reply.md'}): cannot read it: Too many levels of symbolic links"
            ) in done.stderr
