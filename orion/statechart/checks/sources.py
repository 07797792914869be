"""Where a chart comes from: the chart an overlay extends, the overlay's own form, and a
workspace chart that nothing would run. The catalog and the overlay merge raise these."""

from __future__ import annotations

from orion.statechart.checks.rules import declare

EXTENDS = declare("SC601", "extends", "'extends' names no chart of Orion or of a plugin, makes "
                  "a cycle, or names a chart that has errors")
OVERLAY = declare("SC602", "overlay", "an overlay field the format does not have, an edit "
                  "naming a transition id the base chart does not have, or a setting named "
                  "close to one of the base's (a typo nothing would read)")
UNUSED_CHART = declare("SC603", "unused-chart", "a workspace chart whose name is no lifecycle "
                       "Orion or a plugin runs")
