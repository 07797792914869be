"""The write session, wired into the runtime through the public hooks.

- ``WritePlanTool_begin``: a small plan; the content then streams as plain text.
- ``WritePlanTool_execute``: the plan with the content in JSON, for small edits only.
- the ``write_session`` system: after each model request, the message's end becomes the open
  session's next step (DONE, a pause, a cut-off output, a corrections reply).
- a context block while a session is open, so the protocol survives compaction.
- the ``finalize`` hook for ``write_session`` lifecycles: the plan, executed once.
"""

from __future__ import annotations

import uuid

from pydantic import Field

from orion.api import ContextBlock, OrionError, ToolSpec, hookimpl, write_session_of
from orion.write_session.manager import manager_for
from orion.write_session.operations import execute
from orion.write_session.plan import WritePlan, check_plan
from orion.write_session.session import validate_write
from orion.write_session.undo import write_undo_record

#: Content larger than this does not belong in tool-call JSON.
EXECUTE_MAX_CONTENT = 4096

BEGIN_DESCRIPTION = (
    "Start writing a file. Give the plan only (intent, target_file, operation and the fields "
    "of that operation); Orion checks it before you write anything. Then send the file's "
    "content as plain text in your next message and end it with a line DONE. Use this for "
    "any content longer than a few lines.")
EXECUTE_DESCRIPTION = (
    f"Make a small edit at once, with the content in the arguments (at most "
    f"{EXECUTE_MAX_CONTENT} bytes). For anything larger use WritePlanTool_begin.")


#: The longest target path, and the longest marker or search text, the tools accept. Only the
#: content of WritePlanTool_execute may be longer (up to EXECUTE_MAX_CONTENT): no other
#: argument can carry a file's content.
MAX_PATH_CHARS = 1024
MAX_MARKER_CHARS = 1024


def _bounded(name: str, limit: int, **more):
    field = WritePlan.model_fields[name]
    return Field(default=field.default, description=field.description, max_length=limit,
                 **more)


class BeginArgs(WritePlan):
    # WritePlan with every text bounded; the docstring is the schema's description.
    """The plan of a write. The content itself is not part of the plan: it follows as plain
    text, ended by a line DONE."""

    target_file: str = _bounded("target_file", MAX_PATH_CHARS, min_length=1)
    location_marker: str | None = _bounded("location_marker", MAX_MARKER_CHARS)
    start_marker: str | None = _bounded("start_marker", MAX_MARKER_CHARS)
    end_marker: str | None = _bounded("end_marker", MAX_MARKER_CHARS)
    search: str | None = _bounded("search", MAX_MARKER_CHARS)


class ExecuteArgs(BeginArgs):
    """The plan of a small write, with its content (at most 4096 bytes)."""

    content: str = Field(description=f"the content to write (at most {EXECUTE_MAX_CONTENT} "
                                     "bytes; larger content goes through WritePlanTool_begin)",
                         max_length=EXECUTE_MAX_CONTENT)


def begin(args: BeginArgs, context) -> dict:
    return manager_for(context.runtime).begin(WritePlan.model_validate(args.model_dump()))


def execute_small(args: ExecuteArgs, context) -> str:
    runtime = context.runtime
    content = args.content.encode("utf-8", "surrogatepass")
    if len(content) > EXECUTE_MAX_CONTENT:
        raise OrionError(f"the content is {len(content)} bytes; WritePlanTool_execute takes at "
                         f"most {EXECUTE_MAX_CONTENT}. Call WritePlanTool_begin with the same "
                         "plan and send the content as plain text ending with a line DONE.")
    plan = WritePlan.model_validate(args.model_dump(exclude={"content"}))
    checked = check_plan(plan, workspace=runtime.workspace, state_dir=runtime.state_dir)
    issues = validate_write(runtime.plugins, checked, content)
    if issues:
        listed = "; ".join(str(issue) for issue in issues[:20])
        raise OrionError(f"nothing was written: the content has {len(issues)} issue(s): {listed}")
    # A fresh id per write: its backup and undo record never meet another run's.
    write_id = uuid.uuid4().hex
    result = execute(checked, content, state_dir=runtime.state_dir, session_id=write_id)
    manager_for(runtime).writes.append(result)
    report = result.report
    try:
        write_undo_record(runtime.state_dir, session_id=write_id, relative=result.relative,
                          operation=plan.operation.value, sha256=result.sha256,
                          backup=result.backup, written_at_ms=runtime.clock.now_ms())
    except OSError as exc:
        return (f"{report}; its undo record could not be saved ({exc.strerror or exc}), so "
                "orion sessions undo cannot undo it")
    return report


class WriteSessionSystem:
    """After the model system: the end of the message is the open session's next step."""

    name = "write_session"

    async def run(self, turn) -> None:
        runtime = turn.runtime
        session = manager_for(runtime).active
        if session is None or turn.finish is None:
            return
        messages = runtime.conversation.messages
        message = messages[-1] if messages and messages[-1].role == "assistant" else None
        session.end_message(turn.finish, message, tool_calls=bool(turn.tool_calls))


@hookimpl
def register_tools(register):
    register(ToolSpec("WritePlanTool_begin", BEGIN_DESCRIPTION, BeginArgs, begin))
    register(ToolSpec("WritePlanTool_execute", EXECUTE_DESCRIPTION, ExecuteArgs, execute_small))


@hookimpl
def register_systems(register):
    register(WriteSessionSystem())


@hookimpl
def build_context(request):
    runtime = request.runtime
    session = manager_for(runtime).active if runtime is not None else None
    if session is None:
        return None
    return ContextBlock(
        "write_session",
        f"A write session is open: {session.plan.relative} ({session.plan.plan.operation.value}"
        f", session {session.id[:8]}, {session.journal.lines} lines saved, state "
        f"{session.state}). Everything you write as plain text is the file's content; end it "
        f"with a line {session.terminator}. Do not repeat what was already saved.", order=20)


@hookimpl
def conversation_reset(runtime):
    """``/reset``: a session still open belongs to the old conversation. Its content is kept
    (journal closed, not deleted) for ``orion sessions recover``; the new conversation's text
    is not captured."""
    session = manager_for(runtime).active
    if session is not None:
        session.set_aside("the conversation was reset")


@hookimpl
def finalize(lifecycle, transition):
    if lifecycle.name != "write_session":
        return None
    session = write_session_of(lifecycle)
    return session.write() if session is not None else None
