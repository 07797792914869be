"""The conversation's own slash commands: /help, /reset, /compact and /quit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orion.api import hookimpl

if TYPE_CHECKING:
    from collections.abc import Callable

    from orion.api import Host


def help_command(runtime: Host, args: str) -> str:
    commands = runtime.plugins.registry.commands
    return "\n".join(f"/{name:<10} {commands[name].help}" for name in sorted(commands))


def reset_command(runtime: Host, args: str) -> str:
    runtime.reset()
    return "The conversation was reset."


def compact_command(runtime: Host, args: str) -> str:
    removed = runtime.compact(force=True)
    if not removed:
        return ("Nothing to compact: the conversation is one turn (the newest turn is always "
                "kept); /reset starts a new one.")
    return (f"{removed} of the oldest messages were removed; "
            f"{len(runtime.conversation.messages)} remain.")


def quit_command(runtime: Host, args: str) -> str:
    runtime.closing = True
    return "Bye."


@hookimpl
def register_slash_commands(register: Callable[..., None]) -> None:
    register("help", help_command, "list the commands")
    register("reset", reset_command, "start a new conversation (and end plan work)")
    register("compact", compact_command, "drop the oldest turns of the conversation, to half "
             "its size")
    register("quit", quit_command, "leave the chat")
