"""The JSON Schema of the statechart format, for editors and CI (``orion schema``)."""

from __future__ import annotations

from typing import Any

from orion.statechart.model.schema import OverlaySpec, StatechartSpec


def json_schema() -> dict[str, Any]:
    schema = StatechartSpec.model_json_schema()
    overlay = OverlaySpec.model_json_schema()
    # Both documents in one schema: a file with ``extends`` is an overlay, any other a chart.
    defs = {**schema.pop("$defs", {}), **overlay.pop("$defs", {})}
    schema = {"$defs": {**defs, "Statechart": schema, "Overlay": overlay},
              "if": {"required": ["extends"]}, "then": {"$ref": "#/$defs/Overlay"},
              "else": {"$ref": "#/$defs/Statechart"}}
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Orion statechart"
    return schema
