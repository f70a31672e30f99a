"""A misbehaving HTTP server on loopback for the reply-limit tests (issue 31
item 5): it answers every request as its ``mode`` says and counts the bytes it
managed to send before the client hung up.

    server = SlowServer(mode="drip", interval=0.5).start()
    server.url                   # "http://127.0.0.1:<port>/v1"
    server.sent                  # body bytes the client accepted
    server.stop()

Modes: ``drip`` (headers, then one byte of a valid JSON reply every
``interval`` seconds, forever), ``late`` (headers after ``interval`` seconds),
``huge`` (``size`` bytes with their Content-Length), ``huge-chunked`` (the same
without a length, chunked), ``gzip-bomb`` (``size`` zero bytes gzip-compressed,
a few kilobytes on the wire)."""

from __future__ import annotations

import gzip
import threading
import time

from loopback import LoopbackServer, QuietHandler

CHUNK = 64 * 1024


class SlowServer(LoopbackServer):
    def __init__(
        self, *, mode: str, interval: float = 0.5, size: int = 50_000_000
    ) -> None:
        self.mode, self.interval, self.size = mode, interval, size
        self.sent = 0
        self.requests = 0
        self.hung_up = threading.Event()

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    def handle_error(self, request, client_address) -> None:
        self.hung_up.set()  # the client closed first: as intended

    def handler(self):
        outer = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                self._answer()

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._answer()

            def _answer(self):
                outer.requests += 1
                try:
                    outer._serve(self)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    outer.hung_up.set()

        return Handler

    def _serve(self, handler) -> None:
        if self.mode == "late":
            time.sleep(self.interval)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if self.mode == "drip":
            body = b'{"status": "stable", "acute_problems": [], ' + b" " * 10_000
            handler.send_header("Content-Length", str(len(body) + 1))
            handler.end_headers()
            handler.wfile.flush()
            for byte in body:
                self._write(handler, bytes([byte]))
                time.sleep(self.interval)
            return
        if self.mode == "late":
            body = b'{"status": "stable", "acute_problems": []}'
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            self._write(handler, body)
            return
        if self.mode == "gzip-bomb":
            body = gzip.compress(b"\0" * self.size, compresslevel=9)
            handler.send_header("Content-Encoding", "gzip")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            self._write(handler, body)
            return
        chunked = self.mode == "huge-chunked"
        if chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Content-Length", str(self.size))
        handler.end_headers()
        block = b"0" * CHUNK
        left = self.size
        while left > 0:
            piece = block[: min(CHUNK, left)]
            if chunked:
                handler.wfile.write(f"{len(piece):x}\r\n".encode())
                self._write(handler, piece)
                handler.wfile.write(b"\r\n")
            else:
                self._write(handler, piece)
            left -= len(piece)
        if chunked:
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()

    def _write(self, handler, data: bytes) -> None:
        handler.wfile.write(data)
        handler.wfile.flush()
        self.sent += len(data)
