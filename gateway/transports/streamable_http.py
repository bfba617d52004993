"""A backend reached over MCP Streamable HTTP (2025-03-26 and later).

Every message we send is one POST. What comes back depends on the server
and on the message: ``202`` and nothing for a notification or a response;
for a request, either one ``application/json`` body or a
``text/event-stream`` that carries the request's notifications and
server-to-client requests, then its response. A GET opens a stream for what
the server says on its own (list_changed, log messages), reconnecting with
``Last-Event-ID`` when it drops.

Theory of operation: ``send`` returns as soon as a POST's response headers
have arrived. The body (JSON or SSE) is read by its own task in the
channel's nursery, so a tool call that streams for minutes never holds up
another send, and every task that reads a response puts what it reads into
one :class:`~gateway.transports.http_base.Inbox` for ``receive``.

Rules:

1. A request is never left hanging by the transport: when its POST fails
   with an HTTP status, a wrong content type or a stream that ends before
   the answer, the transport delivers a JSON-RPC error response (-32603,
   naming the cause) for that request id through ``receive`` (robustness
   D13).
2. ``404`` while a session id is set means the server forgot the session:
   the channel breaks (``send`` raises, ``receive`` raises) with "session
   expired (404)" and the supervisor starts a new session (robustness D14,
   B11). The transport never retries a message itself.
3. A backend that cannot be reached at all breaks the channel too, so the
   supervisor notices a dead server even when no call is in flight.
4. Reconnecting an SSE stream waits for the server's ``retry:``, floored
   and capped (robustness D15).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import httpx
import msgspec
import structlog
import trio

from gateway.errors import (
    ConnectError,
    LocalProtocolError,
    SessionExpired,
    TransportBroken,
    TransportClosed,
    TransportError,
)
from gateway.protocol import jsonrpc
from gateway.transports.base import map_exceptions
from gateway.transports.framing import SseParser
from gateway.transports.http_base import (
    HTTP_ERRORS,
    JSON_MEDIA_TYPE,
    LAST_EVENT_ID_HEADER,
    MAX_MESSAGE_BYTES,
    MCP_PROTOCOL_VERSION_HEADER,
    MCP_SESSION_ID_HEADER,
    SSE_MEDIA_TYPE,
    Inbox,
    Outgoing,
    base_headers,
    close_response,
    describe_status,
    discard_body,
    error_message,
    failure_response,
    is_header_token,
    media_type,
    open_client,
    read_body,
    read_sse,
    reconnect_delay,
    split_json_body,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from gateway.config import HttpBackend
    from gateway.protocol.jsonrpc import RequestId
    from gateway.transports.framing import SseEvent

logger = structlog.get_logger("gateway.transports.streamable_http")

POST_ACCEPT: Final = f"{JSON_MEDIA_TYPE}, {SSE_MEDIA_TYPE}"
# SSE reconnection (WHATWG "reconnection time"): used until the server sends
# `retry:`; whatever it sends is kept within [floor, cap] (robustness D15).
DEFAULT_RECONNECT_DELAY: Final = 1.0
MIN_RECONNECT_DELAY: Final = 0.1
MAX_RECONNECT_DELAY: Final = 30.0
# A GET stream refused with a status worth retrying (5xx, 409, 429) waits
# this long, doubling per consecutive refusal up to MAX_RECONNECT_DELAY.
REFUSED_STREAM_DELAY: Final = 1.0
# Resuming a POST's stream (GET with Last-Event-ID) that yields nothing new
# this many times in a row is given up; the request then fails (rule 1).
MAX_RESUME_ATTEMPTS: Final = 3
# The DELETE that ends our session on close: shielded, so it goes out even
# while the backend is being cancelled, and short, since nothing waits on it.
DELETE_TIMEOUT: Final = 0.5
# How much of an error response is read to explain it (a JSON-RPC error
# body's message); the rest, an HTML page say, is not worth reading.
ERROR_BODY_LIMIT: Final = 16 * 1024
# Statuses of a refused GET stream that may be transient; any other 4xx
# means the server will not offer the stream.
_RETRYABLE_STREAM_STATUS: Final = frozenset({409, 429, 502, 503, 504})


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
        self._url = cfg.url
        self._headers = base_headers(cfg)
        self._client = client
        self._nursery = nursery
        self._log = log
        self._inbox = Inbox()
        self._closed = False
        self._listening = False
        self.session_id: str | None = None
        """The ``Mcp-Session-Id`` the server gave with its InitializeResult."""
        self.protocol_version: str | None = None
        """The revision the server answered initialize with, once seen."""

    # -- MessageChannel ---------------------------------------------------

    async def send(self, message: bytes) -> None:
        """POST one message; return once the response headers are in.

        Raises:
            TransportClosed: the channel was closed.
            TransportBroken: the session expired (404) or the POST failed.
            ConnectError: the backend could not be reached (the channel
                breaks too, see rule 3).
        """
        self._check_open()
        outgoing = Outgoing.of(message)
        headers = self._request_headers(POST_ACCEPT)
        headers["content-type"] = JSON_MEDIA_TYPE
        request = self._client.build_request("POST", self._url, content=message, headers=headers)
        response = await self._send_request(request)
        handed_off = False
        try:
            if self._closed:
                raise TransportClosed("channel closed")
            handed_off = self._dispatch(response, outgoing)
        finally:
            if not handed_off:
                await discard_body(response)
        if outgoing.initialized and not self._listening:
            self._listening = True
            self._nursery.start_soon(self._listen)

    async def receive(self) -> bytes:
        """The next message from any of the backend's responses or its GET stream.

        Raises:
            TransportBroken: the session expired or the backend is unreachable.
            TransportClosed: the channel was closed.
        """
        return await self._inbox.get()

    async def aclose(self) -> None:
        """End the session: wake readers, then DELETE it at the server (once).

        The DELETE runs shielded under a short deadline and its outcome is
        ignored: ``405`` means the server does not let clients end sessions,
        and any failure means there is nothing left to end. A channel that
        already broke sends none: its session expired or its server is
        unreachable, and a DELETE would only delay the restart.
        """
        if self._closed:
            return
        self._closed = True
        broken = self._inbox.ended is not None
        self._inbox.end(TransportClosed("channel closed"))
        if self.session_id is None or broken:
            return
        headers = self._request_headers(None)
        with trio.move_on_after(DELETE_TIMEOUT, shield=True):
            try:
                response = await self._client.delete(self._url, headers=headers)
            except (httpx.HTTPError, OSError) as exc:
                self._log.debug("backend.http.delete.failed", error=str(exc) or type(exc).__name__)
            else:
                self._log.debug("backend.http.delete.complete", status=response.status_code)

    # -- sending ----------------------------------------------------------

    def _check_open(self) -> None:
        self._inbox.raise_if_ended()
        if self._closed:
            raise TransportClosed("channel closed")

    def _request_headers(self, accept: str | None) -> httpx.Headers:
        headers = self._headers.copy()
        if accept is not None:
            headers["accept"] = accept
        if self.session_id is not None:
            headers[MCP_SESSION_ID_HEADER] = self.session_id
        if self.protocol_version is not None:
            headers[MCP_PROTOCOL_VERSION_HEADER] = self.protocol_version
        return headers

    async def _send_request(self, request: httpx.Request) -> httpx.Response:
        try:
            with map_exceptions(HTTP_ERRORS):
                return await self._client.send(request, stream=True)
        except ConnectError as exc:
            # Rule 3: nothing answers at that address any more.
            self._break(TransportBroken(f"cannot reach backend: {exc}"))
            raise

    def _break(self, reason: TransportError) -> None:
        if self._inbox.ended is None:
            self._log.warning("backend.http.broken", reason=str(reason))
        self._inbox.end(reason)

    def _dispatch(self, response: httpx.Response, outgoing: Outgoing) -> bool:
        """Decide what a POST's response means; True when a task now owns it."""
        status = response.status_code
        if status == 404 and self.session_id is not None:
            self._break(SessionExpired("session expired (404)"))
            self._inbox.raise_if_ended()
        kind = media_type(response)
        if 200 <= status < 300:
            if outgoing.initialize_id is not None:
                self._capture_session_id(response)
            if status in (202, 204):
                return False
            if kind == JSON_MEDIA_TYPE:
                self._nursery.start_soon(self._read_json, response, outgoing)
                return True
            if kind == SSE_MEDIA_TYPE:
                self._nursery.start_soon(self._read_post_stream, response, outgoing)
                return True
            if not outgoing.request_ids and not kind:
                return False  # a bodiless 200 to a notification: fine
        problem = describe_status(response)
        if 200 <= status < 300 or kind not in (JSON_MEDIA_TYPE, ""):
            problem += f" ({kind or 'no content type'})"
        if not outgoing.request_ids:
            self._log.warning("backend.http.post.rejected", problem=problem)
            return False
        self._nursery.start_soon(self._fail_from_response, response, outgoing, problem)
        return True

    def _capture_session_id(self, response: httpx.Response) -> None:
        session_id = response.headers.get(MCP_SESSION_ID_HEADER)
        if session_id is None:
            return
        if not is_header_token(session_id):
            self._break(TransportBroken("backend sent an invalid Mcp-Session-Id"))
            self._inbox.raise_if_ended()
        self.session_id = session_id

    # -- reading responses --------------------------------------------------

    async def _deliver(self, message: bytes, outgoing: Outgoing, awaiting: set[RequestId]) -> None:
        """Note what the message answers, then hand it to ``receive``."""
        if awaiting:
            try:
                decoded = jsonrpc.decode(message)
            except LocalProtocolError:
                decoded = []
            for member in decoded if isinstance(decoded, list) else [decoded]:
                if isinstance(member, jsonrpc.Response | jsonrpc.ErrorResponse):
                    if member.id is not None:
                        awaiting.discard(member.id)
                    if isinstance(member, jsonrpc.Response) and member.id == outgoing.initialize_id:
                        self._learn_version(member.result)
        await self._inbox.put(message)

    def _learn_version(self, result: msgspec.Raw) -> None:
        # The channel peeks at the InitializeResult passing through so that
        # every later request carries MCP-Protocol-Version (2025-06-18).
        try:
            body: Any = jsonrpc.from_raw(result)
        except msgspec.DecodeError:
            return
        version = body.get("protocolVersion") if isinstance(body, dict) else None
        if isinstance(version, str) and is_header_token(version):
            self.protocol_version = version

    async def _read_json(self, response: httpx.Response, outgoing: Outgoing) -> None:
        awaiting = set(outgoing.request_ids)
        problem = "backend ended the response without answering"
        try:
            body = await read_body(response, MAX_MESSAGE_BYTES)
            for message in split_json_body(body):
                await self._deliver(message, outgoing, awaiting)
        except TransportError as exc:
            problem = f"backend response failed: {exc}"
        except msgspec.DecodeError:
            problem = "backend sent a body that is not JSON"
        finally:
            await close_response(response)
        await self._fail(awaiting, problem)

    async def _read_post_stream(self, response: httpx.Response, outgoing: Outgoing) -> None:
        awaiting = set(outgoing.request_ids)
        parser = SseParser(MAX_MESSAGE_BYTES)
        problem = "backend closed the stream before answering"
        try:
            await self._pump(response, parser, outgoing, awaiting)
        except TransportError as exc:
            problem = f"backend stream failed: {exc}"
        finally:
            await close_response(response)
        # A stream with event ids can be resumed where it stopped (spec,
        # "Resumability and Redelivery"; 2025-11-25 servers close POST
        # streams on purpose and expect the client to poll this way).
        idle = 0
        while awaiting and parser.last_event_id and idle < MAX_RESUME_ATTEMPTS:
            if self._inbox.ended is not None:
                return
            await trio.sleep(self._delay(parser.retry))
            before = (parser.last_event_id, len(awaiting))
            if not await self._resume(parser, outgoing, awaiting):
                break
            idle = 0 if (parser.last_event_id, len(awaiting)) != before else idle + 1
        await self._fail(awaiting, problem)

    async def _pump(
        self,
        response: httpx.Response,
        parser: SseParser,
        outgoing: Outgoing,
        awaiting: set[RequestId],
    ) -> None:
        """Deliver a POST stream's messages until it ends or has answered everything.

        Reading stops once every request of the POST is answered: the server
        has nothing more to say there (spec: it SHOULD close the stream after
        the response), and a resumed stream may stay open regardless, which
        would hold a connection for the channel's life.
        """
        with trio.CancelScope() as scope:

            async def on_event(event: SseEvent) -> None:
                if event.event == "message" and event.data:
                    await self._deliver(event.data.encode(), outgoing, awaiting)
                    if outgoing.request_ids and not awaiting:
                        scope.cancel()

            await read_sse(response, parser, on_event)

    async def _resume(
        self, parser: SseParser, outgoing: Outgoing, awaiting: set[RequestId]
    ) -> bool:
        """One GET with Last-Event-ID for a POST's stream; False when refused."""
        headers = self._request_headers(SSE_MEDIA_TYPE)
        headers[LAST_EVENT_ID_HEADER] = parser.last_event_id
        try:
            with map_exceptions(HTTP_ERRORS):
                async with self._client.stream("GET", self._url, headers=headers) as response:
                    if response.status_code == 404 and self.session_id is not None:
                        self._break(SessionExpired("session expired (404)"))
                        return False
                    if response.status_code != 200 or media_type(response) != SSE_MEDIA_TYPE:
                        self._log.debug("backend.http.resume.refused", status=response.status_code)
                        return False
                    await self._pump(response, parser, outgoing, awaiting)
        except ConnectError as exc:
            self._break(TransportBroken(f"cannot reach backend: {exc}"))
            return False
        except TransportError as exc:
            self._log.debug("backend.http.resume.dropped", error=str(exc))
        return True

    async def _fail_from_response(
        self, response: httpx.Response, outgoing: Outgoing, problem: str
    ) -> None:
        """Rule 1: answer the POST's requests with an error naming what went wrong."""
        detail = None
        try:
            if media_type(response) == JSON_MEDIA_TYPE:
                detail = error_message(await read_body(response, ERROR_BODY_LIMIT))
        except TransportError:
            pass
        finally:
            await close_response(response)
        if detail:
            problem = f"{problem}: {detail}"
        self._log.warning(
            "backend.http.post.failed", problem=problem, requests=len(outgoing.request_ids)
        )
        if (
            response.status_code == 400
            and self.session_id is not None
            and detail
            and "session" in detail.lower()
        ):
            # Some servers (the reference server among them) answer a session
            # they no longer know with 400 rather than the spec's 404. Treat
            # it as the same loss of session, so the supervisor starts a new
            # one instead of every call failing from now on.
            await self._fail(set(outgoing.request_ids), problem, status=response.status_code)
            self._break(SessionExpired(f"session expired (400: {detail[:120]})"))
            return
        await self._fail(set(outgoing.request_ids), problem, status=response.status_code)

    async def _fail(
        self, request_ids: set[RequestId], problem: str, *, status: int | None = None
    ) -> None:
        for request_id in sorted(request_ids, key=str):
            await self._inbox.put(failure_response(request_id, problem, status))

    # -- the GET stream -----------------------------------------------------

    def _delay(self, retry_ms: int | None) -> float:
        return reconnect_delay(
            retry_ms, DEFAULT_RECONNECT_DELAY, MIN_RECONNECT_DELAY, MAX_RECONNECT_DELAY
        )

    async def _listen(self) -> None:
        """Keep the server's own stream open for the channel's life."""
        last_event_id = ""
        retry: int | None = None
        refusals = 0
        while True:
            headers = self._request_headers(SSE_MEDIA_TYPE)
            if last_event_id:
                headers[LAST_EVENT_ID_HEADER] = last_event_id
            delay: float | None = None
            try:
                with map_exceptions(HTTP_ERRORS):
                    async with self._client.stream("GET", self._url, headers=headers) as response:
                        status = response.status_code
                        if status == 200 and media_type(response) == SSE_MEDIA_TYPE:
                            refusals = 0
                            parser = SseParser(
                                MAX_MESSAGE_BYTES, last_event_id=last_event_id, retry=retry
                            )
                            try:
                                await read_sse(response, parser, self._on_stream_event)
                            finally:
                                last_event_id, retry = parser.last_event_id, parser.retry
                            self._log.debug("backend.http.stream.ended")
                        elif not self._stream_refused(response):
                            return
                        else:
                            refusals += 1
                            delay = min(
                                REFUSED_STREAM_DELAY * 2 ** (refusals - 1), MAX_RECONNECT_DELAY
                            )
            except ConnectError as exc:
                self._break(TransportBroken(f"cannot reach backend: {exc}"))
                return
            except TransportError as exc:
                self._log.debug("backend.http.stream.dropped", error=str(exc))
            await trio.sleep(delay if delay is not None else self._delay(retry))

    def _stream_refused(self, response: httpx.Response) -> bool:
        """Handle a GET that did not open a stream; True when worth retrying."""
        status = response.status_code
        if status == 405:
            self._log.debug("backend.http.stream.unsupported")
            return False
        if status == 404 and self.session_id is not None:
            self._break(SessionExpired("session expired (404)"))
            return False
        retry = status in _RETRYABLE_STREAM_STATUS or status >= 500
        self._log.warning(
            "backend.http.stream.refused",
            status=status,
            content_type=media_type(response),
            retrying=retry,
        )
        return retry

    async def _on_stream_event(self, event: SseEvent) -> None:
        if event.event == "message" and event.data:
            await self._inbox.put(event.data.encode())


@asynccontextmanager
async def open_streamable_http(
    cfg: HttpBackend, *, backend: str = ""
) -> AsyncIterator[StreamableHttpChannel]:
    """Open a Streamable HTTP channel to ``cfg.url``; end the session on exit.

    Nothing is sent until the first ``send`` (the initialize request): the
    session, its id and its protocol version come from that exchange.

    Args:
        cfg: the backend's config (URL, headers, TLS, connect timeout).
        backend: the backend's name, for logs.

    Raises:
        ConnectError: the TLS settings could not be loaded.
    """
    log = logger.bind(backend=backend or cfg.name)
    async with open_client(cfg) as client, trio.open_nursery() as nursery:
        channel = StreamableHttpChannel(cfg, client, nursery, log)
        try:
            yield channel
        finally:
            await channel.aclose()
            nursery.cancel_scope.cancel()
