"""The state store's metrics: latency per operation, failures, state and reconnects."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import parse
from gateway.runtime.app import open_gateway
from gateway.store.api import StoreUnavailable
from tests.redis_server import RedisServer


async def test_store_operations_failures_and_reconnects_are_exported(tmp_path: Path) -> None:
    """Issue 26: latency by operation, errors by operation, store_up and reconnects."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        config = parse(f"store: {{url: '{server.url}', timeout: 0.5}}\nbackends: []\n")
        async with open_gateway(config) as gateway:
            assert gateway.store is not None
            registry = gateway.metrics.registry

            def value(name: str, **labels: str) -> float | None:
                return registry.get_sample_value("mcp_gateway_" + name, labels)

            await gateway.store.put("cache:x", b"1")
            assert value("store_operation_duration_seconds_count", operation="put") == 1
            assert value("store_up", kind="redis") == 1
            server.stop()
            with pytest.raises(StoreUnavailable):
                await gateway.store.get("cache:x")
            assert value("store_errors_total", operation="get") == 1
            assert value("store_operation_duration_seconds_count", operation="get") == 1
            assert value("store_up", kind="redis") == 0
            server.start()
            for _ in range(20):  # the client reconnects on its next operations
                try:
                    await gateway.store.get("cache:x")
                    break
                except StoreUnavailable:
                    continue
            assert value("store_up", kind="redis") == 1
            assert value("store_reconnects_total") == 1
    finally:
        server.stop()


async def test_the_embedded_store_is_measured_too(tmp_path: Path) -> None:
    """Gateway choice: one set of series whatever the store; the embedded one is up."""
    async with open_gateway(parse("backends: []\n")) as gateway:
        assert gateway.store is not None
        await gateway.store.add("limits:n")
        registry = gateway.metrics.registry
        count = registry.get_sample_value(
            "mcp_gateway_store_operation_duration_seconds_count", {"operation": "add"}
        )
        assert count == 1
        assert registry.get_sample_value("mcp_gateway_store_up", {"kind": "embedded"}) == 1
