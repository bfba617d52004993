"""The response cache shared by two replicas through one redis-server (``cache.shared``).

Two gateways share a ``redis-server`` (the store) and each runs its own
official-SDK backend (``tests/servers/watched.py``: ``touch(uri)`` sends
``notifications/resources/updated``). Hosts speak the modern envelope with
static tokens. What reached a replica's backend is read off its own
request counter.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import trio

from gateway.config import parse
from gateway.config.schema_store import StoreConfig
from gateway.store.redis_store import open_redis_store
from tests.e2e.test_response_cache import ALICE, BOB, sent
from tests.e2e.test_tasks import _ask
from tests.harness import ENGINE, sdk_backend, start_gateway

if TYPE_CHECKING:
    from gateway.router.shared_cache import SharedCache
    from tests.harness import Running
    from tests.redis_server import RedisServer

PREFIX: Final = "shared-cache:"
READ: Final = {"uri": "watched+watch://a"}


async def replicas(
    nursery: trio.Nursery, redis: RedisServer, scope: str
) -> tuple[Running, Running]:
    """Two replicas on ``redis``, their backend's reads kept for 10 minutes with ``scope``."""
    redis.flush()
    document: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": 0, "engine": ENGINE},
        "auth": {"tokens": {"alice": ALICE, "bob": BOB}},
        "store": {"url": redis.url, "key_prefix": PREFIX},
        "cache": {"shared": True},
        "backends": [sdk_backend("watched", session="shared", cache={"ttl": 600, "scope": scope})],
    }
    config = parse(json.dumps(document), env={})
    pair = (await start_gateway(nursery, config), await start_gateway(nursery, config))
    # Each backend coming up dropped the shared answers; those drops are done first.
    with trio.fail_after(10):
        while any(tier(running).pending for running in pair):  # noqa: ASYNC110
            await trio.sleep(0.01)
    return pair


def tier(running: Running) -> SharedCache:
    """The replica's shared tier."""
    cache = running.gateway.router.cache
    assert cache is not None and cache.shared is not None
    return cache.shared


async def kept(redis: RedisServer) -> list[str]:
    """The keys of the answers the store holds (waiting for at least one)."""
    async with open_redis_store(StoreConfig(url=redis.url, key_prefix=PREFIX)) as store:
        with trio.fail_after(10):
            while not (found := await store.scan("cache:r:")):  # noqa: ASYNC110
                await trio.sleep(0.01)
        return [key for key, _ in found]


async def read(running: Running, token: str) -> str:
    """One modern read of ``watch://a`` on ``running``; its text."""
    answer = await _ask(running, "resources/read", READ, token=token)
    text: str = answer["result"]["contents"][0]["text"]
    return text


async def test_a_read_kept_on_one_replica_is_served_by_the_other_until_an_update_drops_it(
    nursery: trio.Nursery, redis_server: RedisServer
) -> None:
    """Gateway choice (cache.shared): B answers A's kept read without its backend; A's
    backend's resources/updated stops B serving it, from B's memory and from the store."""
    a, b = await replicas(nursery, redis_server, "public")
    before_a, before_b = sent(a, "watched"), sent(b, "watched")
    text = await read(a, ALICE)
    await kept(redis_server)
    assert await read(b, BOB) == text
    assert await read(b, ALICE) == text  # B's own memory now
    assert (sent(a, "watched") - before_a, sent(b, "watched") - before_b) == (1, 0)
    metrics = b.gateway.router.cache
    assert metrics is not None
    (sample,) = metrics.samples()
    assert (sample.hits, sample.misses, sample.shared_hits) == (1, 0, 1)

    seen = tier(b).generations["watched"]
    touched = await _ask(
        a, "tools/call", {"name": "watched__touch", "arguments": {"uri": "watch://a"}}, token=ALICE
    )
    assert "result" in touched, touched
    with trio.fail_after(10):
        while tier(b).generations["watched"] == seen:  # noqa: ASYNC110
            await trio.sleep(0.01)
    await read(b, BOB)
    assert sent(b, "watched") - before_b == 1  # asked again: nothing old was served


async def test_a_private_answer_kept_on_one_replica_reaches_only_its_principal_on_the_other(
    nursery: trio.Nursery, redis_server: RedisServer
) -> None:
    """Spec (caching.mdx §Cache Scope) across replicas: Bob on B never gets Alice's answer
    from A; Alice on B does; the store's keys name neither principal nor token."""
    a, b = await replicas(nursery, redis_server, "private")
    before_b = sent(b, "watched")
    await read(a, ALICE)
    keys = await kept(redis_server)
    await read(b, BOB)
    assert sent(b, "watched") - before_b == 1
    await read(b, ALICE)
    assert sent(b, "watched") - before_b == 1  # Alice's own, from the store
    for key in keys:
        assert not any(secret in key for secret in ("alice", "bob", ALICE, BOB))
