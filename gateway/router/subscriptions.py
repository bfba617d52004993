"""``resources/subscribe`` and ``unsubscribe``: one backend subscription per URI.

Rules:

1. A shared backend sees one subscription per URI however many clients
   hold it: the first subscriber's request goes to the backend, the last
   unsubscriber's too (``protocol.tables.Subscriptions`` counts).
2. A client is told it is subscribed only when the backend has accepted
   the subscription. A client that arrives while the first subscribe is in
   flight waits for its outcome; if it failed (refused, timed out, or its
   client went away), the waiter sends its own subscribe and gets that
   answer, so it never believes in a subscription the backend lacks.
3. A per-client backend session gets each client's subscribe as it is.
4. When a backend comes (back) up, every URI someone holds there is
   subscribed again; when a client goes, what only it held is released.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

import structlog
import trio

from gateway.errors import METHOD_NOT_FOUND, GatewayError, LocalProtocolError, ProtocolError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.tables import Subscribe
from gateway.router.neighbours import subscribable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    import msgspec

    from gateway.backends.state import BackendView
    from gateway.protocol.tables import Subscriptions
    from gateway.router.calls import Forwarder, Targets
    from gateway.router.context import Call, Target
    from gateway.router.neighbours import PoolView

logger = structlog.get_logger("gateway.router")


class SubscriptionRelay:
    """Turns clients' subscriptions into the backend's, counted (rules 1-4).

    Args:
        pool: the backends.
        table: who holds what (shared with the ``resources/updated`` fan-out).
        targets: URI lookup through the request's snapshot.
        forwarder: forwards a per-client backend's subscribe as a call.
    """

    def __init__(
        self, pool: PoolView, table: Subscriptions, targets: Targets, forwarder: Forwarder
    ) -> None:
        self._pool = pool
        self._table = table
        self._targets = targets
        self._forward = forwarder.forward
        # One event per URI whose first subscribe is in flight; set when it ends.
        self._settled: dict[tuple[str, str], trio.Event] = {}

    def _target(self, call: Call, params: dict[str, Any]) -> Target:
        target = self._targets.uri(mcp.require_str(params, "uri", "resource"), call)
        if not subscribable(target.backend):
            raise LocalProtocolError(
                f"backend {target.backend.name!r} does not offer resource subscriptions",
                METHOD_NOT_FOUND,
            )
        return target

    async def subscribe(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``resources/subscribe``.

        Raises:
            LocalProtocolError: unknown URI, or its backend offers no subscriptions.
            RemoteProtocolError: the backend refused the subscription.
        """
        target = self._target(call, params)
        if target.backend.per_client:
            return await self._forward(
                call, target.backend, "resources/subscribe", {"uri": target.original}
            )
        await self._subscribe_shared(target.backend, target.original, call.client.session_id)
        return jsonrpc.EMPTY_OBJECT

    async def _subscribe_shared(self, backend: BackendView, uri: str, client: str) -> None:
        key = (backend.name, uri)
        while True:
            step = self._table.subscribe(backend.name, uri, client)
            if step is Subscribe.HELD:
                return
            if step is Subscribe.WAIT:
                await self._settled[key].wait()
                continue
            settled = self._settled[key] = trio.Event()
            try:
                await backend.request("resources/subscribe", mcp.encode({"uri": uri}))
            except BaseException:
                self._table.abandon(backend.name, uri)
                raise
            else:
                self._table.confirm(backend.name, uri)
                return
            finally:
                del self._settled[key]
                settled.set()

    async def unsubscribe(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``resources/unsubscribe``; the backend hears of it when the last holder leaves.

        Raises:
            LocalProtocolError: unknown URI, or its backend offers no subscriptions.
        """
        target = self._target(call, params)
        if target.backend.per_client:
            return await self._forward(
                call, target.backend, "resources/unsubscribe", {"uri": target.original}
            )
        if self._table.unsubscribe(target.backend.name, target.original, call.client.session_id):
            await self._release(target.backend, target.original)
        return jsonrpc.EMPTY_OBJECT

    def client_closed(
        self, client: str, spawn: Callable[[Callable[[], Awaitable[None]]], None]
    ) -> None:
        """Release what only this client held, each unsubscribe run by ``spawn``."""
        for backend_name, uri in self._table.drop_client(client):
            backend = self._pool.get(backend_name)
            if backend is not None:
                spawn(partial(self._release, backend, uri))

    async def renew(self, backend: BackendView) -> None:
        """A backend came (back) up: give it the subscriptions it lost."""
        for uri in self._table.uris_of(backend.name):
            try:
                await backend.request("resources/subscribe", mcp.encode({"uri": uri}))
            except (GatewayError, ProtocolError) as exc:
                logger.warning("subscription.renew_failed", backend=backend.name, error=str(exc))

    async def _release(self, backend: BackendView, uri: str) -> None:
        try:
            await backend.request("resources/unsubscribe", mcp.encode({"uri": uri}))
        except (GatewayError, ProtocolError) as exc:
            logger.info("subscription.release_failed", backend=backend.name, error=str(exc))
