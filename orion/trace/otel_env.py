"""Whether the ``OTEL_*`` environment asks for traces: read before anything of OpenTelemetry is
imported (the SDK takes tens of milliseconds to import, and most runs export nothing).
"""

from __future__ import annotations

from collections.abc import Mapping


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for traces (and OpenTelemetry is not disabled)."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter:
        return exporter != "none"
    return bool(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                or env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


__all__ = ["wanted"]
