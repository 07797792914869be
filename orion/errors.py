"""Typed errors. Every error a user can cause names the file, line, field or position."""

from __future__ import annotations

from dataclasses import dataclass


class OrionError(Exception):
    """Base class of every error Orion raises on purpose."""


@dataclass(frozen=True)
class Diagnostic:
    """One finding of a static check, printed as ``path:line:col: message``."""

    path: str
    line: int
    column: int
    message: str
    code: str = "error"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.message}"


class StatechartError(OrionError):
    """A statechart file failed its static checks."""

    def __init__(self, diagnostics: list[Diagnostic]):
        self.diagnostics = list(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class ConfigError(OrionError):
    """A setting, override or configuration file is invalid."""


class UnknownStatechart(OrionError, LookupError):
    """No built-in statechart has the name asked for; the message lists those that exist."""


class PluginError(OrionError):
    """A plugin could not be loaded or registered; the message names it."""


class LifecycleError(OrionError):
    """Base class of errors raised by a running lifecycle."""


class TriggerNotAllowed(LifecycleError):
    """The trigger exists in the statechart but not in the current state."""

    def __init__(self, lifecycle: str, trigger: str, state: str, allowed: list[str]):
        self.lifecycle, self.trigger, self.state, self.allowed = lifecycle, trigger, state, allowed
        choices = ", ".join(allowed) if allowed else "none"
        super().__init__(
            f"{lifecycle}: trigger {trigger!r} is not allowed in state {state!r} "
            f"(allowed here: {choices})"
        )


class UnknownTrigger(TriggerNotAllowed):
    """The trigger does not exist anywhere in the statechart."""

    def __init__(self, lifecycle: str, trigger: str, state: str, allowed: list[str]):
        super().__init__(lifecycle, trigger, state, allowed)
        self.args = (f"{lifecycle}: unknown trigger {trigger!r} (the statechart defines: "
                     f"{', '.join(allowed) or 'none'})",)

    def __str__(self) -> str:
        return str(self.args[0])


class ActionError(LifecycleError):
    """A named action raised; the lifecycle stays in the state it had reached."""

    def __init__(self, lifecycle: str, action: str, where: str, cause: BaseException):
        self.lifecycle, self.action, self.where, self.cause = lifecycle, action, where, cause
        super().__init__(f"{lifecycle}: action {action!r} failed {where}: "
                         f"{type(cause).__name__}: {cause}")


class RunawayStep(ActionError):
    """One trigger set off more queued events than a lifecycle runs for one (a loop of
    completion events or of triggers that actions send); the rest were discarded and the
    lifecycle stays in the state it had reached."""

    def __init__(self, lifecycle: str, trigger: str, limit: int, state: str,
                 recent: list[str]):
        self.trigger, self.limit, self.state, self.recent = trigger, limit, state, recent
        LifecycleError.__init__(self, (
            f"{lifecycle}: {trigger!r} set off more than {limit:,} events without waiting for "
            f"another (the last: {', '.join(recent)}); the chart loops, and the lifecycle "
            f"stopped in {state!r}"))
        self.lifecycle, self.action, self.where, self.cause = lifecycle, "", "", self


class SnapshotError(LifecycleError):
    """A snapshot cannot be taken or restored (wrong definition, unknown state, bad context)."""
