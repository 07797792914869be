"""The conversation's own slash commands: /help, /reset and /quit."""

from __future__ import annotations

from orion.api import hookimpl


def help_command(runtime, args: str) -> str:
    commands = runtime.plugins.registry.commands
    return "\n".join(f"/{name:<10} {commands[name].help}" for name in sorted(commands))


def reset_command(runtime, args: str) -> str:
    runtime.reset()
    return "The conversation was reset."


def quit_command(runtime, args: str) -> str:
    runtime.closing = True
    return "Bye."


@hookimpl
def register_slash_commands(register):
    register("help", help_command, "list the commands")
    register("reset", reset_command, "start a new conversation (and end plan work)")
    register("quit", quit_command, "leave the chat")
