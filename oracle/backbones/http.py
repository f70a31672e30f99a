"""HTTP to LLM backbones and online-evaluation endpoints (issue 31): every
connection under the address policy, every reply within a total deadline and
a size limit.

The clients made here connect only to addresses oracle.backbones.endpoints
checked: a host name is resolved once per connection, every address it gives
is checked, and the socket is opened to a checked address, while the URL, the
Host header and TLS's server name stay the name's (DNS rebinding gains
nothing). Proxies from the environment are not used, redirects not followed.

``request`` (and ``arequest``) reads a reply as a stream under one deadline
over connection, headers and body (each read waits at most the time left, so a
reply dripping a byte at a time ends at the deadline), and stops reading at
``max_bytes``, closing the connection: a longer reply is refused without being
read. Replies are asked for without compression; a compressed one is
decompressed within the same limit.

A request abandoned before its reply is read (its deadline passed, its task
cancelled, or ``abort`` called from another thread because its run was
cancelled) has its connection closed, not kept for the next request: that is
how a server learns to stop working on it (llama.cpp's server stops
generating when the connection closes).

An online-evaluation endpoint's connection has at most
ENDPOINT_CONNECT_SECONDS, and one that fails is reported at that time whether
the port refused it at once (closed) or never answered (filtered): neither the
error's text for the researcher (agents.remote) nor its timing tells them
apart."""

from __future__ import annotations

import contextvars
import functools
import json
import socket
import ssl
import threading
import time
import weakref
import zlib
from dataclasses import dataclass

import anyio
import httpcore
import httpx

from oracle.backbones.endpoints import AddressRefused, Purpose, host_addresses

# An online-evaluation endpoint's connection must be open within this (or the
# request's time left, if shorter); a failed one is reported only then.
ENDPOINT_CONNECT_SECONDS = 5.0

# The end of the request in progress (time.monotonic()), read by every socket
# operation of the connection it uses.
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "realicu_http_deadline", default=None
)


class ReplyRefused(Exception):
    """A reply not read to its end: longer than the limit, or in an encoding
    that cannot be read within it."""


@dataclass
class Reply:
    status: int
    headers: httpx.Headers
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self):
        return json.loads(self.body)


def _clip(timeout: float | None, expired: type[Exception]) -> float | None:
    """``timeout`` cut to the time the request has left; ``expired`` raised
    when none is left."""
    deadline = _deadline.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the reply's deadline passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, registry: _Streams):
        self._inner = inner
        self._registry = registry
        registry.add(self)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clip(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clip(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._registry.discard(self)
        self._inner.close()

    def abort(self) -> None:
        """Shut the socket down from another thread: a read blocked on it
        returns at once, and the server sees the connection closed."""
        sock = self._inner.get_extra_info("socket")
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed

    def start_tls(self, ssl_context, server_hostname=None, timeout=None):
        self._registry.discard(self)
        return _Stream(
            self._inner.start_tls(
                ssl_context, server_hostname, _clip(timeout, httpcore.ConnectTimeout)
            ),
            self._registry,
        )

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class _AsyncStream(httpcore.AsyncNetworkStream):
    def __init__(self, inner: httpcore.AsyncNetworkStream):
        self._inner = inner

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, _clip(timeout, httpcore.ReadTimeout))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, _clip(timeout, httpcore.WriteTimeout))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(self, ssl_context, server_hostname=None, timeout=None):
        return _AsyncStream(
            await self._inner.start_tls(
                ssl_context, server_hostname, _clip(timeout, httpcore.ConnectTimeout)
            )
        )

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


def _checked(host: str, port: int, purpose: Purpose, app_host: str) -> list[str]:
    addresses = host_addresses(host, port, purpose=purpose, app_host=app_host)
    if not addresses:
        raise httpcore.ConnectError(f"{host} could not be resolved")
    return [str(address) for address in addresses]


def _connect_end(purpose: Purpose, timeout: float | None) -> float | None:
    """When a connection must be open by (time.monotonic()), or None for no
    bound of its own. An endpoint's connection has at most
    ENDPOINT_CONNECT_SECONDS, and a failed one is reported only then (see
    ``_connect_failed``)."""
    timeout = _clip(timeout, httpcore.ConnectTimeout)
    if purpose == Purpose.ENDPOINT:
        timeout = min(timeout or ENDPOINT_CONNECT_SECONDS, ENDPOINT_CONNECT_SECONDS)
    return None if timeout is None else time.monotonic() + timeout


def _connect_left(end: float | None) -> float | None:
    if end is None:
        return None
    left = end - time.monotonic()
    if left <= 0:
        raise httpcore.ConnectTimeout("the connection's time passed")
    return left


def _connect_failed_wait(purpose: Purpose, end: float | None) -> float:
    """Seconds to wait before an endpoint's failed connection is reported: a
    closed port refuses at once where a filtered one answers nothing until
    the connection's time is up, so both are reported at that time (a
    researcher learns nothing of an address's ports from a run's pace)."""
    if purpose != Purpose.ENDPOINT or end is None:
        return 0.0
    return max(0.0, end - time.monotonic())


class _Streams:
    """The open connections of a client's pool, to abort them from another
    thread."""

    def __init__(self) -> None:
        self._streams: weakref.WeakSet = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, stream: _Stream) -> None:
        with self._lock:
            self._streams.add(stream)

    def discard(self, stream: _Stream) -> None:
        with self._lock:
            self._streams.discard(stream)

    def abort(self) -> None:
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            stream.abort()


class _Backend(httpcore.NetworkBackend):
    """Opens a connection to a checked address of the host, never to the
    host name itself."""

    def __init__(self, purpose: Purpose, app_host: str = ""):
        self.purpose, self.app_host = purpose, app_host
        self._inner = httpcore.SyncBackend()
        self.streams = _Streams()

    def connect_tcp(
        self, host, port, timeout=None, local_address=None, socket_options=None
    ):
        end = _connect_end(self.purpose, timeout)
        last: Exception | None = None
        for address in _checked(host, port, self.purpose, self.app_host):
            try:
                stream = self._inner.connect_tcp(
                    address,
                    port,
                    timeout=_connect_left(end),
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                last = error
                continue
            return _Stream(stream, self.streams)
        time.sleep(_connect_failed_wait(self.purpose, end))
        raise last  # type: ignore[misc]

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore.ConnectError("Unix sockets are not used.")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _AsyncBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, purpose: Purpose, app_host: str = ""):
        self.purpose, self.app_host = purpose, app_host
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self, host, port, timeout=None, local_address=None, socket_options=None
    ):
        end = _connect_end(self.purpose, timeout)
        addresses = await anyio.to_thread.run_sync(
            _checked, host, port, self.purpose, self.app_host
        )
        last: Exception | None = None
        for address in addresses:
            try:
                stream = await self._inner.connect_tcp(
                    address,
                    port,
                    timeout=_connect_left(end),
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                last = error
                continue
            return _AsyncStream(stream)
        await anyio.sleep(_connect_failed_wait(self.purpose, end))
        raise last  # type: ignore[misc]

    async def connect_unix_socket(self, path, timeout=None, socket_options=None):
        raise httpcore.ConnectError("Unix sockets are not used.")

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One verifying context per process (loading the CA bundle takes 0.2 s;
    a context is safe to share between connections and threads)."""
    return httpx.create_ssl_context(trust_env=False)


class GuardedTransport(httpx.HTTPTransport):
    """httpx's transport with its connection pool on the guarded backend."""

    def __init__(
        self, *, purpose: Purpose, app_host: str = "", limits: httpx.Limits
    ) -> None:
        context = _ssl_context()
        super().__init__(verify=context, limits=limits, trust_env=False)
        self._backend = _Backend(purpose, app_host)
        self._pool = httpcore.ConnectionPool(
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=self._backend,
        )

    def abort(self) -> None:
        """Close every connection of the pool now, from any thread."""
        self._backend.streams.abort()


class AsyncGuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(
        self, *, purpose: Purpose, app_host: str = "", limits: httpx.Limits
    ) -> None:
        context = _ssl_context()
        super().__init__(verify=context, limits=limits, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_AsyncBackend(purpose, app_host),
        )


def _client_options(timeout_seconds: float, headers: dict | None) -> dict:
    return {
        "timeout": httpx.Timeout(timeout_seconds),
        "headers": {"Accept-Encoding": "identity", **(headers or {})},
        "follow_redirects": False,
        "trust_env": False,
    }


def guarded_client(
    *,
    purpose: Purpose,
    timeout_seconds: float,
    headers: dict | None = None,
    connections: int = 4,
    app_host: str = "",
) -> httpx.Client:
    """An httpx.Client whose every connection is under the address policy for
    ``purpose``. Use ``request`` to read its replies within a deadline."""
    limits = httpx.Limits(
        max_connections=connections, max_keepalive_connections=connections
    )
    return httpx.Client(
        transport=GuardedTransport(purpose=purpose, app_host=app_host, limits=limits),
        **_client_options(timeout_seconds, headers),
    )


def guarded_async_client(
    *,
    purpose: Purpose,
    timeout_seconds: float,
    headers: dict | None = None,
    connections: int = 16,
) -> httpx.AsyncClient:
    limits = httpx.Limits(
        max_connections=connections, max_keepalive_connections=connections
    )
    return httpx.AsyncClient(
        transport=AsyncGuardedTransport(purpose=purpose, limits=limits),
        **_client_options(timeout_seconds, headers),
    )


class _Body:
    """A reply's body gathered up to ``limit`` bytes, raw and decoded."""

    def __init__(self, headers: httpx.Headers, limit: int):
        self.limit = limit
        length = headers.get("content-length", "")
        if length.strip().isdigit() and int(length) > limit:
            raise ReplyRefused(
                f"the reply announced {int(length):,} bytes, more than the "
                f"{limit:,} read"
            )
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("", "identity"):
            self._decoder = None
        elif encoding in ("gzip", "x-gzip", "deflate"):
            self._decoder = zlib.decompressobj(32 + zlib.MAX_WBITS)
        else:
            raise ReplyRefused(f"the reply's encoding {encoding[:40]!r} is not read")
        self.raw = 0
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.raw += len(chunk)
        if self.raw > self.limit:
            raise ReplyRefused(f"the reply is longer than {self.limit:,} bytes")
        if self._decoder is None:
            self.data += chunk
            return
        try:
            room = self.limit + 1 - len(self.data)
            self.data += self._decoder.decompress(chunk, room)
        except zlib.error:
            raise ReplyRefused("the reply's compressed body cannot be read") from None
        if len(self.data) > self.limit or self._decoder.unconsumed_tail:
            raise ReplyRefused(
                f"the reply decompresses to more than {self.limit:,} bytes"
            )


def request(
    client: httpx.Client,
    method: str,
    url: str,
    *,
    deadline_seconds: float,
    max_bytes: int,
    **kwargs,
) -> Reply:
    """One request whose reply, headers and body, must arrive within
    ``deadline_seconds`` of its start (httpx.TimeoutException otherwise) and
    hold at most ``max_bytes`` (ReplyRefused, the connection closed unread).
    AddressRefused when the host resolves to a refused address."""
    token = _deadline.set(time.monotonic() + deadline_seconds)
    try:
        with client.stream(method, url, **kwargs) as response:
            body = _Body(response.headers, max_bytes)
            for chunk in response.iter_raw():
                body.add(chunk)
            return Reply(response.status_code, response.headers, bytes(body.data))
    finally:
        _deadline.reset(token)


def post_or_problem(
    client: httpx.Client,
    url: str,
    *,
    content: bytes | str,
    deadline_seconds: float,
    max_bytes: int,
) -> tuple[Reply | None, str | None]:
    """``request`` POSTing ``content``: the reply and None, or None and the
    problem a timeout or a connection error was, in words for the run's error
    (a retry may follow). AddressRefused and ReplyRefused are raised."""
    try:
        reply = request(
            client,
            "POST",
            url,
            content=content,
            deadline_seconds=deadline_seconds,
            max_bytes=max_bytes,
        )
    except httpx.TimeoutException:
        return None, (
            f"no complete reply within {deadline_seconds:g} s "
            "(connection, headers and body)"
        )
    except httpx.HTTPError as error:
        return None, f"connection error ({type(error).__name__})"
    return reply, None


def abort(client: httpx.Client) -> None:
    """Close the connections of ``client`` (a ``guarded_client``) from
    another thread: a request in flight on it ends at once with a connection
    error, and its server sees the connection closed."""
    transport = getattr(client, "_transport", None)
    if isinstance(transport, GuardedTransport):
        transport.abort()


class GuardedClientHolder:
    """One ``guarded_client`` held on ``_client`` (opened by the subclass's
    ``_open``): ``close`` ends it, and ``abort`` ends it from another thread."""

    _client: httpx.Client | None = None
    aborted = False

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def abort(self) -> None:
        """From another thread, when the run was cancelled: the request in
        flight ends at once with its connection closed (a llama.cpp server
        stops generating for it; an endpoint sees it closed), and none
        follows."""
        self.aborted = True
        if self._client is not None:
            abort(self._client)


async def arequest(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    deadline_seconds: float,
    max_bytes: int,
    **kwargs,
) -> Reply:
    """``request`` for an httpx.AsyncClient."""
    token = _deadline.set(time.monotonic() + deadline_seconds)
    try:
        async with client.stream(method, url, **kwargs) as response:
            body = _Body(response.headers, max_bytes)
            async for chunk in response.aiter_raw():
                body.add(chunk)
            return Reply(response.status_code, response.headers, bytes(body.data))
    finally:
        _deadline.reset(token)


__all__ = [
    "AddressRefused",
    "AsyncGuardedTransport",
    "GuardedClientHolder",
    "GuardedTransport",
    "Purpose",
    "Reply",
    "ReplyRefused",
    "abort",
    "arequest",
    "guarded_async_client",
    "guarded_client",
    "post_or_problem",
    "request",
]
