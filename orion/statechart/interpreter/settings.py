"""Typed statechart settings and their overrides.

Precedence, lowest first: the statechart's ``default``, the workspace's ``orion.yaml``, the
setting's own ``env`` variable (e.g. ``WRITE_SESSION_IDLE_MS``), then
``ORION_<STATECHART>_<SETTING>`` (e.g. ``ORION_WRITE_SESSION_IDLE_MS``).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from orion.errors import ConfigError
from orion.statechart.model.schema import SettingSpec, StatechartSpec

#: The largest int a setting takes: every int up to it is exact as a float (timers use floats).
MAX_INT = 2**53
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def coerce(setting: SettingSpec, value: Any, where: str, *, strict: bool = False) -> Any:
    """``value`` as the setting's type, within its bounds; ``ValueError`` names ``where``.

    Text (from environment variables) is parsed unless ``strict``: a value written in YAML,
    such as a default, must already have the setting's type, so ``default: "2000"`` for an
    int setting is an error rather than a silent conversion.
    """
    kind = setting.type
    try:
        if strict and kind != "str" and isinstance(value, str):
            raise ValueError
        result: Any = _PARSERS[kind](value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{where}: expected {kind}, got {_short(value)}") from None
    if kind == "int" and abs(result) > MAX_INT:
        # Beyond this an int cannot become a float of milliseconds for a timer exactly, and a
        # number like 10**400 cannot become one at all.
        raise ValueError(f"{where}: {_short(result)} is beyond the largest number a setting "
                         f"takes (2**53)")
    if kind in ("int", "float"):
        if setting.min is not None and result < setting.min:
            raise ValueError(f"{where}: {result} is below the minimum {setting.min:g}")
        if setting.max is not None and result > setting.max:
            raise ValueError(f"{where}: {result} is above the maximum {setting.max:g}")
    return result


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError


def _int(value: Any) -> int:
    if isinstance(value, (bool, float)):
        raise ValueError
    return int(value.strip()) if isinstance(value, str) else int(value)


def _float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError
    result = float(value)
    if not math.isfinite(result):  # nan would slip past every bound
        raise ValueError
    return result


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError
    return value


#: How text or YAML values become each type; each raises ValueError for what it refuses.
_PARSERS = {"bool": _bool, "int": _int, "float": _float, "str": _str}


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 \
        else f"a {len(str(abs(value)))}-digit number"
    return text if len(text) <= 60 else text[:57] + "..."


def env_names(spec: StatechartSpec, name: str) -> list[str]:
    """Environment variables that override setting ``name``, weakest first."""
    setting = spec.settings[name]
    names = [setting.env] if setting.env else []
    return names + [f"ORION_{spec.statechart}_{name}".upper()]


def resolve(spec: StatechartSpec, overrides: Mapping[str, Any] | None = None,
            env: Mapping[str, str] | None = None, *, origin: str = "overrides") -> Mapping[str, Any]:
    """The effective settings of ``spec``. Raises :class:`ConfigError` naming the bad source."""
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(spec.settings))
    if unknown:
        meant = (difflib.get_close_matches(unknown[0], list(spec.settings), n=1)
                 if len(unknown) == 1 else [])
        raise ConfigError(f"{origin}: statechart {spec.statechart!r} has no setting "
                          f"{', '.join(map(repr, unknown))}"
                          + (f"; did you mean {meant[0]!r}?" if meant else "")
                          + f" (it has: {', '.join(spec.settings) or 'none'})")
    values: dict[str, Any] = {}
    for name, setting in spec.settings.items():
        candidates = [(setting.default, f"settings.{name}.default")]
        if name in overrides:
            candidates.append((overrides[name], f"{origin}: {spec.statechart}.{name}"))
        for var in env_names(spec, name):
            if env is not None and var in env:
                candidates.append((env[var], f"environment variable {var}"))
        # Every source is checked, not only the one that wins: a bad value hidden by a
        # stronger one would break as soon as the stronger one is removed.
        for value, where in candidates:
            try:
                values[name] = coerce(setting, value, where)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
    return MappingProxyType(values)
