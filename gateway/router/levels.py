"""``logging/setLevel``: each client's level, and the level each backend is set to.

Rules:

1. A client receives log messages only at or above the level it asked for,
   and none before it asks (``protocol.tables.LogLevels``).
2. A shared backend is set to the most verbose level any client wants; a
   per-client backend session gets its own client's level.
3. A level counts as applied to a backend only once the backend has
   acknowledged it. A refused, failed or timed-out ``setLevel`` is not
   remembered, so the next ``logging/setLevel`` from any client, or the
   backend's next (re)connection, sends it again.
4. Levels go to all backends at once, each call bounded by that backend's
   own request timeout: one hung backend delays the host's answer by at
   most one timeout, never one per backend.

Theory of operation: ``_applied`` holds the last level each shared backend
acknowledged. Every shared send takes a number; only the newest send to a
backend may write its outcome, so an old answer that arrives late cannot
overwrite what a newer ``setLevel`` did.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import structlog
import trio

from gateway.backends.state import BackendState
from gateway.errors import INVALID_PARAMS, GatewayError, LocalProtocolError, ProtocolError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.tables import LOG_LEVELS

if TYPE_CHECKING:
    import msgspec

    from gateway.backends.state import BackendView
    from gateway.protocol.tables import LogLevels
    from gateway.router.context import Call
    from gateway.router.neighbours import PoolView

logger = structlog.get_logger("gateway.router")


def takes_set_level(backend: BackendView) -> bool:
    """Whether ``logging/setLevel`` goes to this backend.

    Only to handshake-era backends that offer logging: a 2026-07-28 backend
    has no such method and gets each call's ``logLevel`` in its ``_meta``.
    """
    info = backend.info
    return backend.offers("logging") and not (info is not None and info.modern)


class Levels:
    """Keeps backends' log levels in step with what clients asked for.

    Args:
        pool: the backends.
        wanted: each client's level (shared with the notification fan-out).
    """

    def __init__(self, pool: PoolView, wanted: LogLevels) -> None:
        self._pool = pool
        self._wanted = wanted
        self._applied: dict[str, str] = {}
        self._latest: dict[str, int] = {}
        self._numbers = itertools.count(1)

    async def set_level(self, call: Call, params: dict[str, Any]) -> msgspec.Raw:
        """``logging/setLevel``: record the client's level and pass it on (rules 2-4).

        Raises:
            LocalProtocolError: -32602, not a level the spec defines.
        """
        level = params.get("level")
        if not isinstance(level, str) or level not in LOG_LEVELS:
            raise LocalProtocolError(
                f"invalid params: level must be one of {', '.join(LOG_LEVELS)}", INVALID_PARAMS
            )
        client_id = call.client.session_id
        self._wanted.set(client_id, level)
        async with trio.open_nursery() as nursery:
            for backend in self._pool.backends.values():
                if backend.per_client and backend.has_link(client_id) and takes_set_level(backend):
                    nursery.start_soon(self._send, backend, level, client_id)
            self._start_shared(nursery)
        return jsonrpc.EMPTY_OBJECT

    async def apply(self) -> None:
        """Set each shared backend to the most verbose level any client wants."""
        async with trio.open_nursery() as nursery:
            self._start_shared(nursery)

    def backend_down(self, name: str) -> None:
        """A backend's session ended: whatever level it had is gone with it."""
        self._applied.pop(name, None)
        self._latest.pop(name, None)

    def _start_shared(self, nursery: trio.Nursery) -> None:
        wanted = self._wanted.most_verbose()
        if wanted is None:
            return
        for backend in self._pool.backends.values():
            if (
                backend.state is BackendState.UP
                and takes_set_level(backend)
                and self._applied.get(backend.name) != wanted
            ):
                nursery.start_soon(self._send_shared, backend, wanted)

    async def _send_shared(self, backend: BackendView, level: str) -> None:
        number = next(self._numbers)
        self._latest[backend.name] = number
        acknowledged = await self._send(backend, level, None)
        if self._latest.get(backend.name) != number:
            return  # a newer send (or the backend's end) decides what is applied
        if acknowledged:
            self._applied[backend.name] = level
        else:
            self._applied.pop(backend.name, None)

    async def _send(self, backend: BackendView, level: str, client: str | None) -> bool:
        try:
            await backend.request("logging/setLevel", mcp.encode({"level": level}), client=client)
        except (GatewayError, ProtocolError) as exc:
            logger.warning("logging.set_level.failed", backend=backend.name, error=str(exc))
            return False
        return True
