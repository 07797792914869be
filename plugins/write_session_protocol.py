"""Counters, guards and model prompts of the write-session statechart.

Prompts for the model go through ``lifecycle.prompt(text)``: the runtime hosting the lifecycle
puts them into the conversation before its next model request. Each prompt states the rule
that decides what the model's reply is (see orion.write_session.decision): the idle prompt
says that anything but ``DONE`` alone is added to the file; the continuation request and the
unfinished-line question quote the tail and say that a reply starts with the unfinished line
again, which its first line replaces. What the session has to tell the model meanwhile (text
it set aside) waits in the context's ``news`` and goes first in the next prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from orion.api import WriteContext, hookimpl

if TYPE_CHECKING:
    from collections.abc import Callable

    from orion.api import Lifecycle, Transition

DONE_PROMPT = "If you're finished, reply with DONE on its own line; otherwise continue."


def _prompt(lifecycle: Lifecycle, text: str) -> None:
    lifecycle.prompt(WriteContext.of(lifecycle).with_news(text))


def done_line(lifecycle: Lifecycle) -> str:
    """The terminator the model must send: ``DONE``, or ``DONE <short id>`` in strict mode."""
    return f"DONE {lifecycle.id[:8]}" if lifecycle.settings.get("strict_done") else "DONE"


def _quoted(lifecycle: Lifecycle) -> tuple[list[str], str | None]:
    """The tail the session quotes for the next prompt (in the context, as JSON): the last
    complete lines and the unfinished one (None when the content ends with a line break)."""
    quoted = WriteContext.of(lifecycle).quoted
    if quoted is None:
        return [], None
    return list(quoted.lines), quoted.unfinished


#: A quoted line longer than this is shown by its start and its end (a minified file's one
#: line would make the prompt as long as the file).
QUOTE_CHARS = 400


def _tail(lines: list[str], unfinished: str | None) -> str:
    """The quoted lines, the unfinished one last."""
    rows = [*lines, *([unfinished] if unfinished is not None else [])]
    return "\n".join(f"> {_shown(line)}" for line in rows)


def _shown(line: str) -> str:
    if len(line) <= QUOTE_CHARS:
        return line
    half = QUOTE_CHARS // 2
    return f"{line[:half]} [… {len(line) - 2 * half} more characters …] {line[-half:]}"


def _resend(line: int) -> str:
    """What a reply does with an unfinished line: the rule, as the model is told it (the line
    itself is quoted, last)."""
    return (f"Line {line}, the last one quoted, is not finished: start your reply with line "
            f"{line} again, whole, and your first line replaces the unfinished one.")


def prompt_for_done(lifecycle: Lifecycle, transition: Transition) -> None:
    context = WriteContext.of(lifecycle)
    if context.asked:
        # The model is still answering the last prompt. The chart's timer says so with
        # `unless: model_asked`; a chart copied before it did (0.1.0's) must not ask twice.
        return
    # Counted, so that a model that never says DONE is not asked forever (max_idle_prompts);
    # the session sets the count back to 0 when new content arrives.
    context.idle_prompts += 1
    context.asked = True  # until the reply ends (the session clears it)
    line = done_line(lifecycle)
    text = DONE_PROMPT
    if lifecycle.settings.get("strict_done"):
        text = text.replace("with DONE", f"with {line}")
    text += (f" Anything you write but {line} alone is added to the file, after what is "
             f"saved; end it with a line {line}.")
    _, unfinished = _quoted(lifecycle)
    cut_at = context.unfinished_line
    if unfinished is not None and cut_at:
        text += " " + _resend(cut_at)
    _prompt(lifecycle, text)


def count_continuation(lifecycle: Lifecycle, transition: Transition) -> None:
    WriteContext.of(lifecycle).continuations += 1


def count_correction(lifecycle: Lifecycle, transition: Transition) -> None:
    WriteContext.of(lifecycle).corrections += 1


def request_continuation(lifecycle: Lifecycle, transition: Transition) -> None:
    payload = transition.payload
    context = WriteContext.of(lifecycle)
    n, limit = context.continuations, lifecycle.settings["max_continuations"]
    saved = int(payload.get("lines", 0))
    # The session puts the quoted lines in the context (payloads are traced; lines are content).
    lines, unfinished = _quoted(lifecycle)
    target = context.target
    of = f" of {target}" if target else ""
    text = (f"Your output was cut off. {saved} lines are saved (continuation {n}/{limit}). "
            f"The last lines{of} received were:\n{_tail(lines, unfinished)}\n")
    if unfinished is not None:
        context.unfinished_line = saved + 1
        text += f"{_resend(saved + 1)} Then continue exactly where you stopped"
    else:
        context.unfinished_line = None
        text += (f"Continue exactly where you stopped, with line {saved + 1}: everything you "
                 "send is added after these lines, so do not repeat them (quoted lines sent "
                 "again at the start are set aside, not written twice)")
    _prompt(lifecycle, text + f", and end with {done_line(lifecycle)} on its own line.")


def ask_about_unfinished_line(lifecycle: Lifecycle, transition: Transition) -> None:
    """The message stopped cleanly in the middle of a line: does the file end there?"""
    context = WriteContext.of(lifecycle)
    context.asked = True  # until the reply ends (the session clears it)
    # Counted as an idle prompt is: a model that stops in the middle of a line every time is
    # not asked forever (max_idle_prompts, FS-20).
    context.idle_prompts += 1
    saved = int(transition.payload.get("lines", 0))
    lines, unfinished = _quoted(lifecycle)
    line = saved + 1
    context.unfinished_line = line
    done = done_line(lifecycle)
    _prompt(lifecycle,
            f"Your message stopped in the middle of line {line}, without {done}. The last lines "
            f"received were:\n{_tail(lines, unfinished)}\n"
            f"If the file is complete and ends there, without a final line break, reply with "
            f"{done} on its own line. Otherwise: {_resend(line)} Then continue, and end with "
            f"{done} on its own line.")


def request_corrections(lifecycle: Lifecycle, transition: Transition) -> None:
    # The session wrote the batched prompt, with the lines shown escaped; it is in the context
    # rather than the payload, because payloads are traced and the prompt quotes content.
    context = WriteContext.of(lifecycle)
    prompt = context.take_correction_prompt() or transition.payload.get("prompt")
    if prompt:
        lifecycle.prompt(prompt)
        return
    issues = transition.payload.get("issues") or []
    lines = [f"- line {i.get('line')}: {i.get('context', '')!s} ({i.get('message', '')})"
             for i in issues]
    lifecycle.prompt(
        f"The content has {len(issues)} issue(s) (correction round "
        f"{context.corrections}/{lifecycle.settings['max_corrections']}):\n"
        + "\n".join(lines)
        + "\nReply only with corrected lines, one per line, as `L<line>: <corrected line>`.")


def mark_incomplete(lifecycle: Lifecycle, transition: Transition) -> None:
    WriteContext.of(lifecycle).mark_incomplete()


def mark_replaced(lifecycle: Lifecycle, transition: Transition) -> None:
    WriteContext.of(lifecycle).mark_replaced()


def has_content(lifecycle: Lifecycle, transition: Transition) -> bool:
    """Something to save: at least one byte, and not only whitespace."""
    payload = transition.payload
    if payload.get("blank"):
        return False
    return int(payload.get("bytes", lifecycle.context.get("bytes", 0))) > 0


def model_asked(lifecycle: Lifecycle, transition: Transition) -> bool:
    """The model was asked whether it is finished and its reply has not ended yet: the idle
    timer must not ask again meanwhile (a slow first token, a user's message)."""
    return WriteContext.of(lifecycle).asked


def continuations_left(lifecycle: Lifecycle, transition: Transition) -> bool:
    return bool(WriteContext.of(lifecycle).continuations
                < lifecycle.settings["max_continuations"])


def corrections_left(lifecycle: Lifecycle, transition: Transition) -> bool:
    return bool(WriteContext.of(lifecycle).corrections < lifecycle.settings["max_corrections"])


@hookimpl
def register_actions(register: Callable[..., None]) -> None:
    for action in (prompt_for_done, count_continuation, count_correction, request_continuation,
                   ask_about_unfinished_line, request_corrections, mark_incomplete,
                   mark_replaced):
        register(action.__name__, action)


@hookimpl
def register_guards(register: Callable[..., None]) -> None:
    for guard in (has_content, continuations_left, corrections_left, model_asked):
        register(guard.__name__, guard)
