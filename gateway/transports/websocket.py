"""A backend reached over a WebSocket, one JSON-RPC message per frame.

The client asks for the ``mcp`` subprotocol and sends each message as one
text frame. A binary frame from the server is taken as the UTF-8 bytes of a
message too, since some servers send them. trio-websocket owns the
connection's reader task in its own nursery, which ``open_websocket`` enters
and leaves in one task.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import structlog
import trio
import trio_websocket

from gateway import __version__
from gateway.errors import ConnectError, TransportBroken, TransportClosed
from gateway.transports.framing import DEFAULT_MAX_EVENT_BYTES

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from gateway.config import WebSocketBackend

logger = structlog.get_logger("gateway.transports.websocket")

SUBPROTOCOL: Final = "mcp"
USER_AGENT: Final = f"mcp-gateway/{__version__}"
# The largest message accepted; trio-websocket closes the connection with
# 1009 beyond it (its default, 1 MiB, is too small for big tool results).
MAX_MESSAGE_BYTES: Final = DEFAULT_MAX_EVENT_BYTES
# The closing handshake when we close: bounded, the peer may be gone.
CLOSE_TIMEOUT: Final = 2.0


class WebSocketChannel:
    """The MessageChannel of one WebSocket connection.

    Created by :func:`open_websocket`; not meant to be built elsewhere.

    Args:
        ws: the open connection.
    """

    def __init__(self, ws: trio_websocket.WebSocketConnection) -> None:
        self._ws = ws
        self._closed = False

    @property
    def subprotocol(self) -> str | None:
        """The subprotocol the server agreed to (``mcp``), or None."""
        value = self._ws.subprotocol
        return value if isinstance(value, str) else None

    def _error(self, exc: trio_websocket.ConnectionClosed) -> TransportBroken | TransportClosed:
        if self._closed:
            return TransportClosed("channel closed")
        reason = exc.reason
        code = getattr(reason, "code", None)
        text = getattr(reason, "reason", None)
        return TransportBroken(
            f"WebSocket closed by the server (code {code}{f': {text}' if text else ''})"
        )

    async def send(self, message: bytes) -> None:
        """Send one message as one text frame.

        Raises:
            TransportClosed: the channel was closed by us.
            TransportBroken: the connection is gone.
        """
        if self._closed:
            raise TransportClosed("channel closed")
        try:
            await self._ws.send_message(message.decode("utf-8"))
        except trio_websocket.ConnectionClosed as exc:
            raise self._error(exc) from exc

    async def receive(self) -> bytes:
        """The next message: a text frame's UTF-8 bytes, or a binary frame as is.

        Raises:
            TransportClosed: the channel was closed by us.
            TransportBroken: the server closed the connection or it failed.
        """
        if self._closed:
            raise TransportClosed("channel closed")
        try:
            message = await self._ws.get_message()
        except trio_websocket.ConnectionClosed as exc:
            raise self._error(exc) from exc
        return message.encode("utf-8") if isinstance(message, str) else bytes(message)

    def mark_closed(self) -> None:
        """Refuse further use; the owner closes the connection itself."""
        self._closed = True

    async def aclose(self) -> None:
        """Start the closing handshake (bounded); idempotent."""
        if self._closed:
            return
        self._closed = True
        with trio.move_on_after(CLOSE_TIMEOUT):
            await self._ws.aclose()


def _handshake_headers(cfg: WebSocketBackend, bearer: str | None) -> list[tuple[bytes, bytes]]:
    headers = {"user-agent": ("User-Agent", USER_AGENT)}
    for name, value in cfg.headers.items():
        headers[name.lower()] = (name, value)
    if bearer is not None:
        headers["authorization"] = ("Authorization", f"Bearer {bearer}")
    return [(name.encode(), value.encode()) for name, value in headers.values()]


@asynccontextmanager
async def open_websocket(
    cfg: WebSocketBackend, *, backend: str = "", bearer: str | None = None
) -> AsyncIterator[WebSocketChannel]:
    """Connect to ``cfg.url`` and yield its channel; close the connection on exit.

    Args:
        cfg: the backend's config (URL, handshake headers, connect timeout).
        backend: the backend's name, for logs.
        bearer: the backend credential's token, for the handshake's
            ``Authorization`` (a WebSocket has no later requests to carry one).

    Raises:
        ConnectError: the connection or the handshake failed, or timed out
            after ``timeouts.connect``.
    """
    log = logger.bind(backend=backend or cfg.name)
    channel: WebSocketChannel | None = None
    body_error: BaseException | None = None
    try:
        async with trio_websocket.open_websocket_url(
            cfg.url,
            subprotocols=[SUBPROTOCOL],
            extra_headers=_handshake_headers(cfg, bearer),
            max_message_size=MAX_MESSAGE_BYTES,
            connect_timeout=cfg.timeouts.connect,
            disconnect_timeout=CLOSE_TIMEOUT,
        ) as ws:
            channel = WebSocketChannel(ws)
            log.debug("backend.websocket.connected", subprotocol=channel.subprotocol)
            try:
                yield channel
            except BaseException as exc:
                body_error = exc
                raise
            finally:
                channel.mark_closed()
    except trio_websocket.DisconnectionTimeout:
        # The closing handshake outlived CLOSE_TIMEOUT; the socket is closed
        # regardless. trio-websocket raises this even over an error of the
        # body, which must not be swallowed with it.
        if body_error is not None:
            raise body_error from None
        log.debug("backend.websocket.close_timeout")
    except trio_websocket.ConnectionRejected as exc:
        if channel is not None:
            raise
        raise ConnectError(f"WebSocket handshake rejected with HTTP {exc.status_code}") from exc
    except trio_websocket.ConnectionTimeout as exc:
        if channel is not None:
            raise
        raise ConnectError(f"WebSocket connect timed out after {cfg.timeouts.connect:g} s") from exc
    except (trio_websocket.HandshakeError, OSError, ValueError) as exc:
        if channel is not None:
            raise
        cause = exc.__cause__ or exc
        raise ConnectError(
            f"WebSocket connect failed: {str(cause) or type(cause).__name__}"
        ) from exc
