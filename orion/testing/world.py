"""The world a scenario runs in: a real workspace, the real runtime and plugins, a model whose
replies the steps queue, and a virtual clock. Nothing of Orion is replaced."""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from orion.clock import VirtualClock
from orion.config import load_config
from orion.errors import OrionError
from orion.models.base import ModelRequest, ScriptError
from orion.models.events import ModelEvent
from orion.models.script import ModelReply
from orion.models.scripted import stream_reply
from orion.plugins import PluginManager, make_plugin_manager
from orion.runtime.runtime import Runtime


class QueueModel:
    """The model of a scenario: each request takes the next queued reply."""

    name = "scenario"

    def __init__(self) -> None:
        self.replies: deque[ModelReply] = deque()
        self.requests: list[ModelRequest] = []

    def queue(self, **reply: Any) -> None:
        self.replies.append(ModelReply.model_validate(reply))

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        if not self.replies:
            raise ScriptError(f"the model has no reply queued for request {request.number}; "
                              "the scenario did not expect Orion to ask the model again")
        async for event in stream_reply(self.replies.popleft(), request.number):
            yield event


class World:
    def __init__(self, root: Path, *, plugins: PluginManager | None = None):
        self.root = root
        self.workspace = root / "workspace"
        self.outside = root / "outside"  # a neighbour of the workspace that must never change
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.outside.mkdir(parents=True, exist_ok=True)
        (self.outside / "keep.txt").write_text("outside the workspace\n")
        self._outside_before = self.outside_files()
        self.plugins = plugins
        self.model = QueueModel()
        self.loop = asyncio.new_event_loop()
        self._runtime: Runtime | None = None
        self.errors: list[OrionError] = []
        self.replies: list[str] = []  # what slash commands answered

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            plugins = self.plugins or make_plugin_manager(env={})
            self.plugins = plugins
            self._runtime = Runtime(model=self.model, plugins=plugins,
                                    workspace=self.workspace,
                                    config=load_config(self.workspace, env={}),
                                    clock=VirtualClock(), env={})
        return self._runtime

    def restart(self) -> None:
        """A new runtime in the same workspace, as after a crash or a new ``orion chat``."""
        if self._runtime is not None:
            self._runtime.close()
        self._runtime = None

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def say(self, line: str) -> None:
        """A user line; Orion errors are kept for Then steps instead of ending the step."""
        try:
            reply = self.run(self.runtime.handle(line))
        except OrionError as exc:
            self.errors.append(exc)
            return
        if reply:
            self.replies.append(reply)

    def advance(self, ms: float) -> None:
        self.runtime.advance(ms)
        try:
            self.run(self.runtime.pump())
        except OrionError as exc:
            self.errors.append(exc)

    def outside_files(self) -> dict[str, str]:
        return {str(p.relative_to(self.root)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(self.root.rglob("*"))
                if p.is_file() and not p.is_relative_to(self.workspace)}

    def outside_changed(self) -> bool:
        return self.outside_files() != self._outside_before

    def close(self) -> None:
        if self._runtime is not None:
            self._runtime.close()
        self.loop.close()
