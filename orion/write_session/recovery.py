"""Crash recovery of write sessions: the public face of its modules.

A write session journals its content under ``<state_dir>/write_sessions/<id>/`` while it
streams (see :mod:`orion.write_session.journal`). When the process dies before the target is
written, the directory stays behind: an *orphan*. The work is split by concern:

* :mod:`~orion.write_session.orphans`: finding them (:func:`scan`, :func:`resolve_id`), never
  failing on a damaged one; the errors of the session commands;
* :mod:`~orion.write_session.interrupted`: whether a session that crashed while writing had
  written its target (:func:`already_written`);
* :mod:`~orion.write_session.startup`: what ``orion run`` and ``orion chat`` do first
  (:func:`startup`), with :mod:`~orion.write_session.leftovers` (temp files of killed writes);
* :mod:`~orion.write_session.recover`: ``orion sessions recover --finalize``, the internal
  ``finalizeSession`` without a model (:func:`recover_finalize`);
* :mod:`~orion.write_session.orphan_commands`: ``--continue``, ``discard``, ``clean``,
  ``undo`` and ``show`` (:func:`mark_resume`, :func:`discard`, :func:`clean`, :func:`undo`,
  :func:`show`);
* :mod:`~orion.write_session.durations`: durations as people type and read them.

A session whose lock names a running process (:meth:`Journal.is_live`) is never touched.
"""

from __future__ import annotations

from orion.write_session.durations import format_age, format_duration, parse_duration
from orion.write_session.interrupted import already_written
from orion.write_session.leftovers import remove_temp_leftovers, sweep_temp_leftovers
from orion.write_session.orphan_commands import (Shown, UndoResult, clean, discard, mark_resume,
                                                 show, undo)
from orion.write_session.orphans import (AmbiguousSession, Orphan, RecoveryError,
                                         SessionLive, SessionNotFound, UndoRefused, load,
                                         resolve_id, scan, sessions_dir)
from orion.write_session.recover import RecoveryResult, recover_finalize, workspace_settings
from orion.write_session.startup import StartupAction, startup

__all__ = [
    "AmbiguousSession", "Orphan", "RecoveryError", "RecoveryResult", "SessionLive",
    "SessionNotFound", "Shown", "StartupAction", "UndoRefused", "UndoResult",
    "already_written", "clean", "discard", "format_age", "format_duration", "load",
    "mark_resume", "parse_duration", "recover_finalize", "remove_temp_leftovers",
    "resolve_id", "scan", "sessions_dir", "show", "startup", "sweep_temp_leftovers", "undo",
    "workspace_settings",
]
