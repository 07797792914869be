"""Orion's built-in plugins. Each module is a plugin that uses only Orion's public hooks."""
