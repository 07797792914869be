"""Where a plugin's failure happened, in the plugin's own code.

A plugin's exception is reported as one line that a team can act on: the plugin, its file and
line, and what Orion asked of it. The line is the deepest frame of the traceback that is not
Orion's, pluggy's or Python's own: the team's typo, not the library call that noticed it.
"""

from __future__ import annotations

import inspect
import os
import sys
import sysconfig
from pathlib import Path
from types import TracebackType
from typing import Any

import pluggy

import orion

#: Code that is never the culprit: Orion's package, pluggy, and Python's standard library.
_NOT_THE_PLUGIN = tuple(str(Path(p).resolve()) for p in (
    Path(orion.__file__).parent, Path(pluggy.__file__).parent,
    sysconfig.get_paths()["stdlib"]))


def _foreign(filename: str) -> bool:
    try:
        resolved = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return not resolved.startswith(_NOT_THE_PLUGIN)


def frames(tb: TracebackType | None) -> list[tuple[str, int]]:
    found = []
    while tb is not None:
        found.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    return found


def foreign_frame(exc: BaseException) -> str | None:
    """``path:line`` of the deepest frame of ``exc``'s traceback outside Orion, pluggy and the
    standard library (a plugin's code, Orion's built-in plugins included), or ``None``."""
    for filename, line in reversed(frames(exc.__traceback__)):
        if _foreign(filename):
            return f"{filename}:{line}"
    return None


def where_raised(exc: BaseException, function: Any = None) -> str:
    """``path:line`` of the plugin's code where ``exc`` came from: the deepest frame in the
    package that defines ``function`` (a team's call into a library that raised is the team's
    line), else :func:`foreign_frame`, else the definition of ``function``, else ``"?"``."""
    root = _root_of(function)
    if root is not None:
        for filename, line in reversed(frames(exc.__traceback__)):
            if _under(filename, root):
                return f"{filename}:{line}"
    return foreign_frame(exc) or defined_at(function) or "?"


def defined_at(function: Any) -> str | None:
    """``path:line`` of ``function``'s ``def`` (after its decorators), or ``None`` when Python
    cannot tell."""
    code = _code(function)
    if code is None:
        return None
    line = code.co_firstlineno
    try:
        source, first = inspect.getsourcelines(code)
        line = first + next(i for i, text in enumerate(source)
                            if text.lstrip().startswith(("def ", "async def ")))
    except (OSError, TypeError, StopIteration):
        pass
    return f"{code.co_filename}:{line}"


def _code(function: Any) -> Any:
    if function is None:
        return None
    try:
        function = inspect.unwrap(function)
    except ValueError:
        return None
    return getattr(function, "__code__", None) or getattr(
        getattr(function, "__call__", None), "__code__", None)


def _root_of(function: Any) -> str | None:
    """The directory of the top-level package that defines ``function`` (or its file)."""
    if function is None:
        return None
    module = inspect.getmodule(inspect.unwrap(function)) or inspect.getmodule(type(function))
    return _root(module) if module is not None else None


def _root(module: Any) -> str | None:
    top = sys.modules.get(module.__name__.partition(".")[0])
    path = getattr(top, "__file__", None)
    if not path or top is orion:
        return None
    file = Path(path).resolve()
    return str(file.parent) + os.sep if file.name == "__init__.py" else str(file)


def _under(filename: str, root: str) -> bool:
    try:
        resolved = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return resolved == root or (root.endswith(os.sep) and resolved.startswith(root))


def plugin_roots(pm: Any) -> dict[str, str]:
    """Where each registered plugin's code lives: its top-level package's directory (or its
    module's file), by plugin name. Orion's own package and built-in plugins are not a team's
    plugin: their errors are Orion's."""
    roots: dict[str, str] = {}
    origins = getattr(pm, "origins", {})
    for name, plugin in pm.list_name_plugin():
        origin = origins.get(name)
        if origin is not None and origin.kind == "builtin":
            continue
        module = plugin if inspect.ismodule(plugin) else inspect.getmodule(type(plugin))
        root = _root(module) if module is not None else None
        if root is not None:
            roots.setdefault(root, name)
    return roots


def plugin_failure_line(exc: BaseException, pm: Any) -> str | None:
    """One line for an exception that is not Orion's own but came out of a plugin's code (a
    team's pipeline system, a hook wrapper): the plugin, the line of its code, the exception;
    ``None`` when no frame of the traceback is in a plugin of ``pm``."""
    roots = plugin_roots(pm)
    for filename, line in reversed(frames(exc.__traceback__)):
        for root, plugin in roots.items():
            if _under(filename, root):
                return (f"plugin {plugin!r} failed ({filename}:{line}): "
                        f"{type(exc).__name__}: {exc}")
    return None
