"""A backend reached over MCP Streamable HTTP (2025-03-26 and later).

Every message we send is one POST; a GET opens a stream for what the server
says on its own (list_changed, log messages), reconnecting with
``Last-Event-ID`` when it drops.

Theory of operation: the channel is a thin MessageChannel over one
:class:`~gateway.transports.streamable_session.HttpSession`, the state its
tasks share (session id, protocol version, the inbox, the DELETE at the
end). Three modules do the work, one job each:

- ``streamable_post``: a POST and whatever comes back for it (status
  handling, a JSON body or an SSE stream read by its own task, resuming a
  cut stream, JSON-RPC errors for requests that cannot be answered);
- ``streamable_listen``: the server's own GET stream (``Last-Event-ID``,
  ``retry:``, refusals);
- ``streamable_session``: the session's lifecycle, and which answers mean
  the server forgot it.

``send`` returns as soon as a POST's response headers have arrived, and
every task that reads a response puts what it reads into the session's one
inbox for ``receive``.

Rules:

1. A request is never left hanging by the transport: when its POST fails,
   the transport delivers a JSON-RPC error response (-32603, naming the
   cause) for that request id through ``receive`` (robustness D13).
2. ``404`` while a session id is set (or a ``400`` whose error names the
   session) means the server forgot the session: the channel breaks with
   :class:`~gateway.errors.SessionExpired` (``send`` raises, ``receive``
   raises) and the supervisor starts a new session (robustness D14, B11).
   The transport never retries a message itself.
3. A backend that cannot be reached at all breaks the channel too, so the
   supervisor notices a dead server even when no call is in flight.
4. Reconnecting an SSE stream waits for the server's ``retry:``, floored
   and capped (robustness D15).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import structlog
import trio

from gateway.transports.http_base import open_client
from gateway.transports.streamable_listen import REFUSED_STREAM_DELAY, listen
from gateway.transports.streamable_post import (
    ERROR_BODY_LIMIT,
    MAX_RESUME_ATTEMPTS,
    POST_ACCEPT,
    post,
)
from gateway.transports.streamable_session import (
    DEFAULT_RECONNECT_DELAY,
    DELETE_TIMEOUT,
    MAX_RECONNECT_DELAY,
    MIN_RECONNECT_DELAY,
    HttpSession,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import httpx

    from gateway.config import HttpBackend
    from gateway.transports.base import ToolSchemas

__all__ = [
    "DEFAULT_RECONNECT_DELAY",
    "DELETE_TIMEOUT",
    "ERROR_BODY_LIMIT",
    "MAX_RECONNECT_DELAY",
    "MAX_RESUME_ATTEMPTS",
    "MIN_RECONNECT_DELAY",
    "POST_ACCEPT",
    "REFUSED_STREAM_DELAY",
    "StreamableHttpChannel",
    "open_streamable_http",
]

logger = structlog.get_logger("gateway.transports.streamable_http")


class StreamableHttpChannel:
    """The MessageChannel of one Streamable HTTP backend session.

    Created by :func:`open_streamable_http`; not meant to be built elsewhere.

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
        self._session = HttpSession(cfg, client, nursery, log)
        self._listening = False

    @property
    def session_id(self) -> str | None:
        """The ``Mcp-Session-Id`` the server gave with its InitializeResult."""
        return self._session.session_id

    @property
    def protocol_version(self) -> str | None:
        """The revision the server answered initialize with, once seen."""
        return self._session.protocol_version

    def use_tool_schemas(self, lookup: ToolSchemas) -> None:
        """Mint ``Mcp-Param-*`` headers of modern tools/call from ``lookup``."""
        self._session.tool_schema = lookup

    async def send(self, message: bytes) -> None:
        """POST one message; return once the response headers are in.

        The server's own stream is opened once ``notifications/initialized``
        has gone out, as the spec allows no earlier.

        Raises:
            TransportClosed: the channel was closed.
            SessionExpired: the server forgot the session (rule 2).
            TransportBroken: the POST failed, or the channel broke before.
            ConnectError: the backend could not be reached (the channel
                breaks too, see rule 3).
        """
        outgoing = await post(self._session, message)
        if outgoing.initialized and not self._listening:
            self._listening = True
            self._session.nursery.start_soon(listen, self._session)

    async def receive(self) -> bytes:
        """The next message from any of the backend's responses or its GET stream.

        Raises:
            TransportBroken: the session expired (``SessionExpired``) or the
                backend is unreachable.
            TransportClosed: the channel was closed.
        """
        return await self._session.inbox.get()

    async def aclose(self) -> None:
        """End the session: wake readers, then DELETE it at the server (once)."""
        await self._session.end()


@asynccontextmanager
async def open_streamable_http(
    cfg: HttpBackend, *, backend: str = "", auth: httpx.Auth | None = None
) -> AsyncIterator[StreamableHttpChannel]:
    """Open a Streamable HTTP channel to ``cfg.url``; end the session on exit.

    Nothing is sent until the first ``send`` (the initialize request): the
    session, its id and its protocol version come from that exchange.

    Args:
        cfg: the backend's config (URL, headers, TLS, connect timeout).
        backend: the backend's name, for logs.
        auth: the backend's credential, when it has one.

    Raises:
        ConnectError: the TLS settings could not be loaded.
    """
    log = logger.bind(backend=backend or cfg.name)
    async with open_client(cfg, auth) as client, trio.open_nursery() as nursery:
        channel = StreamableHttpChannel(cfg, client, nursery, log)
        try:
            yield channel
        finally:
            await channel.aclose()
            nursery.cancel_scope.cancel()
