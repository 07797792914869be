"""Every feature in ``features/``, run by pytest-bdd with Orion's step library
(``orion.testing.steps`` and ``orion.testing.plan_steps``, loaded by Orion's pytest plugin).
See docs/testing.md."""

from pathlib import Path

from pytest_bdd import scenarios

FEATURES = Path(__file__).resolve().parents[2] / "features"

scenarios(str(FEATURES))
