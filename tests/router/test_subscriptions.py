"""resources/subscribe and unsubscribe: one backend subscription per URI, counted."""

from __future__ import annotations

import trio
import trio.testing

from gateway.backends.backend import BackendState
from gateway.catalog.naming import public_uri
from tests.router.fakes import FakeBackend, FakeClient, FakePool, ask, make_router

URI = "file:///notes.txt"
PUBLIC = public_uri("alpha", URI)


def _subscription_calls(backend: FakeBackend) -> list[str]:
    return [s.method for s in backend.sent if s.method.startswith("resources/")]


async def test_the_backend_sees_one_subscription_however_many_clients_hold_it(
    nursery: trio.Nursery,
) -> None:
    """Router rule (subscriptions 1): first subscribe and last unsubscribe reach the backend."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"))
    router = make_router(pool, nursery)
    one, two = FakeClient("c1"), FakeClient("c2")
    assert (await ask(router, one, "resources/subscribe", uri=PUBLIC))["result"] == {}
    assert (await ask(router, two, "resources/subscribe", uri=PUBLIC))["result"] == {}
    await ask(router, one, "resources/unsubscribe", uri=PUBLIC)
    assert _subscription_calls(alpha) == ["resources/subscribe"]
    await ask(router, two, "resources/unsubscribe", uri=PUBLIC)
    assert _subscription_calls(alpha) == ["resources/subscribe", "resources/unsubscribe"]
    assert [s.params for s in alpha.sent] == [{"uri": URI}] * 2


async def test_a_closing_client_releases_what_only_it_held(nursery: trio.Nursery) -> None:
    """Router rule (subscriptions 4)."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"))
    router = make_router(pool, nursery)
    client = FakeClient("c1")
    router.client_opened(client)
    await ask(router, client, "resources/subscribe", uri=PUBLIC)
    router.client_closed("c1", nursery)
    await trio.testing.wait_all_tasks_blocked()
    assert _subscription_calls(alpha) == ["resources/subscribe", "resources/unsubscribe"]
    assert alpha.closed_clients == ["c1"]


async def test_a_backend_that_comes_back_is_subscribed_again(nursery: trio.Nursery) -> None:
    """Router rule (subscriptions 4)."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"))
    router = make_router(pool, nursery)
    await ask(router, FakeClient("c1"), "resources/subscribe", uri=PUBLIC)
    pool.set_state(alpha, BackendState.DOWN)
    pool.set_state(alpha, BackendState.UP)
    await trio.testing.wait_all_tasks_blocked()
    assert _subscription_calls(alpha) == ["resources/subscribe"] * 2


async def test_a_backend_without_subscriptions_is_method_not_found(nursery: trio.Nursery) -> None:
    """Gateway choice: -32601 naming the backend, nothing sent."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha", capabilities={"resources": {}}))
    router = make_router(pool, nursery)
    answer = await ask(router, FakeClient("c1"), "resources/subscribe", uri=PUBLIC)
    assert answer["error"]["code"] == -32601
    assert alpha.sent == []
