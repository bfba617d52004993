"""The HTTP/1.1 engine: the gateway's own server, carrying the ASGI app (``server.engine: h11``).

The engine was built on h11 and the config value keeps its name; requests
are now parsed by llhttp (``request_parser.py``), responses written by
``http1_response.py``.

Rules / theory of operation:

- **One task per connection**, in one nursery ``serve_http1`` owns; the
  listeners are served in a nursery of their own, so shutdown can stop
  accepting without touching the connections.
- **One request at a time per connection.** llhttp parses
  (``request_parser.py``); the next request reaches the app only after the
  response to this one has ended (a pipelined one waits in the parser's
  queue). A request body the app did not read closes the connection after
  its response, which says ``Connection: close``.
- **Limits.** A header block over ``max_header_bytes`` gets 431, a malformed
  request 400 (or the parser's status: 501 for a transfer coding other than
  chunked, 505 for a version other than 1.0 and 1.1), then the connection
  closes.
  The headers of a request must be complete within ``header_timeout`` of the
  connection going idle (slowloris, robustness A26): a connection that
  trickles or says nothing is closed without an answer, as hypercorn does at
  its keep-alive timeout. A body whose next bytes do not come within the
  same timeout is a host gone (``http.disconnect``): a body that stops
  cannot hold a request open for ever (one trickled faster than that still
  can, up to the body's size limit). That limit is the app's
  (``server.max_body_bytes``, 413).
- **Closing with input unread** (a refusal, an unread body) shuts our side
  first and discards what the host still sends for a moment, so that the
  kernel does not answer that input with a reset that destroys the response
  before the host has read it.
- **Shutdown** (``stopping`` set): the listeners close at once, connections
  waiting for a next request close at once, requests in flight finish (their
  responses say ``Connection: close``) within ``drain_timeout``, after which
  the rest are cancelled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final

import structlog
import trio

from gateway.frontend.engine import http1_response as wire_format
from gateway.frontend.engine.http1_exchange import Exchange, Wire, build_scope
from gateway.frontend.engine.http1_response import DATE
from gateway.frontend.engine.request_parser import Request, RequestRefused

if TYPE_CHECKING:
    import ssl
    from collections.abc import Awaitable, Callable

    from gateway.frontend import http_util as h

    App = Callable[[h.Scope, h.Receive, h.Send], Awaitable[None]]

logger = structlog.get_logger("gateway.frontend.http1")

# How long a close with input unread waits for the host to finish sending.
LINGER_TIMEOUT: Final = 1.0
# The most bytes discarded while lingering; a host still sending after this is cut.
LINGER_BYTES: Final = 1024 * 1024
# A close (TLS close_notify included) gets this long, even when cancelled.
CLOSE_TIMEOUT: Final = 1.0


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What one connection may cost the gateway.

    Attributes:
        max_header_bytes: the largest request head (request line and headers).
        header_timeout: seconds for a request's headers to be complete, from
            the moment the connection is ready for it (connected, or the
            previous response ended); also the longest silence mid-body.
        idle_timeout: seconds an idle keep-alive connection is held.
        drain_timeout: seconds requests in flight get once shutdown starts.
        backlog: the kernel's queue of connections not yet accepted.
    """

    max_header_bytes: int = 64 * 1024
    header_timeout: float = 8.0
    idle_timeout: float = 8.0
    drain_timeout: float = 10.0
    backlog: int = 1024


class Http1Server:
    """The connections of one server: serves each, and closes the idle ones on shutdown.

    Args:
        app: the ASGI app.
        limits: the limits.
        ssl_context: TLS for every connection, or None for plain HTTP.
    """

    def __init__(self, app: App, limits: Limits, ssl_context: ssl.SSLContext | None) -> None:
        self._app = app
        self._limits = limits
        self._ssl = ssl_context
        self._scheme = "https" if ssl_context is not None else "http"
        self._idle: set[trio.CancelScope] = set()
        self.stopping = False
        self.connections = 0

    def stop(self) -> None:
        """No new request on any connection; the idle ones close now."""
        self.stopping = True
        for scope in self._idle:
            scope.cancel()

    async def handle(self, stream: trio.abc.Stream) -> None:
        """Serve one accepted connection until it closes (a ``serve_listeners`` handler)."""
        client, server = _addresses(stream)
        if self._ssl is not None:
            stream = trio.SSLStream(stream, self._ssl, server_side=True, https_compatible=True)
        wire = Wire(stream, self._limits.max_header_bytes, self._limits.header_timeout)
        self.connections += 1
        try:
            await self._serve(wire, client, server)
        except Exception:  # a bug in here must not take the other connections down
            logger.exception("http.connection.failed", client=client)
        finally:
            self.connections -= 1
            wire.parser.close()
            await _close(wire)  # noqa: ASYNC102 - shields itself, with a deadline

    async def _serve(
        self, wire: Wire, client: tuple[str, int] | None, server: tuple[str, int] | None
    ) -> None:
        # One cancel scope serves the waits for every head on the connection
        # (its deadline set for each wait, infinite while the app runs),
        # instead of a scope a request.
        while True:
            request: Request | None = None
            with trio.CancelScope() as waiting:
                while True:
                    request = None
                    request = await self._next_request(wire, waiting)
                    if request is None or waiting.cancel_called:
                        break
                    if not await self._exchange(wire, request, client, server):
                        return
            if request is None:
                return  # closed, refused, timed out, or shutting down
            # The head came in time, but the wait's deadline (or a shutdown)
            # fell in the same instant: the scope is spent, the request served.
            if not await self._exchange(wire, request, client, server):
                return

    async def _exchange(
        self,
        wire: Wire,
        request: Request,
        client: tuple[str, int] | None,
        server: tuple[str, int] | None,
    ) -> bool:
        """Run the app for one request; True when the connection can carry the next."""
        exchange = Exchange(wire, request, self._closing)
        scope = build_scope(request, self._scheme, client, server)
        try:
            await self._app(scope, exchange.receive, exchange.send)
        finally:
            # A response that ended needs nothing more: no shielded scope for it.
            if not exchange.complete:
                with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_TIMEOUT):
                    await exchange.finish()
        return self._reusable(wire, exchange)

    def _closing(self) -> bool:
        return self.stopping

    def _reusable(self, wire: Wire, exchange: Exchange) -> bool:
        if not exchange.pull_buffered_body():
            wire.unread = True  # input we did not read: linger before closing
            return False
        return not (self.stopping or wire.broken or wire.must_close) and exchange.complete

    async def _next_request(self, wire: Wire, scope: trio.CancelScope) -> Request | None:
        """The next request's head, or None: closed, refused, or shutting down.

        ``scope`` is the connection's waiting scope: its deadline is the idle
        or header timeout while this waits (a timeout cancels it), infinite
        again when this returns.
        """
        parser = wire.parser
        events = parser.events
        idle = not (events or parser.head_open)
        timeout = self._limits.idle_timeout if idle else self._limits.header_timeout
        arrived: float | None = None
        if idle:
            if self.stopping:
                return None
            self._idle.add(scope)
        scope.deadline = trio.current_time() + timeout
        try:
            while not events:
                if arrived is not None:  # a head still incomplete: its own deadline
                    scope.deadline = arrived + self._limits.header_timeout
                    arrived = None
                data = await wire.read()
                parser.feed(data)
                if data and idle:  # a request is arriving: no longer idle
                    self._idle.discard(scope)
                    idle = False
                    # The header timeout runs from now; the deadline
                    # moves only if the head needs another read.
                    arrived = trio.current_time()
            event = events.popleft()
            if type(event) is Request:
                return event
            if type(event) is RequestRefused:
                await _refuse(wire, event.status, event.reason)
            return None  # CLOSED (a previous body is always taken whole: _reusable)
        finally:
            self._idle.discard(scope)
            scope.deadline = math.inf


def _addresses(
    stream: trio.abc.Stream,
) -> tuple[tuple[str, int] | None, tuple[str, int] | None]:
    """(client, server) addresses of a TCP stream, for the ASGI scope."""
    if not isinstance(stream, trio.SocketStream):
        return None, None
    try:
        peer = stream.socket.getpeername()
        local = stream.socket.getsockname()
    except OSError:
        return None, None
    return (str(peer[0]), int(peer[1])), (str(local[0]), int(local[1]))


async def _refuse(wire: Wire, status: int, reason: str) -> None:
    """Answer a request the parser refused; the connection closes after it."""
    body = f"{reason}\n".encode()
    head = b"%scontent-type: text/plain; charset=utf-8\r\n" % wire_format.status_line(status)
    head += b"content-length: %d\r\ndate: %s\r\nconnection: close\r\n\r\n" % (
        len(body),
        DATE.value(),
    )
    await wire.write(head + body)
    wire.must_close = wire.unread = True


async def _close(wire: Wire) -> None:
    """Close the connection; with input unread, let the host finish sending first."""
    stream = wire.stream
    with trio.CancelScope(shield=True, deadline=trio.current_time() + CLOSE_TIMEOUT):
        if wire.unread and not wire.broken and isinstance(stream, trio.abc.HalfCloseableStream):
            try:
                await stream.send_eof()
                with trio.move_on_after(LINGER_TIMEOUT):
                    discarded = 0
                    while discarded < LINGER_BYTES:
                        data = await stream.receive_some(64 * 1024)
                        if not data:
                            break
                        discarded += len(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
        await stream.aclose()


def _url(scheme: str, listener: trio.SocketListener) -> str:
    host, port = listener.socket.getsockname()[:2]
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


async def serve_http1(
    app: App,
    host: str,
    port: int,
    limits: Limits,
    *,
    stopping: trio.Event,
    ssl_context: ssl.SSLContext | None = None,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` on ``host:port`` until cancelled; shut down gracefully on ``stopping``.

    ``task_status.started`` receives the bound URLs (``http://127.0.0.1:PORT``).
    """
    listeners = await trio.open_tcp_listeners(port, host=host, backlog=limits.backlog)
    server = Http1Server(app, limits, ssl_context)
    scheme = "https" if ssl_context is not None else "http"
    async with trio.open_nursery() as connections:
        async with trio.open_nursery() as accepting:
            accepting.start_soon(
                partial(trio.serve_listeners, server.handle, listeners, handler_nursery=connections)
            )
            task_status.started([_url(scheme, listener) for listener in listeners])
            await stopping.wait()
            accepting.cancel_scope.cancel()  # serve_listeners closes the listeners
        server.stop()
        connections.cancel_scope.deadline = trio.current_time() + limits.drain_timeout
