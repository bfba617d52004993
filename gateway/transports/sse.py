"""A backend reached over the legacy HTTP+SSE transport (2024-11-05).

The client GETs the SSE URL and keeps that stream open for the session's
life. The first ``endpoint`` event names the URL to POST messages to;
every message from the server, responses included, then arrives as a
``message`` event on the stream, and each POST is answered ``202``.

Rules:

1. The POST URL must have the SSE URL's origin (scheme, host, port). A
   server that names another origin is refused: the gateway would otherwise
   send every message, with the configured credentials, wherever a
   compromised or confused server points it.
2. The session *is* the stream: when it ends or fails, the channel breaks.
   There is no reconnecting in this revision.
3. A POST for a request refused with an HTTP error is answered with a
   JSON-RPC error for that request (as for Streamable HTTP); ``404`` means
   the server forgot the session and breaks the channel with
   ``SessionExpired``, the type the supervisor reacts to.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import httpx
import structlog
import trio

from gateway.errors import (
    ConnectError,
    SessionExpired,
    TransportBroken,
    TransportClosed,
    TransportError,
)
from gateway.telemetry import tracing
from gateway.transports.base import map_exceptions
from gateway.transports.framing import SseParser
from gateway.transports.http_base import (
    HTTP_ERRORS,
    JSON_MEDIA_TYPE,
    MAX_MESSAGE_BYTES,
    SSE_MEDIA_TYPE,
    Inbox,
    Outgoing,
    base_headers,
    close_response,
    describe_status,
    discard_body,
    error_message,
    failure_response,
    media_type,
    open_client,
    read_body,
    read_sse,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from gateway.config import SseBackend
    from gateway.transports.framing import SseEvent

logger = structlog.get_logger("gateway.transports.sse")

# How much of a refused POST's body is read to explain the refusal.
ERROR_BODY_LIMIT: Final = 16 * 1024


class SseChannel:
    """The MessageChannel of one legacy HTTP+SSE session.

    Created by :func:`open_sse`; not meant to be built elsewhere.

    Args:
        cfg: the backend's config.
        client: the HTTP client, owned by ``open_sse``.
        nursery: where the stream reader and error deliveries run.
        log: a logger bound to the backend.
    """

    def __init__(
        self,
        cfg: SseBackend,
        client: httpx.AsyncClient,
        nursery: trio.Nursery,
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        self._sse_url = httpx.URL(cfg.url)
        self._name = cfg.name
        self._headers = base_headers(cfg)
        self._client = client
        self._nursery = nursery
        self._log = log
        self._inbox = Inbox()
        self._closed = False
        self._ready = trio.Event()
        self._connect_failure: TransportBroken | None = None
        self.endpoint: httpx.URL | None = None
        """Where messages are POSTed, from the server's ``endpoint`` event."""

    # -- MessageChannel ---------------------------------------------------

    async def send(self, message: bytes) -> None:
        """POST one message to the endpoint; its answer comes on the stream.

        Raises:
            TransportClosed: the channel was closed.
            SessionExpired: the server forgot the session (404).
            TransportBroken: the stream ended or the POST failed.
            ConnectError: the backend could not be reached (the channel
                breaks too).
        """
        self._inbox.raise_if_ended()
        if self._closed:
            raise TransportClosed("channel closed")
        assert self.endpoint is not None  # open_sse yields only once it is known
        outgoing = Outgoing.of(message)
        headers = self._headers.copy()
        headers["content-type"] = JSON_MEDIA_TYPE
        trace = tracing.outgoing_http_headers()  # None unless tracing is on
        if trace is not None:
            headers.update(trace)
        request = self._client.build_request(
            "POST", self.endpoint, content=message, headers=headers
        )
        try:
            with map_exceptions(HTTP_ERRORS):
                response = await self._client.send(request, stream=True)
        except ConnectError as exc:
            self._break(TransportBroken(f"cannot reach backend: {exc}"))
            raise
        status = response.status_code
        if 200 <= status < 300:
            await discard_body(response)
            return
        if status == 404:
            await discard_body(response)
            self._break(SessionExpired("session expired (404)"))
            self._inbox.raise_if_ended()
        problem = describe_status(response)
        if status == 401:
            # After the credential's one retry with a fresh token (if it has one).
            problem = f"backend {self._name!r} refused the gateway's credential: {problem}"
        if not outgoing.request_ids:
            await discard_body(response)
            self._log.warning("backend.sse.post.rejected", problem=problem)
            return
        self._nursery.start_soon(self._fail_requests, response, outgoing, problem)

    async def receive(self) -> bytes:
        """The next ``message`` event's data from the stream.

        Raises:
            TransportBroken: the stream ended or failed.
            TransportClosed: the channel was closed.
        """
        return await self._inbox.get()

    async def aclose(self) -> None:
        """Mark the channel closed and wake readers; ``open_sse`` ends the stream.

        The legacy transport has no way to end a session other than closing
        its stream.
        """
        self._closed = True
        self._inbox.end(TransportClosed("channel closed"))

    # -- the stream -------------------------------------------------------

    async def run_stream(self) -> None:
        """Hold the SSE stream open; record the endpoint, then deliver messages.

        Never raises: a failure before the endpoint is known is kept for
        ``open_sse`` to raise as ``ConnectError``, and one after it breaks
        the channel (rule 2).
        """
        headers = self._headers.copy()
        headers["accept"] = SSE_MEDIA_TYPE
        ended = TransportBroken("SSE stream ended")
        try:
            with map_exceptions(HTTP_ERRORS):
                async with self._client.stream("GET", self._sse_url, headers=headers) as response:
                    kind = media_type(response)
                    if response.status_code != 200 or kind != SSE_MEDIA_TYPE:
                        ended = TransportBroken(
                            f"GET {self._sse_url} answered HTTP {response.status_code} "
                            f"({kind or 'no content type'})"
                        )
                    else:
                        await read_sse(response, SseParser(MAX_MESSAGE_BYTES), self._on_event)
        except TransportError as exc:
            ended = TransportBroken(f"SSE stream failed: {exc}")
            ended.__cause__ = exc
        if self._ready.is_set():
            self._break(ended)
        else:
            self._connect_failure = ended
            self._ready.set()

    async def _on_event(self, event: SseEvent) -> None:
        if self.endpoint is None:
            if event.event == "endpoint":
                self.endpoint = self._endpoint_url(event.data)
                self._log.debug("backend.sse.endpoint", path=self.endpoint.path)
                self._ready.set()
            return
        if event.event == "message" and event.data:
            await self._inbox.put(event.data.encode())

    def _endpoint_url(self, data: str) -> httpx.URL:
        try:
            url = self._sse_url.join(data.strip())
        except httpx.InvalidURL as exc:
            raise TransportBroken(f"invalid endpoint {data[:200]!r}: {exc}") from exc
        origin = (url.scheme, url.host, url.port)
        if origin != (self._sse_url.scheme, self._sse_url.host, self._sse_url.port):
            raise TransportBroken(
                f"endpoint {data[:200]!r} is not on the SSE URL's origin; refused"
            )
        return url

    def _break(self, reason: TransportBroken) -> None:
        if self._inbox.ended is None and not self._closed:
            self._log.warning("backend.sse.broken", reason=str(reason))
        self._inbox.end(reason)

    async def _fail_requests(
        self, response: httpx.Response, outgoing: Outgoing, problem: str
    ) -> None:
        """Rule 3: answer a refused POST's requests with an error naming the status."""
        try:
            detail = error_message(await read_body(response, ERROR_BODY_LIMIT))
        except TransportError:
            detail = None
        finally:
            await close_response(response)  # noqa: ASYNC102 - shields itself, with a deadline
        if detail:
            problem = f"{problem}: {detail}"
        self._log.warning("backend.sse.post.failed", problem=problem)
        for request_id in outgoing.request_ids:
            await self._inbox.put(failure_response(request_id, problem, response.status_code))

    async def wait_ready(self) -> None:
        """Wait until the endpoint is known or the stream failed first."""
        await self._ready.wait()

    @property
    def connect_failure(self) -> TransportBroken | None:
        """Why the stream failed before naming its endpoint, if it did."""
        return self._connect_failure


@asynccontextmanager
async def open_sse(
    cfg: SseBackend, *, backend: str = "", auth: httpx.Auth | None = None
) -> AsyncIterator[SseChannel]:
    """Open the SSE stream of ``cfg.url`` and yield a channel once its endpoint is known.

    Waiting for the ``endpoint`` event is part of connecting, so it is
    bounded by ``timeouts.connect``: a server that accepts the GET and then
    says nothing would otherwise stall its backend's supervisor forever.

    Args:
        cfg: the backend's config (URL, headers, TLS, connect timeout).
        backend: the backend's name, for logs.
        auth: the backend's credential, when it has one.

    Raises:
        ConnectError: the stream could not be opened, or named no usable
            endpoint in time.
    """
    log = logger.bind(backend=backend or cfg.name)
    failure: ConnectError | None = None
    async with open_client(cfg, auth) as client, trio.open_nursery() as nursery:
        channel = SseChannel(cfg, client, nursery, log)
        nursery.start_soon(channel.run_stream)
        with trio.move_on_after(cfg.timeouts.connect):
            await channel.wait_ready()
        if channel.endpoint is None:
            cause = channel.connect_failure
            failure = ConnectError(
                str(cause) if cause else f"no endpoint event within {cfg.timeouts.connect:g} s"
            )
            failure.__cause__ = cause
            nursery.cancel_scope.cancel()
        else:
            try:
                yield channel
            finally:
                await channel.aclose()
                nursery.cancel_scope.cancel()
    if failure is not None:
        raise failure
