"""Orion's pytest plugin: fixtures and the Gherkin step library that teams reuse.

Installed with Orion as the ``pytest11`` entry point ``orion``; see docs/testing.md.
"""
