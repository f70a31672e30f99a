"""A server on loopback that "generates" for ``hold`` seconds before it
answers, watching its connection meanwhile as llama.cpp's server does: when
the client closes it, the server stops and says so.

    server = GeneratingServer(hold=60).start()
    server.url          # "http://127.0.0.1:<port>/v1"
    server.received     # set when a request arrived
    server.hung_up      # set when a client closed its connection mid-way
    server.stop()

It answers what ``reply`` gives (a chat completion by default) once ``hold``
has passed with the connection still open."""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.oracle.fake_llm import completion


class GeneratingServer:
    def __init__(self, *, hold: float = 60.0, reply: dict | None = None) -> None:
        self.hold = hold
        self.reply = reply or completion('{"status": "stable"}')
        self.received = threading.Event()
        self.hung_up = threading.Event()
        self.requests = 0
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> GeneratingServer:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                outer.requests += 1
                outer.received.set()
                if outer._client_left(self.connection):
                    outer.hung_up.set()
                    return
                data = json.dumps(outer.reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def _client_left(self, connection: socket.socket) -> bool:
        """Whether the client closed the connection within ``hold``: its
        socket turns readable with nothing to read."""
        end = time.monotonic() + self.hold
        while (left := end - time.monotonic()) > 0:
            readable, _, _ = select.select([connection], [], [], min(left, 0.05))
            if readable:
                try:
                    if connection.recv(1, socket.MSG_PEEK) == b"":
                        return True
                except OSError:
                    return True
        return False

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
