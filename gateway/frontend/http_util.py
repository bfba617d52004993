"""Small raw-ASGI helpers: headers, bodies, plain responses.

The frontend speaks raw ASGI (no framework): the MCP endpoint needs control
over when response headers go out (JSON first, SSE when needed), and every
layer between hypercorn and the router costs time on every call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from functools import lru_cache
from typing import Any, Final

import msgspec
import trio

from gateway.errors import GatewayError
from gateway.protocol.headers import (
    JSON_MEDIA_TYPE_RAW,
    MCP_PROTOCOL_VERSION_HEADER_RAW,
    MCP_SESSION_ID_HEADER_RAW,
    SSE_MEDIA_TYPE_RAW,
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

JSON: Final = JSON_MEDIA_TYPE_RAW
EVENT_STREAM: Final = SSE_MEDIA_TYPE_RAW
# Idle event streams (a session's GET stream, a 2026-07-28 listen stream)
# get a comment this often so proxies keep them open (robustness B14:
# keep-alive at most every 15 s).
KEEPALIVE_INTERVAL: Final = 15.0

_encoder: Final = msgspec.json.Encoder()


class Activity:
    """Counts requests being handled, so a drain can wait for the last response.

    A handler counts from the moment it starts until its response is fully
    written; counting only the backend call would let shutdown cut a
    response that was computed but not yet sent.
    """

    def __init__(self) -> None:
        self.active = 0
        # Set when ``active`` drops to 0; made only while ``wait_idle`` waits,
        # so a request does not create and set an Event each time (one
        # caller's every request took ``active`` from 0 to 1 and back).
        self._idle: trio.Event | None = None

    def __enter__(self) -> None:
        self.active += 1

    def __exit__(self, *exc_info: object) -> None:
        self.active -= 1
        if self.active == 0 and self._idle is not None:
            self._idle.set()
            self._idle = None

    async def wait_idle(self) -> None:
        """Return once nothing is being handled."""
        if self.active == 0:
            await trio.lowlevel.checkpoint()
            return
        if self._idle is None:
            self._idle = trio.Event()
        await self._idle.wait()


class BodyTooLarge(GatewayError):
    """The request body passed the configured limit."""


def header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of a header (names compared lower-case), or None."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


class McpHeaders(msgspec.Struct, frozen=True, gc=False):
    """The headers an MCP endpoint reads, each its first value or None (``mcp_headers``).

    Positional, not ``kw_only``: ``mcp_headers`` fills it in field order.
    """

    host: bytes | None
    origin: bytes | None
    authorization: bytes | None
    content_type: bytes | None
    accept: bytes | None
    content_length: bytes | None
    session_id: bytes | None
    protocol_version: bytes | None


# The header names of McpHeaders' fields, in its field order.
_MCP_HEADER_NAMES: Final = (
    b"host",
    b"origin",
    b"authorization",
    b"content-type",
    b"accept",
    b"content-length",
    MCP_SESSION_ID_HEADER_RAW,
    MCP_PROTOCOL_VERSION_HEADER_RAW,
)


def mcp_headers(scope: Scope) -> McpHeaders:
    """The headers the front door and the MCP endpoint read, found in one pass.

    A request to ``/mcp`` read them one ``header`` scan at a time, nine scans
    a call (Origin and Host, the media types, the length, the session and
    version headers twice). The table keeps each name's first value, as
    ``header`` does (``reversed``: the first occurrence is written last),
    and is read in C (``map``), not by a Python call per name.
    """
    table = dict(reversed(scope["headers"]))
    return McpHeaders(*map(table.get, _MCP_HEADER_NAMES))


def media_types(value: bytes | None) -> frozenset[str]:
    """The media types in an Accept or Content-Type value, without parameters.

    Hosts send the same few values on every request: the parse is kept for
    the last ``MEDIA_TYPE_CACHE`` values seen.
    """
    if not value:
        return frozenset()
    return _media_types(value)


# Distinct Accept / Content-Type values whose parse is kept.
MEDIA_TYPE_CACHE: Final = 128


@lru_cache(maxsize=MEDIA_TYPE_CACHE)
def _media_types(value: bytes) -> frozenset[str]:
    text = value.decode("latin-1")
    return frozenset(
        part.split(";", 1)[0].strip().lower() for part in text.split(",") if part.strip()
    )


def accepts(scope: Scope, wanted: str) -> bool:
    """Whether the Accept header admits ``wanted`` (wildcards count)."""
    return accepts_type(media_types(header(scope, b"accept")), wanted)


@lru_cache(maxsize=MEDIA_TYPE_CACHE)
def accepts_type(types: frozenset[str], wanted: str) -> bool:
    """Whether parsed Accept media types admit ``wanted`` (wildcards count)."""
    major = wanted.split("/", 1)[0]
    return bool(types & {wanted, f"{major}/*", "*/*"})


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole request body, refusing to buffer more than ``limit`` bytes.

    Raises:
        BodyTooLarge: the body (chunked or not) grew past the limit.
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def respond(
    send: Send,
    status: int,
    body: bytes = b"",
    *,
    content_type: bytes | None = JSON,
    headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    """Send a complete response with a body."""
    out = [(b"content-length", str(len(body)).encode())]
    if content_type is not None and body:
        out.append((b"content-type", content_type))
    out.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})


async def respond_json(
    send: Send, status: int, value: Any, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    """Send a JSON document."""
    await respond(send, status, _encoder.encode(value), headers=headers)


def sse_event(data: bytes, event_id: int | None = None) -> bytes:
    """One SSE ``message`` event carrying a JSON-RPC message."""
    head = b"event: message\n"
    if event_id is not None:
        head += b"id: " + str(event_id).encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


async def cancel_on_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    """Cancel ``scope`` once the host hangs up (a streamed response has no other end)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return
