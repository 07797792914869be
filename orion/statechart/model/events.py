"""Event names and descriptors, as SCXML has them (section 3.12.1).

An event name is dot-separated tokens (``done.state.review``). A transition's ``trigger`` lists
one or more descriptors, separated by spaces; a descriptor answers the events it names or
prefixes token by token (``done`` answers ``done``, ``done.state`` and ``done.state.review``,
not ``doneness``); ``name.*`` means the same as ``name``; ``*`` answers every event.

Completion events name their state by its path (``done.state.job.phase`` when ``job.phase``
completes), where SCXML has a flat id. So the path counts as one token: ``done.state.job``
answers the completion of ``job`` only, not that of ``job.phase``; ``done.state`` and ``done``
answer every completion event.
"""

from __future__ import annotations

#: The prefix of completion events: entering a final child of ``p`` raises ``done.state.p``.
DONE_PREFIX = "done.state."
#: The descriptor that matches every event (SCXML's ``event="*"``).
ANY_EVENT = "*"


def normalize_descriptor(descriptor: str) -> str:
    """``foo.*`` means the same as ``foo``: both match ``foo`` and ``foo.<anything>``."""
    return descriptor[:-2] if descriptor.endswith(".*") else descriptor


def descriptors(trigger: str) -> list[str]:
    """The descriptors a ``trigger`` lists (``"foo bar.*"`` -> ``foo``, ``bar``): a transition
    answers an event any of them matches (SCXML's space-separated event attribute)."""
    return [normalize_descriptor(d) for d in trigger.split()]


def matching_descriptors(event: str) -> list[str]:
    """The descriptors that match ``event``: each dot-separated prefix, the whole name, and
    ``*`` (``done.state.job.phase`` -> ``done``, ``done.state``, ``done.state.job.phase``,
    ``*``: a completion event's state path is one token)."""
    if event.startswith(DONE_PREFIX):
        return ["done", "done.state", event, ANY_EVENT]
    parts = event.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))] + [ANY_EVENT]


def answers(descriptors: set[str] | frozenset[str], event: str) -> bool:
    """Whether one of ``descriptors`` (normalized) matches ``event``."""
    return event in descriptors or any(d in descriptors for d in matching_descriptors(event))
