"""Django's ASGI handler with bounds against slow clients (issue 31): a request's
body is read asynchronously, before any thread is taken, and must arrive within
a total deadline (408 when missed, 413 above the largest upload); then at most
``threads`` requests run Django's synchronous code at once, each on a
long-lived thread of its own, so a database connection is kept per thread as
under gunicorn's gthread worker."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler

# Bodies up to this size stay in memory while they arrive; larger ones go to a
# temporary file, so a thousand half-sent uploads hold at most 256 MB.
SPOOL_BYTES = 256 * 1024
# Multipart framing and the form's other fields around the largest upload.
UPLOAD_MARGIN_BYTES = 1024 * 1024


def _env_float(name: str, default: float) -> float:
    return float(os.environ.get(name) or default)


class ReceivedBody:
    """``receive`` of a request whose body was read already: Django's handler
    takes the body from here and listens for a disconnect on ``receive``."""

    def __init__(self, receive, body):
        self.receive = receive
        self.body = body

    async def __call__(self):
        return await self.receive()


class RequestHandler(ASGIHandler):
    """Django's ``ASGIHandler`` with a body deadline, a body size limit, a
    bounded pool of request threads, and streamed responses whose synchronous
    iterators are read a chunk at a time (Django's own handler reads such an
    iterator whole into memory first: a release file would be held in RAM).

    The deadline is ``REALICU_REQUEST_BODY_SECONDS`` (30) plus the announced
    Content-Length at ``REALICU_REQUEST_BODY_RATE`` bytes/s (256 KiB/s), set
    once when the headers are in: a large upload over a slow link still
    arrives, a stalled one is answered 408 and closed."""

    def __init__(self, *, threads: int = 4):
        # The middleware chain loaded synchronously, as for WSGI (not
        # ASGIHandler's async chain): the project's middleware and views are
        # synchronous, and an async chain adapts them one by one, a hop between
        # the loop and the thread at each (the sign-in page took 3.8 ms of CPU
        # that way, 2.4 ms this way, 1.7 ms under gthread).
        self.load_middleware(is_async=False)
        self.threads = threads
        self.body_seconds = _env_float("REALICU_REQUEST_BODY_SECONDS", 30.0)
        self.body_rate = _env_float("REALICU_REQUEST_BODY_RATE", 256 * 1024)
        self.max_body_bytes = settings.REALICU_SUBMISSION_MAX_BYTES + (
            UPLOAD_MARGIN_BYTES
        )
        self._slots: asyncio.Semaphore | None = None
        self._idle: list[ThreadPoolExecutor] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await super().__call__(scope, receive, send)
        body = await self._receive_body(scope, receive, send)
        if body is None:
            return
        try:
            async with self._request_thread() as (executor, release):

                async def send_releasing(message):
                    # The response is computed: the slot goes to the next
                    # request while this one is sent (a slow reader holds a
                    # thread of its own, never a slot).
                    if message["type"] == "http.response.start":
                        release()
                    await send(message)

                async with ThreadSensitiveContext(executor=executor):
                    await self.handle(
                        scope, ReceivedBody(receive, body), send_releasing
                    )
        finally:
            body.close()

    async def read_body(self, receive):
        if isinstance(receive, ReceivedBody):
            return receive.body
        return await super().read_body(receive)

    async def get_response_async(self, request):
        # The whole chain and the view in one call on the request's thread.
        return await sync_to_async(self.get_response)(request)

    async def run_get_response(self, request):
        response = await super().run_get_response(request)
        if response.streaming and not response.is_async:
            response.streaming_content = _chunks_in_thread(response.streaming_content)
        return response

    async def _receive_body(self, scope, receive, send):
        """The request's body in a spooled file, or None when the request was
        answered here (408, 413) or the client went away."""
        length = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                with contextlib.suppress(ValueError):
                    length = int(value)
        if length is not None and length > self.max_body_bytes:
            await _answer(send, 413, self._too_large())
            return None
        seconds = self.body_seconds + (length or 0) / self.body_rate
        body = tempfile.SpooledTemporaryFile(
            max_size=SPOOL_BYTES, mode="w+b", dir=settings.FILE_UPLOAD_TEMP_DIR
        )
        size = 0
        try:
            async with asyncio.timeout(seconds):
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        body.close()
                        return None
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        body.close()
                        await _answer(send, 413, self._too_large())
                        return None
                    body.write(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            body.close()
            await _answer(
                send,
                408,
                f"The request's body did not arrive within {seconds:.0f} s "
                f"({size} bytes came); send it again.",
            )
            return None
        body.seek(0)
        return body

    def _too_large(self) -> str:
        return (
            f"The request is larger than {self.max_body_bytes // (1024 * 1024)} MB "
            "(REALICU_SUBMISSION_MAX_BYTES and its form)."
        )

    @contextlib.asynccontextmanager
    async def _request_thread(self):
        """One of ``threads`` slots and a thread of the request's own; the
        slot can be given back early (``release``), the thread at the end."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.threads)
        slots = self._slots
        await slots.acquire()
        held = True

        def release():
            nonlocal held
            if held:
                held = False
                slots.release()

        executor = (
            self._idle.pop()
            if self._idle
            else ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")
        )
        try:
            yield executor, release
        finally:
            release()
            if len(self._idle) < self.threads:
                self._idle.append(executor)
            else:
                # More threads than slots were busy (responses being sent):
                # this one ends, closing its database connection first.
                executor.submit(_close_connections)
                executor.shutdown(wait=False)


def _close_connections() -> None:
    from django.db import connections

    connections.close_all()


async def _chunks_in_thread(iterator):
    """The parts of a synchronous iterator, each read in the request's thread
    (a file's read, a generator that may use the request's connection)."""
    done = object()
    next_part = sync_to_async(next)
    while (part := await next_part(iterator, done)) is not done:
        yield part


async def _answer(send, status: int, text: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": text.encode()})
