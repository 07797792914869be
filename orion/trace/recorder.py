"""The runtime's trace recorder: encodes events as they happen and hands them to the
``store_traces`` hook in batches.

A batch is flushed after every model request (the ``trace`` system of the pipeline), when it
is ``flush_interval_ms`` old at the next event, and when the runtime closes. Events are made
JSON-safe and content-free here, before any plugin sees them, so no store can hold content by
accident. Plugin failures recorded by the plugin manager become ``error`` events.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from orion.trace import events as ev
from orion.trace.encoding import encode_event
from orion.trace.events import TraceEvent


class Recorder:
    def __init__(self, plugins: Any, state_dir: Path, *, capture_content: bool = False,
                 max_text: int = 1024, flush_interval_ms: float = 100.0,
                 now_ms: Any = None):
        self.plugins = plugins
        self.state_dir = state_dir
        self.capture_content = capture_content
        self.max_text = max_text
        self.flush_interval = flush_interval_ms / 1000.0
        self._now_ms = now_ms or (lambda: time.time() * 1000.0)
        self._batch: list[TraceEvent] = []
        self._blobs: dict[str, str] = {}
        self._batch_started = 0.0  # monotonic time of the batch's first event
        self._failures_seen = len(getattr(plugins, "failures", ()))
        self.emitted = 0

    def emit(self, event: TraceEvent) -> None:
        blobs = self._blobs if self.capture_content else None
        if not self._batch:
            self._batch_started = time.monotonic()
        self._batch.append(encode_event(event, max_text=self.max_text, blobs=blobs))
        self.emitted += 1
        if time.monotonic() - self._batch_started >= self.flush_interval:
            self.flush()

    def flush(self) -> None:
        self._note_plugin_failures()
        if not self._batch:
            return
        batch, blobs = self._batch, self._blobs
        self._batch, self._blobs = [], {}
        self.plugins.hook.store_traces(events=batch, blobs=blobs, state_dir=self.state_dir)

    def _note_plugin_failures(self) -> None:
        failures = getattr(self.plugins, "failures", None)
        if failures is None or len(failures) <= self._failures_seen:
            return
        new, self._failures_seen = failures[self._failures_seen:], len(failures)
        for failure in new:
            if failure.hook == "store_traces":
                continue  # a failing store is counted by the store; don't loop on it
            self._batch.append(encode_event(ev.error(
                f"plugin {failure.plugin} ({failure.hook})", failure.error, at_ms=self._now_ms()),
                max_text=self.max_text))
