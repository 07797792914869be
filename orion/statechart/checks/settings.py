"""Settings and context: what the chart's values must be before any override applies."""

from __future__ import annotations

import json
from collections.abc import Iterator

from orion.statechart.checks.rules import Chart, Finding, rule
from orion.statechart.interpreter.settings import coerce


@rule("SC201", "delay-setting", "an 'after' delay names a setting that is missing or not an "
                                "int")
def delay_setting(chart: Chart) -> Iterator[Finding]:
    for node in chart.nodes.values():
        for k, a in enumerate(node.spec.after):
            if not isinstance(a.ms, str):
                continue
            loc = (*node.loc, "after", k, "ms")
            setting = chart.spec.settings.get(a.ms)
            if setting is None:
                yield Finding(loc, f"'after' delay names setting {a.ms!r}, which is not in "
                                   "'settings'")
            elif setting.type != "int":
                yield Finding(loc, f"'after' delay setting {a.ms!r} must be an int, not "
                                   f"{setting.type}")


@rule("SC202", "setting-bounds", "'min' or 'max' on a setting that is not a number, or a max "
                                 "below the min")
def setting_bounds(chart: Chart) -> Iterator[Finding]:
    for name, setting in chart.spec.settings.items():
        for bound in ("min", "max"):
            if getattr(setting, bound) is not None and setting.type not in ("int", "float"):
                yield Finding(("settings", name, bound),
                              f"setting {name!r} is a {setting.type}; only int and float "
                              f"settings can have a {bound!r}")
        if setting.min is not None and setting.max is not None and setting.min > setting.max:
            yield Finding(("settings", name, "max"), f"setting {name!r} has max "
                                                     f"{setting.max:g} below its min "
                                                     f"{setting.min:g}")


@rule("SC203", "setting-default", "a setting's default does not have its type or is out of "
                                  "its bounds")
def setting_default(chart: Chart) -> Iterator[Finding]:
    for name, setting in chart.spec.settings.items():
        try:
            coerce(setting, setting.default, f"settings.{name}.default", strict=True)
        except ValueError as exc:
            yield Finding(("settings", name, "default"), str(exc))


@rule("SC204", "context-json", "the initial context is not JSON data (snapshots could not hold "
                               "it)")
def context_json(chart: Chart) -> Iterator[Finding]:
    try:
        json.dumps(chart.spec.context, allow_nan=False)
    except (TypeError, ValueError) as exc:
        yield Finding(("context",), f"context values must be JSON data: {exc}")
