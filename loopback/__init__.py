"""An HTTP server on loopback served by a thread of this process: the one base
of the stand-ins that the tests and the benchmarks put in place of, or in front
of, an LLM server or a researcher's endpoint (fakes, recording and slowing
proxies, servers that misbehave on purpose)."""

from __future__ import annotations

import json
import select
import socket
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that writes no access log line per request, and
    reads a request's body (``request_body``) and answers with a whole body in
    one call (``send_body``, ``send_json``)."""

    def log_message(self, format, *args):
        pass

    def request_body(self) -> bytes:
        """The request's body: as many bytes as its Content-Length says."""
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def send_body(self, status: int, data: bytes, headers: dict | None = None):
        """Answer ``status`` with ``data`` as the whole body and its
        Content-Length; Content-Type application/json unless ``headers`` (sent
        too) give another."""
        headers = dict(headers or {})
        self.send_response(status)
        self.send_header(
            "Content-Type", headers.pop("Content-Type", "application/json")
        )
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(data)

    def send_json(self, status: int, body, headers: dict | None = None):
        """Answer ``status`` with ``body`` written as JSON (see ``send_body``)."""
        self.send_body(status, json.dumps(body).encode(), headers)


def free_port() -> int:
    """A loopback port free now, for a server process the caller starts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def client_hung_up(connection: socket.socket, seconds: float) -> bool:
    """Whether the client closes ``connection`` within ``seconds`` (its socket
    turns readable with nothing to read), waiting no longer than that."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select([connection], [], [], min(left, 0.05))
        if readable:
            try:
                if connection.recv(1, socket.MSG_PEEK) == b"":
                    return True
            except OSError:
                return True
    return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a request still held does not keep a stop waiting
    request_queue_size = 1024  # many clients at once queue, not refused

    def __init__(self, owner: LoopbackServer, handler: type[BaseHTTPRequestHandler]):
        self.owner = owner
        super().__init__((owner.host, owner.port), handler)

    def handle_error(self, request, client_address):
        self.owner.handle_error(request, client_address)


class LoopbackServer:
    """A subclass says how requests are answered (``handler``); ``start`` binds
    ``host`` and ``port`` (0: a free one, set on the instance once bound) and
    serves in a daemon thread; ``root`` is its http:// address; ``stop`` closes
    it (safe when not started)."""

    host = "127.0.0.1"
    port = 0
    _server: _Server | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def handle_error(self, request, client_address) -> None:
        """A handler raised: socketserver's traceback on stderr, unless a
        subclass says otherwise (a client that hung up on purpose)."""
        socketserver.BaseServer.handle_error(self._server, request, client_address)

    @property
    def root(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self):
        self._server = _Server(self, self.handler())
        self.port = self._server.server_address[1]
        threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.1},
            daemon=True,
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
