"""Per-credential rate limits across replicas: one budget in the shared store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import httpx
import trio
from structlog.testing import capture_logs

from gateway.frontend.rate_limits import RateLimiter
from gateway.frontend.shared_limits import SharedLimiter
from gateway.store.api import Store, StoreUnavailable
from gateway.store.embedded import EmbeddedStore
from tests.harness import Running, gateway_config, initialize_message, start_gateway
from tests.redis_server import RedisServer

TOKEN: Final = "token-of-alice-0123456789"
HEADERS: Final = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "authorization": f"Bearer {TOKEN}",
}


async def _replica(nursery: trio.Nursery, store: dict[str, Any], burst: int) -> Running:
    config = gateway_config(
        [],
        auth={"tokens": {"alice": TOKEN}},
        limits={"token_rate": 0.001, "token_burst": burst},
        store=store,
    )
    return await start_gateway(nursery, config)


async def _statuses(http: httpx.AsyncClient, urls: list[str]) -> list[int]:
    body = json.dumps(initialize_message()).encode()
    return [(await http.post(url, headers=HEADERS, content=body)).status_code for url in urls]


async def test_two_replicas_sharing_redis_admit_one_budget_per_credential(
    nursery: trio.Nursery, redis_server: RedisServer
) -> None:
    """Issue 26: a burst of 3 is spent across both replicas; the fourth request is 429 on either."""
    shared = {"url": redis_server.url, "key_prefix": "limits-one-budget:"}
    first = await _replica(nursery, shared, burst=3)
    second = await _replica(nursery, shared, burst=3)
    async with httpx.AsyncClient() as http:
        admitted = await _statuses(http, [first.url, second.url, first.url])
        refused = await _statuses(http, [second.url, first.url])
    assert admitted == [200, 200, 200]
    assert refused == [429, 429]


async def test_two_replicas_on_embedded_stores_each_admit_their_own_budget(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: the embedded default keeps the local buckets, one budget per gateway."""
    first = await _replica(nursery, {}, burst=2)
    second = await _replica(nursery, {}, burst=2)
    async with httpx.AsyncClient() as http:
        statuses = await _statuses(http, [first.url, first.url, second.url, second.url, first.url])
    assert statuses == [200, 200, 200, 200, 429]


async def test_a_replica_whose_store_is_down_limits_with_its_local_bucket_logged_and_counted(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Gateway choice (fail open): store down, the local bucket decides; one warning, counted."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        running = await _replica(nursery, {"url": server.url, "timeout": 0.5}, burst=2)
        server.stop()
        async with httpx.AsyncClient() as http:
            with capture_logs() as logs:
                statuses = await _statuses(http, [running.url] * 3)
    finally:
        server.stop()
    assert statuses == [200, 200, 429]
    warnings = [e for e in logs if e["event"] == "limits.store_fallback"]
    assert len(warnings) == 1 and warnings[0]["reason"]
    metrics = running.gateway.metrics
    assert metrics.store_fallbacks.labels(tenant="rate_limits")._value.get() == 3


class _Down(EmbeddedStore):
    """A store that fails every spend until told otherwise (a fault a real server shows slowly)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = True
        self.asked = 0

    async def spend(self, key: str, *, rate: float, burst: float, cost: float = 1.0) -> float:
        """Fails while down; counts every attempt."""
        self.asked += 1
        if self.down:
            raise StoreUnavailable("spend", "refused")
        return await super().spend(key, rate=rate, burst=burst, cost=cost)


async def test_a_store_that_failed_is_not_asked_again_for_a_second(autojump_clock: Any) -> None:
    """Gateway choice: after a failure no request waits on the store for RETRY_AFTER seconds."""
    store = _Down()
    limiter = SharedLimiter(RateLimiter(1.0, 100.0), store)
    for _ in range(5):
        assert await limiter.check("alice", trio.current_time()) == 0.0
    assert store.asked == 1
    store.down = False
    await trio.sleep(1.0)
    with capture_logs() as logs:
        assert await limiter.check("alice", trio.current_time()) == 0.0
    assert store.asked == 2
    assert [e["event"] for e in logs] == ["limits.store_restored"]


async def test_two_limiters_on_one_store_share_the_budget(store: Store) -> None:
    """Issue 26: the bucket lives in the store (each kind): two limiters spend one burst."""
    first = SharedLimiter(RateLimiter(0.001, 2.0), store)
    second = SharedLimiter(RateLimiter(0.001, 2.0), store)
    now = trio.current_time()
    waits = [await first.check("k", now), await second.check("k", now)]
    assert waits == [0.0, 0.0]
    assert await first.check("k", now) > 0
    assert await second.check("k", now) > 0
    assert await first.check("other", now) == 0.0
