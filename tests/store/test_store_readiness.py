"""The state store as the running gateway shows it: /readyz names it and its state."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import parse
from gateway.runtime.app import open_gateway
from gateway.store.api import StoreUnavailable
from tests.redis_server import RedisServer


async def test_readyz_names_the_embedded_store_beside_the_config_file(tmp_path: Path) -> None:
    """Issue 26: without store.url the embedded store serves, its file beside the config."""
    config = parse("backends: []\n")
    path = str(tmp_path / "gw.yaml")
    async with open_gateway(config, config_path=path) as gateway:
        ready, details = gateway.readiness()
    assert ready
    assert details["store"] == {
        "kind": "embedded",
        "state": "ok",
        "location": str(tmp_path / "gw.state.sqlite"),
        "detail": "",
        "reconnects": 0,
    }
    assert details["degraded"] is False


async def test_readyz_is_degraded_not_down_while_the_shared_store_is_unreachable(
    tmp_path: Path,
) -> None:
    """Issue 26 and E22: the store's state and reason in /readyz; the gateway stays ready."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        config = parse(f"store: {{url: '{server.url}', timeout: 0.5}}\nbackends: []\n")
        async with open_gateway(config) as gateway:
            assert gateway.store is not None
            await gateway.store.put("cache:x", b"1")
            assert gateway.readiness()[1]["store"]["state"] == "ok"
            server.stop()
            with pytest.raises(StoreUnavailable):
                await gateway.store.get("cache:x")
            ready, details = gateway.readiness()
            assert ready
            assert details["degraded"] is True
            assert details["store"]["kind"] == "redis"
            assert details["store"]["state"] == "down" and details["store"]["detail"]
    finally:
        server.stop()
