"""The store interface, held by every implementation (gateway/store/api.py's rules)."""

from __future__ import annotations

import trio

from gateway.store.api import Store

# A gap far longer than the short ttls below: expiry only needs time to
# pass, so the tests hold however slow the machine is.
PAST_SHORT_TTL = 0.3
SHORT_TTL = 0.05
LONG_TTL = 3600.0


async def test_a_value_put_is_read_back_and_gone_once_deleted(store: Store) -> None:
    """Interface: put/get/delete; an absent key reads None."""
    assert await store.get("cache:a") is None
    await store.put("cache:a", b"\x00value\xff")
    assert await store.get("cache:a") == b"\x00value\xff"
    assert await store.delete("cache:a") is True
    assert await store.delete("cache:a") is False
    assert await store.get("cache:a") is None


async def test_a_value_with_a_ttl_is_gone_after_it_and_there_before(store: Store) -> None:
    """Rule 3: expiry is the store's."""
    await store.put("tasks:short", b"1", ttl=SHORT_TTL)
    await store.put("tasks:long", b"2", ttl=LONG_TTL)
    await trio.sleep(PAST_SHORT_TTL)
    assert await store.get("tasks:short") is None
    assert await store.get("tasks:long") == b"2"
    assert [k for k, _ in await store.scan("tasks:")] == ["tasks:long"]


async def test_put_new_sets_only_an_absent_key(store: Store) -> None:
    """Interface: SET NX semantics; an expired key counts as absent."""
    assert await store.put_new("consent:state", b"first", ttl=SHORT_TTL) is True
    assert await store.put_new("consent:state", b"second") is False
    assert await store.get("consent:state") == b"first"
    await trio.sleep(PAST_SHORT_TTL)
    assert await store.put_new("consent:state", b"third") is True
    assert await store.get("consent:state") == b"third"


async def test_take_returns_a_value_once(store: Store) -> None:
    """Interface: single-use values (an OAuth state, a login nonce)."""
    await store.put("consent:nonce", b"n")
    assert await store.take("consent:nonce") == b"n"
    assert await store.take("consent:nonce") is None


async def test_swap_replaces_only_the_expected_value(store: Store) -> None:
    """Interface: compare and set, absent as None, delete as new None."""
    assert await store.swap("tasks:t", None, b"working") is True
    assert await store.swap("tasks:t", None, b"again") is False
    assert await store.swap("tasks:t", b"completed", b"x") is False
    assert await store.swap("tasks:t", b"working", b"completed", ttl=LONG_TTL) is True
    assert await store.get("tasks:t") == b"completed"
    assert await store.swap("tasks:t", b"completed", None) is True
    assert await store.get("tasks:t") is None


async def test_of_many_concurrent_swaps_from_one_value_exactly_one_wins(store: Store) -> None:
    """Rule 2: a transition two replicas race for is taken once."""
    await store.put("tasks:race", b"working")
    winners: list[int] = []

    async def contend(i: int) -> None:
        if await store.swap("tasks:race", b"working", b"done-%d" % i):
            winners.append(i)

    async with trio.open_nursery() as nursery:
        for i in range(20):
            nursery.start_soon(contend, i)
    assert len(winners) == 1
    assert await store.get("tasks:race") == b"done-%d" % winners[0]


async def test_scan_lists_live_keys_of_a_prefix_in_order_up_to_the_limit(store: Store) -> None:
    """Interface: prefix scan; glob characters in a prefix are literal."""
    for name in ["b", "a", "c"]:
        await store.put(f"pins:x*[:{name}", name.encode())
    await store.put("pins:xy:z", b"other")
    await store.put("cache:x*[:a", b"other namespace")
    found = await store.scan("pins:x*[:")
    assert found == [("pins:x*[:a", b"a"), ("pins:x*[:b", b"b"), ("pins:x*[:c", b"c")]
    assert await store.scan("pins:x*[:", limit=2) == found[:2]


async def test_add_counts_and_sets_the_ttl_only_when_it_creates_the_key(store: Store) -> None:
    """Interface: a fixed-window counter expires with its window."""
    assert await store.add("limits:w", 1, ttl=SHORT_TTL) == 1
    assert await store.add("limits:w", 2, ttl=LONG_TTL) == 3
    await trio.sleep(PAST_SHORT_TTL)
    assert await store.add("limits:w", 5) == 5


async def test_a_bucket_admits_its_burst_then_asks_to_wait(store: Store) -> None:
    """Interface: token bucket; the wait is what one token takes to come back."""
    waits = [await store.spend("limits:b", rate=0.5, burst=3) for _ in range(4)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert 0.0 < waits[3] <= 2.0


async def test_a_bucket_refills_at_its_rate(store: Store) -> None:
    """Interface: 20 tokens a second refill one in 0.05 s."""
    assert await store.spend("limits:r", rate=20, burst=1) == 0.0
    assert await store.spend("limits:r", rate=20, burst=1) > 0.0
    await trio.sleep(PAST_SHORT_TTL)
    assert await store.spend("limits:r", rate=20, burst=1) == 0.0


async def test_a_published_message_reaches_every_subscriber(store: Store) -> None:
    """Interface: pub/sub, best effort, for revocations and reloads."""
    async with store.subscribe("events") as first, store.subscribe("events") as second:
        # Redis confirms a subscription asynchronously: publish until it is seen.
        with trio.fail_after(5):
            while True:
                await store.publish("events", b"revoked:alice")
                with trio.move_on_after(0.1):
                    assert await first.receive() == b"revoked:alice"
                    break
            assert await second.receive() == b"revoked:alice"


async def test_a_subscriber_hears_nothing_of_another_channel(store: Store) -> None:
    """Interface: channels are separate."""
    async with store.subscribe("one") as one:
        await store.publish("two", b"x")
        with trio.move_on_after(0.2):
            await one.receive()
            raise AssertionError("a message of another channel arrived")
