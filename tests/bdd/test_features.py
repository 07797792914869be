"""Every feature in ``features/``, run by pytest-bdd with Orion's step library (loaded by
Orion's pytest plugin) and Orion's own fault and process steps (``tests/fault_steps.py`` and
``tests/process_steps.py``, loaded by ``tests/conftest.py``). See docs/testing.md."""

from pathlib import Path

from pytest_bdd import scenarios

FEATURES = Path(__file__).resolve().parents[2] / "features"

scenarios(str(FEATURES))
