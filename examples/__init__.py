"""Scripted conversations (see docs/scripts.md), shipped so that `orion demo` can play one."""
