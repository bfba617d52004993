"""A reload (a revoked token, a new policy) applied on one replica is applied by all."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
import trio
from prometheus_client import CollectorRegistry

from gateway.config import parse
from gateway.runtime import reload_news
from gateway.runtime.app import Gateway, reload_config, serve
from gateway.runtime.reload_news import GENERATION, POLL_INTERVAL, ReloadNews
from gateway.store.embedded import EmbeddedStore
from tests.harness import initialize_message
from tests.redis_server import RedisServer

TOKENS: Final = {"alice": "token-of-alice-0123456789", "bob": "token-of-bob-0123456789"}
HEADERS: Final = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
}


def _document(store: dict[str, Any], tokens: dict[str, str]) -> str:
    return json.dumps(
        {
            "server": {"host": "127.0.0.1", "port": 0},
            "auth": {"tokens": tokens},
            "store": store,
            "backends": [],
        }
    )


async def _replica(nursery: trio.Nursery, path: Path, document: str) -> tuple[Gateway, str]:
    config = parse(document, env={})
    started: tuple[Gateway, list[str]] = await nursery.start(
        partial(serve, config, registry=CollectorRegistry(), config_path=str(path))
    )
    gateway, binds = started
    return gateway, binds[0] + config.server.path


async def test_a_token_revoked_on_one_replica_is_refused_by_the_other_within_a_round_trip(
    nursery: trio.Nursery,
    redis_server: RedisServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 26: bob's token removed and reloaded on A; B refuses it (pub/sub, not the poll)."""
    monkeypatch.setattr(reload_news, "POLL_INTERVAL", 60.0)  # only the message can be in time
    store = {"url": redis_server.url, "key_prefix": "reload-news:"}
    paths = [tmp_path / "a.yaml", tmp_path / "b.yaml"]
    document = _document(store, TOKENS)
    for path in paths:
        path.write_text(document)
    (first, _), (second, second_url) = [await _replica(nursery, p, document) for p in paths]
    assert second.reload_news is not None
    with trio.fail_after(10):
        await second.reload_news.listening.wait()
    for path in paths:
        path.write_text(_document(store, {"alice": TOKENS["alice"]}))
    holder = second.live.identity.holder if second.live is not None else None
    assert holder is not None and "bob" in holder.current.static_names
    assert await reload_config(first, str(paths[0])) is True
    announced = trio.current_time()
    with trio.fail_after(30):
        # A measurement: the follower's own reload is what is timed, so poll it.
        while "bob" in holder.current.static_names:  # noqa: ASYNC110
            await trio.sleep(0.001)
    propagation = trio.current_time() - announced
    print(f"\nreload propagation A->B over redis pub/sub: {propagation * 1000:.1f} ms")
    assert propagation < 60.0
    body = json.dumps(initialize_message()).encode()
    async with httpx.AsyncClient() as http:
        bob = {**HEADERS, "authorization": f"Bearer {TOKENS['bob']}"}
        refused = await http.post(second_url, headers=bob, content=body)
    assert refused.status_code == 401


async def test_a_follower_that_missed_the_message_follows_within_the_poll_interval(
    autojump_clock: Any,
) -> None:
    """Gateway choice: pub/sub may lose a message; the generation is read every POLL_INTERVAL."""
    store = EmbeddedStore()
    followed: list[float] = []
    done = trio.Event()

    async def reload() -> bool:
        followed.append(trio.current_time())
        done.set()
        return True

    async with trio.open_nursery() as nursery:
        follower = ReloadNews(store, reload)
        await nursery.start(follower.run)
        await follower.listening.wait()
        await store.add(GENERATION)  # announced, its message lost
        lost_at = trio.current_time()
        with trio.fail_after(POLL_INTERVAL * 2):
            await done.wait()
        nursery.cancel_scope.cancel()
    assert followed[0] - lost_at <= POLL_INTERVAL


async def test_a_replica_does_not_follow_its_own_announcement(autojump_clock: Any) -> None:
    """Gateway choice: the announcing replica applied the reload already; others follow once."""
    store = EmbeddedStore()
    calls = {"announcer": 0, "follower": 0}

    def counting(name: str) -> Any:
        async def reload() -> bool:
            calls[name] += 1
            return True

        return reload

    async with trio.open_nursery() as nursery:
        announcer = ReloadNews(store, counting("announcer"))
        follower = ReloadNews(store, counting("follower"))
        for news in (announcer, follower):
            await nursery.start(news.run)
            await news.listening.wait()
        await announcer.announce()
        await trio.sleep(POLL_INTERVAL * 3)
        nursery.cancel_scope.cancel()
    assert calls == {"announcer": 0, "follower": 1}
