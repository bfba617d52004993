"""The gateway's ASGI application: the MCP endpoint plus operations paths.

``{mcp_path}`` serves the profile ``default``; ``{mcp_path}/{name}`` serves
each other configured profile (``catalog.profiles``). Any other path under
``{mcp_path}/`` is 404 with a JSON-RPC error body, so an MCP client sees a
JSON-RPC error rather than an HTML page or nothing.

``/sse`` and ``/messages`` serve hosts on the legacy HTTP+SSE transport.
``/healthz`` says the process answers; ``/readyz`` says whether every
backend marked ``required`` is up, and names the ones that are not;
``/metrics`` is the Prometheus exposition of the gateway's registry.

Every HTTP request runs under ``rejection.answer``: the one place where a
refusal becomes its response and a failure becomes a logged, counted
JSON-RPC error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gateway.catalog.profiles import DEFAULT_PROFILE
from gateway.frontend import http_util as h
from gateway.frontend.rejection import Rejection, answer

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from gateway.frontend.legacy_sse import LegacySseEndpoint
    from gateway.frontend.streamable_http import McpEndpoint
    from gateway.observability import Metrics


class GatewayApp:
    """Routes HTTP paths; everything else is 404.

    Args:
        mcp_path: where the MCP endpoint lives (``/mcp``).
        endpoint: the MCP endpoint.
        readiness: returns (ready, details) for ``/readyz``.
        metrics: the metrics; their registry is served at ``/metrics``, and
            refusals and failures are counted on them.
        legacy: the legacy HTTP+SSE endpoints, when enabled.
        profiles: the names of the profiles served under ``mcp_path``
            (``default`` is always served at ``mcp_path`` itself).
    """

    def __init__(
        self,
        mcp_path: str,
        endpoint: McpEndpoint,
        readiness: Callable[[], tuple[bool, dict[str, Any]]],
        metrics: Metrics,
        legacy: LegacySseEndpoint | None = None,
        profiles: Collection[str] = (),
    ) -> None:
        self._mcp_path = mcp_path.rstrip("/") or "/"
        base = "" if self._mcp_path == "/" else self._mcp_path
        self._profile_base = base + "/"
        self._profiles = frozenset(profiles) - {DEFAULT_PROFILE}
        self._endpoint = endpoint
        self._legacy = legacy
        self._readiness = readiness
        self._metrics = metrics

    async def __call__(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        """The ASGI entry point."""
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        await answer(self._route, scope, receive, send, self._metrics)

    async def _route(self, scope: h.Scope, receive: h.Receive, send: h.Send) -> None:
        path = scope["path"].rstrip("/") or "/"
        if path == self._mcp_path:
            await self._endpoint(scope, receive, send)
        elif path.startswith(self._profile_base) and self._is_profile_path(path):
            name = path[len(self._profile_base) :]
            if name not in self._profiles:
                raise Rejection(404, f"no such profile: {name[:64]}")
            await self._endpoint(scope, receive, send, name)
        elif path == "/sse" and self._legacy is not None:
            await self._legacy.stream(scope, receive, send)
        elif path == "/messages" and self._legacy is not None:
            await self._legacy.post(scope, receive, send)
        elif path == "/healthz":
            await h.respond_json(send, 200, {"status": "ok"})
        elif path == "/readyz":
            ready, details = self._readiness()
            await h.respond_json(send, 200 if ready else 503, {"ready": ready, **details})
        elif path == "/metrics":
            await h.respond(
                send,
                200,
                generate_latest(self._metrics.registry),
                content_type=CONTENT_TYPE_LATEST.encode(),
            )
        else:
            await h.respond_json(send, 404, {"error": f"no such path: {path[:100]}"})

    def _is_profile_path(self, path: str) -> bool:
        # One segment under the MCP path. With ``mcp_path`` "/", only names
        # of configured profiles are profile paths, so the operations paths
        # (/healthz, /metrics...) stay what they are.
        rest = path[len(self._profile_base) :]
        if not rest or "/" in rest:
            return False
        return self._mcp_path != "/" or rest in self._profiles


async def _lifespan(receive: h.Receive, send: h.Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
