"""Whether the process that left a file behind is still running.

Files named after their process's id (a write's temp file, a trace ledger) are claimed or
removed only once that process is gone: a file another running process is still writing is
left alone.
"""

from __future__ import annotations

import os


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (this process counts; another user's process too, as
    signalling it is refused rather than answered "no such process")."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, it belongs to someone else
    return True
