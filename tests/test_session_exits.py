"""Leaving a chat in any phase of a write session keeps the session: a session is abandoned
only when its journal holds nothing (FS-13).

Real signals to a real piped `orion chat` that talks to a loopback SSE server. The phase the
signal comes in is the idle prompt: the model wrote part of the file, stopped without DONE,
Orion asked it whether it is finished, and its answer is still streaming.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sse_server import (Pause, Reached, SSEServer, begin_write, finish_chunk, stream,
                        text_chunk)

FIRST = "".join(f"line {n}\n" for n in range(1, 117))
#: The start of the answer to the idle prompt: held until Orion can tell whether it starts
#: the file over.
MORE = "line 117\nline 118\n"


def _idle_reply(*, more: str, sent: threading.Event) -> list:
    """Begin, 116 lines without DONE (the idle prompt follows), then an answer to the idle
    prompt that sends ``more`` and goes on thinking (``sent`` is set then): the signal comes
    meanwhile."""
    answer = ([text_chunk(more)] if more else []) + [Reached(sent), Pause(60),
                                                     text_chunk("late\n"), finish_chunk("stop")]
    return [begin_write("doc.txt"),
            stream([text_chunk(FIRST), finish_chunk("stop")]),
            stream(answer)]


def _piped_chat(server: SSEServer, workspace: Path) -> tuple[subprocess.Popen, list[str]]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "orion", "chat", "--base-url", server.base_url, "--model",
         "test-model", "--workspace", str(workspace)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**clean, "OPENAI_API_KEY": "k", "WRITE_SESSION_IDLE_MS": "50"})
    err: list[str] = []
    threading.Thread(target=lambda: err.extend(iter(lambda: proc.stderr.read(1), "")),
                     daemon=True).start()
    threading.Thread(target=lambda: proc.stdout.read(), daemon=True).start()
    return proc, err


def _wait(what: str, ready, proc: subprocess.Popen, err: list[str]) -> None:
    end = time.monotonic() + 60
    while not ready():
        assert time.monotonic() < end and proc.poll() is None, f"no {what}: {''.join(err)}"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("more", ["", MORE], ids=["thinking", "after-more-content"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT],
                         ids=["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_while_the_model_answers_the_idle_prompt_keeps_the_session(tmp_path, signum,
                                                                            more):
    sent = threading.Event()
    with SSEServer(_idle_reply(more=more, sent=sent)) as server:
        proc, err = _piped_chat(server, tmp_path)
        try:
            proc.stdin.write("Write the document.\n")
            proc.stdin.flush()
            # The third request is the idle prompt; its answer is streaming.
            _wait("the idle prompt's answer", sent.is_set, proc, err)
            proc.send_signal(signum)
            if signum == signal.SIGINT:  # a piped chat: Ctrl-C stops the reply; then EOF
                proc.stdin.close()
            proc.wait(timeout=60)
        finally:
            proc.kill()
            proc.wait()
    said = " ".join("".join(err).split())
    # Nothing acts on the session once the chat closed it: no continuation, no abandon.
    assert "abandoned" not in said and "continuing" not in said, said
    assert "Cannot operate on a closed database" not in said, said
    sessions = tmp_path / ".orion" / "write_sessions"
    (directory,) = [d for d in sessions.iterdir() if d.is_dir()]
    assert (directory / "content.txt").read_text() == FIRST
    short = directory.name[:8]
    assert f"orion sessions recover {short} --continue" in said, said
    listed = subprocess.run([sys.executable, "-m", "orion", "sessions", "show", short,
                             "--workspace", str(tmp_path)], capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    if more:  # the reply's start, not read yet, is kept beside the content and counted
        assert "116 lines saved, 2 lines set aside" in said, said
        assert "line 117\nline 118" in listed.stdout, listed.stdout
