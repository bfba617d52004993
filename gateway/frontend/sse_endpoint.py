"""The legacy HTTP+SSE transport (protocol 2024-11-05) for old hosts.

A host GETs ``/sse``; the first event, ``endpoint``, names the URL to POST
its messages to (``/messages?session_id=...``). Every POST is answered
``202``; every answer, notification and server-to-client request travels on
the SSE stream. The stream *is* the connection: when it closes, the client
session ends and its calls are cancelled.

Requests run in the stream's own nursery, so they live exactly as long as
the connection that will carry their answers; for the same reason the
session counts as having an open stream (it never idles out) while the
connection lasts. Refusals are the same
:class:`~gateway.frontend.rejection.Rejection` as on ``/mcp``, answered with
the same JSON-RPC error body.
"""

from __future__ import annotations

import secrets
from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs

import structlog
import trio

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.errors import INVALID_REQUEST, LocalProtocolError
from gateway.frontend import http_util as h
from gateway.frontend.client_messages import accept_one_way, open_client_session, route_request
from gateway.frontend.guard import Guard
from gateway.frontend.rejection import Rejection
from gateway.protocol import jsonrpc
from gateway.protocol.headers import SSE_MEDIA_TYPE
from gateway.protocol.jsonrpc import Request

if TYPE_CHECKING:
    from gateway.frontend.clients import ClientRegistry, ClientSession
    from gateway.frontend.origin import OriginPolicy
    from gateway.identity.authenticator import AuthHolder
    from gateway.identity.principal import Principal
    from gateway.router import Router
    from gateway.telemetry.metrics import Metrics

logger = structlog.get_logger("gateway.frontend.sse")

# Messages queued for one SSE stream; a host that stops reading makes
# responses wait here, and progress beyond it is dropped.
STREAM_BUFFER: Final = 256
KEEPALIVE_INTERVAL: Final = 15.0


@dataclass(eq=False)
class _Link:
    """One legacy connection: its stream, its nursery and (after initialize) its session."""

    link_id: str
    nursery: trio.Nursery
    outgoing: trio.MemorySendChannel[bytes]
    session: ClientSession | None = None
    session_opened: trio.Event = field(default_factory=trio.Event)
    # The key of the principal that opened the stream (None: auth off).
    principal: str | None = None
    # That principal itself, for the access policy (refreshed on each POST).
    caller: Principal | None = None

    def emit(self, message: bytes) -> bool:
        try:
            self.outgoing.send_nowait(message)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        return True


class LegacySseEndpoint:
    """Serves ``GET /sse`` and ``POST /messages``.

    Args:
        router: routes requests.
        clients: the client-session registry.
        origin_policy: the same Origin/Host checks as the main endpoint.
        messages_path: where hosts POST (``/messages``).
        max_body_bytes: the largest POST body accepted.
        auth: holds the authenticator in force (a reload swaps it).
        resource_path: the MCP path whose resource metadata a 401 names (the
            legacy endpoints serve the same resource).
        metrics: where unexpected exceptions while routing are counted.
    """

    def __init__(
        self,
        router: Router,
        clients: ClientRegistry,
        origin_policy: OriginPolicy,
        *,
        messages_path: str = "/messages",
        max_body_bytes: int,
        auth: AuthHolder | None = None,
        resource_path: str = "/mcp",
        metrics: Metrics | None = None,
    ) -> None:
        self._router = router
        self._clients = clients
        self.guard = Guard(origin_policy, auth, resource_path=resource_path, metrics=metrics)
        self._messages_path = messages_path
        self._max_body = max_body_bytes
        self._links: dict[str, _Link] = {}
        self._metrics = metrics

    async def stream(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        """``GET /sse``: open a connection and stream everything for it.

        Raises:
            Rejection: refused by the guard, or not a GET for an event stream.
        """
        principal = await self.guard.admit(scope)
        self._may_open(principal, "HTTP GET")
        self._clients.note_caller(principal)
        if scope["method"] != "GET":
            raise Rejection(
                405, f"Method {scope['method']} not allowed: use GET", headers=[(b"allow", b"GET")]
            )
        if not h.accepts(scope, SSE_MEDIA_TYPE):
            raise Rejection(406, "Not Acceptable: Accept must list text/event-stream")
        link_id = secrets.token_urlsafe(24)
        outgoing, incoming = trio.open_memory_channel[bytes](STREAM_BUFFER)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", h.EVENT_STREAM), (b"cache-control", b"no-cache")],
            }
        )
        endpoint = f"{self._messages_path}?session_id={link_id}".encode()
        await send(
            {
                "type": "http.response.body",
                "body": b"event: endpoint\ndata: " + endpoint + b"\n\n",
                "more_body": True,
            }
        )
        link: _Link | None = None
        try:
            async with trio.open_nursery() as nursery:
                link = _Link(link_id, nursery, outgoing)
                link.principal = None if principal is None else principal.key
                link.caller = principal
                self._links[link_id] = link
                nursery.start_soon(h.cancel_on_disconnect, receive, nursery.cancel_scope)
                nursery.start_soon(self._pump_outbox, link)
                await _write_events(send, incoming)
                nursery.cancel_scope.cancel()
        finally:
            self._links.pop(link_id, None)
            if link is not None and link.session is not None:
                link.session.stream_open = False
                self._clients.close(link.session)
                logger.info("client.session.closed", reason="sse stream closed")
            # The host may be gone already; there is nothing else to finish.
            with trio.CancelScope(shield=True), trio.move_on_after(1), suppress(Exception):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _pump_outbox(self, link: _Link) -> None:
        await link.session_opened.wait()
        assert link.session is not None
        last = 0
        while not link.session.closed:
            for event_id, message in await link.session.outbox.wait_after(last):
                last = event_id
                if message:  # empty: the wake-up sent when the session closes
                    await link.outgoing.send(message)
        # Closed from elsewhere (a reload removed its token, the gateway
        # stops): the connection ends with it.
        link.nursery.cancel_scope.cancel()

    async def post(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        """``POST /messages?session_id=...``: accept one message, answer 202.

        Raises:
            Rejection: refused by the guard, an unknown connection, a body too
                large, not JSON-RPC, or a batch.
        """
        principal = await self.guard.admit(scope)
        self._may_open(principal, "HTTP POST")
        self._clients.note_caller(principal)
        if scope["method"] != "POST":
            raise Rejection(
                405,
                f"Method {scope['method']} not allowed: use POST",
                headers=[(b"allow", b"POST")],
            )
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        link = self._links.get((query.get("session_id") or [""])[0])
        if link is None:
            raise Rejection(404, "Session not found: unknown or closed connection")
        who = None if principal is None else principal.key
        if link.principal != who:
            logger.warning(
                "auth.session.mismatch", principal=who, owner=link.principal, method="POST"
            )
            raise Rejection(404, "Session not found: unknown or closed connection")
        link.caller = principal
        if link.session is not None:
            link.session.last_seen = trio.current_time()
            link.session.caller = principal
        try:
            body = await h.read_body(receive, self._max_body)
        except h.BodyTooLarge:
            raise Rejection(413, f"Payload Too Large: limit is {self._max_body} bytes") from None
        try:
            message = jsonrpc.decode(body)
        except LocalProtocolError as exc:
            raise Rejection(400, exc.message, code=exc.code) from None
        if isinstance(message, list):
            raise Rejection(400, "invalid request: batches are not part of 2024-11-05")
        await h.respond(send, 202, b"Accepted", content_type=b"text/plain")
        await self._accept(link, message)

    def _may_open(self, principal: Principal | None, method: str) -> None:
        """The legacy endpoint serves ``default``: the policy must let the caller open it.

        Raises:
            Rejection: 403, as on the Streamable HTTP endpoint.
        """
        if not self._router.access.opens(principal, DEFAULT_PROFILE, method):
            raise Rejection(
                403,
                "Forbidden: the access policy does not let this caller open the profile 'default'",
                reason="policy",
            )

    async def _accept(self, link: _Link, message: jsonrpc.Message) -> None:
        if isinstance(message, Request) and message.method == "initialize":
            if link.session is not None:
                link.emit(jsonrpc.encode_error(message.id, INVALID_REQUEST, "already initialized"))
                return
            try:
                session, reply = open_client_session(
                    self._router,
                    self._clients,
                    message,
                    principal=link.principal,
                    caller=link.caller,
                )
            except LocalProtocolError as exc:
                link.emit(jsonrpc.encode_error(message.id, exc.code, exc.message))
                return
            # The connection is the session's stream: while it is open the
            # session must not idle out (ClientRegistry.expire_idle).
            session.stream_open = True
            link.session = session
            link.session_opened.set()
            link.emit(reply)
            return
        current = link.session
        if current is None:
            if isinstance(message, Request):
                link.emit(jsonrpc.encode_error(message.id, INVALID_REQUEST, "initialize first"))
            return
        if isinstance(message, Request):
            link.nursery.start_soon(self._answer, link, current, message)
        else:
            await accept_one_way(self._router, current, message, metrics=self._metrics)

    async def _answer(self, link: _Link, session: ClientSession, request: Request) -> None:
        reply = await route_request(
            self._router, session, request, link.emit, metrics=self._metrics
        )
        if reply:
            await link.outgoing.send(reply)


async def _write_events(send: h.Send, incoming: trio.MemoryReceiveChannel[bytes]) -> None:
    while True:
        message = None
        with trio.move_on_after(KEEPALIVE_INTERVAL):
            message = await incoming.receive()
        body = b": keep-alive\n\n" if message is None else h.sse_event(message)
        await send({"type": "http.response.body", "body": body, "more_body": True})
