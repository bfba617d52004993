"""A modern ``subscriptions/listen`` POST: one SSE stream per request.

The rules of what goes on the stream are ``protocol.listen``'s; this module
does the I/O:

1. The stream opens with the acknowledgement, written before anything
   else, so nothing tagged with this subscription precedes it.
2. list_changed reaches the stream from the app's coalescer through
   ``Listeners.broadcast`` (only when the merged view changed, coalesced as
   for sessions); ``resources/updated`` through the router's fan-out, where
   the listener is registered like a client session for as long as the
   stream lives (``Router.listen``), its URIs subscribed at the backends
   through the refcounted table legacy sessions share.
3. Queued messages never block the fan-out: a listener whose queue is full
   drops the message (counted in the log) rather than stall other clients.
4. An idle stream gets a keep-alive comment every ``KEEPALIVE_INTERVAL``.
5. The client closing the stream ends it; the gateway shutting down ends it
   with the spec's final ``complete`` result. Either way the listener leaves
   the fan-out and its subscriptions are released (``Router.listener_closed``).
6. One principal holds at most ``limits.listen_streams_per_principal``
   streams at once (anonymous hosts count as one principal); one more is
   refused before anything is subscribed (``ListenLimitReached``: HTTP 429
   and -32603 naming the limit), and other principals are not affected.
"""

from __future__ import annotations

import collections
import itertools
import math
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.errors import INTERNAL_ERROR, METHOD_NOT_FOUND, LocalProtocolError
from gateway.frontend import http_util as h
from gateway.frontend.http_util import KEEPALIVE_INTERVAL
from gateway.protocol import jsonrpc
from gateway.protocol.stateless.listen import LIST_CHANGED_FIELDS, LISTEN, Subscription, honour
from gateway.telemetry import tracing

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    import msgspec

    from gateway.identity.principal import Principal
    from gateway.protocol.jsonrpc import Request, RequestId
    from gateway.protocol.stateless.envelope import Envelope
    from gateway.protocol.stateless.listen import ListenFilter
    from gateway.router import Emit, Router

logger = structlog.get_logger("gateway.frontend")

# Messages a listen stream holds before the writer catches up (rule 3).
LISTENER_QUEUE: Final = 128
# ``limits.listen_streams_per_principal``'s default (rule 6).
DEFAULT_LISTEN_STREAMS: Final = 100
_ids: Final = itertools.count(1)
_OFFERED: Final = frozenset(LIST_CHANGED_FIELDS.values())


@dataclass(eq=False)
class Listener:
    """One listen stream, as the router's fan-out sees it (a ``ClientPeer``).

    Attributes:
        subscription: what the stream carries, and how it is tagged.
        envelope: the listen request's ``_meta``.
        session_id: unique to this stream, for the router's tables only.
        principal: the key of the principal that opened it (None: auth off).
    """

    subscription: Subscription
    envelope: Envelope
    session_id: str = field(default_factory=lambda: f"listen-{next(_ids)}")
    profile: str = DEFAULT_PROFILE
    ended: trio.Event = field(default_factory=trio.Event)
    dropped: int = 0
    carried: int = 0
    principal: str | None = None
    caller: Principal | None = None
    # The stream's one server span (tracing on): an event per notification.
    span: tracing.ServerSpan | None = None

    def __post_init__(self) -> None:
        self._send, self.inbox = trio.open_memory_channel[bytes](LISTENER_QUEUE)

    @property
    def protocol_version(self) -> str:
        """The revision the listen request names."""
        return self.envelope.protocol_version

    @property
    def capabilities(self) -> dict[str, Any]:
        """The capabilities the listen request declared."""
        return self.envelope.client_capabilities

    def notify_nowait(self, message: bytes) -> None:
        """Queue ``message`` if it belongs on this stream, tagged (rules 2-3)."""
        self.offer(message)

    def offer(self, message: bytes) -> bool:
        """``notify_nowait``; True when the message belongs on this stream."""
        tagged = self.subscription.tag(message)
        if tagged is None:
            return False
        self.carried += 1
        dropped = False
        try:
            self._send.send_nowait(tagged)
        except trio.WouldBlock:
            self.dropped += 1
            dropped = True
        if self.span is not None:  # tracing on: one event, never a span of its own
            self.span.event("notification", _event_attributes(message, dropped))
        return True

    async def request(
        self, method: str, params: msgspec.Raw | None, emit: Emit | None
    ) -> msgspec.Raw:
        """A listen stream answers no backend request.

        Raises:
            LocalProtocolError: always.
        """
        raise LocalProtocolError(f"{method}: not on a listen stream", METHOD_NOT_FOUND)


class ListenLimitReached(LocalProtocolError):
    """A principal asked for one listen stream more than it may hold (rule 6)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"too many open subscriptions/listen streams for this principal ({limit}; "
            "limits.listen_streams_per_principal): close one first",
            INTERNAL_ERROR,
            data={"reason": "listen_streams", "limit": limit},
        )


class Listeners:
    """The open listen streams: list_changed reaches them all (rule 2).

    Args:
        per_principal: streams one principal may hold at once (rule 6).
    """

    def __init__(self, per_principal: int = DEFAULT_LISTEN_STREAMS) -> None:
        self._open: dict[str, Listener] = {}
        self.closing = False
        self.per_principal = per_principal
        self._held: collections.Counter[str | None] = collections.Counter()

    @contextmanager
    def room_for(self, principal: str | None) -> Iterator[None]:
        """Hold one of ``principal``'s streams for the block (rule 6).

        Raises:
            ListenLimitReached: the principal holds its limit already.
        """
        if self._held[principal] >= self.per_principal:
            raise ListenLimitReached(self.per_principal)
        self._held[principal] += 1
        try:
            yield
        finally:
            self._held[principal] -= 1
            if not self._held[principal]:
                del self._held[principal]

    def __len__(self) -> int:
        return len(self._open)

    def add(self, listener: Listener) -> None:
        """A stream opened."""
        self._open[listener.session_id] = listener

    def remove(self, listener: Listener) -> None:
        """A stream ended."""
        self._open.pop(listener.session_id, None)

    def __iter__(self) -> Iterator[Listener]:
        return iter(list(self._open.values()))

    def broadcast(
        self,
        message: bytes,
        profile: str | None = None,
        accept: Callable[[Listener], bool] | None = None,
    ) -> int:
        """Queue a notification for every stream that asked for it; returns how many.

        ``profile`` limits it to the streams opened on that profile's endpoint,
        ``accept`` to the streams it accepts (one effective view's).
        """
        count = 0
        for listener in list(self._open.values()):
            if profile in (None, listener.profile) and (accept is None or accept(listener)):
                count += listener.offer(message)
        return count

    def close_all(self) -> None:
        """The gateway shuts down: end every stream with its final result (rule 5)."""
        self.closing = True
        for listener in list(self._open.values()):
            listener.ended.set()


def _event_attributes(message: bytes, dropped: bool) -> dict[str, str | int | bool]:
    """A notification's event on the listen span: its method, and whether it was dropped."""
    decoded = jsonrpc.decode(message)  # tag() decoded it already: it is a notification
    method = decoded.method if isinstance(decoded, jsonrpc.Notification) else ""
    attributes: dict[str, str | int | bool] = {"mcp.method.name": method}
    if dropped:
        attributes["mcp_gateway.dropped"] = True
    return attributes


async def _chunk(send: h.Send, body: bytes) -> None:
    await send({"type": "http.response.body", "body": body, "more_body": True})


async def write_stream(listener: Listener, send: h.Send) -> None:
    """Rules 1 and 4: the ack, then the queue, with keep-alives when idle.

    As on the GET stream (``get_stream._stream_outbox``): one keep-alive
    timer per period rather than a cancel scope per message, lifted while a
    message is written, so the timer ends a wait and never cuts a write in
    two on a slow socket.
    """
    await _chunk(send, h.sse_event(listener.subscription.acknowledgement()))
    while True:
        taken: bytes | None = None
        with trio.move_on_after(KEEPALIVE_INTERVAL) as period:
            due = period.deadline
            while True:
                message = await listener.inbox.receive()
                period.deadline = math.inf
                if period.cancel_called:  # due as it arrived: written after the scope
                    taken = message
                    break
                await _chunk(send, h.sse_event(message))
                period.deadline = due
        if taken is not None:
            await _chunk(send, h.sse_event(taken))
        await _chunk(send, b": keep-alive\n\n")


@asynccontextmanager
async def registered(
    router: Router,
    listeners: Listeners,
    request_id: RequestId,
    envelope: Envelope,
    asked: ListenFilter,
    profile: str = DEFAULT_PROFILE,
    caller: Principal | None = None,
) -> AsyncIterator[Listener]:
    """One listener, in the fan-out for as long as the block runs (rules 2 and 5).

    The transport-independent half of a listen request, shared by the HTTP
    stream below and stdio mode (``frontend.stdio_modern``): the URIs are
    subscribed at the backends, the subscription honours what was granted,
    and on leaving (however it is left) the listener leaves the broadcast
    and the router releases its subscriptions.

    Raises:
        ListenLimitReached: the caller holds its limit of streams (rule 6).
    """
    with listeners.room_for(None if caller is None else caller.key):
        async with _registered(
            router, listeners, request_id, envelope, asked, profile, caller
        ) as listener:
            yield listener


@asynccontextmanager
async def _registered(
    router: Router,
    listeners: Listeners,
    request_id: RequestId,
    envelope: Envelope,
    asked: ListenFilter,
    profile: str,
    caller: Principal | None,
) -> AsyncIterator[Listener]:
    listener = Listener(
        honour(request_id, asked, _OFFERED, []),
        envelope,
        profile=profile,
        principal=None if caller is None else caller.key,
        caller=caller,
    )
    # One span for the stream's life (tracing rule 5): the host closing it is
    # how it normally ends, so a cancellation is "ok"; the backend subscribe
    # requests router.listen sends are its children.
    params: dict[str, Any] = {"_meta": dict(envelope.trace)}
    version = envelope.protocol_version
    with tracing.answered(LISTEN, params, version=version, profile=profile, cancelled="ok") as span:
        listener.span = span
        try:
            held = await router.listen(listener, asked.uris)
            tasks = router.tasks.watchable(asked.task_ids, listener.principal)
            listener.subscription = honour(request_id, asked, _OFFERED, held, tasks)
            listeners.add(listener)
            if listeners.closing:
                listener.ended.set()
            yield listener
        finally:
            listeners.remove(listener)
            router.listener_closed(listener.session_id)
            if listener.dropped:
                logger.warning("listen.dropped", count=listener.dropped)
            if span is not None:
                ended = "gateway" if listener.ended.is_set() else "client"
                span.annotate("mcp_gateway.listen.ended", ended)
                span.annotate("mcp_gateway.listen.dropped", listener.dropped)
                # The SDK keeps a span's last 128 events (OTEL_SPAN_EVENT_COUNT_LIMIT):
                # the total is an attribute, so a long stream's count survives.
                span.annotate("mcp_gateway.listen.notifications", listener.carried)


async def serve_listen(
    router: Router,
    listeners: Listeners,
    receive: h.Receive,
    send: h.Send,
    request: Request,
    envelope: Envelope,
    asked: ListenFilter,
    profile: str = DEFAULT_PROFILE,
    caller: Principal | None = None,
) -> None:
    """Serve one listen request until the client or the gateway ends it (rule 5).

    ``caller`` is whom the request was authenticated as: the stream carries
    only what the access policy lets it see.
    """
    async with registered(
        router, listeners, request.id, envelope, asked, profile, caller
    ) as listener:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", h.EVENT_STREAM), (b"cache-control", b"no-cache")],
            }
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.cancel_on_disconnect, receive, nursery.cancel_scope)
            nursery.start_soon(write_stream, listener, send)
            await listener.ended.wait()
            nursery.cancel_scope.cancel()
        if listener.ended.is_set():
            await _chunk(send, h.sse_event(listener.subscription.complete()))
            await send({"type": "http.response.body", "body": b"", "more_body": False})
