"""The write promise as a property: whatever the model streams while a session is open, the
file plus the text Orion reports as set aside is everything it streamed, minus terminator
lines and the repeats the prompts declared.

Hypothesis draws a document (a run of identical rows, then numbered lines; its last line with
or without a line break) and delivers it through the real runtime (``orion.runtime.runner``
with the scripted model) in messages that end every way a message ends: a pause at the end of
a line (the idle prompt follows), a clean stop in the middle of a line (the model is asked at
once), a cut-off (``length``, an error event, a dropped connection), text beside a tool call,
and the last message with ``DONE`` and a remark after it. Each message is cut into chunks at
random; after a stop in the middle of a line the model sends that line again (a declared
repeat) or does not (the old text is set aside);
the user sometimes types a message during a pause. The text set aside, put back part by part
where it was (as ``WritePlanTool_keep`` would), must give back the stream.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orion.write_session.orphan_commands import show
from write_harness import begin, make_runner

ENDINGS = ("pause", "cut", "error", "connection_lost", "tool")


@dataclass
class Script:
    """The conversation drawn, and what it streams that the file must hold."""

    conversation: list[dict[str, Any]] = field(default_factory=list)
    expected: str = ""  # the stream without terminator lines and declared repeats
    content: str = ""  # what the content holds so far, as the model sees it


def _chunks(draw, text: str) -> list[str]:
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=6))))
    points = [0, *[c for c in cuts if 0 < c < len(text)], len(text)]
    return [text[a:b] for a, b in zip(points, points[1:])] or [""]


@st.composite
def scripts(draw) -> Script:
    run = draw(st.integers(0, 5))
    count = draw(st.integers(1, 24))
    lines = ["0,0,0,0"] * run + [f"line {n}: {draw(st.sampled_from(['alpha', 'beta', 'DONE.']))}"
                                 for n in range(1, count + 1)]
    document = "\n".join(lines) + ("\n" if draw(st.booleans()) else "")
    script = Script([{"user": "Write the file."}, begin("out.txt")])
    position = 0
    parts = draw(st.integers(1, 4))
    for index in range(parts):
        last = index == parts - 1
        take = len(document) - position if last else \
            draw(st.integers(0, len(document) - position))
        piece = document[position:position + take]
        position += take
        if not piece.strip() and not last:
            continue
        unfinished = script.content.rsplit("\n", 1)[-1] if script.content else ""
        prefix = ""
        if unfinished and draw(st.booleans()):
            # The model does as it was asked: the unfinished line again, whole (a declared
            # repeat of its start).
            prefix = unfinished
        elif unfinished and piece.startswith(unfinished):
            # It does not, but its text starts with the unfinished line's: by the rule it was
            # told, that start is the line sent again (a declared repeat).
            prefix, piece = unfinished, piece[len(unfinished):]
        elif unfinished and piece.strip():
            # It does not: its first line takes the unfinished line's place, and the old text
            # is set aside where it was (the stream keeps it in its place).
            script.content = script.content[:len(script.content) - len(unfinished)]
        text = prefix + piece
        if last:
            script.expected += piece
            if text and not text.endswith("\n") and draw(st.booleans()):
                # The file ends without a line break: asked about it, the model says DONE. (A
                # message that only sends the unfinished line again adds nothing: a pause.)
                script.conversation += [{"model": {"chunks": _chunks(draw, text)}},
                                        *([] if piece else [{"wait_ms": 2000}]),
                                        {"model": {"text": "DONE"}}]
            else:
                if text and not text.endswith("\n"):
                    text += "\n"  # the line break before DONE is content
                    script.expected += "\n"
                remark = draw(st.sampled_from(["", "\nThat is all.", "\n\nDONE\n"]))
                script.conversation.append(
                    {"model": {"chunks": _chunks(draw, text + "DONE\n" + remark)}})
                # Text after DONE is set aside exactly as it arrived, its blank line too.
                script.expected += remark if remark == "\nThat is all." else ""
            script.conversation.append({"model": {"text": "Written."}})
            break
        ending = draw(st.sampled_from(ENDINGS))
        if ending == "tool":
            # Set aside where it was: the content does not change (a line the model resent
            # stays unfinished, and is asked for again).
            note = draw(st.sampled_from(["Let me read the notes.", "Checking:\nthe README"]))
            script.conversation.append({"model": {
                "chunks": _chunks(draw, text + note), "tool_calls": [
                    {"name": "read_file", "arguments": {"path": "README.md"}}]}})
            script.expected += piece + note
            continue
        script.expected += piece
        script.content += piece
        reply: dict[str, Any] = {"chunks": _chunks(draw, text)}
        if ending != "pause":
            reply["finish_reason"] = ending if ending != "cut" else "length"
        script.conversation.append({"model": reply})
        if ending == "pause" and not script.content.endswith("\n"):
            continue  # a stop in the middle of a line: asked at once
        if ending == "pause":
            script.conversation.append(
                {"user": "How is it going?"} if draw(st.booleans()) else {"wait_ms": 2000})
    return script


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("ORION_PROPERTY_EXAMPLES", "45")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(script=scripts())
def test_the_file_and_the_text_set_aside_are_everything_streamed(tmp_path, monkeypatch,
                                                                 script):
    run = make_runner(tmp_path, monkeypatch)
    played = run({"settings": {"write_session": {"max_continuations": 20}},
                  "files": {"README.md": "readme\n"},
                  "conversation": script.conversation},
                 workspace=Path(tempfile.mkdtemp(dir=tmp_path)))
    assert played.result.ok, (played.result.errors, script.conversation)
    [session] = played.result.sessions
    assert session["status"] in ("written", "written_with_set_aside"), session
    shown = show(played.state_dir, session["id"])
    content = played.read("out.txt")
    parts = shown.set_aside.parts
    for part in sorted(parts, key=lambda p: p.order):  # put back as WritePlanTool_keep does
        data = shown.set_aside.read(part.number)
        content = content[:part.at] + data + content[part.at:]
        for other in parts:
            if other.order > part.order and other.at >= part.at:
                other.at += len(data)
    assert content.decode("utf-8") == script.expected, (script.conversation, parts)
    assert (session["status"] == "written") == (not parts)
