"""The gunicorn worker of RealICU Web (gunicorn.conf.py's ``worker_class``): uvicorn
on one asyncio loop per process, so a client that sends its headers or body
slowly holds a socket, never a thread (issue 31). Request headers must arrive
within ``REALICU_REQUEST_HEADER_SECONDS`` (10; 408 and closed, or closed when
nothing came); bodies are bounded by realicu_web.handler; each process takes
requests from at most gunicorn's ``worker_connections`` connections at once (503
beyond), and runs gunicorn's ``threads`` of them in Django's code at a time."""

from __future__ import annotations

import gc
import os

from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn_worker import UvicornWorker


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on request headers, from
    the connection's start or a kept-alive connection's next byte."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.header_seconds = float(
            os.environ.get("REALICU_REQUEST_HEADER_SECONDS") or 10.0
        )
        self._header_deadline = None

    def connection_made(self, transport):
        super().connection_made(transport)
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        if self._between_requests():
            self._arm_header_deadline()
        super().data_received(data)
        if not self._between_requests():
            self._disarm_header_deadline()

    def connection_lost(self, exc):
        self._disarm_header_deadline()
        super().connection_lost(exc)

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm_header_deadline(self) -> None:
        if self._header_deadline is None:
            self._header_deadline = self.loop.call_later(
                self.header_seconds, self._header_deadline_passed
            )

    def _disarm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _header_deadline_passed(self) -> None:
        self._header_deadline = None
        if self.transport.is_closing() or not self._between_requests():
            return
        received, _ = self.conn.trailing_data
        if received:
            text = (
                f"The request's headers did not arrive within "
                f"{self.header_seconds:.0f} s; send it again.\n"
            ).encode()
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\n"
                b"content-type: text/plain; charset=utf-8\r\n"
                b"content-length: %d\r\n"
                b"connection: close\r\n\r\n" % len(text) + text
            )
            self.logger.info("%s: request headers too slow, 408", self.client)
        # A connection that sent nothing is closed like an idle kept-alive one.
        self.transport.close()


class Worker(UvicornWorker):
    """uvicorn-worker's gunicorn worker with the deadlines and caps above."""

    CONFIG_KWARGS = {"loop": "asyncio", "http": DeadlineH11Protocol, "lifespan": "off"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.config.limit_concurrency = self.cfg.worker_connections

    def load_wsgi(self):
        super().load_wsgi()
        from django.core.handlers.wsgi import WSGIHandler

        from realicu_web.handler import RequestHandler

        if isinstance(self.wsgi, WSGIHandler):
            # `gunicorn realicu_web.wsgi -c gunicorn.conf.py` names the same
            # project: serve it through its ASGI handler.
            from realicu_web.asgi import application

            self.wsgi = application
        if isinstance(self.wsgi, RequestHandler):
            self.wsgi.threads = self.cfg.threads
        app_loaded_freeze()


def app_loaded_freeze() -> int:
    """Import every view the URLconf names, then move all objects alive now
    to the collector's permanent generation (gc.freeze), and return how many
    there are. A process that has loaded every URL holds about 175,000
    objects that live as long as it does; each full collection walked them
    all, about 100 ms of a request at load 12 (issue 35, a page's slow
    tail). Frozen, they are never walked again; what requests allocate is
    collected as before. Loading the URLconf here, not at the first request,
    puts its modules among the frozen."""
    from django.urls import get_resolver

    def walk(patterns):
        for pattern in patterns:
            if hasattr(pattern, "url_patterns"):
                walk(pattern.url_patterns)

    walk(get_resolver().url_patterns)
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
