"""Hooks: the plugin manager that loads plugins and calls them, and the registry of
what their ``register_*`` hooks give (named guards, actions and tools)."""
