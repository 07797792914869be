"""The write session, wired into the runtime through the public hooks.

- ``WritePlanTool_begin``: a small plan; the content then streams as plain text.
- ``WritePlanTool_execute``: the plan with the content in JSON, for small edits only.
- ``WritePlanTool_keep``: put text the open session set aside back where it was (a part
  number, no content); advertised only while a session is open.
- the ``write_session`` system: after each model request, the message's end becomes the open
  session's next step (DONE, a pause, a cut-off output, a corrections reply).
- a context block while a session is open, so the protocol survives compaction.
- the ``finalize`` action of the ``write_session`` chart: the plan, executed once.
- at ``runtime_started``, the write sessions of earlier runs: orphans offered, expired or
  repaired, one marked for ``--continue`` adopted, temp leftovers swept and old backups pruned.
- at ``runtime_closing``, what an open session means for the user who leaves.
- ``open_write``: the open session, for the chat's live line; what a write changed in a file
  that existed, for the chat (``reporter.changed``).
- ``report_run``: the sessions of ``orion run``, the files they wrote, and the writes that
  failed or ended incomplete (which fail the run); ``reply_stopped``: an open session saved
  when the user stops a reply.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from orion.api import (ContextBlock, OpenWrite, OrionError, RunReport, ToolSpec,
                       hookimpl, host_of)
from orion.write_session.context import session_of
from orion.write_session.diff import changes, read_regular
from orion.write_session.manager import manager_for
from orion.write_session.operations import execute
from orion.write_session.plan import WritePlan, check_plan
from orion.write_session.session import validate_write
from orion.write_session.startup import startup
from orion.write_session.undo import prune_after_write, write_undo_record
from .finalization import finalizer

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from orion.api import (ContextRequest, Finish, GateRequest, Host, Lifecycle, ToolContext,
                           Transition, Turn)

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
KEEP_DESCRIPTION = (
    "Put text the open write session set aside back into the file's content, where it was: "
    "Orion says which part it set aside and why (text beside a tool call, an unfinished line "
    "your continuation did not send again). Give the part's number; no content.")
KEEP = "WritePlanTool_keep"


#: The longest target path, and the longest marker or search text, the tools accept. Only the
#: content of WritePlanTool_execute may be longer (up to EXECUTE_MAX_CONTENT): no other
#: argument can carry a file's content.
MAX_PATH_CHARS = 1024
MAX_MARKER_CHARS = 1024


def _bounded(name: str, limit: int, **more: Any) -> Any:
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


class KeepArgs(BaseModel):
    """Which part of the text set aside to put back."""

    part: int = Field(ge=1, le=1_000_000, description="the number of the part, as Orion said it")


def keep(args: KeepArgs, context: ToolContext) -> str:
    session = manager_for(context.host).active
    if session is None:
        raise OrionError("no write session is open: text set aside by a finished session is "
                         "not in any file; orion sessions show ID prints it, and "
                         "WritePlanTool_begin writes it again")
    return session.keep(args.part)


def begin(args: BeginArgs, context: ToolContext) -> dict[str, Any]:
    return manager_for(context.host).begin(WritePlan.model_validate(args.model_dump()))


def execute_small(args: ExecuteArgs, context: ToolContext) -> str:
    runtime = manager_for(context.host).runtime
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
    manager_for(runtime).wrote(result)
    _say_changes(runtime, [result])
    report = result.report
    try:
        write_undo_record(runtime.state_dir, session_id=write_id, relative=result.relative,
                          operation=plan.operation.value, sha256=result.sha256,
                          backup=result.backup, written_at_ms=runtime.clock.now_ms())
        prune_after_write(runtime.state_dir, int(
            runtime.definition("write_session").settings.get("keep_backups", 100)))
    except OSError as exc:
        return (f"{report}; its undo record could not be saved ({exc.strerror or exc}), so "
                "orion sessions undo cannot undo it")
    return report


def cut_notice(finish: Finish) -> str:
    """What the user is told about a reply that did not end cleanly outside a write session
    (a write session continues its own): every end of a reply is named."""
    if finish.error:  # the error itself, in one line
        return (f"error: the endpoint reported an error in the middle of the reply "
                f"({finish.error}); what arrived is kept")
    if finish.raw == "length":
        return ("the reply was cut by the output limit (finish reason length): it ends "
                "mid-way. Ask the model to go on, or raise model.max_tokens in orion.yaml")
    if finish.raw == "connection_lost":
        return "the connection broke in the middle of the reply; what arrived is kept"
    if finish.raw == "content_filter":
        return "the provider's content filter stopped the reply; what arrived is kept"
    if finish.raw is None:
        return ("the reply ended without a finish reason (the server stopped sending); what "
                "arrived is kept")
    return f"the reply ended with finish reason {finish.raw!r}; what arrived is kept"


class WriteSessionSystem:
    """After the model system: the end of the message is the open session's next step."""

    name = "write_session"

    async def run(self, turn: Turn) -> None:
        runtime = turn.host
        session = manager_for(runtime).active
        if turn.finish is None:
            return
        if session is None:
            if turn.finish.truncated:  # no session continues it: the user is told why it ended
                runtime.reporter.notice(cut_notice(turn.finish))
            return
        messages = runtime.conversation.messages
        message = messages[-1] if messages and messages[-1].role == "assistant" else None
        session.end_message(turn.finish, message, tool_calls=bool(turn.tool_calls),
                            thought="".join(turn.thought))


@hookimpl
def register_tools(register: Callable[[ToolSpec], None]) -> None:
    register(ToolSpec("WritePlanTool_begin", BEGIN_DESCRIPTION, BeginArgs, begin,
                      paths=("target_file",)))
    register(ToolSpec("WritePlanTool_execute", EXECUTE_DESCRIPTION, ExecuteArgs, execute_small,
                      paths=("target_file",)))
    register(ToolSpec(KEEP, KEEP_DESCRIPTION, KeepArgs, keep))


@hookimpl
def gate_tools(tools: Sequence[ToolSpec], request: GateRequest) -> list[str] | None:
    """``WritePlanTool_keep`` only while a session is open: nothing else can be put back."""
    runtime = request.host
    if runtime is None or manager_for(runtime).active is None:
        return [KEEP]
    return None


@hookimpl
def register_actions(register: Callable[..., None]) -> None:
    register("finalize", finalizer(write), chart="write_session")


@hookimpl
def register_systems(register: Callable[[Any], None]) -> None:
    register(WriteSessionSystem())


@hookimpl
def build_context(request: ContextRequest) -> ContextBlock | None:
    runtime = request.host
    session = manager_for(runtime).active if runtime is not None else None
    if session is None:
        return None
    pending = session.aside.pending
    aside = ""
    if pending:
        listed = "; ".join(f"{part.describe()} {part.why}" for part in pending)
        aside = (f" Set aside, not in the file: {listed}. WritePlanTool_keep with a part's "
                 "number puts it back where it was.")
    return ContextBlock(
        "write_session",
        f"A write session is open: {session.plan.relative} ({session.plan.plan.operation.value}"
        f", session {session.id[:8]}, {session.journal.lines} lines saved, state "
        f"{session.state}). Everything you write as plain text is the file's content; end it "
        f"with a line {session.terminator}. Do not repeat what was already saved. Text in a "
        f"message that calls a tool, and text after the {session.terminator} line, is set "
        "aside, not written." + aside
        + (" The user sent a message meanwhile; you will see it once the file is written."
           if session.held_messages else ""), order=20, volatile=True)


@hookimpl
def conversation_reset(host: Host) -> None:
    """``/reset``: a session still open belongs to the old conversation. Its content is kept
    (journal closed, not deleted) for ``orion sessions recover``; the new conversation's text
    is not captured."""
    session = manager_for(host).active
    if session is not None:
        session.set_aside("the conversation was reset")


@hookimpl
def runtime_started(host: Host) -> None:
    """Every runtime (``orion run``, ``orion chat``, a test's world), before its first turn:
    what earlier runs left behind. A session marked for ``--continue`` is adopted and asks the
    model to go on; whoever drives the runtime answers that prompt (``runtime.pump()``)."""
    manager_for(host).at_start = startup(manager_for(host).runtime)


@hookimpl
def report_run(host: Host) -> RunReport:
    manager = manager_for(host)
    sessions: list[dict[str, Any]] = []
    problems: list[str] = []
    for summary in manager.summaries():  # ended sessions beyond the newest are summaries
        sessions.append({"id": summary.id, "target_file": summary.target_file,
                         "operation": summary.operation, "status": summary.status,
                         "continuations": summary.continuations,
                         "corrections": summary.corrections,
                         "set_aside_lines": summary.set_aside})
        if summary.status == "failed":
            outcome = "failed"
        elif summary.status == "incomplete":  # cut off, or no DONE after the idle prompts
            why = summary.incomplete_reason
            outcome = f"is incomplete: {why or 'the output was cut off'}"
        else:
            continue
        problems.append(f"the write of {summary.target_file} (session {summary.id[:8]}) "
                        f"{outcome}")
    # Only what this runtime wrote: another process writing in the workspace meanwhile is not
    # this run's.
    return RunReport(sections={"sessions": sessions}, files=list(manager.files.values()),
                     problems=problems)


@hookimpl
def reply_stopped(host: Host) -> str | None:
    """The reply was a write's content: it is saved, and the session stays open."""
    session = manager_for(host).active
    if session is None:
        return None
    session.checkpoint()
    journal, short = session.journal, session.id[:8]
    held = _held(session.held_messages)
    if journal.degraded is not None:
        return (f"reply stopped; write session {short} holds {journal.lines} lines in memory "
                f"only ({journal.degraded}): they are lost if this chat ends{held}")
    return (f"reply stopped; write session {short} saved ({journal.lines} lines); it stays "
            f"open here, and `orion sessions recover {short}` finishes it from another shell"
            f"{held}")


def _held(messages: list[str]) -> str:
    if not messages:
        return ""
    if len(messages) == 1:
        return "; your message is held with it and sent once the file is written"
    return f"; your {len(messages)} messages are held with it and sent once the file is written"


@hookimpl
def runtime_closing(host: Host) -> None:
    """The process ends (``/quit``, the end of input or of a script) with a session open: say
    where its content and the user's held messages are, and how to go on. The journal keeps
    both (the session manager releases it when the runtime closes its services)."""
    session = manager_for(host).active
    if session is not None:
        host.reporter.notice(session.open_notice())


#: The word ``orion chat``'s live line uses for a write session, by the first of its
#: lifecycle's tags that it has (docs/write-sessions.md lists the tags); a write that has none
#: of them is writing.
WRITE_WORDS = (("correcting", "correcting"), ("finalizing", "checking"),
               ("continuing", "continuing"), ("paused", "waiting"), ("receiving", "writing"))


def write_word(lifecycle: Lifecycle) -> str:
    """What a write session is doing, in a word a user understands: writing, continuing,
    checking, correcting or waiting."""
    for tag, word in WRITE_WORDS:
        if lifecycle.has_tag(tag):
            return word
    return "writing"


@hookimpl
def open_write(host: Host) -> OpenWrite | None:
    session = manager_for(host).active
    if session is None:
        return None
    return OpenWrite(session.id, write_word(session.lifecycle), session.progress)


def _say_changes(runtime: Any, results: list[Any]) -> None:
    """What each write changed in a file that existed, for a reporter that shows it."""
    for result in results:
        if result.backup is not None:
            runtime.reporter.changed(lambda result=result: _changed_lines(runtime, result))


def _changed_lines(runtime: Any, result: Any) -> str:
    try:
        summary = changes(read_regular(result.backup), read_regular(result.path)).summary()
    except OSError as exc:
        return f"{result.relative}: what changed cannot be read ({exc.strerror or exc})"
    try:
        write_id = result.backup.relative_to(runtime.state_dir / "backups").parts[0]
    except ValueError:  # not where backups are kept: no id to name
        return f"{result.relative}: {summary}"
    return f"{result.relative}: {summary}; `orion sessions diff {write_id[:8]}` shows them"


def write(lifecycle: Lifecycle, transition: Transition) -> Any:
    """The ``finalize`` of a write session: the plan, executed once. The lifecycle's context
    knows its session (a lifecycle run on its own has none: the ``finalize`` hook's other
    implementations are asked)."""
    session = session_of(lifecycle)
    if session is None:
        return None
    result = session.write()
    _say_changes(host_of(lifecycle), [result])
    return result
