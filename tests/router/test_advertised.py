"""Robustness row E7: the gateway advertises only what some backend really serves.

A backend that declares ``resources.subscribe`` and then answers its
``resources/list`` or a subscription with -32601 does not make the gateway
promise subscriptions to hosts, in ``initialize`` or in ``server/discover``.
"""

from __future__ import annotations

import json
from typing import Any, Final

import pytest
import trio
from prometheus_client import CollectorRegistry

from gateway.backends.backend import BackendState
from gateway.config import parse
from gateway.errors import RemoteProtocolError
from gateway.protocol import jsonrpc
from gateway.router.initialize import server_capabilities
from gateway.runtime.app import open_gateway
from tests.fakes import FakeConnector, FakeMcpServer
from tests.harness import wait_for_states
from tests.router.fakes import FakeBackend, FakePool

LATEST: Final = "2025-11-25"
CLAIMS: Final[dict[str, Any]] = {"resources": {"subscribe": True, "listChanged": True}}


def _subscribe(capabilities: dict[str, Any]) -> object:
    return capabilities["resources"].get("subscribe")


async def test_a_backend_that_refuses_the_resources_it_declared_is_not_advertised(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (E7): its resources/list answered -32601, so no ``subscribe: true``."""
    config = parse(
        json.dumps(
            {
                "backends": [
                    {
                        "name": "liar",
                        "transport": "stdio",
                        "command": "x",
                        "health": {"ping_interval": 0},
                    }
                ]
            }
        ),
        env={},
    )
    connector = FakeConnector({"liar": FakeMcpServer("liar", capabilities=CLAIMS)})
    async with open_gateway(config, connect=connector, registry=CollectorRegistry()) as gateway:
        await wait_for_states(gateway, {"liar": BackendState.UP})
        backend = gateway.pool.backends["liar"]
        assert "resources" in backend.refused
        initialized = json.loads(bytes(gateway.router.initialize_result(LATEST)))
        assert _subscribe(initialized["capabilities"]) is None
        discovered = gateway.router.discover_result()
        assert _subscribe(discovered["capabilities"]) is None
        with pytest.raises(RemoteProtocolError):
            await backend.request("resources/subscribe", jsonrpc.to_raw({"uri": "x://y"}))
        assert "resources.subscribe" in backend.refused


def test_a_subscription_refused_with_minus_32601_withdraws_subscribe() -> None:
    """Gateway choice (E7): once a backend refused a subscription, hosts are not promised one."""
    pool = FakePool()
    backend = pool.add(FakeBackend("alpha"))
    assert _subscribe(server_capabilities(pool)) is True  # type: ignore[arg-type]
    backend.refused = frozenset({"resources.subscribe"})
    assert _subscribe(server_capabilities(pool)) is None  # type: ignore[arg-type]
