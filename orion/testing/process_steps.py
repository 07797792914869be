"""Deprecated: the steps that put Orion's own process under a fault (signals and a closed
terminal in the middle of a write, a wall clock stepped ahead, a journal file swapped for a
link) test Orion itself, and live in Orion's own tests now; the step library no longer loads
them. This name goes in 0.3.0."""

from __future__ import annotations

import warnings

warnings.warn("orion.testing.process_steps left the step library: its steps test Orion itself "
              "and are part of Orion's own tests now; the module goes in 0.3.0",
              DeprecationWarning, stacklevel=2)
