"""The real-server lane's helpers: a real server started and ended by its pid, and ``orion
chat`` run as a user runs it (see conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import urllib.error
import urllib.request

HERE = Path(__file__).resolve().parent
PYTHON = os.environ.get("ORION_REAL_PYTHON", "")
#: How long a model may take to load on a busy two-core machine.
START_TIMEOUT_S = 300


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RealServer:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def kill(self) -> None:
        """SIGKILL: the server dies as a crash would leave it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
            return bool(answer.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def post_lines(url: str, body: dict[str, object]) -> tuple[int, list[str]]:
    """POST ``body`` as JSON; the status and the body's non-empty lines, as they arrived."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=600) as answer:
            return answer.status, [line.decode().rstrip("\r\n") for line in answer
                                   if line.strip()]
    except urllib.error.HTTPError as failed:
        return failed.code, [line.decode().rstrip("\r\n") for line in failed if line.strip()]


def start_server(log_dir: Path, context: int = 2048) -> RealServer:
    port = _free_port()
    log = log_dir / f"server-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen([PYTHON, str(HERE / "serve.py"), str(port), str(context)],
                                   stdout=out, stderr=subprocess.STDOUT)
    server = RealServer(process, port, log)
    for _ in range(START_TIMEOUT_S * 4):
        if process.poll() is not None:
            break
        if healthy(port):
            return server
        try:
            process.wait(timeout=0.25)
        except subprocess.TimeoutExpired:
            pass
    server.stop()
    raise RuntimeError(f"the real server did not start: {log.read_text(errors='replace')[-2000:]}")


def orion_chat(workspace: Path, base_url: str, lines: str, *, orion_yaml: str = "",
               timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``orion chat`` with its input piped (not a terminal), as a script would run it."""
    if orion_yaml:
        (workspace / "orion.yaml").write_text(orion_yaml, encoding="utf-8")
    orion = Path(sys.executable).with_name("orion")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ORION_"))}
    return subprocess.run([str(orion), "chat", "--base-url", base_url, "--model", "smollm2",
                           "--workspace", str(workspace)], input=lines, text=True,
                          capture_output=True, timeout=timeout, env=env)
