"""``logging/setLevel``: each client's level, and the level each backend is set to.

Rules:

1. A client receives log messages only at or above the level it asked for,
   and none before it asks (``protocol.tables.LogLevels``).
2. A shared backend is set to the most verbose level any client wants; a
   per-client backend session gets its own client's level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import structlog

from gateway.backends.backend import BackendState
from gateway.errors import INVALID_PARAMS, GatewayError, LocalProtocolError, ProtocolError
from gateway.protocol import jsonrpc, mcp
from gateway.protocol.tables import LOG_LEVELS

if TYPE_CHECKING:
    import msgspec

    from gateway.protocol.tables import LogLevels
    from gateway.router.calls import Call
    from gateway.router.views import BackendView, PoolView

logger = structlog.get_logger("gateway.router")


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
        for backend in self._pool.backends.values():
            if backend.per_client and backend.has_link(client_id) and backend.offers("logging"):
                await self._send(backend, level, client_id)
        await self.apply()
        return jsonrpc.EMPTY_OBJECT

    async def apply(self) -> None:
        """Set each shared backend to the most verbose level any client wants."""
        wanted = self._wanted.most_verbose()
        if wanted is None:
            return
        for backend in self._pool.backends.values():
            if (
                backend.state is BackendState.UP
                and backend.offers("logging")
                and self._applied.get(backend.name) != wanted
            ):
                self._applied[backend.name] = wanted
                await self._send(backend, wanted, None)

    def backend_down(self, name: str) -> None:
        """A backend's session ended: whatever level it had is gone with it."""
        self._applied.pop(name, None)

    async def _send(self, backend: BackendView, level: str, client: str | None) -> None:
        try:
            await backend.request("logging/setLevel", mcp.encode({"level": level}), client=client)
        except (GatewayError, ProtocolError) as exc:
            logger.warning("logging.set_level.failed", backend=backend.name, error=str(exc))
