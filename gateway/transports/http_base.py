"""What the two HTTP transports share: the client, the inbox, SSE reading.

Streamable HTTP (``streamable_*.py``) and legacy HTTP+SSE (``sse.py``)
both talk to one backend through one ``httpx.AsyncClient``, receive
messages from several concurrent HTTP responses, and must end every waiting
``receive()`` the moment the link is known to be gone. The pieces for that
live here so both transports behave the same way.
"""

from __future__ import annotations

import copy
import re
import ssl
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import httpx
import msgspec
import trio

from gateway import __version__
from gateway.errors import (
    INTERNAL_ERROR,
    ConnectError,
    LocalProtocolError,
    TransportBroken,
    TransportClosed,
    TransportError,
)
from gateway.protocol import jsonrpc
from gateway.protocol.headers import JSON_MEDIA_TYPE as JSON_MEDIA_TYPE
from gateway.protocol.headers import LAST_EVENT_ID_HEADER as LAST_EVENT_ID_HEADER
from gateway.protocol.headers import MCP_PROTOCOL_VERSION_HEADER as MCP_PROTOCOL_VERSION_HEADER
from gateway.protocol.headers import MCP_SESSION_ID_HEADER as MCP_SESSION_ID_HEADER
from gateway.protocol.headers import SSE_MEDIA_TYPE as SSE_MEDIA_TYPE
from gateway.transports.base import map_exceptions
from gateway.transports.framing import DEFAULT_MAX_EVENT_BYTES, SseParser

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from gateway.config import HttpLikeBackend, NetworkBackend
    from gateway.protocol.jsonrpc import RequestId
    from gateway.transports.framing import SseEvent

USER_AGENT: Final = f"mcp-gateway/{__version__}"

# Connections to one backend. Every long tool call holds one for its SSE
# response, so this bounds concurrent calls per backend session; past it a
# send waits for a free connection (the caller's deadline still applies).
MAX_CONNECTIONS: Final = 64
# Idle connections kept for reuse; a burst beyond this reconnects.
MAX_KEEPALIVE_CONNECTIONS: Final = 8
# The largest message accepted from a backend (a JSON body or one SSE
# event), as for stdio lines (robustness D2).
MAX_MESSAGE_BYTES: Final = DEFAULT_MAX_EVENT_BYTES
# Messages waiting for receive(). 0: every producer is a background task,
# and the session's reader never blocks, so a buffer would only hide a
# stalled reader (STYLE rule 4).
INBOX_BUFFER: Final = 0
# A body we do not want (a 202's, a refusal's) is still read, this much at
# most and for this long at most, because a connection whose response was
# not read to the end cannot be reused: every POST would open a new one.
DISCARD_LIMIT: Final = 64 * 1024
DISCARD_TIMEOUT: Final = 1.0
# Cleanup of one HTTP response (closing its connection) after its reader
# was cancelled: shielded, and bounded like every shield (rule 3).
RESPONSE_CLOSE_TIMEOUT: Final = 1.0

# Visible ASCII only (MCP transports, "Session Management"); anything else
# could smuggle bytes into our later requests' headers.
_HEADER_TOKEN: Final = re.compile(r"[\x21-\x7e]{1,1024}")

HTTP_ERRORS: Final[dict[type[BaseException], type[TransportError]]] = {
    httpx.ConnectError: ConnectError,
    httpx.ConnectTimeout: ConnectError,
    httpx.UnsupportedProtocol: ConnectError,
    httpx.ProxyError: ConnectError,
    httpx.InvalidURL: ConnectError,
    httpx.HTTPError: TransportBroken,
    httpx.StreamError: TransportBroken,
    trio.ClosedResourceError: TransportClosed,
    OSError: TransportBroken,
}
"""How httpx and trio failures map to the gateway's transport errors."""


def is_header_token(value: str) -> bool:
    """Whether ``value`` is safe to echo back in a header (visible ASCII, bounded)."""
    return _HEADER_TOKEN.fullmatch(value) is not None


def tls_verify(cfg: HttpLikeBackend) -> ssl.SSLContext | bool:
    """The ``verify`` argument for httpx from a backend's TLS settings.

    httpx deprecates its ``cert=`` and string ``verify=`` arguments, so a CA
    file or a client certificate goes into an ``SSLContext`` of our own.

    Raises:
        ConnectError: a CA file or client certificate could not be loaded.
    """
    if cfg.ca_file is None and cfg.client_cert is None:
        return cfg.verify_tls
    try:
        context = ssl.create_default_context(cafile=cfg.ca_file)
        if not cfg.verify_tls:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cfg.client_cert is not None:
            context.load_cert_chain(cfg.client_cert, cfg.client_key)
    except OSError as exc:  # ssl.SSLError is an OSError
        raise ConnectError(f"cannot load TLS files: {exc}") from exc
    return context


def base_headers(cfg: NetworkBackend) -> httpx.Headers:
    """The headers every request to this backend carries: ours, then the config's.

    The protocol headers (Accept, Content-Type, session and version) are set
    per request on top of these and always win, so a config cannot break the
    transport by accident.
    """
    headers = httpx.Headers({"user-agent": USER_AGENT})
    for name, value in cfg.headers.items():
        headers[name] = value
    return headers


def open_client(cfg: HttpLikeBackend, auth: httpx.Auth | None = None) -> httpx.AsyncClient:
    """One ``httpx.AsyncClient`` for one backend, configured from its config.

    ``trust_env`` is off: the configuration is the only source of what the
    gateway sends, so neither a proxy variable nor a ``~/.netrc`` entry
    (which would add an ``Authorization`` header) can change it silently.
    Read, write and pool waits have no timeout here: they are cancel scopes
    set by the callers (STYLE rule 3); only connecting is bounded, by
    ``timeouts.connect``. ``auth``, the backend's credential
    (``gateway.backends.credentials.provider``), puts its token on every request and
    repeats one refused with a 401 once.

    Raises:
        ConnectError: the TLS settings could not be loaded.
    """
    return httpx.AsyncClient(
        auth=auth,
        verify=tls_verify(cfg),
        timeout=httpx.Timeout(connect=cfg.timeouts.connect, read=None, write=None, pool=None),
        limits=httpx.Limits(
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE_CONNECTIONS
        ),
        trust_env=False,
        follow_redirects=False,
    )


def media_type(response: httpx.Response) -> str:
    """The response's media type, lower-case, without parameters ("" when absent)."""
    value: str = response.headers.get("content-type", "")
    return value.partition(";")[0].strip().lower()


def describe_status(response: httpx.Response) -> str:
    """``HTTP 502 Bad Gateway``: the status and its phrase, even when the server sent none."""
    status = response.status_code
    phrase = response.reason_phrase or httpx.codes.get_reason_phrase(status)
    return f"HTTP {status} {phrase}".rstrip()


async def close_response(response: httpx.Response) -> None:
    """Close a streamed response even while the caller is being cancelled."""
    with trio.move_on_after(RESPONSE_CLOSE_TIMEOUT, shield=True):
        # A failure here means the connection is being dropped anyway.
        with suppress(httpx.HTTPError, OSError):
            await response.aclose()


async def discard_body(response: httpx.Response) -> None:
    """Read and drop a small body (bounded in size and time), then close the response.

    Reading it to the end lets httpx return the connection to the pool.
    """
    try:
        with trio.move_on_after(DISCARD_TIMEOUT), map_exceptions(HTTP_ERRORS):
            seen = 0
            async for chunk in response.aiter_raw():
                seen += len(chunk)
                if seen > DISCARD_LIMIT:
                    break
    except TransportError:
        pass  # the connection is dropped by the close below
    finally:
        await close_response(response)  # noqa: ASYNC102 - shields itself, with a deadline


async def read_body(response: httpx.Response, limit: int) -> bytes:
    """Read a streamed body, refusing one larger than ``limit``.

    Raises:
        TransportBroken: the body is too large or the connection failed.
    """
    body = bytearray()
    with map_exceptions(HTTP_ERRORS):
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > limit:
                raise TransportBroken(f"response body exceeds {limit} bytes")
    return bytes(body)


async def read_sse(
    response: httpx.Response,
    parser: SseParser,
    on_event: Callable[[SseEvent], Awaitable[None]],
) -> None:
    """Feed a streamed response through ``parser``; await ``on_event`` for each event.

    Returns when the server ends the stream.

    Raises:
        TransportBroken: the connection failed or an event was too large.
    """
    with map_exceptions(HTTP_ERRORS):
        async for chunk in response.aiter_bytes():
            for event in parser.feed(chunk):
                await on_event(event)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """What an HTTP transport needs to know about a message it sends.

    Attributes:
        request_ids: the ids of the requests in it (a batch may hold several);
            each must get an answer, from the backend or from the transport.
        initialize_id: the id of an ``initialize`` request in it: its HTTP
            response carries the session id, its result the revision.
        initialized: whether it holds ``notifications/initialized``, after
            which the server's own stream may be opened.
        modern: whether it is a 2026-07-28 request, cancelled by closing
            its response stream.
    """

    request_ids: tuple[RequestId, ...] = ()
    initialize_id: RequestId | None = None
    initialized: bool = False
    modern: bool = False

    @classmethod
    def of(cls, message: bytes) -> Outgoing:
        """Read the envelope(s) of an encoded message; unreadable bytes carry nothing."""
        try:
            decoded = jsonrpc.decode(message)
        except LocalProtocolError:
            return cls()
        ids: list[RequestId] = []
        initialize_id: RequestId | None = None
        initialized = False
        for member in decoded if isinstance(decoded, list) else [decoded]:
            if isinstance(member, jsonrpc.Request):
                ids.append(member.id)
                if member.method == "initialize":
                    initialize_id = member.id
            elif isinstance(member, jsonrpc.Notification):
                initialized = initialized or member.method == "notifications/initialized"
        return cls(tuple(ids), initialize_id, initialized)


def failure_response(request_id: RequestId, problem: str, status: int | None = None) -> bytes:
    """The JSON-RPC error a transport delivers for a request the backend cannot answer.

    The waiting caller then fails at once with a message naming the cause
    instead of running into its timeout (robustness D13).

    Args:
        request_id: the id of the request that failed.
        problem: what went wrong (``HTTP 502 Bad Gateway (text/html)``).
        status: the HTTP status, when there was one; sent as ``data.httpStatus``.
    """
    data = {"httpStatus": status} if status is not None else None
    return jsonrpc.encode_error(
        request_id, INTERNAL_ERROR, f"backend request failed: {problem}", data
    )


_any_decoder: Final = msgspec.json.Decoder()


def error_message(body: bytes) -> str | None:
    """The ``error.message`` of a JSON-RPC error body, if that is what ``body`` is."""
    try:
        value = _any_decoder.decode(body)
    except msgspec.DecodeError:
        return None
    error = value.get("error") if isinstance(value, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message[:200] if isinstance(message, str) else None


_array_decoder: Final = msgspec.json.Decoder(list[msgspec.Raw])
_raw_decoder: Final = msgspec.json.Decoder(msgspec.Raw)


def split_json_body(body: bytes) -> list[bytes]:
    """The messages of an ``application/json`` body: one object, or an array's members.

    Returns:
        The encoded messages, in order; none for an empty body.

    Raises:
        msgspec.DecodeError: the body is not JSON.
    """
    if not body.strip():
        return []
    try:
        return [bytes(member) for member in _array_decoder.decode(body)]
    except msgspec.ValidationError:
        return [bytes(_raw_decoder.decode(body))]


class Inbox:
    """Messages on their way to ``receive()``, and how the channel ended.

    Any number of background tasks ``put`` messages; one reader ``get``s
    them. ``end`` records the first reason the channel stopped and wakes
    every waiting reader at once with it (a cancel scope per waiter, so no
    message can be lost to the wake-up: trio's receive is atomic under
    cancellation).
    """

    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[bytes](INBOX_BUFFER)
        self._waiters: set[trio.CancelScope] = set()
        self.ended: TransportError | None = None

    async def put(self, message: bytes) -> None:
        """Hand one message to the reader; dropped once the channel has ended."""
        if self.ended is None:
            await self._send.send(message)

    async def get(self) -> bytes:
        """The next message.

        Raises:
            TransportError: the reason the channel ended (a fresh instance
                each time, so tracebacks do not pile up on one object).
        """
        self.raise_if_ended()
        with trio.CancelScope() as scope:
            self._waiters.add(scope)
            try:
                return await self._receive.receive()
            finally:
                self._waiters.discard(scope)
        self.raise_if_ended()
        raise TransportClosed("channel closed")  # pragma: no cover - only end() cancels

    def raise_if_ended(self) -> None:
        """Raise the end reason, if the channel has ended.

        The copy has the recorded reason's type and attributes, so a caller
        can decide on them (``except SessionExpired``), never on its text.

        Raises:
            TransportError: a copy of the recorded reason.
        """
        if self.ended is not None:
            raise copy.copy(self.ended)

    def end(self, reason: TransportError) -> None:
        """Record why the channel ended (the first reason wins) and wake all readers."""
        if self.ended is None:
            self.ended = reason
        for scope in self._waiters:
            scope.cancel()


def reconnect_delay(retry_ms: int | None, default: float, floor: float, cap: float) -> float:
    """Seconds to wait before reconnecting a dropped SSE stream.

    The server's ``retry:`` is honoured within ``[floor, cap]`` so that
    ``retry: 0`` cannot make a hot loop and a huge value cannot park the
    stream for hours (robustness D15).
    """
    seconds = default if retry_ms is None else retry_ms / 1000
    return min(max(seconds, floor), cap)
