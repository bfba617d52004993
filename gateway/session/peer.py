"""One JSON-RPC peer over one MessageChannel.

Rules:

1. Request ids we send are ours: a counter per session, so ids from any
   number of clients can never collide on this link.
2. Every request we send has exactly one waiter. Its answer, an error, the
   link breaking or the waiter being cancelled ends the wait; whatever comes
   later for that id is dropped (spec: the sender ignores late responses).
3. A waiter that is cancelled tells the peer with ``notifications/cancelled``
   (never for ``initialize``, which the spec forbids cancelling).
4. A progress handler is keyed by a token the caller made unique on this
   link, so progress can only reach the request that asked for it, and none
   is delivered after the answer or after the waiter gave up.
5. The reader never blocks on the gateway: notifications and progress go to
   callbacks that must not await; requests from the peer run as tasks.
6. On a modern (2026-07-28) link (``modern``, set by the handshake) every
   request we send carries the per-request envelope in ``params._meta``;
   what the caller put there already wins (``protocol.backend_leg``).

Theory of operation: ``open_session`` owns one reader task in its nursery.
When the link breaks, the reader records why, fails every waiter with that
error and sets ``closed``; the owner (a backend supervisor) waits on that.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

import msgspec
import structlog
import trio

from gateway.errors import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    GatewayError,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    TransportClosed,
    TransportError,
)
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.jsonrpc import (
    ErrorResponse,
    Notification,
    Request,
    RequestId,
    Response,
)
from gateway.protocol.stateless import backend_leg

if TYPE_CHECKING:
    from gateway.transports.base import MessageChannel

logger = structlog.get_logger("gateway.session.peer")

# How long a shielded cleanup send (notifications/cancelled) may take before
# we give up on it: the link is probably the reason we are cleaning up.
CLEANUP_SEND_TIMEOUT: Final = 1.0

ProgressHandler = Callable[[dict[str, Any]], None]
NotificationHandler = Callable[[str, msgspec.Raw | None], None]


class RequestHandler(Protocol):
    """Answers a request the peer sent us (sampling, roots, elicitation)."""

    def __call__(self, method: str, params: msgspec.Raw | None) -> Awaitable[msgspec.Raw]:
        """Return the result, or raise ProtocolError to answer with an error."""
        ...


async def _no_requests(method: str, params: msgspec.Raw | None) -> msgspec.Raw:
    raise LocalProtocolError(f"method not found: {method}", METHOD_NOT_FOUND)


def _ignore_notification(method: str, params: msgspec.Raw | None) -> None:
    return None


@dataclass(eq=False, slots=True)
class _Pending:
    method: str
    done: trio.Event = field(default_factory=trio.Event)
    result: msgspec.Raw | None = None
    error: GatewayError | None = None
    on_progress: ProgressHandler | None = None


class Peer:
    """The gateway's end of one JSON-RPC link.

    Created by ``open_session``; not meant to be constructed elsewhere.
    """

    def __init__(
        self,
        channel: MessageChannel,
        nursery: trio.Nursery,
        *,
        name: str,
        on_request: RequestHandler,
        on_notification: NotificationHandler,
    ) -> None:
        self._channel = channel
        self._nursery = nursery
        self._on_request = on_request
        self._on_notification = on_notification
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, _Pending] = {}
        self._progress: dict[RequestId, _Pending] = {}
        # Requests meant to stay open for the session's life (a 2026-07-28
        # listen stream): not "in flight" for liveness purposes.
        self._standing = 0
        self._log = logger.bind(peer=name)
        self.name = name
        self.closed = trio.Event()
        self.close_reason: TransportError | None = None
        self.junk_lines = 0
        # Whether the link speaks 2026-07-28 (rule 6): set once by the handshake.
        self.modern = False
        # When the peer last said anything: a peer that talks is alive, so
        # liveness pings are only needed after a quiet spell.
        self.last_heard = trio.current_time()

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered, standing ones not counted.

        A peer with a call in flight is busy rather than silent; a standing
        listen request is neither, so it must not stop the liveness pings.
        """
        return len(self._pending) - self._standing

    async def send_raw(self, message: bytes) -> None:
        """Send an already-encoded message (the router forwards bytes)."""
        if self.close_reason is not None:
            raise self.close_reason
        await self._channel.send(message)

    async def notify(self, method: str, params: msgspec.Raw | None = None) -> None:
        """Send a notification."""
        await self.send_raw(jsonrpc.encode_notification(method, params))

    async def request(
        self,
        method: str,
        params: msgspec.Raw | None = None,
        *,
        progress_token: RequestId | None = None,
        on_progress: ProgressHandler | None = None,
        standing: bool = False,
        on_sent: Callable[[RequestId], None] | None = None,
    ) -> msgspec.Raw:
        """Send a request and wait for its result.

        Args:
            method: the JSON-RPC method.
            params: forwarded verbatim.
            progress_token: the token the caller put in ``params._meta``;
                progress notifications carrying it go to ``on_progress``
                until the answer arrives. The caller guarantees it is unique
                on this link.
            on_progress: called with each progress notification's params.
            standing: the request stays open by design (``subscriptions/listen``)
                and does not count in ``in_flight``.
            on_sent: told the request's id as it goes out (a listen stream's
                notifications carry it as their subscription id).

        Raises:
            RemoteProtocolError: the peer answered with an error.
            TransportError: the link broke before the answer.
        """
        if self.close_reason is not None:
            raise self.close_reason
        if self.modern:
            params = enveloped(params)
        msg_id = next(self._ids)
        pending = _Pending(method, on_progress=on_progress)
        self._pending[msg_id] = pending
        if progress_token is not None and on_progress is not None:
            self._progress[progress_token] = pending
        self._standing += standing
        try:
            if on_sent is not None:
                on_sent(msg_id)
            await self._channel.send(jsonrpc.encode_request(msg_id, method, params))
            await pending.done.wait()
        except trio.Cancelled:
            if not pending.done.is_set() and method != "initialize":
                pending.done.set()  # late progress and answers are dropped from now on
                self._nursery.start_soon(self._send_cancelled, msg_id)
            raise
        finally:
            self._standing -= standing
            self._pending.pop(msg_id, None)
            if progress_token is not None:
                self._progress.pop(progress_token, None)
        if pending.error is not None:
            raise pending.error
        assert pending.result is not None
        return pending.result

    async def _send_cancelled(self, msg_id: RequestId) -> None:
        # Runs in the session's nursery, not the cancelled task: the waiter
        # is gone at once and the notice still goes out.
        params = jsonrpc.to_raw({"requestId": msg_id, "reason": "cancelled by the gateway"})
        with trio.move_on_after(CLEANUP_SEND_TIMEOUT):
            with suppress(TransportError):
                await self.notify("notifications/cancelled", params)

    def _fail_all(self, error: TransportError) -> None:
        self.close_reason = error
        for pending in self._pending.values():
            # A waiter already answered (or given up) keeps its outcome (rule
            # 2): it may not have run yet to collect it when the link breaks.
            if not pending.done.is_set():
                pending.error = error
                pending.done.set()
        self.closed.set()

    async def _read_loop(self) -> None:
        # trio.current_time() is this clock's reading behind two wrapper calls;
        # the loop reads it once a message.
        now = trio.lowlevel.current_clock().current_time
        try:
            while True:
                data = await self._channel.receive()
                self.last_heard = now()
                self._dispatch(data)
        except TransportError as exc:
            self._log.info("session.closed", reason=str(exc))
            self._fail_all(exc)
        except BaseException:
            self._fail_all(TransportClosed("session ended"))
            raise

    def _dispatch(self, data: bytes) -> None:
        try:
            message = jsonrpc.decode(data)
        except LocalProtocolError as exc:
            self.junk_lines += 1
            # Rate-limit: the first few junk lines tell the operator what is
            # wrong; a flood must not flood the log too (robustness D1).
            if self.junk_lines <= 5 or self.junk_lines % 1000 == 0:
                self._log.warning(
                    "session.junk_dropped",
                    count=self.junk_lines,
                    error=exc.message[:200],
                    sample=data[:120].decode("utf-8", "backslashreplace"),
                )
            return
        if isinstance(message, list):
            for member in message:
                if not isinstance(member, LocalProtocolError):
                    self._dispatch_one(member)
            return
        self._dispatch_one(message)

    def _dispatch_one(self, message: jsonrpc.Message) -> None:
        if isinstance(message, Response | ErrorResponse):
            pending = self._pending.get(message.id) if message.id is not None else None
            if pending is None or pending.done.is_set():
                self._log.debug("session.unmatched_response_dropped", id=message.id)
                return
            if isinstance(message, Response):
                pending.result = message.result
            else:
                pending.error = RemoteProtocolError(message.message, message.code, message.data)
            pending.done.set()
        elif isinstance(message, Notification):
            if message.method == "notifications/progress":
                self._route_progress(message.params)
            else:
                self._on_notification(message.method, message.params)
        else:
            self._nursery.start_soon(self._answer, message)

    def _route_progress(self, params: msgspec.Raw | None) -> None:
        try:
            body = jsonrpc.from_raw(params)
        except msgspec.DecodeError:  # pragma: no cover - params were validated as JSON
            return
        if not isinstance(body, dict):
            return
        token = body.get("progressToken")
        if isinstance(token, bool) or not isinstance(token, int | str):
            return
        pending = self._progress.get(token)
        if pending is None or pending.on_progress is None or pending.done.is_set():
            return  # unknown or finished token: dropped (robustness D8)
        pending.on_progress(body)

    async def _answer(self, request: Request) -> None:
        if request.method == "ping":
            reply = jsonrpc.encode_response(request.id, jsonrpc.EMPTY_OBJECT)
        else:
            try:
                result = await self._on_request(request.method, request.params)
                reply = jsonrpc.encode_response(request.id, result)
            except ProtocolError as exc:
                reply = jsonrpc.encode_error(request.id, exc.code, exc.message, exc.data)
            except GatewayError as exc:
                reply = jsonrpc.encode_error(request.id, INTERNAL_ERROR, str(exc))
        with suppress(TransportError):
            await self.send_raw(reply)


def enveloped(params: msgspec.Raw | None) -> msgspec.Raw:
    """``params`` with the modern envelope's defaults filled in (rule 6).

    Params that are not a JSON object are sent as they are: the backend
    answers them with its own -32602, which names the problem better.
    """
    body = mcp.decode_object(params) if params is not None else {}
    if body is None:
        assert params is not None
        return params
    return jsonrpc.to_raw(backend_leg.with_envelope(body))


@asynccontextmanager
async def open_session(
    channel: MessageChannel,
    *,
    name: str = "",
    on_request: RequestHandler = _no_requests,
    on_notification: NotificationHandler = _ignore_notification,
) -> AsyncIterator[Peer]:
    """Run a JSON-RPC peer over ``channel`` for the body of the block.

    The reader task lives in this context's nursery; leaving the block
    stops it and fails every waiter with ``TransportClosed``.
    """
    async with trio.open_nursery() as nursery:
        peer = Peer(
            channel, nursery, name=name, on_request=on_request, on_notification=on_notification
        )
        nursery.start_soon(peer._read_loop)
        try:
            yield peer
        finally:
            if peer.close_reason is None:
                peer._fail_all(TransportClosed("session closed"))
            nursery.cancel_scope.cancel()
