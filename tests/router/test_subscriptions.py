"""resources/subscribe and unsubscribe: one backend subscription per URI, counted."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from gateway.backends.state import BackendState
from gateway.catalog.naming import public_uri
from gateway.errors import RemoteProtocolError
from gateway.protocol import jsonrpc
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
    router = await make_router(pool, nursery)
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
    router = await make_router(pool, nursery)
    client = FakeClient("c1")
    router.client_opened(client)
    await ask(router, client, "resources/subscribe", uri=PUBLIC)
    router.client_closed("c1")
    await trio.testing.wait_all_tasks_blocked()
    assert _subscription_calls(alpha) == ["resources/subscribe", "resources/unsubscribe"]
    assert alpha.closed_clients == ["c1"]


async def test_a_backend_that_comes_back_is_subscribed_again(nursery: trio.Nursery) -> None:
    """Router rule (subscriptions 4)."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"))
    router = await make_router(pool, nursery)
    await ask(router, FakeClient("c1"), "resources/subscribe", uri=PUBLIC)
    pool.set_state(alpha, BackendState.DOWN)
    pool.set_state(alpha, BackendState.UP)
    await trio.testing.wait_all_tasks_blocked()
    assert _subscription_calls(alpha) == ["resources/subscribe"] * 2


async def test_a_backend_without_subscriptions_is_method_not_found(nursery: trio.Nursery) -> None:
    """Gateway choice: -32601 naming the backend, nothing sent."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha", capabilities={"resources": {}}))
    router = await make_router(pool, nursery)
    answer = await ask(router, FakeClient("c1"), "resources/subscribe", uri=PUBLIC)
    assert answer["error"]["code"] == -32601
    assert alpha.sent == []


async def test_a_subscriber_who_joined_a_failing_first_subscribe_is_subscribed_for_real(
    nursery: trio.Nursery,
) -> None:
    """Router rule (subscriptions 2), issue 13: the second subscriber never believes in a
    subscription the backend lacks; here it sends its own, which the backend accepts."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"))
    release = trio.Event()
    accepted: list[str] = []

    async def first_refused(params: dict[str, Any], client: str | None) -> Any:
        if not accepted and not release.is_set():
            await release.wait()
            accepted.append("refused")
            raise RemoteProtocolError("busy", -32603)
        accepted.append(params["uri"])
        return jsonrpc.EMPTY_OBJECT

    alpha.answers["resources/subscribe"] = first_refused
    router = await make_router(pool, nursery)
    answers: dict[str, Any] = {}

    async def subscribe(client: str) -> None:
        answers[client] = await ask(router, FakeClient(client), "resources/subscribe", uri=PUBLIC)

    async with trio.open_nursery() as clients:
        clients.start_soon(subscribe, "c1")
        await trio.testing.wait_all_tasks_blocked()
        clients.start_soon(subscribe, "c2")
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert answers["c1"]["error"]["message"] == "busy"
    assert answers["c2"]["result"] == {}
    assert accepted == ["refused", URI]  # the backend holds the subscription c2 believes in
    updated = FakeClient("c2")
    router.client_opened(updated)
    router.backend_notification(
        alpha, "notifications/resources/updated", jsonrpc.to_raw({"uri": URI}), None
    )
    assert [n["params"]["uri"] for n in updated.notifications] == [PUBLIC]


async def test_when_the_backend_refuses_every_subscribe_every_subscriber_hears_so(
    nursery: trio.Nursery,
) -> None:
    """Router rule (subscriptions 2): an error for each, and nothing held afterwards."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"))
    release = trio.Event()

    async def refuse(params: dict[str, Any], client: str | None) -> Any:
        await release.wait()
        raise RemoteProtocolError("no", -32602)

    alpha.answers["resources/subscribe"] = refuse
    router = await make_router(pool, nursery)
    answers: dict[str, Any] = {}

    async def subscribe(client: str) -> None:
        answers[client] = await ask(router, FakeClient(client), "resources/subscribe", uri=PUBLIC)

    async with trio.open_nursery() as clients:
        for client in ("c1", "c2", "c3"):
            clients.start_soon(subscribe, client)
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert {client: a["error"]["code"] for client, a in answers.items()} == {
        "c1": -32602,
        "c2": -32602,
        "c3": -32602,
    }
    # Nobody holds it, so a backend restart renews nothing.
    pool.set_state(alpha, BackendState.DOWN)
    pool.set_state(alpha, BackendState.UP)
    await trio.testing.wait_all_tasks_blocked()
    assert _subscription_calls(alpha) == ["resources/subscribe"] * 3
