"""Typed errors. Every error a user can cause names the file, line, field or position."""

from __future__ import annotations

import difflib
from dataclasses import dataclass


class OrionError(Exception):
    """Base class of every error Orion raises on purpose."""


@dataclass(frozen=True)
class Diagnostic:
    """One finding of a static check, printed as ``path:line:col: message``; a warning (what
    still runs, for now) as ``path:line:col: warning: message``."""

    path: str
    line: int
    column: int
    message: str
    code: str = "error"
    severity: str = "error"  # or "warning"

    def __str__(self) -> str:
        label = "warning: " if self.severity == "warning" else ""
        return f"{self.path}:{self.line}:{self.column}: {label}{self.message}"


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


class PluginFailed(OrionError):
    """A plugin's hook implementation raised: one line that names the plugin, where in its own
    code, and what Orion had asked of it. The caller keeps what it holds (the conversation, a
    write's content) and goes on; the original exception is the ``__cause__``."""

    def __init__(self, plugin: str, hook: str, where: str, cause: BaseException):
        self.plugin, self.hook, self.where, self.cause = plugin, hook, where, cause
        super().__init__(f"plugin {plugin!r} failed in {hook} ({where}): "
                         f"{type(cause).__name__}: {cause}")


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


class UnknownTag(LifecycleError, LookupError):
    """A tag no state of the statechart has: asking ``has_tag`` about it is a mistake (a typo,
    or a tag the chart lost), never a silent ``False``."""

    def __init__(self, lifecycle: str, tag: str, tags: list[str]):
        self.lifecycle, self.tag, self.tags = lifecycle, tag, tags
        hint = difflib.get_close_matches(tag, tags, n=1)
        super().__init__(f"{lifecycle}: unknown tag {tag!r} (the statechart's states have: "
                         f"{', '.join(tags) or 'no tags'})"
                         + (f"; did you mean {hint[0]!r}?" if hint else ""))


class ActionError(LifecycleError):
    """A named action raised; the lifecycle stays in the state it had reached."""

    def __init__(self, lifecycle: str, action: str, where: str, cause: BaseException, *,
                 plugin: str | None = None, at: str | None = None):
        self.lifecycle, self.action, self.where, self.cause = lifecycle, action, where, cause
        #: The plugin that provided the action, and the line of its code that raised.
        self.plugin, self.at = plugin, at
        super().__init__(f"{lifecycle}: action {action!r} failed {where}: "
                         f"{type(cause).__name__}: {cause}"
                         + (f" (plugin {plugin!r}, {at})" if plugin else ""))


class GuardError(LifecycleError):
    """A named guard raised. A guard that cannot answer holds what it guards: the event takes
    no transition (not even a later candidate), the lifecycle stays where it was, and the
    caller is told which plugin failed, where, and on which trigger."""

    #: Set by the one who has told the user already (a write session that held its write).
    told = False

    def __init__(self, lifecycle: str, guard: str, plugin: str, where: str, trigger: str,
                 state: str, cause: BaseException):
        self.lifecycle, self.guard, self.plugin, self.where = lifecycle, guard, plugin, where
        self.trigger, self.state, self.cause = trigger, state, cause
        super().__init__(f"{lifecycle}: plugin {plugin!r} failed in guard {guard!r} ({where}) "
                         f"deciding {trigger!r} in state {state!r}: {type(cause).__name__}: "
                         f"{cause}; no transition was taken")


class MacrostepLimit(LifecycleError):
    """A trigger's run to completion processed more events than the engine allows
    (:data:`orion.statechart.interpreter.lifecycle.MAX_MICROSTEPS`): events it raises or sends
    lead back to themselves. The lifecycle stays in the last state it reached, consistent; the
    events still queued are discarded."""

    def __init__(self, lifecycle: str, trigger: str, state: str, limit: int,
                 queued: list[str]):
        self.lifecycle, self.trigger, self.state, self.limit = lifecycle, trigger, state, limit
        self.queued = queued
        shown = ", ".join(dict.fromkeys(queued)) or "none"
        super().__init__(
            f"{lifecycle}: trigger {trigger!r} did not come to rest within {limit:,} "
            f"microsteps (state {state!r}; still queued: {shown}): events it raises or sends "
            "lead back to themselves; the lifecycle stays where it is and the queued events "
            "were discarded (`orion check` finds such loops when no guard is involved)")


class SnapshotError(LifecycleError):
    """A snapshot cannot be taken or restored (wrong definition, unknown state, bad context)."""


class CompiledChartError(LifecycleError, TypeError):
    """A ``transitions`` call that would change a compiled chart's machine, or drive it outside
    Orion's rules; the message names what Orion offers instead."""

    def __init__(self, lifecycle: str, call: str, instead: str):
        self.lifecycle, self.call, self.instead = lifecycle, call, instead
        super().__init__(f"{lifecycle}: {call} is not available on a compiled statechart's "
                         f"machine: {instead}")
