"""The response cache with real backends behind the gateway, for both host eras.

A 2026-07-28 backend (the official SDK 2.x server ``tests/servers/modern_sdk2.py``
with ``SDK2_CACHE_HINTS=1``: its reads carry ``{45000, public}``) and a
handshake-era one (the official SDK 1.x ``alpha``, with ``backends[].cache``
and a profile's tool opt-in); the hosts are the official ``mcp`` client
(2025-11-25) and raw ``httpx`` with the modern envelope. What reached a
backend is read off its own request counter.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec

from gateway.config import parse
from gateway.config.schema_cache import ToolCache
from gateway.config.schema_profiles import ProfileConfig
from gateway.runtime.app import reload_config
from tests.e2e.test_modern_backend import modern_call, sdk2_stdio
from tests.e2e.test_tasks import _ask
from tests.harness import (
    ENGINE,
    NEEDS_SDK2,
    gateway_config,
    open_client,
    run_sdk2_host,
    sdk_backend,
    start_gateway,
)

if TYPE_CHECKING:
    import trio

    from tests.harness import Running


SDK2_HOST: Final = Path(__file__).resolve().parents[1] / "sdk2" / "cache_host.py"
ALICE: Final = "alice-token-0123456789abcdef"
BOB: Final = "bob-token-0123456789abcdef"


def sent(running: Running, backend: str) -> int:
    """Requests the gateway has sent to ``backend`` so far."""
    return sum(running.gateway.pool.backends[backend].handshake.requests.values())


@NEEDS_SDK2[0]
@NEEDS_SDK2[1]
async def test_a_modern_backends_read_is_kept_per_its_hint_for_both_host_eras(
    nursery: trio.Nursery,
) -> None:
    """Spec (caching.mdx): kept for ttlMs; each era gets its own shape, once from the backend."""
    config = gateway_config([sdk2_stdio("m", env={"SDK2_CACHE_HINTS": "1"})], cache={})
    running = await start_gateway(nursery, config)
    before = sent(running, "m")
    modern_reads = [
        (await modern_call(running, n, "resources/read", {"uri": "m+sdk2://note"}))["result"]
        for n in (1, 2)
    ]
    async with open_client(running.url) as session:
        legacy_reads = [await session.read_resource("m+sdk2://note") for _ in range(2)]  # type: ignore[arg-type]
    assert sent(running, "m") - before == 2  # one per era's shape
    first, second = modern_reads
    assert first["contents"] == second["contents"]
    assert first["ttlMs"] == 45000 and 0 < second["ttlMs"] <= 45000
    assert legacy_reads[0].contents == legacy_reads[1].contents
    assert not set(legacy_reads[1].model_extra or {}) & {"ttlMs", "cacheScope", "resultType"}
    cache = running.gateway.router.cache
    assert cache is not None
    stats = cache.responses.stats("m")
    assert (stats.hits, stats.misses) == (2, 2)


async def test_a_legacy_backends_opted_in_reads_and_read_only_calls_are_kept(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: backends[].cache and profiles[].cache for a hint-less backend."""
    config = gateway_config(
        [sdk_backend("alpha", cache={"ttl": 60})],
        cache={"default_ttl": 60},
    )
    echo_only = ToolCache(tools=["alpha__echo"], allow_unannotated=True)  # SDK 1.x: no hints
    config = msgspec.structs.replace(
        config, profiles=[ProfileConfig(name="default", cache=echo_only)]
    )
    running = await start_gateway(nursery, config)
    before = sent(running, "alpha")
    async with open_client(running.url) as session:
        reads = [await session.read_resource("alpha+alpha://readme") for _ in range(3)]  # type: ignore[arg-type]
        echoes = [await session.call_tool("alpha__echo", {"text": "hi"}) for _ in range(2)]
        sums = [await session.call_tool("alpha__add", {"a": 1, "b": 2}) for _ in range(2)]
    assert sent(running, "alpha") - before == 1 + 1 + 2  # add is not opted in
    assert reads[0].contents == reads[2].contents
    assert echoes[0].content == echoes[1].content
    assert sums[0].content == sums[1].content


async def test_a_real_backends_updated_and_list_changed_drop_what_they_make_stale(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: resources/updated drops the URI's reads, tools/list_changed the
    backend's tool answers (the official SDK's low-level server ``watched``)."""
    config = gateway_config([sdk_backend("watched", cache={"ttl": 600})], cache={})
    touch_kept = ToolCache(tools=["watched__touch"], allow_unannotated=True)
    config = msgspec.structs.replace(
        config, profiles=[ProfileConfig(name="default", cache=touch_kept)]
    )
    running = await start_gateway(nursery, config)
    async with open_client(running.url) as session:
        for _ in range(2):
            await session.read_resource("watched+watch://a")  # type: ignore[arg-type]
        await session.call_tool("watched__touch", {"uri": "watch://a"})  # sends updated(a)
        await session.read_resource("watched+watch://a")  # type: ignore[arg-type]
        await session.call_tool("watched__touch", {"uri": "watch://a"})  # kept
        await session.call_tool("watched__grow", {})  # sends tools/list_changed
        await session.call_tool("watched__touch", {"uri": "watch://a"})
    cache = running.gateway.router.cache
    assert cache is not None
    stats = cache.responses.stats("watched")
    assert (stats.hits, stats.misses) == (2, 4)


async def test_private_reads_stay_with_their_principal_and_a_reload_starts_afresh(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Spec (caching.mdx §Cache Scope), gateway choice: two static-token principals
    each get their own private entry; a reload drops every entry."""
    document: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": 0, "engine": ENGINE},
        "auth": {"tokens": {"alice": ALICE, "bob": BOB}},
        "cache": {},
        "backends": [sdk_backend("alpha", cache={"ttl": 60, "scope": "private"})],
    }
    path = tmp_path / "gateway.json"
    path.write_text(json.dumps(document))
    running = await start_gateway(nursery, parse(json.dumps(document), env={}))
    read = {"uri": "alpha+alpha://readme"}
    before = sent(running, "alpha")
    for token in (ALICE, BOB, ALICE, BOB):
        answer = await _ask(running, "resources/read", read, token=token)
        assert answer["result"]["contents"][0]["text"] == "Alpha readme", answer
    assert sent(running, "alpha") - before == 2  # one each: Bob never got Alice's
    cache = running.gateway.router.cache
    assert cache is not None
    assert (cache.responses.stats("alpha").hits, cache.responses.stats("alpha").misses) == (2, 2)
    assert await reload_config(running.gateway, str(path)) is True
    await _ask(running, "resources/read", read, token=ALICE)
    assert sent(running, "alpha") - before == 3


@NEEDS_SDK2[0]
@NEEDS_SDK2[1]
async def test_an_sdk2_host_reads_from_the_cache_with_the_time_left(
    nursery: trio.Nursery,
) -> None:
    """Spec (caching.mdx): the official SDK 2.x host's second read is a hit whose ttlMs
    never exceeds the time the entry has left."""
    config = gateway_config([sdk2_stdio("m", env={"SDK2_CACHE_HINTS": "1"})], cache={})
    running = await start_gateway(nursery, config)
    before = sent(running, "m")
    seen = await run_sdk2_host(SDK2_HOST, running.url, "m+sdk2://note", limit=60.0)
    assert seen["protocol_version"] == "2026-07-28"
    assert seen["texts"] == ["a note from sdk2"] * 2
    first, second = seen["ttls"]
    assert first == 45000 and 0 < second <= 45000
    assert sent(running, "m") - before == 1
