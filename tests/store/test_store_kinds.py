"""What differs between the stores: the embedded file, the shared server's failures and replicas."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
import trio
from structlog.testing import capture_logs

from gateway.config import StoreConfig, parse
from gateway.errors import ConfigError
from gateway.store.api import StoreState, StoreUnavailable
from gateway.store.embedded import EmbeddedStore
from gateway.store.opening import default_path, open_store
from gateway.store.redis_store import RedisStore, open_redis_store, redis_location
from tests.redis_server import RedisServer, free_port


async def test_the_embedded_file_keeps_durable_namespaces_across_a_restart(
    tmp_path: Path,
) -> None:
    """Gateway choice: tasks, pins, consent and console logins survive; a cache does not."""
    path = str(tmp_path / "state.sqlite")
    first = EmbeddedStore(path)
    await first.put("pins:files:read", b"digest")
    await first.put("tasks:t1", b"record", ttl=3600)
    await first.put("cache:k", b"cached")
    first.close()
    second = EmbeddedStore(path)
    assert await second.get("pins:files:read") == b"digest"
    assert await second.get("tasks:t1") == b"record"
    assert await second.get("cache:k") is None
    second.close()


async def test_the_embedded_purge_drops_expired_entries_of_both_tables(tmp_path: Path) -> None:
    """Rule 4: expired entries are absent to reads and purged from memory and file."""
    now = [1000.0]
    store = EmbeddedStore(str(tmp_path / "s.sqlite"), clock=lambda: now[0])
    await store.put("tasks:a", b"1", ttl=10)
    await store.put("cache:b", b"2", ttl=10)
    await store.put("cache:c", b"3")
    now[0] += 11
    assert store.purge() == 2
    assert await store.scan("") == [("cache:c", b"3")]
    store.close()


async def test_an_unopenable_embedded_file_is_a_typed_failure(tmp_path: Path) -> None:
    """Rule 4 of the api: a store that cannot open says where and why."""
    with pytest.raises(StoreUnavailable, match=r"state\.sqlite"):
        EmbeddedStore(str(tmp_path / "missing-dir" / "state.sqlite"))


def test_the_embedded_file_defaults_to_beside_the_config_file() -> None:
    """docs/configuration.md: store.path, else <stem>.state.sqlite beside the config."""
    assert default_path(StoreConfig(), "/etc/gw/gateway.yaml") == "/etc/gw/gateway.state.sqlite"
    assert default_path(StoreConfig(path="/var/lib/gw.db"), "/etc/gw/gateway.yaml") == (
        "/var/lib/gw.db"
    )
    assert default_path(StoreConfig(), None) == ""


def test_a_store_url_of_another_scheme_is_refused_at_its_place() -> None:
    """Config: a typo'd scheme fails loudly, not as a connection error at run time."""
    with pytest.raises(ConfigError, match=r"store\.url: must start with redis://"):
        parse("store: {url: 'http://cache:6379'}\n")
    with pytest.raises(ConfigError, match=r"store\.password_file: give password or"):
        parse("store: {url: 'redis://h', password: a, password_file: /f}\n")


def test_a_store_location_never_shows_the_password() -> None:
    """Rule 3 of redis_store: health and logs carry the address only."""
    assert redis_location("redis://user:s3cret@cache.internal:6380/2") == "cache.internal:6380/2"


async def test_open_store_serves_the_embedded_store_without_a_url(tmp_path: Path) -> None:
    """Config: no store.url, the embedded store with its file beside the config."""
    config_file = str(tmp_path / "gw.yaml")
    async with open_store(StoreConfig(), config_file=config_file) as store:
        await store.put("pins:x", b"1")
        assert store.health().kind == "embedded"
        assert store.health().location == str(tmp_path / "gw.state.sqlite")
    assert (tmp_path / "gw.state.sqlite").exists()


async def test_open_store_serves_redis_with_a_url(redis_server: RedisServer) -> None:
    """Config: store.url selects the shared server."""
    async with open_store(StoreConfig(url=redis_server.url), config_file=None) as store:
        await store.put("cache:x", b"1")
        assert store.health().kind == "redis"
        assert store.health().state is StoreState.OK


async def test_two_replicas_on_one_server_share_one_bucket(redis_server: RedisServer) -> None:
    """Issue 26: two replicas together admit one budget."""
    redis_server.flush()
    config = StoreConfig(url=redis_server.url, key_prefix="r:")
    async with open_redis_store(config) as one, open_redis_store(config) as two:
        admitted = 0
        for i in range(10):
            store = one if i % 2 else two
            if await store.spend("limits:alice", rate=0.001, burst=4) == 0.0:
                admitted += 1
        assert admitted == 4


async def test_key_prefixes_keep_two_gateways_apart(redis_server: RedisServer) -> None:
    """Rule 4: nothing outside the prefix is read, written or scanned."""
    redis_server.flush()
    async with (
        open_redis_store(StoreConfig(url=redis_server.url, key_prefix="a:")) as a,
        open_redis_store(StoreConfig(url=redis_server.url, key_prefix="b:")) as b,
    ):
        await a.put("pins:x", b"from a")
        assert await b.get("pins:x") is None
        assert await b.scan("") == []
        assert await a.scan("") == [("pins:x", b"from a")]


async def test_a_store_whose_server_is_gone_fails_within_its_timeout_and_recovers(
    tmp_path: Path,
) -> None:
    """E22: no request blocks past the store timeout; health says down with the reason;
    what the server held is there after it returns."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        config = StoreConfig(url=server.url, timeout=0.5)
        async with open_redis_store(config) as store:
            assert isinstance(store, RedisStore)
            await store.put("tasks:t1", b"working")
            server.stop()
            started = time.monotonic()
            with pytest.raises(StoreUnavailable) as failure:
                await store.get("tasks:t1")
            # Bounded by the timeout plus the client's own retries; never a hang.
            assert time.monotonic() - started < 5
            assert failure.value.operation == "get"
            health = store.health()
            assert health.state is StoreState.DOWN and health.detail
            server.start()
            with trio.fail_after(10):
                while True:
                    try:
                        value = await store.get("tasks:t1")
                        break
                    except StoreUnavailable:
                        await trio.sleep(0.1)
            assert value == b"working"
            assert store.health().state is StoreState.OK
            assert store.health().reconnects == 1
    finally:
        server.stop()


async def test_subscribing_to_a_server_that_is_gone_is_one_typed_failure(tmp_path: Path) -> None:
    """E22: coredis fails a subscription inside its task groups; the caller gets one
    StoreUnavailable to retry on, never a group that ends the gateway's nursery."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        async with open_redis_store(StoreConfig(url=server.url, timeout=0.5)) as store:
            await store.put("pins:x", b"1")  # a connection made while the server was up
            server.stop()
            with trio.fail_after(10):
                for _attempt in range(3):
                    with pytest.raises(StoreUnavailable) as failure:
                        async with store.subscribe("pins"):
                            pass
                    assert failure.value.operation == "subscribe"
    finally:
        server.stop()


async def test_a_subscription_whose_server_restarts_goes_on_or_ends_in_one_typed_failure(
    tmp_path: Path,
) -> None:
    """Gateway choice: a server restarted under an open subscription either carries on
    (coredis subscribed again) or ends the receive with StoreUnavailable: never a group
    that ends the gateway (the replica run's store restart found it)."""
    server = RedisServer(tmp_path)
    server.start()
    heard: bytes | None = None
    failed: StoreUnavailable | None = None
    try:
        async with open_redis_store(StoreConfig(url=server.url, timeout=0.5)) as store:
            try:
                async with store.subscribe("reload") as messages:
                    server.stop()
                    server.start()
                    with trio.fail_after(20):
                        while heard is None:
                            with contextlib.suppress(StoreUnavailable):
                                await store.publish("reload", b"after")
                            with trio.move_on_after(0.2):
                                heard = await messages.receive()
            except StoreUnavailable as failure:
                failed = failure
    finally:
        server.stop()
    assert heard == b"after" if failed is None else failed.operation == "subscribe"


async def test_a_server_down_at_start_is_not_fatal(tmp_path: Path) -> None:
    """Rule 3: the store starts down and serves once the server answers."""
    port = free_port()
    config = StoreConfig(url=f"redis://127.0.0.1:{port}/0", timeout=0.5)
    async with open_redis_store(config) as store:
        with pytest.raises(StoreUnavailable):
            await store.get("cache:x")
        assert store.health().state is StoreState.DOWN
        with pytest.raises(StoreUnavailable):
            async with store.subscribe("pins"):
                pass


async def test_a_default_file_that_cannot_be_written_leaves_the_store_in_memory(
    tmp_path: Path,
) -> None:
    """Gateway choice: a config where no file can be made (a directory that is gone, a
    read-only install) still starts, memory only, with a warning; a store.path the
    operator set that cannot be opened stops the start."""
    gone = tmp_path / "gone"
    with capture_logs() as logs:
        async with open_store(StoreConfig(), config_file=str(gone / "gw.yaml")) as store:
            assert store.health().location == "memory"
    assert [e["event"] for e in logs] == ["store.embedded.memory_only"]
    with pytest.raises(StoreUnavailable):
        async with open_store(StoreConfig(path=str(gone / "s.sqlite")), config_file=None):
            pass
