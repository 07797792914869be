"""The plugin manager: built-ins, entry points (group ``orion``) and ``ORION_LOAD_PLUGINS``."""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import pluggy

from orion import hookspecs
from orion.errors import PluginError, PluginFailed
from orion.config import DEFAULT_VALIDATOR_DEADLINE_MS
from orion.hooks.blame import defined_at, where_raised
from orion.hooks.deadline import DeadlinePassed, call_within

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

logger = logging.getLogger("orion.plugins")

ENTRYPOINT_GROUP = "orion"
BUILTIN_PACKAGE = "orion_plugins"
#: Hooks whose failing implementations are reported and skipped instead of raised.
OBSERVER_HOOKS = frozenset({"lifecycle_started", "lifecycle_transition", "lifecycle_finished",
                            "lifecycle_event_discarded", "store_traces", "close_traces",
                            "prune_traces", "runtime_closing"})
#: Hooks whose failing implementations deny instead of raising.
FAIL_CLOSED_HOOKS = frozenset({"authorize_tool_call"})
#: Hooks whose failing implementations, from a plugin that is not built in, are reported and
#: skipped: a team's context block that cannot be built leaves the request without it, rather
#: than every request of the conversation failing with it.
SKIPPED_WHEN_FAILING = frozenset({"build_context"})
#: Hooks whose implementations, from a plugin that is not built in, run with a deadline
#: (:mod:`orion.hooks.deadline`, ``runtime.validator_deadline_ms``).
DEADLINE_HOOKS = frozenset({"validate_content", "validate_lines", "normalize_content"})


class PluginUnavailable(ImportError):
    """Raised at import by a built-in plugin whose optional dependency is not installed (the
    OpenTelemetry exporter without the ``otel`` extra): the plugin is skipped, not an error."""


@dataclass(frozen=True)
class PluginFailure:
    """An isolated failure: which plugin, in which hook (or guard), and what it raised."""

    plugin: str
    hook: str
    error: str
    traceback: str = field(repr=False, default="")
    #: ``path:line`` of the plugin's code that raised.
    where: str = ""


@dataclass(frozen=True)
class PluginOrigin:
    kind: str  # "builtin", "entrypoint" or "registered"
    module: str | None = None
    distribution: str | None = None
    version: str | None = None


class PluginManager(pluggy.PluginManager):
    """pluggy's manager with Orion's contract: observer hooks isolated, clear load errors."""

    def __init__(self) -> None:
        super().__init__("orion")
        self.add_hookspecs(hookspecs)
        self.failures: list[PluginFailure] = []
        #: Called with each failure that no error raised to a caller names (an observer's,
        #: a gate's): ``orion chat`` shows it on the screen.
        self.on_failure: list[Callable[[PluginFailure], None]] = []
        #: How long a team's validator or normalizer may take (``DEADLINE_HOOKS``); the
        #: runtime sets it from ``runtime.validator_deadline_ms``.
        self.validator_deadline_ms: float = DEFAULT_VALIDATOR_DEADLINE_MS
        self.origins: dict[str, PluginOrigin] = {}
        self._registry: Any = None

    def register(self, plugin: object, name: str | None = None,
                 origin: PluginOrigin | None = None) -> str | None:
        label = name or getattr(plugin, "__name__", None) or repr(plugin)
        try:
            registered = super().register(plugin, name)
        except pluggy.PluginValidationError as exc:
            raise PluginError(self._invalid(plugin, label, exc)) from exc
        except ValueError as exc:
            raise PluginError(f"plugin {label!r} cannot be registered: {exc}") from exc
        if registered is None:  # blocked
            return None
        self.origins[registered] = origin or PluginOrigin("registered",
                                                          getattr(plugin, "__name__", None))
        for caller in self.get_hookcallers(plugin) or []:
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin:
                    impl.function = self._guarded(impl, caller.name, origin)  # type: ignore[misc]
        self._registry = None
        return registered

    def _guarded(self, impl: pluggy.HookImpl, hook: str,
                 origin: PluginOrigin | None) -> Callable[..., Any]:
        """``impl``'s function as Orion calls it: an observer's isolated, a gate's failing
        closed, a team's skipped (``build_context``) or contained (the other hooks)."""
        if hook in OBSERVER_HOOKS:
            return self._isolated(impl, hook)
        if hook in FAIL_CLOSED_HOOKS and not (impl.wrapper or impl.hookwrapper):
            return self._fail_closed(impl, hook)
        if not self._contains(hook, impl, origin):
            return impl.function
        if hook in SKIPPED_WHEN_FAILING:
            return self._isolated(impl, hook)
        return self._contained(impl, hook)

    def _invalid(self, plugin: object, label: str, exc: pluggy.PluginValidationError) -> str:
        """pluggy's refusal of a hook implementation, said at the implementation's own file and
        line, with the hook's argument names and the closest one to each wrong name."""
        detail = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        found = re.search(r"hook '(\w+)'", detail)
        caller = getattr(self.hook, found.group(1), None) if found else None
        if caller is None or caller.spec is None:
            return f"plugin {label!r} is invalid: {detail}"
        argnames = list(caller.spec.argnames)
        takes = ", ".join(argnames) or "no arguments"
        function = getattr(plugin, caller.name, None)
        where = _source_position(function)
        wrong = re.search(r"Argument\(s\) \{(.*?)\}", detail)
        if function is None or wrong is None:
            return f"{where}plugin {label!r} is invalid: {detail} ({caller.name} takes: {takes})"
        names = re.findall(r"'(\w+)'", wrong.group(1))
        hints = []
        for bad in names:
            close = difflib.get_close_matches(bad, argnames, n=1)
            hints.append(f"{bad!r} (did you mean {close[0]!r}?)" if close else repr(bad))
        return (f"{where}plugin {label!r}: {caller.name}() takes no argument named "
                f"{', '.join(hints)}; the hook's arguments are: {takes} (a hook implementation "
                f"may take any of them, by name, in any order)")

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any:
        # Look the name up first: once unregistered, ``get_name(plugin)`` no longer knows it.
        if name is None and plugin is not None:
            name = self.get_name(plugin)
        result = super().unregister(plugin, name)
        self._registry = None
        if name is not None:
            self.origins.pop(name, None)
        return result

    def check(self) -> None:
        """Fail on hook implementations that match no hook (a typo in a hook name), like
        pluggy's ``check_pending``, with a message that names the plugin and the closest hook.
        Implementations marked ``optionalhook=True`` are allowed."""
        hooks = self.hook_names()
        for name in sorted(vars(self.hook)):
            caller = getattr(self.hook, name)
            if name.startswith("_") or caller.has_spec():
                continue
            for impl in caller.get_hookimpls():
                if impl.optionalhook:
                    continue
                origin = self.origins.get(impl.plugin_name)
                where = (f" (from distribution {origin.distribution})"
                         if origin is not None and origin.distribution else "")
                close = difflib.get_close_matches(name, hooks, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise PluginError(f"plugin {impl.plugin_name!r}{where} implements unknown hook "
                                  f"{name!r}{hint} (Orion's hooks: {', '.join(hooks)})")

    def hook_names(self) -> list[str]:
        """The names of every hook in :mod:`orion.hookspecs`."""
        return sorted(name for name in vars(self.hook)
                      if not name.startswith("_") and getattr(self.hook, name).has_spec())

    @property
    def registry(self):  # -> orion.hooks.registry.Registry
        """Guards, actions and tools from the ``register_*`` hooks, collected once."""
        if self._registry is None:
            from orion.hooks.registry import Registry

            self._registry = Registry.collect(self)
        return self._registry

    def report_failure(self, plugin: str, hook: str, exc: BaseException,
                       function: Any = None, *, told: bool = False) -> None:
        """Record a plugin's failure on :attr:`failures` and in the ``orion.plugins`` log: a
        warning, unless the caller tells the user itself (``told``: the error it raises names
        the plugin), so the user reads one line, not two."""
        failure = PluginFailure(plugin, hook, f"{type(exc).__name__}: {exc}",
                                "".join(traceback.format_exception(exc)),
                                where_raised(exc, function))
        self.failures.append(failure)
        logger.log(logging.DEBUG if told else logging.WARNING,
                   "plugin %s failed in %s: %s (at %s)", plugin, hook, failure.error,
                   failure.where)
        if not told:
            for listener in self.on_failure:
                try:
                    listener(failure)
                except Exception as exc:  # noqa: BLE001 - a screen that is gone (SIGHUP)
                    # must not turn an isolated failure into one that propagates
                    logger.debug("telling a plugin failure failed: %r", exc)

    def _isolated(self, impl: pluggy.HookImpl, hook: str) -> Callable[..., Any]:
        """Wrap an observer implementation so that what it raises is reported, not raised."""
        function, plugin = impl.function, impl.plugin_name
        report = self.report_failure
        if impl.wrapper or impl.hookwrapper:
            def guarded_wrapper(*args: Any, **kwargs: Any) -> Any:
                gen = cast(Generator[None, Any, Any], function(*args, **kwargs))
                try:
                    next(gen)
                except StopIteration:
                    report(plugin, hook, RuntimeError("wrapper returned without yielding"))
                    return (yield)
                except Exception as exc:
                    report(plugin, hook, exc, function)
                    return (yield)
                try:
                    result = yield
                except BaseException:
                    # Only a non-isolated error (KeyboardInterrupt, ...) gets here: let the
                    # plugin's generator clean up and let the error through.
                    gen.close()
                    raise
                try:
                    gen.send(result)
                except StopIteration as stop:
                    return stop.value if impl.wrapper else None
                except Exception as exc:
                    report(plugin, hook, exc, function)
                    return result
                gen.close()
                report(plugin, hook, RuntimeError("wrapper yielded more than once"))
                return result
            guarded_wrapper.__wrapped__ = function  # type: ignore[attr-defined]
            return guarded_wrapper

        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except Exception as exc:
                report(plugin, hook, exc, function)
                return None
        guarded.__wrapped__ = function  # type: ignore[attr-defined]
        return guarded

    @staticmethod
    def _contains(hook: str, impl: pluggy.HookImpl, origin: PluginOrigin | None) -> bool:
        """Whether a failure of ``impl`` is turned into a :class:`PluginFailed`: a plain
        implementation of a hook Orion calls while it runs (not ``register_*``, called once at
        load, where a failure is a load error), from a plugin that is not built in (a built-in's
        error is Orion's own, and its callers may expect it as it is)."""
        return not (impl.wrapper or impl.hookwrapper or hook.startswith("register_")
                    or (origin is not None and origin.kind == "builtin"))

    def _contained(self, impl: pluggy.HookImpl, hook: str) -> Callable[..., Any]:
        """Wrap an implementation so that what it raises becomes a :class:`PluginFailed` that
        names the plugin, the line of its own code and the hook: the caller says it in one
        line and keeps what it holds. A generator it returns is run here, so that its error is
        the plugin's too. ``MemoryError`` and what is not an ``Exception`` pass unchanged."""
        function, plugin = impl.function, impl.plugin_name
        report = self.report_failure
        timed = hook in DEADLINE_HOOKS

        def materialized(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            return list(result) if inspect.isgenerator(result) else result

        def contained(*args: Any, **kwargs: Any) -> Any:
            try:
                if timed:
                    return call_within(materialized, args, kwargs, self.validator_deadline_ms,
                                       f"{plugin} {hook}")
                return materialized(*args, **kwargs)
            except DeadlinePassed as exc:
                report(plugin, hook, exc, function, told=True)
                raise PluginFailed(plugin, hook, defined_at(function) or "?", exc) from None
            except (MemoryError, PluginFailed):
                raise
            except Exception as exc:
                report(plugin, hook, exc, function, told=True)
                raise PluginFailed(plugin, hook, where_raised(exc, function), exc) from exc
        contained.__wrapped__ = function  # type: ignore[attr-defined]
        return contained

    def _fail_closed(self, impl: pluggy.HookImpl, hook: str) -> Callable[..., Any]:
        """Wrap an ``authorize_tool_call`` implementation: an error, or a result that is not a
        :class:`~orion.tools.gating.Decision`, becomes a denial that names the plugin. Decisions
        without a ``plugin`` get the implementation's plugin name."""
        from orion.hooks.types import Decision

        function, plugin = impl.function, impl.plugin_name
        report = self.report_failure

        def fail_closed(*args: Any, **kwargs: Any) -> Any:
            try:
                decision = function(*args, **kwargs)
            except Exception as exc:
                report(plugin, hook, exc, function)
                return Decision(False, f"plugin {plugin!r} failed in {hook} "
                                       f"({where_raised(exc, function)}), so the call is "
                                       f"denied: {type(exc).__name__}: {exc}", plugin)
            if decision is None:
                return None
            if not isinstance(decision, Decision):
                return Decision(False, f"plugin {plugin!r} returned "
                                       f"{type(decision).__name__} from {hook}, not a Decision; "
                                       "the call is denied", plugin)
            return decision if decision.plugin else dataclasses.replace(decision, plugin=plugin)
        fail_closed.__wrapped__ = function  # type: ignore[attr-defined]
        return fail_closed

    def culprit(self, hook: str, exc: BaseException) -> str:
        """The plugin whose implementation of ``hook`` raised ``exc`` (from the traceback), or
        ``"?"`` when no implementation's code is on it."""
        caller = getattr(self.hook, hook, None)
        codes: dict[Any, str] = {}
        for impl in caller.get_hookimpls() if caller is not None else ():
            function = inspect.unwrap(getattr(impl.function, "__func__", impl.function))
            code = getattr(function, "__code__", None)
            if code is not None:
                codes[code] = impl.plugin_name
        found, tb = "?", exc.__traceback__
        while tb is not None:
            found = codes.get(tb.tb_frame.f_code, found)
            tb = tb.tb_next
        return found


def _source_position(function: Any) -> str:
    """``path:line: `` of a function's definition, or nothing when Python cannot tell."""
    position = defined_at(function)
    return f"{position}: " if position else ""


def parse_allow_list(value: str | None) -> set[str] | None:
    """``ORION_LOAD_PLUGINS``: unset loads every installed plugin; a comma-separated list
    loads only those (by entry-point or distribution name); an empty value loads none."""
    if value is None:
        return None
    return {part.strip() for part in value.split(",") if part.strip()}


def canonical_distribution_name(name: str) -> str:
    """PEP 503 normalization: ``My_Plugin``, ``my.plugin`` and ``my-plugin`` are one name."""
    return re.sub(r"[-_.]+", "-", name).lower()


#: Orion's built-in plugins, by module name in ``orion_plugins`` (``plugins/`` in the source
#: tree). A list, not a scan of the directory: a stray file there is never loaded as a plugin.
BUILTIN_PLUGINS = (
    "compaction", "conversation_commands", "finalization", "otel_exporter", "plan_commands",
    "plan_mode", "session_commands", "trace_commands", "trace_sqlite", "tracing",
    "turn_systems", "unwrap_fence",
    "validate_placeholders", "validate_syntax", "validate_utf8", "workspace_tools",
    "write_session_protocol", "write_sessions",
)


#: The built-in plugins that add ``orion`` commands (``register_commands``). ``orion --help``
#: loads only these and the installed plugins to list the commands; a test keeps the list true.
COMMAND_PLUGINS = ("plan_commands", "session_commands", "trace_commands")


def builtin_modules() -> list[str]:
    return sorted(f"{BUILTIN_PACKAGE}.{name}" for name in BUILTIN_PLUGINS)


def load_builtins(pm: PluginManager, *, skip: Iterable[str] = (),
                  only: Iterable[str] | None = None) -> None:
    skipped = set(skip)
    wanted = set(only) if only is not None else None
    for module_name in builtin_modules():
        short = module_name.rsplit(".", 1)[-1]
        if module_name in skipped or short in skipped:
            continue
        if wanted is not None and short not in wanted:
            continue
        try:
            module = importlib.import_module(module_name)
        except PluginUnavailable as exc:
            logger.debug("built-in plugin %s is not available: %s", module_name, exc)
            continue
        except Exception as exc:
            raise PluginError(f"built-in plugin {module_name!r} failed to import: "
                              f"{type(exc).__name__}: {exc}") from exc
        pm.register(module, module_name, PluginOrigin("builtin", module_name))


def entry_points_may_exist() -> bool:
    """A quick look, without ``importlib.metadata``, at whether any distribution on
    ``sys.path`` may declare an entry point of group ``orion``: an ``[orion]`` section in a
    metadata directory's ``entry_points.txt``. Conservative: anything it cannot read cheaply
    (a zip file or an egg on the path, an unreadable file) counts as yes. Reading every
    distribution's metadata costs more than all else ``orion --help`` does."""
    section = re.compile(rb"^[ \t]*\[[ \t]*" + re.escape(ENTRYPOINT_GROUP.encode())
                         + rb"[ \t]*\][ \t]*\r?$", re.MULTILINE)
    for entry in sys.path:
        try:
            listing = os.scandir(entry or ".")
        except (FileNotFoundError, PermissionError):
            continue
        except OSError:  # a zip file (NotADirectoryError) or something stranger
            return True
        with listing:
            for item in listing:
                name = item.name
                if name.endswith(".egg"):
                    return True
                if not name.endswith((".dist-info", ".egg-info")):
                    continue
                try:
                    with open(os.path.join(item.path, "entry_points.txt"), "rb") as handle:
                        if section.search(handle.read()):
                            return True
                except (FileNotFoundError, NotADirectoryError):
                    continue
                except OSError:
                    return True
    return False


def load_entrypoints(pm: PluginManager, allow: set[str] | None) -> None:
    """Load the plugins of entry-point group ``orion``; with ``allow``, only those whose
    entry-point name or distribution name (in any PEP 503 spelling) it lists."""
    if not allow and not entry_points_may_exist():
        return
    import importlib.metadata

    allowed_dists = {canonical_distribution_name(a) for a in allow} if allow is not None else set()
    seen: set[str] = set()
    dists: set[str] = set()
    for ep in importlib.metadata.entry_points(group=ENTRYPOINT_GROUP):
        dist = ep.dist.name if ep.dist is not None else None
        if dist is not None:
            dists.add(canonical_distribution_name(dist))
        if ep.name in seen:
            continue
        seen.add(ep.name)
        if allow is not None and ep.name not in allow and (
                dist is None or canonical_distribution_name(dist) not in allowed_dists):
            continue
        if not (pm.is_blocked(ep.name) or pm.has_plugin(ep.name)):
            _register_entry_point(pm, ep, dist)
    if allow:
        _check_allowed(allow, seen, dists)


def _register_entry_point(pm: PluginManager, ep: EntryPoint, dist: str | None) -> None:
    """Import the plugin of ``ep`` (from distribution ``dist``) and register it; a failure
    names the entry point and the distribution."""
    try:
        plugin = ep.load()
    except Exception as exc:
        raise PluginError(f"plugin {ep.name!r} ({ep.value}"
                          + (f", from distribution {dist}" if dist else "")
                          + f") failed to import: {type(exc).__name__}: {exc}") from exc
    try:
        pm.register(plugin, ep.name, PluginOrigin(
            "entrypoint", ep.value, dist, ep.dist.version if ep.dist is not None else None))
    except PluginError as exc:
        if dist is None:
            raise
        raise PluginError(f"{exc} (from distribution {dist})") from exc


def _check_allowed(allow: set[str], seen: set[str], dists: set[str]) -> None:
    """Every name ``ORION_LOAD_PLUGINS`` lists is an entry point's (``seen``) or a
    distribution's (``dists``, canonical names)."""
    missing = sorted(a for a in allow
                     if a not in seen and canonical_distribution_name(a) not in dists)
    if missing:
        raise PluginError(f"ORION_LOAD_PLUGINS names {', '.join(map(repr, missing))}, but no "
                          f"installed plugin has that name (installed: "
                          f"{', '.join(sorted(seen)) or 'none'})")


def installed_plugin_names() -> set[str]:
    """Every name a plugin can be disabled by: built-in modules (full and short names) and
    entry-point names."""
    import importlib.metadata

    names: set[str] = set()
    for module in builtin_modules():
        names.update({module, module.rsplit(".", 1)[-1]})
    for ep in importlib.metadata.entry_points(group=ENTRYPOINT_GROUP):
        names.add(ep.name)
    return names


def make_plugin_manager(*, builtins: bool = True, entrypoints: bool = True,
                        blocked: Iterable[str] = (),
                        env: dict[str, str] | os._Environ[str] | None = None,
                        plugins: Mapping[str, object] | None = None) -> PluginManager:
    """A fully loaded and checked plugin manager. ``plugins`` (name -> module or object) are
    registered too, unless an entry point loaded them already: a project's tests register
    its plugin this way whether or not the project is installed."""
    env = os.environ if env is None else env
    pm = PluginManager()
    for name in blocked:
        pm.set_blocked(name)
    if builtins:
        load_builtins(pm, skip=blocked)
    if entrypoints:
        load_entrypoints(pm, parse_allow_list(env.get("ORION_LOAD_PLUGINS")))
    for name, plugin in (plugins or {}).items():
        if pm.is_registered(plugin) or pm.is_blocked(name):
            continue
        if pm.has_plugin(name):
            raise PluginError(f"plugin name {name!r} is taken by another plugin "
                              f"({pm.get_plugin(name)!r}); register {plugin!r} under another "
                              "name")
        pm.register(plugin, name)
    pm.check()
    return pm


_default: PluginManager | None = None


def command_plugin_manager() -> PluginManager:
    """The plugins that can add ``orion`` commands: the built-in ones that do
    (:data:`COMMAND_PLUGINS`) and every installed plugin (``ORION_LOAD_PLUGINS`` applies).
    What the command line loads to find a command it does not define, or to list them all,
    without importing the built-in plugins that only serve a runtime."""
    pm = PluginManager()
    load_builtins(pm, only=COMMAND_PLUGINS)
    load_entrypoints(pm, parse_allow_list(os.environ.get("ORION_LOAD_PLUGINS")))
    pm.check()
    return pm


def default_plugin_manager() -> PluginManager:
    """The process-wide manager that the CLI uses, loaded on first use."""
    global _default
    if _default is None:
        _default = make_plugin_manager()
    return _default
