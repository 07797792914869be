"""A team's customization of Orion: a review step before every write-session write.

``team_review.plugin`` is the plugin (entry point ``team_review`` in the group ``orion``); it
ships ``WRITE_SESSION``, an overlay of Orion's ``write_session`` statechart.
"""

from pathlib import Path

STATECHARTS = Path(__file__).resolve().parent / "statecharts"
WRITE_SESSION = STATECHARTS / "write_session.yaml"
