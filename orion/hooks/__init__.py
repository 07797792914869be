"""Hooks: the plugin manager that loads plugins and calls them, the registry of what their
``register_*`` hooks give (named guards, actions and tools), and the types hooks receive and
return (:mod:`orion.hooks.types`, :mod:`orion.hooks.host`), which the engine, the runtime and
the tools share without importing one another."""
