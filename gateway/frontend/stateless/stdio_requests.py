"""stdio mode for 2026-07-28 (modern) hosts: requests that carry their own envelope.

A desktop host on a dual-era SDK spawns the gateway and sends
``server/discover`` first; every request then carries its version and
capabilities in ``params._meta`` and needs no session
(``S/basic/transports/stdio.mdx``, ``S/basic/index.mdx`` §Statelessness).
``frontend.stdio`` decides the era of the connection; this module serves the
modern requests it hands over. Rules:

1. **Checks before routing**, the HTTP path's minus its headers (stdio has
   none): the envelope (-32602, -32022 naming both eras), the method
   (-32601, removed methods say so), the listen filter (-32602). Each is a
   JSON-RPC error on stdout with the request's id; no ``Mcp-Param-*``
   check (no headers to compare).
2. **Routing** is the router's one modern entry, ``Router.handle_modern``,
   as on HTTP: ``server/discover`` answered by the gateway; ``resultType``
   and cache hints by ``frontend.modern.finish``; a legacy backend's own
   requests during ``tools/call``/``prompts/get``/``resources/read`` become
   ``input_required`` (the MRTR bridge, ``router/held``).
3. **tools/list drops tools with an invalid ``x-mcp-header``** on stdio too
   (gateway choice). The spec lets *stdio clients* ignore the annotations;
   it does not ask a server to serve a different list per transport, and a
   host that does validate them would drop the tool itself. One list for
   both transports keeps a tool from appearing on one and not the other.
4. **Related messages** (progress, and log messages when ``_meta`` asked for
   a ``logLevel``) go to stdout as notifications while the request runs;
   they are dropped rather than buffered when stdout is backed up (the
   writer's bound, ``stdio.OUTGOING_BUFFER``).
5. **Cancellation** is ``notifications/cancelled{requestId}`` from the host
   (stdio.mdx: the client MUST send it). The request's scope is cancelled,
   which cancels the backend's call (it gets its own
   ``notifications/cancelled``); nothing more is written for that id
   (``S/basic/patterns/cancellation.mdx``). Unknown ids are ignored.
6. **``subscriptions/listen``**: the acknowledgement first, then the
   list_changed and ``resources/updated`` notifications asked for, each
   tagged with the listen request's id as ``subscriptionId``, interleaved
   with other traffic. The host ends it with ``notifications/cancelled``
   naming the listen id, and nothing more is sent for it. If the gateway
   ends it (``Listeners.close_all``), the final ``complete`` result is sent.
   stdin closing ends it silently: there is nobody left to tell.
7. **Ids** in flight are unique: a second request with an id still in
   flight is -32600, since its answer could not be told apart (and a
   cancel could not name one of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog
import trio

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    UNSUPPORTED_PROTOCOL_VERSION,
    GatewayError,
    LocalProtocolError,
)
from gateway.frontend.rejection import (
    INTERNAL_ERROR_MESSAGE,
    ROUTER_COMPONENT,
    report_internal_error,
)
from gateway.frontend.stateless.listen_stream import ListenLimitReached, registered
from gateway.frontend.stateless.post import finish
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.eras import check_method, parse_modern
from gateway.protocol.stateless.envelope import MODERN_VERSIONS
from gateway.protocol.stateless.error_codes import ModernProtocolError
from gateway.protocol.stateless.listen import LISTEN, parse_filter
from gateway.router.context import ModernRequest
from gateway.telemetry import tracing

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from gateway.frontend.stateless.listen_stream import Listeners
    from gateway.protocol.jsonrpc import Notification, Request, RequestId
    from gateway.protocol.stateless.envelope import Envelope
    from gateway.protocol.stateless.listen import ListenFilter
    from gateway.router import Emit, Router
    from gateway.telemetry.metrics import Metrics

logger = structlog.get_logger("gateway.frontend.stdio")


class EnvelopeRefused(GatewayError):
    """A modern request whose envelope failed its checks (rule 1).

    Such a request does not decide the connection's era: a -32022 names the
    handshake versions too, and the host may answer it with ``initialize``.

    Args:
        reply: the encoded error to write.
    """

    def __init__(self, reply: bytes) -> None:
        super().__init__("envelope refused")
        self.reply = reply


def check_envelope(request: Request) -> tuple[Envelope, dict[str, Any]]:
    """Rule 1, first half: the params and the envelope, with no headers.

    Returns:
        The envelope and the decoded params.

    Raises:
        EnvelopeRefused: the error to answer with.
    """
    try:
        params = mcp.decode_params(request.params)
        return parse_modern(request.method, params, None), params
    except (ModernProtocolError, LocalProtocolError) as exc:
        raise EnvelopeRefused(
            jsonrpc.encode_error(request.id, exc.code, exc.message, exc.data)
        ) from None


def initialize_refused(request: Request) -> bytes:
    """The answer to ``initialize`` on a connection locked to the modern era.

    -32022 naming the modern versions only, as the SDK's dual-era stdio
    server answers it: this connection will not become a legacy session,
    and listing handshake versions would invite the host to try again.
    """
    try:
        params = mcp.decode_params(request.params)
    except LocalProtocolError:
        params = {}
    requested = params.get("protocolVersion")
    supported = list(MODERN_VERSIONS)
    data: dict[str, Any] = {"supported": supported}
    if isinstance(requested, str):
        data["requested"] = requested
    return jsonrpc.encode_error(
        request.id,
        UNSUPPORTED_PROTOCOL_VERSION,
        "this connection serves the 2026-07-28 protocol; the initialize handshake is not accepted",
        data,
    )


class ModernStdio:
    """The modern requests of one stdio connection.

    Args:
        router: routes the requests.
        listeners: the registry list_changed broadcasts reach (rule 6).
        write: queues one message for stdout, waiting for room.
        emit: queues one related message for stdout, or drops it (rule 4).
        metrics: where unexpected exceptions while routing are counted.
        profile: the profile this pipe serves (``mcp-gateway stdio --profile``).
    """

    def __init__(
        self,
        router: Router,
        listeners: Listeners,
        write: Callable[[bytes], Awaitable[None]],
        emit: Emit,
        *,
        metrics: Metrics | None = None,
        profile: str = DEFAULT_PROFILE,
    ) -> None:
        self._router = router
        self._profile = profile
        self._listeners = listeners
        self._write = write
        self._emit = emit
        self._metrics = metrics
        self._inflight: dict[RequestId, trio.CancelScope] = {}

    @property
    def inflight(self) -> int:
        """How many modern requests (listens included) are running."""
        return len(self._inflight)

    async def start(
        self, request: Request, envelope: Envelope, params: dict[str, Any], nursery: trio.Nursery
    ) -> None:
        """Check the rest of rule 1, then serve ``request`` in ``nursery``.

        The envelope has passed ``check_envelope``.
        """
        if request.id in self._inflight:
            await self._write(
                jsonrpc.encode_error(
                    request.id,
                    INVALID_REQUEST,
                    f"invalid request: id {request.id!r} is already in use",
                )
            )
            return
        try:
            check_method(request.method)
            asked = parse_filter(params) if request.method == LISTEN else None
        except (ModernProtocolError, LocalProtocolError) as exc:
            await self._write(jsonrpc.encode_error(request.id, exc.code, exc.message, exc.data))
            return
        scope = trio.CancelScope()
        self._inflight[request.id] = scope
        if asked is not None:
            nursery.start_soon(self._listen, scope, request, envelope, asked)
        else:
            nursery.start_soon(self._request, scope, request, envelope, params)

    def cancel(self, message: Notification) -> None:
        """A host's ``notifications/cancelled``: cancel the request it names (rule 5)."""
        try:
            params = mcp.decode_params(message.params)
        except LocalProtocolError:
            return
        request_id = params.get("requestId")
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            return
        scope = self._inflight.pop(request_id, None)
        if scope is not None:  # its id is free at once: the host is done with it
            scope.cancel()

    async def _request(
        self,
        scope: trio.CancelScope,
        request: Request,
        envelope: Envelope,
        params: dict[str, Any],
    ) -> None:
        reply = b""
        try:
            with scope:
                reply = await self._route(request, envelope, params)
        finally:
            self._forget(request.id, scope)
        if reply and not scope.cancel_called:
            await self._write(reply)

    async def _route(self, request: Request, envelope: Envelope, params: dict[str, Any]) -> bytes:
        """Rule 2: the router's answer as a modern host receives it."""
        if request.method == "server/discover":
            version = envelope.protocol_version
            with tracing.answered(request.method, params, version=version, profile=self._profile):
                result = mcp.encode(self._router.discover_result(self._profile))
            return jsonrpc.encode_response(request.id, result)
        modern = ModernRequest(envelope=envelope, emit=self._emit, profile=self._profile)
        try:
            reply = await self._router.handle_modern(modern, request, params)
            return finish(self._router, request, params, reply)
        except Exception as exc:
            report_internal_error(
                exc,
                self._metrics,
                ROUTER_COMPONENT,
                method=request.method,
                session_id=modern.session_id,
            )
            return jsonrpc.encode_error(request.id, INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE)

    async def _listen(
        self,
        scope: trio.CancelScope,
        request: Request,
        envelope: Envelope,
        asked: ListenFilter,
    ) -> None:
        """Rule 6: the ack, then the stream's notifications until it ends."""
        try:
            with scope:
                async with registered(
                    self._router, self._listeners, request.id, envelope, asked, self._profile
                ) as listener:
                    await self._write(listener.subscription.acknowledgement())
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(self._relay, listener.inbox)
                        await listener.ended.wait()
                        nursery.cancel_scope.cancel()
                    await self._write(listener.subscription.complete())
        except ListenLimitReached as exc:
            await self._write(jsonrpc.encode_error(request.id, exc.code, exc.message, exc.data))
        finally:
            self._forget(request.id, scope)

    async def _relay(self, inbox: trio.MemoryReceiveChannel[bytes]) -> None:
        async for message in inbox:
            await self._write(message)

    def _forget(self, request_id: RequestId, scope: trio.CancelScope) -> None:
        if self._inflight.get(request_id) is scope:
            del self._inflight[request_id]
