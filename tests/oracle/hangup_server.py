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

import threading

from loopback import LoopbackServer, QuietHandler, client_hung_up
from tests.oracle.fake_llm import completion


class GeneratingServer(LoopbackServer):
    def __init__(self, *, hold: float = 60.0, reply: dict | None = None) -> None:
        self.hold = hold
        self.reply = reply or completion('{"status": "stable"}')
        self.received = threading.Event()
        self.hung_up = threading.Event()
        self.requests = 0

    @property
    def url(self) -> str:
        return f"{self.root}/v1"

    def handler(self):
        outer = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.request_body()
                outer.requests += 1
                outer.received.set()
                if client_hung_up(self.connection, outer.hold):
                    outer.hung_up.set()
                    return
                self.send_json(200, outer.reply)

        return Handler
