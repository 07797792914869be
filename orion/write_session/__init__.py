"""The write session: large file writes through the plain-text channel.

The model calls ``WritePlanTool_begin`` with a small plan, streams the content as plain text and
ends it with a line ``DONE``. Orion journals the content to disk as it arrives, validates and
repairs it, continues automatically when the output is cut off, and writes the target once,
atomically.
"""
