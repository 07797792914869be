"""Trace events and their storage."""
