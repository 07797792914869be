"""Counters, guards and model prompts of the write-session statechart.

Prompts for the model go through ``lifecycle.prompt(text)``: the runtime hosting the lifecycle
puts them into the conversation before its next model request.
"""

from __future__ import annotations

from orion.api import hookimpl

DONE_PROMPT = "If you're finished, reply with DONE on its own line; otherwise continue."


def done_line(lifecycle) -> str:
    """The terminator the model must send: ``DONE``, or ``DONE <short id>`` in strict mode."""
    return f"DONE {lifecycle.id[:8]}" if lifecycle.settings.get("strict_done") else "DONE"


def prompt_for_done(lifecycle, transition) -> None:
    # Counted, so that a model that never says DONE is not asked forever (max_idle_prompts);
    # the session sets the count back to 0 when new content arrives.
    lifecycle.context["idle_prompts"] = lifecycle.context.get("idle_prompts", 0) + 1
    lifecycle.context["asked"] = True  # until the reply ends (the session clears it)
    line = done_line(lifecycle)
    text = DONE_PROMPT
    if lifecycle.settings.get("strict_done"):
        text = text.replace("with DONE", f"with {line}")
    if lifecycle.context.pop("unwritten_reply", False):
        text = (f"Your last reply did not end with a line {line}, so it was not added to the "
                f"file. {text} If you continue, end the content with a line {line}.")
    lifecycle.prompt(text)


def count_continuation(lifecycle, transition) -> None:
    lifecycle.context["continuations"] = lifecycle.context.get("continuations", 0) + 1


def count_correction(lifecycle, transition) -> None:
    lifecycle.context["corrections"] = lifecycle.context.get("corrections", 0) + 1


def request_continuation(lifecycle, transition) -> None:
    payload = transition.payload
    n, limit = lifecycle.context["continuations"], lifecycle.settings["max_continuations"]
    # The session puts the quoted lines in the context (payloads are traced; lines are content).
    tail = lifecycle.context.get("last_lines") or payload.get("last_lines") or []
    quoted = "\n".join(f"> {line}" for line in tail)
    lifecycle.prompt(
        f"Your output was cut off. {payload.get('lines', 0)} lines are saved "
        f"(continuation {n}/{limit}). The last lines received were:\n{quoted}\n"
        "Continue exactly where you stopped, without repeating anything, and end with "
        f"{done_line(lifecycle)} on its own line.")


def request_corrections(lifecycle, transition) -> None:
    # The session wrote the batched prompt, with the lines shown escaped; it is in the context
    # rather than the payload, because payloads are traced and the prompt quotes content.
    prompt = lifecycle.context.pop("correction_prompt", None) or transition.payload.get("prompt")
    if prompt:
        lifecycle.prompt(prompt)
        return
    issues = transition.payload.get("issues") or []
    lines = [f"- line {i.get('line')}: {i.get('context', '')!s} ({i.get('message', '')})"
             for i in issues]
    lifecycle.prompt(
        f"The content has {len(issues)} issue(s) (correction round "
        f"{lifecycle.context['corrections']}/{lifecycle.settings['max_corrections']}):\n"
        + "\n".join(lines)
        + "\nReply only with corrected lines, one per line, as `L<line>: <corrected line>`.")


def mark_incomplete(lifecycle, transition) -> None:
    lifecycle.context["status"] = "incomplete"


def mark_replaced(lifecycle, transition) -> None:
    lifecycle.context["safe_replacement"] = True


def has_content(lifecycle, transition) -> bool:
    """Something to save: at least one byte, and not only whitespace."""
    payload = transition.payload
    if payload.get("blank"):
        return False
    return int(payload.get("bytes", lifecycle.context.get("bytes", 0))) > 0


def model_asked(lifecycle, transition) -> bool:
    """The model was asked whether it is finished and its reply has not ended yet: the idle
    timer must not ask again meanwhile (a slow first token, a user's message)."""
    return bool(lifecycle.context.get("asked"))


def continuations_left(lifecycle, transition) -> bool:
    return lifecycle.context.get("continuations", 0) < lifecycle.settings["max_continuations"]


def corrections_left(lifecycle, transition) -> bool:
    return lifecycle.context.get("corrections", 0) < lifecycle.settings["max_corrections"]


@hookimpl
def register_actions(register):
    for action in (prompt_for_done, count_continuation, count_correction, request_continuation,
                   request_corrections, mark_incomplete, mark_replaced):
        register(action.__name__, action)


@hookimpl
def register_guards(register):
    for guard in (has_content, continuations_left, corrections_left, model_asked):
        register(guard.__name__, guard)
