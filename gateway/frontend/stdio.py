"""stdio mode: the gateway as one MCP server for a desktop host that spawns it.

One client session, newline-delimited JSON-RPC on stdin/stdout. stdout
carries nothing but MCP messages (logs go to stderr, see cli). Requests run
concurrently, each in its own task, so a long tool call never holds up a
ping; writes to stdout take turns through one lock so two messages never
interleave.

Both eras on one connection (``S/basic/transports/stdio.mdx``,
``S/basic/versioning.mdx`` §Backward Compatibility). The connection's era
is decided once, as the official SDK's ``serve_dual_era_loop`` does it:

1. ``initialize`` opens a legacy session that works exactly as before; a
   request carrying the 2026-07-28 envelope afterwards is -32600.
2. A request whose ``params._meta`` carries the protocol version is modern
   and is served statelessly by ``frontend.stdio_modern``; the first one
   whose envelope passes its checks locks the connection to the modern era.
   An ``initialize`` afterwards is -32022 naming the modern versions, and a
   request without an envelope gets the envelope's -32602.
3. A refused envelope (-32602, or -32022 naming both eras) decides nothing,
   so a host may fall back to ``initialize`` after it (gateway choice; the
   SDK locks on the first enveloped request, but its -32022 lists no
   handshake version, ours does).
4. The startup wait applies to whichever comes first, ``initialize`` or the
   first modern request, so a host's first tools/list is complete.
5. A line that is not JSON is -32700 and the connection goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import structlog
import trio

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.errors import INVALID_REQUEST, LocalProtocolError
from gateway.frontend.client_messages import accept_one_way, open_client_session, route_request
from gateway.frontend.stateless.stdio_requests import (
    EnvelopeRefused,
    ModernStdio,
    check_envelope,
    initialize_refused,
)
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.jsonrpc import Notification, Request
from gateway.protocol.stateless.envelope import is_modern
from gateway.protocol.versions import supports_batches
from gateway.transports.framing import LineFramer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from gateway.frontend.clients import ClientRegistry, ClientSession
    from gateway.router import Router
    from gateway.telemetry.metrics import Metrics

logger = structlog.get_logger("gateway.frontend.stdio")

READ_CHUNK_BYTES: Final = 256 * 1024
# The largest message a host may send us on stdin.
MAX_LINE_BYTES: Final = 16 * 1024 * 1024
# How long initialize may wait for the backends' first connect attempts.
STARTUP_WAIT: Final = 30.0
# Messages waiting for stdout. A host that stops reading blocks responses
# behind this; progress beyond it is dropped rather than buffered.
OUTGOING_BUFFER: Final = 256


def enveloped(request: Request) -> bool:
    """Whether ``request`` claims the 2026-07-28 era: its ``_meta`` names a version.

    ``initialize`` never does, even with an envelope stamped on it: the
    handshake does not exist at 2026 versions (the SDK's rule).
    """
    if request.method == "initialize":
        return False
    try:
        params = mcp.decode_params(request.params)
    except LocalProtocolError:
        return False
    return is_modern(params)


class StdioServer:
    """Serves one host over a pair of byte streams (stdin, stdout).

    Args:
        router: routes requests to backends.
        clients: the registry the one session lives in.
        receive: the host's messages (stdin).
        send: where our messages go (stdout).
        startup: awaited (at most ``STARTUP_WAIT``) before answering
            initialize: a desktop host lists tools right after spawning
            us, and should see the backends' tools, not an empty list.
        metrics: where unexpected exceptions while routing are counted.
        profile: the profile the host's session is bound to
            (``mcp-gateway stdio --profile``).
    """

    def __init__(
        self,
        router: Router,
        clients: ClientRegistry,
        receive: trio.abc.ReceiveStream,
        send: trio.abc.SendStream,
        *,
        startup: Callable[[], Awaitable[None]] | None = None,
        metrics: Metrics | None = None,
        profile: str = DEFAULT_PROFILE,
    ) -> None:
        self._profile = profile
        self._router = router
        self._clients = clients
        self._receive = receive
        self._send = send
        self._startup = startup
        self._metrics = metrics
        self._session: ClientSession | None = None
        self._session_opened = trio.Event()
        self._out_in, self._out = trio.open_memory_channel[bytes](OUTGOING_BUFFER)
        self._started = False
        self.modern: ModernStdio | None = None

    async def _await_startup(self) -> None:
        # Rule 4: once, before the first initialize or modern request.
        if self._started:
            return
        self._started = True
        if self._startup is not None:
            with trio.move_on_after(STARTUP_WAIT):
                await self._startup()

    async def write(self, message: bytes) -> None:
        """Queue one message for stdout; the writer keeps messages whole and in order."""
        await self._out_in.send(message)

    def _emit(self, message: bytes) -> bool:
        # Related messages (progress, questions) for a request in flight.
        try:
            self._out_in.send_nowait(message)
        except trio.WouldBlock:
            return False
        return True

    async def _writer(self) -> None:
        async for message in self._out:
            await self._send.send_all(message + b"\n")

    async def run(self) -> None:
        """Serve until stdin closes; then end the session (cancelling its calls)."""
        framer = LineFramer(MAX_LINE_BYTES)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer)
                nursery.start_soon(self._pump_outbox)
                while True:
                    chunk = await self._receive.receive_some(READ_CHUNK_BYTES)
                    if not chunk:
                        break
                    for line in framer.feed(bytes(chunk)):
                        await self._handle_line(line, nursery)
                if self.modern is not None:
                    logger.info(
                        "client.modern.closed",
                        reason="stdin closed",
                        in_flight=self.modern.inflight,
                    )
                nursery.cancel_scope.cancel()
        finally:
            if self._session is not None:
                self._clients.close(self._session)
                logger.info("client.session.closed", reason="stdin closed")

    async def _pump_outbox(self) -> None:
        await self._session_opened.wait()
        session = self._session
        assert session is not None
        last = 0
        while True:
            for event_id, message in await session.outbox.wait_after(last):
                last = event_id
                if message:
                    await self.write(message)

    async def _handle_line(self, line: bytes, nursery: trio.Nursery) -> None:
        try:
            message = jsonrpc.decode(line)
        except LocalProtocolError as exc:
            msg_id = exc.data.get("id") if isinstance(exc.data, dict) else None
            await self.write(jsonrpc.encode_error(msg_id, exc.code, exc.message))
            return
        if self.modern is not None:
            await self._modern_line(self.modern, message, nursery)
            return
        if isinstance(message, list):
            session = self._session
            if session is None or not supports_batches(session.protocol_version):
                await self.write(
                    jsonrpc.encode_error(
                        None, INVALID_REQUEST, "invalid request: batches need protocol 2025-03-26"
                    )
                )
                return
            nursery.start_soon(self._batch, session, message)
            return
        if isinstance(message, Request) and enveloped(message):
            await self._first_modern(message, nursery)
            return
        if isinstance(message, Request) and message.method == "initialize":
            if self._session is not None:
                await self.write(
                    jsonrpc.encode_error(
                        message.id, INVALID_REQUEST, "invalid request: already initialized"
                    )
                )
                return
            await self._await_startup()
            session, reply = open_client_session(
                self._router, self._clients, message, self._profile
            )
            self._session = session
            self._session_opened.set()
            await self.write(reply)
            return
        session = self._session
        if session is None:
            if isinstance(message, Request):
                await self.write(
                    jsonrpc.encode_error(
                        message.id, INVALID_REQUEST, "invalid request: send initialize first"
                    )
                )
            return
        if isinstance(message, Request):
            nursery.start_soon(self._request, session, message)
        else:
            await accept_one_way(self._router, session, message, metrics=self._metrics)

    async def _first_modern(self, request: Request, nursery: trio.Nursery) -> None:
        """An enveloped request on a pipe not locked modern (rules 1-3).

        Refused on a legacy pipe; otherwise the first one whose envelope
        passes locks the pipe modern and is served.
        """
        if self._session is not None:
            logger.info("client.era.refused", method=request.method[:64], era="legacy")
            await self.write(
                jsonrpc.encode_error(
                    request.id,
                    INVALID_REQUEST,
                    "invalid request: this connection serves the handshake era "
                    "(it sent initialize); requests carrying the 2026-07-28 "
                    "envelope are not accepted on it",
                )
            )
            return
        try:
            envelope, params = check_envelope(request)
        except EnvelopeRefused as exc:
            await self.write(exc.reply)
            return
        modern = ModernStdio(
            self._router,
            self._clients.listeners,
            self.write,
            self._emit,
            metrics=self._metrics,
            profile=self._profile,
        )
        self.modern = modern
        logger.info("client.modern.opened", protocol_version=envelope.protocol_version)
        await self._await_startup()
        await modern.start(request, envelope, params, nursery)

    async def _modern_line(
        self,
        modern: ModernStdio,
        message: jsonrpc.Message | list[jsonrpc.Message | LocalProtocolError],
        nursery: trio.Nursery,
    ) -> None:
        """Any message on a connection locked to the modern era (rule 2)."""
        if isinstance(message, list):
            await self.write(
                jsonrpc.encode_error(
                    None, INVALID_REQUEST, "invalid request: 2026-07-28 has no batches"
                )
            )
        elif isinstance(message, Request):
            if message.method == "initialize":
                logger.info("client.era.refused", method="initialize", era="2026-07-28")
                await self.write(initialize_refused(message))
                return
            try:
                envelope, params = check_envelope(message)
            except EnvelopeRefused as exc:
                await self.write(exc.reply)
                return
            await modern.start(message, envelope, params, nursery)
        elif isinstance(message, Notification) and message.method == "notifications/cancelled":
            modern.cancel(message)
        # Other notifications and any response: a modern host owes us none.

    async def _request(self, session: ClientSession, request: Request) -> None:
        reply = await route_request(
            self._router, session, request, self._emit, metrics=self._metrics
        )
        if reply:
            await self.write(reply)

    async def _batch(
        self, session: ClientSession, members: list[jsonrpc.Message | LocalProtocolError]
    ) -> None:
        replies: list[bytes] = []
        for member in members:
            if isinstance(member, LocalProtocolError):
                msg_id = member.data.get("id") if isinstance(member.data, dict) else None
                replies.append(jsonrpc.encode_error(msg_id, member.code, member.message))
            elif isinstance(member, Request):
                reply = await route_request(self._router, session, member, metrics=self._metrics)
                if reply:
                    replies.append(reply)
            else:
                await accept_one_way(self._router, session, member, metrics=self._metrics)
        if replies:
            await self.write(b"[" + b",".join(replies) + b"]")
