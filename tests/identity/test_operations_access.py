"""Issue 16 item 6: /metrics and /readyz details off loopback need the admin token or
live on their own listener; /healthz stays open."""

from __future__ import annotations

import socket

import httpx
import pytest
import trio

from gateway.frontend.asgi import operations_access
from tests.harness import gateway_config, start_gateway

ADMIN = "admin-token-0123456789"


@pytest.mark.parametrize(
    ("host", "metrics_port", "access"),
    [
        ("127.0.0.1", 0, "open"),
        ("::1", 0, "open"),
        ("localhost", 9100, "open"),
        ("0.0.0.0", 0, "admin"),
        ("0.0.0.0", 9100, "elsewhere"),
        ("10.1.2.3", 0, "admin"),
    ],
)
def test_who_may_read_operations_details_follows_the_bind(
    host: str, metrics_port: int, access: str
) -> None:
    """Loopback: open; otherwise a separate listener, else admin tokens only."""
    assert operations_access(host, metrics_port) == access


async def test_off_loopback_metrics_need_the_admin_token_and_healthz_stays_open(
    nursery: trio.Nursery,
) -> None:
    """A49: 403 without the admin token, 200 with it; /readyz says only ready/not."""
    running = await start_gateway(
        nursery, gateway_config([], auth={"admin_tokens": [ADMIN], "tokens": {"a": "tok-a-1234"}})
    )
    running.gateway.app.operations = "admin"  # as on a 0.0.0.0 bind (tests bind loopback)
    admin = {"authorization": f"Bearer {ADMIN}"}
    async with httpx.AsyncClient(base_url=running.base_url) as http:
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/metrics")).status_code == 403
        assert (
            await http.get("/metrics", headers={"authorization": "Bearer tok-a-1234"})
        ).status_code == 403
        metrics = await http.get("/metrics", headers=admin)
        assert metrics.status_code == 200
        assert "mcp_gateway_ready" in metrics.text
        assert (await http.get("/readyz")).json() == {"ready": True}
        assert "backends" in (await http.get("/readyz", headers=admin)).json()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def test_a_separate_metrics_listener_serves_the_details(nursery: trio.Nursery) -> None:
    """A49: metrics: {host, port} starts a second listener with the three paths only."""
    port = _free_port()
    running = await start_gateway(
        nursery, gateway_config([], metrics={"host": "127.0.0.1", "port": port})
    )
    running.gateway.app.operations = "elsewhere"
    async with httpx.AsyncClient() as http:
        ops = f"http://127.0.0.1:{port}"
        assert (await http.get(ops + "/metrics")).status_code == 200
        assert "backends" in (await http.get(ops + "/readyz")).json()
        assert (await http.get(ops + "/mcp")).status_code == 404
        assert (await http.get(running.base_url + "/metrics")).status_code == 403
        assert (await http.get(running.base_url + "/readyz")).json() == {"ready": True}
