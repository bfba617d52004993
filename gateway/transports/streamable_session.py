"""One Streamable HTTP session's state and lifecycle, shared by its POSTs and its GET stream.

The session is what the server keys on: the ``Mcp-Session-Id`` it gave
with its InitializeResult, the revision it answered with (sent back as
``MCP-Protocol-Version``), and the DELETE that ends it. Both halves of the
transport work on one :class:`HttpSession`: the POST path
(``streamable_post``) and the server's own GET stream
(``streamable_listen``). It also holds the one inbox they deliver to and
the one decision both need: which answers mean the server forgot us.

Rules:

1. The session ends once, with the first reason (``break_``): every
   waiting ``receive`` wakes with it and every later ``send`` raises it.
2. A forgotten session is a type, :class:`~gateway.errors.SessionExpired`,
   decided in :func:`session_expired` alone, so the backend can react to it
   (re-initialize, repeat an idempotent request once) without reading any
   message text (robustness D14, B11).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from gateway.errors import (
    ConnectError,
    SessionExpired,
    TransportBroken,
    TransportClosed,
    TransportError,
)
from gateway.protocol import jsonrpc
from gateway.transports.base import map_exceptions
from gateway.transports.http_base import (
    HTTP_ERRORS,
    MCP_PROTOCOL_VERSION_HEADER,
    MCP_SESSION_ID_HEADER,
    Inbox,
    base_headers,
    failure_response,
    is_header_token,
    reconnect_delay,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    import httpx
    import structlog

    from gateway.config import HttpBackend
    from gateway.protocol.jsonrpc import RequestId
    from gateway.transports.base import ToolSchemas
    from gateway.transports.http_base import Outgoing

# SSE reconnection (WHATWG "reconnection time"): used until the server sends
# `retry:`; whatever it sends is kept within [floor, cap] (robustness D15).
DEFAULT_RECONNECT_DELAY: Final = 1.0
MIN_RECONNECT_DELAY: Final = 0.1
MAX_RECONNECT_DELAY: Final = 30.0
# The DELETE that ends our session on close: shielded, so it goes out even
# while the backend is being cancelled, and short, since nothing waits on it.
DELETE_TIMEOUT: Final = 0.5
# How much of a server's error message goes into the SessionExpired text.
_DETAIL_IN_REASON: Final = 120


def session_expired(
    status: int, session_id: str | None, detail: str | None = None
) -> SessionExpired | None:
    """The :class:`SessionExpired` an HTTP answer means, or None when it means none.

    Only a session we hold can expire: before initialize, a 404 is a wrong
    URL and the caller hears of it as an ordinary error.

    Args:
        status: the answer's HTTP status.
        session_id: the session id we sent, if any.
        detail: the server's JSON-RPC error message, when it sent one.
    """
    if session_id is None:
        return None
    if status == 404:
        return SessionExpired("session expired (404)")
    if status == 400 and detail and _names_session(detail):
        # Some servers (the reference server among them) answer a session
        # they no longer know with 400 rather than the spec's 404. It is the
        # same loss of session: the supervisor starts a new one instead of
        # every call failing from now on.
        return SessionExpired(f"session expired (400: {detail[:_DETAIL_IN_REASON]})")
    return None


def _names_session(detail: str) -> bool:
    # The one place the transport reads text to decide: a server's own words
    # for a 400, which carries no other sign. They become a type right here.
    return "session" in detail.lower()


class HttpSession:
    """The state one Streamable HTTP session's tasks share, and its lifecycle.

    Created by ``StreamableHttpChannel``; not meant to be built elsewhere.

    Args:
        cfg: the backend's config.
        client: the HTTP client, owned by ``open_streamable_http``.
        nursery: where response readers and the GET stream run.
        log: a logger bound to the backend.
    """

    def __init__(
        self,
        cfg: HttpBackend,
        client: httpx.AsyncClient,
        nursery: trio.Nursery,
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        self.url = cfg.url
        self.backend = cfg.name
        """The backend's name, for errors a caller reads."""
        self.client = client
        self.nursery = nursery
        self.log = log
        self.inbox = Inbox()
        self.closed = False
        """Whether we closed the channel (``aclose``)."""
        self.session_id: str | None = None
        """The ``Mcp-Session-Id`` the server gave with its InitializeResult."""
        self.protocol_version: str | None = None
        """The revision the server answered initialize with, once seen."""
        self._headers = base_headers(cfg)
        self.modern_streams: dict[RequestId, trio.CancelScope] = {}
        """The readers of 2026-07-28 requests' responses, by request id: closing
        one is how such a request is cancelled."""
        self.speaks_modern = False
        """Whether the session's requests are 2026-07-28 ones (no session, no
        POSTed ``notifications/cancelled``); an ``initialize`` makes it legacy."""
        self.tool_schema: ToolSchemas | None = None
        """The backend's own tool schemas, for ``Mcp-Param-*`` headers."""

    @contextmanager
    def stream_scope(self, outgoing: Outgoing) -> Iterator[trio.CancelScope]:
        """Run a POST or a response reader so that cancelling its modern request closes it."""
        with trio.CancelScope() as scope:
            ids = outgoing.request_ids if outgoing.modern else ()
            for request_id in ids:
                self.modern_streams[request_id] = scope
            try:
                yield scope
            finally:
                for request_id in ids:
                    if self.modern_streams.get(request_id) is scope:
                        del self.modern_streams[request_id]

    # -- every request ------------------------------------------------------

    def check_open(self) -> None:
        """Raise why the session ended, or that we closed it.

        Raises:
            TransportBroken: the session broke (``SessionExpired`` when forgotten).
            TransportClosed: the channel was closed.
        """
        self.inbox.raise_if_ended()
        if self.closed:
            raise TransportClosed("channel closed")

    def request_headers(self, accept: str | None) -> httpx.Headers:
        """The headers of our next request: the config's, then the session's.

        The session id and protocol version go on every request once known
        (2025-06-18 and later require the version header).
        """
        headers = self._headers.copy()
        if accept is not None:
            headers["accept"] = accept
        if self.session_id is not None:
            headers[MCP_SESSION_ID_HEADER] = self.session_id
        if self.protocol_version is not None:
            headers[MCP_PROTOCOL_VERSION_HEADER] = self.protocol_version
        return headers

    async def send(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` streamed; return once its response headers are in.

        Raises:
            ConnectError: the backend cannot be reached; the session breaks too,
                so the supervisor notices a dead server even with nothing in flight.
            TransportBroken: the request failed otherwise.
        """
        try:
            with map_exceptions(HTTP_ERRORS):
                return await self.client.send(request, stream=True)
        except ConnectError as exc:
            self.unreachable(exc)
            raise

    def reconnect_delay(self, retry_ms: int | None) -> float:
        """Seconds before reopening an SSE stream whose last ``retry:`` was ``retry_ms``."""
        return reconnect_delay(
            retry_ms, DEFAULT_RECONNECT_DELAY, MIN_RECONNECT_DELAY, MAX_RECONNECT_DELAY
        )

    # -- how it ends ----------------------------------------------------------

    def break_(self, reason: TransportError) -> None:
        """End the session with ``reason`` (the first reason wins), logged once."""
        if self.inbox.ended is None:
            self.log.warning("backend.http.broken", reason=str(reason))
        self.inbox.end(reason)

    def unreachable(self, exc: ConnectError) -> None:
        """Break the session because nothing answers at its address any more."""
        self.break_(TransportBroken(f"cannot reach backend: {exc}"))

    def expire_on(self, status: int, detail: str | None = None) -> bool:
        """Break the session if this answer means the server forgot it; True if so."""
        expired = session_expired(status, self.session_id, detail)
        if expired is None:
            return False
        self.break_(expired)
        return True

    async def end(self) -> None:
        """Close the session: wake readers, then DELETE it at the server (once).

        The DELETE runs shielded under a short deadline and its outcome is
        ignored: ``405`` means the server does not let clients end sessions,
        and any failure means there is nothing left to end. A session that
        already broke sends none: it expired or its server is unreachable,
        and a DELETE would only delay the restart.
        """
        if self.closed:
            return
        self.closed = True
        broken = self.inbox.ended is not None
        self.inbox.end(TransportClosed("channel closed"))
        if self.session_id is None or broken:
            return
        headers = self.request_headers(None)
        with trio.move_on_after(DELETE_TIMEOUT, shield=True):
            try:
                with map_exceptions(HTTP_ERRORS):
                    response = await self.client.delete(self.url, headers=headers)
            except TransportError as exc:
                self.log.debug("backend.http.delete.failed", error=str(exc))
            else:
                self.log.debug("backend.http.delete.complete", status=response.status_code)

    # -- what the server tells us about the session ------------------------------

    def capture_session_id(self, response: httpx.Response) -> None:
        """Keep the session id of the initialize response, if it gave one.

        Raises:
            TransportBroken: the id is not a visible-ASCII token; echoing it
                back could smuggle bytes into our later requests' headers.
        """
        session_id = response.headers.get(MCP_SESSION_ID_HEADER)
        if session_id is None:
            return
        if not is_header_token(session_id):
            self.break_(TransportBroken("backend sent an invalid Mcp-Session-Id"))
            self.inbox.raise_if_ended()
        self.session_id = session_id

    def learn_version(self, result: msgspec.Raw) -> None:
        """Keep the revision an InitializeResult names, for the version header."""
        try:
            body: Any = jsonrpc.from_raw(result)
        except msgspec.DecodeError:
            return
        version = body.get("protocolVersion") if isinstance(body, dict) else None
        if isinstance(version, str) and is_header_token(version):
            self.protocol_version = version

    # -- delivering ------------------------------------------------------------

    async def deliver(self, message: bytes) -> None:
        """Hand one message to ``receive``; dropped once the session has ended."""
        await self.inbox.put(message)

    async def fail(
        self, request_ids: set[RequestId], problem: str, *, status: int | None = None
    ) -> None:
        """Answer each request with a JSON-RPC error naming ``problem`` (robustness D13)."""
        for request_id in sorted(request_ids, key=str):
            await self.inbox.put(failure_response(request_id, problem, status))
