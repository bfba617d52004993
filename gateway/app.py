"""Composition root: config → metrics → pool → router → frontend → hypercorn.

Everything the gateway runs lives under the nursery of ``serve``: the
backends (inside the pool), hypercorn, and housekeeping. Leaving it stops
all of them, backends last, so that no child process outlives the gateway.
"""

from __future__ import annotations

import signal
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import hypercorn.config
import hypercorn.trio
import structlog
import trio

from gateway.backends.backend import Backend, BackendState
from gateway.backends.pool import Pool, open_pool
from gateway.catalog.cursor import CursorCodec
from gateway.catalog.naming import NamingRules
from gateway.catalog.snapshot import Kind, Snapshot
from gateway.frontend.asgi import GatewayApp
from gateway.frontend.clients import ClientRegistry, ClientSession
from gateway.frontend.streamable_http import McpEndpoint, OriginPolicy
from gateway.observability import Metrics
from gateway.protocol import jsonrpc
from gateway.router import Router

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from prometheus_client import CollectorRegistry

    from gateway.config import GatewayConfig

logger = structlog.get_logger("gateway.app")

# How often idle client sessions are looked for.
EXPIRY_SWEEP_INTERVAL: Final = 30.0
_LIST_CHANGED_METHOD: Final = {
    Kind.TOOLS: "notifications/tools/list_changed",
    Kind.PROMPTS: "notifications/prompts/list_changed",
    Kind.RESOURCES: "notifications/resources/list_changed",
    Kind.TEMPLATES: "notifications/resources/list_changed",
}


@dataclass
class Gateway:
    """The running parts, for the server loop and for tests."""

    config: GatewayConfig
    pool: Pool
    router: Router
    clients: ClientRegistry
    app: GatewayApp
    metrics: Metrics
    draining: bool = False

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(ready, details) for ``/readyz``."""
        states = {name: b.state.value for name, b in sorted(self.pool.backends.items())}
        down = [name for name, state in states.items() if state != BackendState.UP.value]
        required_down = [name for name in down if self.pool.backends[name].config.required]
        ready = not required_down and not self.draining
        return ready, {"backends": states, "down": down, "required_down": required_down}


@asynccontextmanager
async def open_gateway(
    config: GatewayConfig, *, registry: CollectorRegistry | None = None
) -> AsyncIterator[Gateway]:
    """Start the backends and build the frontend; stop everything on exit."""
    metrics = Metrics(registry)
    rules = NamingRules(config.naming.separator, config.naming.max_length)
    async with open_pool(config.backends, rules) as pool, trio.open_nursery() as housekeeping:
        router = Router(
            pool,
            CursorCodec(config.pagination.cursor_secret),
            config.pagination.page_size,
            metrics,
        )

        def opened(session: ClientSession) -> None:
            router.client_opened(session)
            metrics.client_sessions_opened.inc()
            metrics.client_sessions_open.inc()

        def closed(session: ClientSession) -> None:
            router.client_closed(session.session_id, housekeeping)
            metrics.client_sessions_open.dec()

        clients = ClientRegistry(config.server.max_sessions, on_open=opened, on_close=closed)
        server = config.server
        gateway: Gateway
        endpoint = McpEndpoint(
            router,
            clients,
            OriginPolicy(server.host, server.allowed_origins, server.allowed_hosts),
            max_body_bytes=server.max_body_bytes,
            is_draining=lambda: gateway.draining,
        )
        app = GatewayApp(server.path, endpoint, lambda: gateway.readiness(), metrics.registry)
        gateway = Gateway(config, pool, router, clients, app, metrics)

        def fan_out(snapshot: Snapshot, kinds: frozenset[Kind]) -> None:
            for method in sorted({_LIST_CHANGED_METHOD[k] for k in kinds}):
                sent = clients.broadcast(jsonrpc.encode_notification(method))
                metrics.notifications_sent.labels(kind=method).inc(sent)
            for backend in pool.backends.values():
                for kind in Kind:
                    count = sum(1 for e in snapshot.view(kind).entries if e.backend == backend.name)
                    metrics.catalog_items.labels(backend=backend.name, kind=kind.value).set(count)

        def track_state(backend: Backend) -> None:
            metrics.backend_up.labels(backend=backend.name).set(
                1 if backend.state is BackendState.UP else 0
            )

        pool.on_catalog_change(fan_out)
        pool.on_state_change(track_state)
        try:
            yield gateway
        finally:
            for session in clients:
                clients.close(session)
            housekeeping.cancel_scope.cancel()


def _hypercorn_config(host: str, port: int) -> hypercorn.config.Config:
    hc = hypercorn.config.Config()
    hc.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    hc.accesslog = None
    hc.errorlog = None
    hc.keep_alive_timeout = 75.0
    hc.graceful_timeout = 5.0
    # h11 refuses header blocks past this size; slow headers time out
    # through read_timeout (robustness A26).
    hc.h11_max_incomplete_size = 64 * 1024
    hc.read_timeout = 10
    return hc


async def _expire_sessions(gateway: Gateway) -> None:
    idle = gateway.config.server.session_idle_timeout
    while True:
        await trio.sleep(min(EXPIRY_SWEEP_INTERVAL, idle))
        for session in gateway.clients.expire_idle(trio.current_time(), idle):
            logger.info(
                "client.session.closed", client_session=session.session_id[:8], reason="idle"
            )


async def serve(
    config: GatewayConfig,
    *,
    registry: CollectorRegistry | None = None,
    task_status: trio.TaskStatus[tuple[Gateway, list[str]]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the gateway until cancelled.

    ``task_status.started`` receives the gateway and the bound addresses
    (``http://127.0.0.1:PORT``) once the socket is listening.
    """
    async with open_gateway(config, registry=registry) as gateway, trio.open_nursery() as nursery:
        hc = _hypercorn_config(config.server.host, config.server.port)
        binds: list[str] = await nursery.start(hypercorn.trio.serve, gateway.app, hc)
        nursery.start_soon(_expire_sessions, gateway)
        logger.info(
            "gateway.listening", binds=binds, path=config.server.path, backends=len(config.backends)
        )
        task_status.started((gateway, binds))


async def _serve_until_signal(config: GatewayConfig) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(serve, config)
            async for signum in signals:
                logger.info("gateway.stopping", signal=signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


def run(config: GatewayConfig) -> None:
    """Serve until SIGTERM or SIGINT, then stop every backend and return."""
    trio.run(_serve_until_signal, config)
