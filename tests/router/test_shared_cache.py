"""The response cache's shared tier (gateway/router/shared_cache.py).

Two routers stand for two replicas: each has its own pool and recording
backend, and both share one store (the ``store`` fixture: memory, SQLite
file, redis-server). A backend's count of reads says which replica's
answer came from where. Faults the real stores cannot produce on demand (a
store that refuses, one that never answers, a lost message) are small
wrappers around the embedded store; time runs on trio's MockClock there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.backends.state import BackendState
from gateway.cache.responses import ResponseCache
from gateway.config.schema_cache import CacheConfig
from gateway.router import Router
from gateway.router.response_cache import cache_for
from gateway.router.shared_cache import SharedCache
from gateway.store.api import Store, StoreUnavailable
from gateway.store.embedded import EmbeddedStore
from gateway.telemetry.scrape import CacheCollector
from tests.router.fakes import FakeClient, FakePool, ask, make_router
from tests.router.test_cache_hints import read
from tests.router.test_response_cache import (
    ALICE,
    BOB,
    _Who,
    legacy_backend,
    modern_backend,
    notify,
    reads_sent,
)

SHARED = CacheConfig(shared=True)
URI = "m+mem://a"
RESOURCES = ({"uri": "mem://a", "name": "a"},)


async def replica(
    store: Store,
    nursery: trio.Nursery,
    backend_factory: Callable[[], Any],
    *,
    wall: Callable[[], float] | None = None,
    store_timeout: float = 1.0,
    failures: list[int] | None = None,
    poll: float = 5.0,
) -> tuple[Router, Any, SharedCache]:
    """One gateway replica over ``store``: a router, its own backend, its shared tier."""
    pool = FakePool()
    backend = pool.add(backend_factory(), resources=RESOURCES)
    router = await make_router(pool, nursery)
    shared = SharedCache(
        store,
        timeout=store_timeout,
        poll=poll,
        on_failure=None if failures is None else (lambda: failures.append(1)),
        **({} if wall is None else {"wall": wall}),
    )
    await nursery.start(shared.run)
    configs = [b.config for b in pool.backends.values()]
    router.set_cache(cache_for(SHARED, configs, (), shared=shared))
    with trio.fail_after(5):
        await shared.listening.wait()
    POOLS[id(router)] = pool
    return router, backend, shared


#: Each replica's pool, by its router (to deliver a backend's notification).
POOLS: dict[int, FakePool] = {}


async def written(store: Store, count: int = 1) -> None:
    """Wait until ``count`` answers are in the store (written off the request path)."""
    with trio.fail_after(5):
        while len(await store.scan("cache:r:")) < count:  # noqa: ASYNC110 - maybe redis
            await trio.sleep(0.005)


async def heard(shared: SharedCache, backend: str, seen: int | None) -> None:
    """Wait until ``shared`` knows of a generation of ``backend`` other than ``seen``."""
    with trio.fail_after(5):
        while shared.generations.get(backend) == seen:  # noqa: ASYNC110 - maybe redis
            await trio.sleep(0.005)


def public_modern() -> Any:
    """A modern backend whose reads are public for a minute."""
    return modern_backend({"ttlMs": 60000, "cacheScope": "public"})


def private_modern() -> Any:
    """A modern backend whose reads are private for a minute."""
    return modern_backend({"ttlMs": 60000, "cacheScope": "private"})


def hits(router: Router) -> tuple[int, int, int | None]:
    """The replica's (local hits, misses, shared hits) for backend ``m``."""
    assert router.cache is not None
    (sample,) = [s for s in router.cache.samples() if s.backend == "m"]
    return sample.hits, sample.misses, sample.shared_hits


async def test_a_read_kept_on_one_replica_is_served_by_another_without_its_backend(
    store: Store, nursery: trio.Nursery
) -> None:
    """Gateway choice (cache.shared): a local miss asks the store before the backend."""
    a, backend_a, _ = await replica(store, nursery, public_modern)
    b, backend_b, _ = await replica(store, nursery, public_modern)
    first = await read(a, URI)
    await written(store)
    second = await read(b, URI)
    assert (reads_sent(backend_a), reads_sent(backend_b)) == (1, 0)
    assert second["contents"] == first["contents"]
    assert 0 < second["ttlMs"] <= 60000
    await read(b, URI)  # now from B's own memory
    assert hits(b) == (1, 0, 1)
    assert reads_sent(backend_b) == 0


async def test_resources_updated_on_one_replica_stops_every_replica_serving_the_old_answer(
    store: Store, nursery: trio.Nursery
) -> None:
    """Gateway choice: a drop bumps the backend's generation and is published."""
    a, backend_a, _ = await replica(store, nursery, public_modern)
    # B hears of it by the message alone: its poll is far off.
    b, backend_b, shared_b = await replica(store, nursery, public_modern, poll=3600)
    await read(a, URI)
    await written(store)
    await read(b, URI)  # B holds it locally now
    assert reads_sent(backend_b) == 0
    seen = shared_b.generations["m"]
    notify(POOLS[id(a)], backend_a, "notifications/resources/updated", {"uri": "mem://a"})
    await heard(shared_b, "m", seen)
    await read(b, URI)
    assert reads_sent(backend_b) == 1  # neither B's memory nor the store served the old one
    await written(store, 2)  # the old answer (unreachable) and B's new one
    await read(a, URI)
    assert reads_sent(backend_a) == 1  # A is served B's answer, read after the update


async def test_a_private_answer_is_served_on_another_replica_to_its_principal_only(
    store: Store, nursery: trio.Nursery
) -> None:
    """Spec (caching.mdx §Cache Scope) across replicas: Bob never gets Alice's answer."""
    a, _, _ = await replica(store, nursery, private_modern)
    b, backend_b, _ = await replica(store, nursery, private_modern)
    await read(a, URI, _Who(ALICE))
    await written(store)
    await read(b, URI, _Who(BOB))
    assert reads_sent(backend_b) == 1
    await read(b, URI, _Who(ALICE))
    assert reads_sent(backend_b) == 1  # Alice's own, from the store
    for key, _ in await store.scan("cache:"):
        assert "alice" not in key and "bob" not in key  # digests only


async def test_without_a_principal_a_private_answer_is_not_shared(
    store: Store, nursery: trio.Nursery
) -> None:
    """Gateway choice: no principal, nothing private kept, in the store either."""
    a, _, _ = await replica(store, nursery, private_modern)
    await read(a, URI)
    await trio.testing.wait_all_tasks_blocked()
    assert await store.scan("cache:r:") == []


async def test_a_legacy_hosts_answer_and_a_modern_hosts_are_kept_apart(
    store: Store, nursery: trio.Nursery
) -> None:
    """Spec: the host's protocol version is part of the shared key as of the local one."""
    a, _, _ = await replica(store, nursery, public_modern)
    b, backend_b, _ = await replica(store, nursery, public_modern)
    await read(a, URI)
    await written(store)
    legacy = await ask(b, FakeClient("c"), "resources/read", uri=URI)
    assert "ttlMs" not in legacy["result"]
    assert reads_sent(backend_b) == 1


class _Lossy(EmbeddedStore):
    """The embedded store whose messages are all lost (pub/sub is at most once)."""

    async def publish(self, channel: str, message: bytes) -> None:
        """Lose it."""


async def test_a_lost_message_leaves_a_local_answer_served_at_most_the_poll_interval(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Gateway choice: replicas re-read the generations they saw every POLL_INTERVAL."""
    store = _Lossy(clock=trio.current_time)
    a, backend_a, _ = await replica(store, nursery, public_modern, wall=trio.current_time)
    b, backend_b, _ = await replica(store, nursery, public_modern, wall=trio.current_time)
    await read(a, URI)
    await written(store)
    await read(b, URI)
    notify(POOLS[id(a)], backend_a, "notifications/resources/list_changed", {})
    await trio.testing.wait_all_tasks_blocked()
    await read(b, URI)
    assert reads_sent(backend_b) == 0  # the message was lost: B's memory still serves it
    await trio.sleep(5.01)
    await read(b, URI)
    assert reads_sent(backend_b) == 1  # within the bound, far inside the minute's ttl


async def test_news_of_other_backends_does_not_put_off_the_poll(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Gateway choice: a lost bump is re-read within the poll interval however busy the channel."""
    store = EmbeddedStore(clock=trio.current_time)
    dropped: list[tuple[float, str]] = []
    shared = SharedCache(store, timeout=1.0, poll=5.0, wall=trio.current_time)
    shared.attach(lambda backend: dropped.append((trio.current_time(), backend)))
    await nursery.start(shared.run)
    with trio.fail_after(5):
        await shared.listening.wait()
    shared.generations["m"] = 0  # seen once, as a lookup would
    await store.add("cache:g:m")  # another replica's bump, its message lost
    bumped = trio.current_time()

    async def chatter() -> None:
        """Another replica bumping backend ``x`` every second, its messages heard."""
        for generation in range(1, 20):
            news = msgspec.msgpack.encode(("other", "x", generation))
            await store.publish("cache", news)
            await trio.sleep(1.0)

    nursery.start_soon(chatter)
    await trio.sleep(10)
    drops_of_m = [at for at, backend in dropped if backend == "m"]
    assert drops_of_m and drops_of_m[0] - bumped <= 5.0


async def test_a_shared_hit_carries_the_time_left_and_nothing_is_served_past_it(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Spec (caching.mdx): ttlMs from the store is the time left; at the deadline a miss."""
    store = EmbeddedStore(clock=trio.current_time)

    def five_seconds() -> Any:
        return modern_backend({"ttlMs": 5000, "cacheScope": "public"})

    a, _, _ = await replica(store, nursery, five_seconds, wall=trio.current_time)
    b, backend_b, _ = await replica(store, nursery, five_seconds, wall=trio.current_time)
    c, backend_c, _ = await replica(store, nursery, five_seconds, wall=trio.current_time)
    await read(a, URI)
    await written(store)
    await trio.sleep(3)
    served = await read(b, URI)
    assert reads_sent(backend_b) == 0
    assert 1900 <= served["ttlMs"] <= 2000
    await trio.sleep(2)  # the deadline: the store's record, and B's copy, are past it
    await read(c, URI)
    assert reads_sent(backend_c) == 1


class _Down(EmbeddedStore):
    """A store that refuses every operation (a redis-server gone)."""

    async def get(self, key: str) -> bytes | None:
        """Refused."""
        raise StoreUnavailable("get", "connection refused")

    async def put(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        """Refused."""
        raise StoreUnavailable("put", "connection refused")

    async def add(self, key: str, amount: int = 1, *, ttl: float | None = None) -> int:
        """Refused."""
        raise StoreUnavailable("add", "connection refused")


async def test_a_store_that_refuses_is_a_miss_and_the_local_tier_keeps_serving(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: the store never fails a call; each refusal is counted."""
    failures: list[int] = []
    a, backend_a, _ = await replica(_Down(), nursery, public_modern, failures=failures)
    first = await read(a, URI)
    second = await read(a, URI)
    assert first["contents"] == second["contents"]
    assert reads_sent(backend_a) == 1
    await trio.testing.wait_all_tasks_blocked()
    assert len(failures) == 1  # the lookup (and so no write: no generation to write under)
    notify(POOLS[id(a)], backend_a, "notifications/resources/list_changed", {})
    await trio.testing.wait_all_tasks_blocked()
    assert len(failures) == 2  # the bump's first try
    await read(a, URI)  # the bump is pending: the store is not asked, the backend is
    assert reads_sent(backend_a) == 2
    assert len(failures) == 2


class _Silent(EmbeddedStore):
    """A store whose reads never answer (a redis-server that hangs)."""

    async def get(self, key: str) -> bytes | None:
        """Never."""
        await trio.sleep_forever()
        raise AssertionError


async def test_a_store_that_hangs_costs_a_call_at_most_the_store_timeout(
    nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Gateway choice (docs/robustness.md): nothing waits on the store past store.timeout."""
    failures: list[int] = []
    silent = _Silent(clock=trio.current_time)
    a, backend_a, _ = await replica(
        silent, nursery, public_modern, store_timeout=0.5, failures=failures
    )
    start = trio.current_time()
    await read(a, URI)
    assert trio.current_time() - start == pytest.approx(0.5)
    assert reads_sent(backend_a) == 1 and failures == [1]


async def test_a_backend_restart_on_one_replica_drops_the_shared_answers(
    store: Store, nursery: trio.Nursery
) -> None:
    """Gateway choice: a new backend session owes nothing to what the old one said."""
    a, backend_a, _ = await replica(store, nursery, lambda: legacy_backend(ttl=600))
    b, backend_b, shared_b = await replica(store, nursery, lambda: legacy_backend(ttl=600))
    await ask(a, FakeClient("c"), "resources/read", uri="old+mem://a")
    await written(store)
    seen = shared_b.generations.get("old")
    pool_a = POOLS[id(a)]
    pool_a.set_state(backend_a, BackendState.DOWN)
    await heard(shared_b, "old", seen)
    await ask(b, FakeClient("c"), "resources/read", uri="old+mem://a")
    assert reads_sent(backend_b) == 1


async def test_the_shared_hits_are_exported_apart_from_the_local_ones(
    store: Store, nursery: trio.Nursery
) -> None:
    """Gateway choice: result="hit_shared" beside hit and miss; a shared hit is no miss."""
    a, _, _ = await replica(store, nursery, public_modern)
    b, _, _ = await replica(store, nursery, public_modern)
    await read(a, URI)
    await written(store)
    await read(b, URI)
    await read(b, URI)
    assert b.cache is not None
    (requests, _, _) = CacheCollector(b.cache.samples).collect()
    values = {s.labels["result"]: s.value for s in requests.samples if s.name.endswith("_total")}
    assert values == {"hit": 1, "miss": 0, "hit_shared": 1}


# -- the property: no private answer crosses principals, none outlives its ttl ----------

_ops = st.lists(
    st.tuples(
        st.sampled_from(["keep", "find", "find", "invalidate"]),
        st.integers(0, 1),  # which replica
        st.sampled_from(["", "alice", "bob"]),
        st.sampled_from(["public", "private"]),
        st.integers(0, 2),  # which request
        st.floats(0, 3),  # time advance
        st.integers(1, 4),  # ttl
    ),
    max_size=40,
)


#: Moved by hand: an autojumping clock would skip to the tiers' next poll
#: whenever the test waits for them, and expire what it just kept.
_clock = trio.testing.MockClock()


def _run(main: Callable[[], Awaitable[None]]) -> None:
    trio.run(main, clock=_clock)


@settings(max_examples=150, deadline=None)
@given(_ops)
def test_no_shared_answer_crosses_principals_or_outlives_its_ttl(ops: list[Any]) -> None:
    """Issue 31's property across replicas: 0 cross-principal private hits, 0 stale ones,
    against a model of what each caller may be served."""

    async def main() -> None:
        store = EmbeddedStore(clock=trio.current_time)
        async with trio.open_nursery() as nursery:
            tiers = []
            for _ in range(2):
                tier = SharedCache(store, timeout=1.0, wall=trio.current_time)
                await nursery.start(tier.run)
                tier.attach(ResponseCache(1 << 20).invalidate_backend)
                tiers.append(tier)
            model: dict[int, list[tuple[bytes, float, str]]] = {}
            for op, which, principal, scope, request, advance, ttl in ops:
                _clock.jump(advance)
                await trio.testing.wait_all_tasks_blocked()
                now = trio.current_time()
                tier = tiers[which]
                key = b"request-%d" % request
                if op == "keep":
                    _, generation = await tier.find("b", key, principal)
                    assert generation is not None
                    value = f"{request}-{principal}-{scope}-{now}".encode()
                    tier.keep("b", key, principal, scope, value, ttl, generation)
                    await trio.testing.wait_all_tasks_blocked()
                    if scope == "public" or principal:
                        owner = principal if scope == "private" else ""
                        kept = [e for e in model.get(request, []) if e[2] != owner]
                        model[request] = [*kept, (value, now + ttl, owner)]
                elif op == "find":
                    hit, _ = await tier.find("b", key, principal)
                    if hit is not None:
                        allowed = {
                            v
                            for v, deadline, owner in model.get(request, [])
                            if now < deadline and owner in ("", principal)
                        }
                        assert hit.value in allowed
                        assert hit.left <= ttl + 4
                else:
                    tier.invalidate("b")
                    await trio.testing.wait_all_tasks_blocked()
                    model.clear()
            nursery.cancel_scope.cancel()

    _run(main)


class _ReadOnly(EmbeddedStore):
    """A store that answers reads and refuses writes (a replica of a read-only redis)."""

    async def put(self, key: str, value: bytes, *, ttl: float | None = None) -> None:
        """Refused."""
        raise StoreUnavailable("put", "READONLY")


async def test_a_write_the_store_refuses_is_dropped_and_counted(nursery: trio.Nursery) -> None:
    """Gateway choice: a refused write costs the call nothing; the local tier keeps it."""
    failures: list[int] = []
    a, backend_a, _ = await replica(_ReadOnly(), nursery, public_modern, failures=failures)
    await read(a, URI)
    await trio.testing.wait_all_tasks_blocked()
    assert failures == [1]
    await read(a, URI)
    assert reads_sent(backend_a) == 1


async def test_a_reload_on_one_replica_drops_the_shared_answers_of_its_backends(
    store: Store, nursery: trio.Nursery
) -> None:
    """Gateway choice: a reload may change opt-ins and scopes; no replica serves what the
    old rules kept (the new cache is ``renewed``)."""
    a, _, shared_a = await replica(store, nursery, public_modern)
    b, backend_b, shared_b = await replica(store, nursery, public_modern)
    await read(a, URI)
    await written(store)
    await read(b, URI)
    seen = shared_b.generations["m"]
    renewed = cache_for(SHARED, [POOLS[id(a)].backends["m"].config], (), shared=shared_a)
    assert renewed is not None
    renewed.renewed(["m"])
    a.set_cache(renewed)
    await heard(shared_b, "m", seen)
    await read(b, URI)
    assert reads_sent(backend_b) == 1
