"""The MCP Streamable HTTP endpoint (``/mcp``): POST, GET and DELETE.

Checks run cheapest first and each has its own status, so a host learns
exactly what was wrong: Origin/Host (403), method (405), media types
(415/406), size (413), JSON (400 -32700), session (400/404), protocol
version header (400).

A POST carrying a request is answered with ``application/json`` when the
first thing the gateway has to say about it is the response, and switches
to ``text/event-stream`` only when something comes first (progress, a
server-to-client request). Measured on the official SDK, JSON costs about
half the CPU of SSE (DESIGN.md, "JSON first").
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final

import structlog
import trio

from gateway.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    LocalProtocolError,
)
from gateway.frontend import http_util as h
from gateway.frontend.dispatch import accept_one_way, open_client_session, route_request
from gateway.frontend.guard import REFUSED, Guard, error_body, too_many
from gateway.protocol import jsonrpc
from gateway.protocol.jsonrpc import Request
from gateway.protocol.versions import (
    SUPPORTED_VERSIONS,
    supports_batches,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from gateway.frontend.auth import Authenticator, RateLimiter
    from gateway.frontend.clients import ClientRegistry, ClientSession
    from gateway.frontend.origin import OriginPolicy
    from gateway.observability import Metrics
    from gateway.router import Router

logger = structlog.get_logger("gateway.frontend")

MCP_SESSION_ID_HEADER: Final = b"mcp-session-id"
MCP_PROTOCOL_VERSION_HEADER: Final = b"mcp-protocol-version"
LAST_EVENT_ID_HEADER: Final = b"last-event-id"
# Idle GET streams get a comment this often so proxies keep them open
# (robustness B14: keep-alive at most every 15 s).
KEEPALIVE_INTERVAL: Final = 15.0
# Progress and server-to-client requests queued for one POST's stream while
# it is being written; beyond this, progress is dropped (it is advisory) and
# questions go to the GET stream instead, so a slow host cannot make the
# gateway buffer without bound.
RELATED_MESSAGE_BUFFER: Final = 64


def _error_body(msg_id: jsonrpc.RequestId | None, code: int, message: str) -> bytes:
    return jsonrpc.encode_error(msg_id, code, message)


class McpEndpoint:
    """Serves one MCP endpoint path.

    Args:
        router: routes requests to backends.
        clients: the client-session registry.
        origin_policy: Origin/Host checks.
        max_body_bytes: the largest POST body accepted.
        is_draining: returns True while the gateway shuts down (503).
        nursery: where a request's related-message writer runs when it needs one.
    """

    def __init__(
        self,
        router: Router,
        clients: ClientRegistry,
        origin_policy: OriginPolicy,
        *,
        max_body_bytes: int,
        is_draining: Callable[[], bool] = lambda: False,
        authenticator: Authenticator | None = None,
        session_limiter: RateLimiter | None = None,
        principal_limiter: RateLimiter | None = None,
        metrics: Metrics | None = None,
        nursery: trio.Nursery,
    ) -> None:
        self._router = router
        self._clients = clients
        self._guard = Guard(origin_policy, authenticator, principal_limiter)
        self._max_body = max_body_bytes
        self._is_draining = is_draining
        self._session_limiter = session_limiter
        self._metrics = metrics
        self._nursery = nursery
        self.activity = h.Activity()

    async def __call__(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        """Handle one HTTP request to the endpoint."""
        send = _forgiving(send)
        if self._metrics is not None:
            send = _counting_rejections(send, self._metrics)
        if await self._guard.admit(scope, send) is REFUSED:
            return
        method = scope["method"]
        if method == "POST":
            with self.activity:
                await self._post(scope, receive, send)
        elif method == "GET":
            await self._get(scope, receive, send)
        elif method == "DELETE":
            await self._delete(scope, send)
        else:
            await h.respond(
                send,
                405,
                _error_body(None, INVALID_REQUEST, f"Method {method} not allowed"),
                headers=[(b"allow", b"GET, POST, DELETE")],
            )

    # -- session lookup ----------------------------------------------------

    async def _session_for(self, scope: h.Scope, send: h.Send) -> ClientSession | None:
        raw = h.header(scope, MCP_SESSION_ID_HEADER)
        if raw is None:
            await h.respond(
                send,
                400,
                _error_body(
                    None, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required"
                ),
            )
            return None
        session = None
        if raw.isascii():
            session = self._clients.get(raw.decode("ascii"))
        if session is None:
            await h.respond(send, 404, _error_body(None, INVALID_REQUEST, "Session not found"))
            return None
        version = h.header(scope, MCP_PROTOCOL_VERSION_HEADER)
        if version is not None:
            text = version.decode("latin-1")
            if text not in SUPPORTED_VERSIONS:
                await h.respond(
                    send,
                    400,
                    _error_body(
                        None,
                        INVALID_REQUEST,
                        f"Bad Request: unsupported MCP-Protocol-Version {text[:40]!r} "
                        f"(supported: {', '.join(SUPPORTED_VERSIONS)})",
                    ),
                )
                return None
            # A supported version other than the negotiated one is accepted:
            # the spec asks hosts to send the negotiated one (SHOULD) but makes
            # only unsupported values an error, and the official conformance
            # suite (server-sse-multiple-streams) relies on exactly that.
        session.last_seen = trio.current_time()
        if self._session_limiter is not None:
            wait = self._session_limiter.check(session.session_id, session.last_seen)
            if wait:
                await too_many(send, wait)
                return None
        return session

    # -- POST --------------------------------------------------------------

    async def _post(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        if self._is_draining():
            await h.respond(
                send,
                503,
                _error_body(None, INTERNAL_ERROR, "gateway is shutting down"),
                headers=[(b"retry-after", b"1")],
            )
            return
        if "application/json" not in h.media_types(h.header(scope, b"content-type")):
            await h.respond(
                send,
                415,
                _error_body(
                    None,
                    INVALID_REQUEST,
                    "Unsupported Media Type: Content-Type must be application/json",
                ),
            )
            return
        accepted = h.media_types(h.header(scope, b"accept"))
        if not (
            h.accepts_type(accepted, "application/json")
            and h.accepts_type(accepted, "text/event-stream")
        ):
            await h.respond(
                send,
                406,
                _error_body(
                    None,
                    INVALID_REQUEST,
                    "Not Acceptable: Accept must list application/json and text/event-stream",
                ),
            )
            return
        too_large = error_body(f"Payload Too Large: limit is {self._max_body} bytes")
        length = h.header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self._max_body:
            await h.respond(send, 413, too_large)  # refused before reading (A24)
            return
        try:
            body = await h.read_body(receive, self._max_body)
        except h.BodyTooLarge:
            await h.respond(send, 413, too_large)
            return
        try:
            message = jsonrpc.decode(body)
        except LocalProtocolError as exc:
            msg_id = exc.data.get("id") if isinstance(exc.data, dict) else None
            await h.respond(send, 400, _error_body(msg_id, exc.code, exc.message))
            return
        if isinstance(message, list):
            await self._post_batch(scope, send, message)
            return
        if isinstance(message, Request) and message.method == "initialize":
            await self._initialize(scope, send, message)
            return
        session = await self._session_for(scope, send)
        if session is None:
            return
        if isinstance(message, Request):
            await self._post_request(send, session, message)
        else:
            await accept_one_way(self._router, session, message)
            await h.respond(send, 202)

    async def _post_batch(
        self, scope: h.Scope, send: h.Send, members: list[jsonrpc.Message | LocalProtocolError]
    ) -> None:
        # Batches exist only in 2025-03-26 (robustness A6/A7).
        session = await self._session_for(scope, send)
        if session is None:
            return
        if not supports_batches(session.protocol_version):
            await h.respond(
                send,
                400,
                _error_body(
                    None,
                    INVALID_REQUEST,
                    "invalid request: JSON-RPC batches are not part of protocol "
                    + session.protocol_version,
                ),
            )
            return
        replies: list[bytes] = []
        for member in members:
            if isinstance(member, LocalProtocolError):
                msg_id = member.data.get("id") if isinstance(member.data, dict) else None
                replies.append(_error_body(msg_id, member.code, member.message))
            elif isinstance(member, Request):
                if member.method == "initialize":
                    replies.append(
                        _error_body(
                            member.id, INVALID_REQUEST, "initialize cannot be part of a batch"
                        )
                    )
                else:
                    replies.append(await route_request(self._router, session, member))
            else:
                await accept_one_way(self._router, session, member)
        if not replies:
            await h.respond(send, 202)
            return
        await h.respond(send, 200, b"[" + b",".join(replies) + b"]")

    async def _initialize(self, scope: h.Scope, send: h.Send, request: Request) -> None:
        if h.header(scope, MCP_SESSION_ID_HEADER) is not None:
            await h.respond(
                send,
                400,
                _error_body(
                    request.id,
                    INVALID_REQUEST,
                    "invalid request: this session is already initialized; "
                    "send initialize without Mcp-Session-Id to start a new one",
                ),
            )
            return
        version_header = h.header(scope, MCP_PROTOCOL_VERSION_HEADER)
        asked = None if version_header is None else version_header.decode("latin-1")
        if asked is not None and asked not in SUPPORTED_VERSIONS:
            await h.respond(
                send,
                400,
                _error_body(
                    request.id,
                    INVALID_REQUEST,
                    f"Bad Request: unsupported MCP-Protocol-Version {asked[:40]!r}",
                ),
            )
            return
        if len(self._clients) >= self._clients.max_sessions:
            await h.respond(
                send,
                503,
                _error_body(request.id, INTERNAL_ERROR, "too many open sessions"),
                headers=[(b"retry-after", b"5")],
            )
            return
        try:
            session, body = open_client_session(self._router, self._clients, request)
        except LocalProtocolError as exc:
            await h.respond(send, 200, _error_body(request.id, exc.code, exc.message))
            return
        await h.respond(
            send, 200, body, headers=[(MCP_SESSION_ID_HEADER, session.session_id.encode("ascii"))]
        )

    async def _post_request(self, send: h.Send, session: ClientSession, request: Request) -> None:
        # JSON first, SSE when needed (DESIGN.md): the response headers wait
        # for the first thing there is to say about this request. The request
        # is routed in this task; only a request that has something to say
        # before its answer pays for a writer task (_RelatedWriter).
        stream = _EventStream(send, session.session_id)
        related = _RelatedWriter(stream, self._nursery)
        try:
            reply = await route_request(self._router, session, request, related.emit)
        finally:
            related.close()
        if related.started:
            await related.finished()
            if reply:
                await stream.event(reply)
            await stream.end()
        elif reply:
            await h.respond(send, 200, reply)
        else:
            await stream.end()  # cancelled by the host: no answer at all

    # -- GET ---------------------------------------------------------------

    async def _get(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        if not h.accepts(scope, "text/event-stream"):
            await h.respond(
                send,
                406,
                _error_body(
                    None, INVALID_REQUEST, "Not Acceptable: Accept must list text/event-stream"
                ),
            )
            return
        session = await self._session_for(scope, send)
        if session is None:
            return
        if session.stream_open:
            await h.respond(
                send,
                409,
                _error_body(
                    None, INVALID_REQUEST, "Conflict: this session already has a GET stream"
                ),
            )
            return
        last_id = session.outbox.last_id
        resume = h.header(scope, LAST_EVENT_ID_HEADER)
        if resume is not None and resume.isdigit():
            last_id = min(int(resume), session.outbox.last_id)
        session.stream_open = True
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", h.EVENT_STREAM),
                        (b"cache-control", b"no-cache"),
                        (MCP_SESSION_ID_HEADER, session.session_id.encode("ascii")),
                    ],
                }
            )
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_cancel_on_disconnect, receive, nursery.cancel_scope)
                await self._stream_outbox(session, send, last_id)
                nursery.cancel_scope.cancel()
        finally:
            session.stream_open = False
            session.last_seen = trio.current_time()

    async def _stream_outbox(self, session: ClientSession, send: h.Send, last_id: int) -> None:
        await send({"type": "http.response.body", "body": b": stream open\n\n", "more_body": True})
        while not session.closed:
            batch: list[tuple[int, bytes]] = []
            with trio.move_on_after(KEEPALIVE_INTERVAL):
                batch = await session.outbox.wait_after(last_id)
            if not batch:
                await send(
                    {"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True}
                )
                continue
            for event_id, message in batch:
                last_id = event_id
                if message:  # empty: the wake-up sent when the session closes
                    await send(
                        {
                            "type": "http.response.body",
                            "body": h.sse_event(message, event_id),
                            "more_body": True,
                        }
                    )
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    # -- DELETE ------------------------------------------------------------

    async def _delete(self, scope: h.Scope, send: h.Send) -> None:
        session = await self._session_for(scope, send)
        if session is None:
            return
        self._clients.close(session)
        logger.info("client.session.closed", client_session=session.session_id[:8], reason="delete")
        await h.respond(send, 200)


_REJECTION_REASONS: Final = {
    400: "protocol",
    401: "auth",
    403: "origin",
    404: "session",
    405: "protocol",
    406: "protocol",
    409: "protocol",
    413: "size",
    415: "protocol",
    429: "rate",
    503: "unavailable",
}


def _forgiving(send: h.Send) -> h.Send:
    """Wrap ``send`` so that writing to a host that hung up is not an error.

    ASGI servers may raise once the client is gone; the call it was for has
    already completed (spec: a disconnect is not a cancel), and there is
    nobody left to tell (robustness B8).
    """
    gone = False

    async def forgiving(message: h.Message) -> None:
        nonlocal gone
        if gone:
            return
        try:
            await send(message)
        except OSError:
            gone = True

    return forgiving


def _counting_rejections(send: h.Send, metrics: Metrics) -> h.Send:
    """Wrap ``send`` so every 4xx/5xx the endpoint answers is counted by reason."""

    async def counted(message: h.Message) -> None:
        if message["type"] == "http.response.start":
            reason = _REJECTION_REASONS.get(message["status"])
            if reason is not None:
                metrics.rejected.labels(reason=reason).inc()
        await send(message)

    return counted


class _RelatedWriter:
    """Writes a request's related messages (progress, questions) as they come.

    ``emit`` is called synchronously from wherever the message arises; the
    first call starts one writer task, which switches the response to SSE and
    drains the queue in order. The handler waits for the writer before it
    writes the final answer, so the answer is always the last event.
    """

    def __init__(self, stream: _EventStream, nursery: trio.Nursery) -> None:
        self._stream = stream
        self._nursery = nursery
        self._queue: deque[bytes] = deque()
        self._wake = trio.Event()
        self._done = trio.Event()
        self._closed = False
        self.started = False

    def emit(self, message: bytes) -> bool:
        """Queue one message; False when full or over (the caller falls back)."""
        if self._closed or len(self._queue) >= RELATED_MESSAGE_BUFFER:
            return False
        self._queue.append(message)
        if not self.started:
            self.started = True
            self._nursery.start_soon(self._run)
        self._wake.set()
        return True

    async def _run(self) -> None:
        try:
            while True:
                while self._queue:
                    await self._stream.event(self._queue.popleft())
                if self._closed:
                    return
                self._wake = trio.Event()
                await self._wake.wait()
        finally:
            self._done.set()

    def close(self) -> None:
        """No more messages: the writer drains what is queued and stops."""
        self._closed = True
        self._wake.set()

    async def finished(self) -> None:
        """Wait until the writer has written everything queued."""
        await self._done.wait()


class _EventStream:
    """The SSE response of one POST, started on its first event."""

    def __init__(self, send: h.Send, session_id: str) -> None:
        self._send = send
        self._session_id = session_id
        self.started = False
        self.broken = False

    async def _write(self, message: h.Message) -> None:
        if self.broken:
            return
        try:
            await self._send(message)
        except Exception:  # the host went away; the call still completes (spec: not a cancel)
            self.broken = True

    async def _start(self) -> None:
        self.started = True
        await self._write(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", h.EVENT_STREAM),
                    (b"cache-control", b"no-cache"),
                    (MCP_SESSION_ID_HEADER, self._session_id.encode("ascii")),
                ],
            }
        )

    async def event(self, message: bytes) -> None:
        """Send one JSON-RPC message as an SSE event."""
        if not self.started:
            await self._start()
        await self._write(
            {"type": "http.response.body", "body": h.sse_event(message), "more_body": True}
        )

    async def end(self) -> None:
        """Finish the response."""
        if not self.started:
            await self._start()
        await self._write({"type": "http.response.body", "body": b"", "more_body": False})


async def _cancel_on_disconnect(
    receive: Callable[[], Awaitable[h.Message]], scope: trio.CancelScope
) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return
