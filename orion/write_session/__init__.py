"""The write session: large file writes through the plain-text channel.

The model calls ``WritePlanTool_begin`` with a small plan, streams the content as plain text and
ends it with a line ``DONE``. Orion journals the content to disk as it arrives, decides what is
content by the rules the model was told (text kept out of the file is set aside, never lost),
validates and repairs it, continues automatically when the output is cut off, and writes the
target once, atomically.

The modules, by what they own: ``plan`` (the questionnaire and its checks), ``protocol`` (the
end marker), ``session`` coordinating one session's parts: ``intake`` (the message being
streamed, the hot path), ``decision`` (what a message is, pure), ``finalize`` (the checks and the
write), ``asides`` (what an open session does with the text it keeps out of the file),
``endings`` (how a session ends without a write), ``held`` (the messages the user types while a
session is open), ``context`` (what the session and its chart's actions tell each other) and
``message_end`` (what the session says when it carries a decision out), ``set_aside`` (the text
kept out of the file, on disk), ``journal`` (the content on disk), ``operations`` and ``edit_validation``
(the write itself), ``repair`` (corrections), ``undo`` (undo records), ``manager`` (the
sessions of a runtime), and crash recovery: ``orphans`` (the session directories a dead process
left behind, and the errors of the session commands), ``interrupted`` (whether a crashed write
had written its target), ``startup`` and ``leftovers`` (what every runtime does first),
``recover`` (``orion sessions recover --finalize``), ``orphan_commands`` (``--continue``,
``discard``, ``clean``, ``undo``, ``show``) and ``durations``.
"""
