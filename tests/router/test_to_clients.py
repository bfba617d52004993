"""Notifications and backends' own requests, back to the clients they concern."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from gateway.catalog.naming import public_uri
from gateway.errors import LocalProtocolError
from gateway.protocol import jsonrpc
from gateway.protocol.stateless.envelope import Envelope
from gateway.protocol.tables import LogLevels, Owners, Subscriptions
from gateway.router.context import Call, ModernRequest
from gateway.router.to_clients import ToClients, lacking_mode
from tests.router.fakes import FakeBackend, FakeClient, FakePool, ask, make_router

URI = "file:///notes.txt"
MODERN = "2026-07-28"


def _fan_out(
    *clients: FakeClient,
) -> tuple[ToClients, Subscriptions, LogLevels, Owners[Call]]:
    owners: Owners[Call] = Owners()
    subscriptions = Subscriptions()
    levels = LogLevels()
    to_clients = ToClients(owners, subscriptions, levels)
    for client in clients:
        to_clients.opened(client)
    return to_clients, subscriptions, levels, owners


def _subscribed(table: Subscriptions, backend: str, uri: str, client: str) -> None:
    table.subscribe(backend, uri, client)
    table.confirm(backend, uri)


def test_resources_updated_reaches_only_the_subscribers_under_the_public_uri() -> None:
    """Router rule (to_clients 2): resources/updated goes to subscribers, URI namespaced."""
    one, two = FakeClient("c1"), FakeClient("c2")
    to_clients, subscriptions, _, _ = _fan_out(one, two)
    _subscribed(subscriptions, "alpha", URI, "c1")
    params = jsonrpc.to_raw({"uri": URI})
    to_clients.backend_notification(
        FakeBackend("alpha"), "notifications/resources/updated", params, None
    )
    assert one.notifications == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/resources/updated",
            "params": {"uri": public_uri("alpha", URI)},
        }
    ]
    assert two.notifications == []


def test_a_notification_on_a_clients_own_backend_session_reaches_only_that_client() -> None:
    """Router rule (to_clients 2): a per-client session's updates are that client's."""
    one, two = FakeClient("c1"), FakeClient("c2")
    to_clients, _, _, _ = _fan_out(one, two)
    params = jsonrpc.to_raw({"uri": URI})
    to_clients.backend_notification(
        FakeBackend("alpha"), "notifications/resources/updated", params, "c2"
    )
    assert one.notifications == []
    assert [n["params"]["uri"] for n in two.notifications] == [public_uri("alpha", URI)]


@pytest.mark.parametrize(
    ("asked", "delivered"),
    [(None, False), ("debug", True), ("warning", True), ("error", False)],
)
def test_a_log_message_reaches_a_client_only_at_or_above_the_level_it_asked_for(
    asked: str | None, delivered: bool
) -> None:
    """Router rule (levels 1): and none at all before the client asks for a level."""
    client = FakeClient("c1")
    to_clients, _, levels, _ = _fan_out(client)
    if asked is not None:
        levels.set("c1", asked)
    params = jsonrpc.to_raw({"level": "warning", "logger": "db", "data": "slow"})
    to_clients.backend_notification(FakeBackend("alpha"), "notifications/message", params, None)
    if delivered:
        [message] = client.notifications
        assert message["params"] == {"level": "warning", "logger": "alpha/db", "data": "slow"}
    else:
        assert client.notifications == []


def test_a_closed_client_receives_nothing_more() -> None:
    """Router rule: fan-out skips sessions that ended."""
    client = FakeClient("c1")
    to_clients, _, levels, _ = _fan_out(client)
    levels.set("c1", "debug")
    to_clients.closed("c1")
    params = jsonrpc.to_raw({"level": "error", "data": "x"})
    to_clients.backend_notification(FakeBackend("alpha"), "notifications/message", params, None)
    assert client.notifications == []


async def test_a_backend_request_without_a_single_owner_is_refused_at_once() -> None:
    """Router rule (to_clients 1): no client has a call in flight there, so no guess."""
    to_clients, _, _, _ = _fan_out(FakeClient("c1", capabilities={"sampling": {}}))
    with pytest.raises(LocalProtocolError, match="cannot tell which client") as caught:
        await to_clients.backend_request(FakeBackend("alpha"), "sampling/createMessage", None, None)
    assert caught.value.code == -32603
    assert "session: per_client or per_principal" in caught.value.message  # the fix, named


async def test_a_backend_request_goes_to_the_client_whose_call_is_in_flight(
    nursery: trio.Nursery,
) -> None:
    """Router rule (to_clients 1): the sole owner is asked, on its request's stream."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"), tools=({"name": "ask", "inputSchema": {}},))
    router = await make_router(pool, nursery)
    owner = FakeClient("c1", capabilities={"sampling": {}})
    bystander = FakeClient("c2", capabilities={"sampling": {}})
    router.client_opened(owner)
    router.client_opened(bystander)
    relayed: list[Any] = []

    async def call_back(params: dict[str, Any], client: str | None) -> Any:
        relayed.append(await router.backend_request(alpha, "sampling/createMessage", None, None))
        return jsonrpc.to_raw({"content": [], "isError": False})

    alpha.answers["tools/call"] = call_back
    await ask(router, owner, "tools/call", name="alpha__ask")
    assert [method for method, _, _ in owner.asked] == ["sampling/createMessage"]
    assert bystander.asked == []
    assert relayed == [jsonrpc.EMPTY_OBJECT]


async def test_a_legacy_host_is_not_sent_the_gateways_input_key_hint(
    nursery: trio.Nursery,
) -> None:
    """Gateway convention (issue 14): ``dev.mcp-gateway/inputKey`` is for the gateway;
    a handshake-era host gets the request without it, other ``_meta`` kept."""
    pool = FakePool()
    alpha = pool.add(FakeBackend("alpha"), tools=({"name": "ask", "inputSchema": {}},))
    router = await make_router(pool, nursery)
    owner = FakeClient("c1", capabilities={"elicitation": {}})
    router.client_opened(owner)
    asked = {
        "message": "Name?",
        "requestedSchema": {"type": "object"},
        "_meta": {"dev.mcp-gateway/inputKey": "user_name", "com.example/x": 1},
    }

    async def call_back(params: dict[str, Any], client: str | None) -> Any:
        await router.backend_request(alpha, "elicitation/create", jsonrpc.to_raw(asked), None)
        return jsonrpc.to_raw({"content": [], "isError": False})

    alpha.answers["tools/call"] = call_back
    await ask(router, owner, "tools/call", name="alpha__ask")
    assert [params for _, params, _ in owner.asked] == [
        {"message": "Name?", "requestedSchema": {"type": "object"}, "_meta": {"com.example/x": 1}}
    ]


async def test_a_backend_request_the_owner_lacks_the_capability_for_is_method_not_found(
    nursery: trio.Nursery,
) -> None:
    """Router rule (to_clients 1): a client that did not declare sampling is not asked."""
    to_clients, _, _, _ = _fan_out(FakeClient("c1"))
    with pytest.raises(LocalProtocolError, match="did not declare") as caught:
        await to_clients.backend_request(FakeBackend("alpha"), "sampling/createMessage", None, "c1")
    assert caught.value.code == -32601


async def test_a_client_that_never_answers_is_answered_for_after_the_backend_input_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Router rule (to_clients 4): the backend gets -32001 after its own ``timeouts.input``."""

    async def never(method: str, params: Any) -> Any:
        await trio.sleep_forever()

    to_clients, _, _, _ = _fan_out(FakeClient("c1", capabilities={"roots": {}}, answer=never))
    started = trio.current_time()
    with pytest.raises(LocalProtocolError, match="did not answer") as caught:
        await to_clients.backend_request(
            FakeBackend("alpha", request_timeout=3, input_timeout=7), "roots/list", None, "c1"
        )
    assert caught.value.code == -32001
    assert trio.current_time() - started == 7


@pytest.mark.parametrize(
    ("method", "params", "capabilities", "lacking"),
    [
        (
            "elicitation/create",
            {"mode": "url", "url": "https://x"},
            {"elicitation": {}},
            "elicitation.url",
        ),
        ("elicitation/create", {"mode": "url"}, {"elicitation": {"url": {}}}, None),
        ("elicitation/create", {"message": "m"}, {"elicitation": {}}, None),
        ("elicitation/create", {"message": "m"}, {"elicitation": {"url": {}}}, "elicitation.form"),
        ("elicitation/create", {"message": "m"}, {"elicitation": {"form": {}}}, None),
        ("sampling/createMessage", {"tools": [{"name": "t"}]}, {"sampling": {}}, "sampling.tools"),
        ("sampling/createMessage", {"tools": [{"name": "t"}]}, {"sampling": {"tools": {}}}, None),
        ("sampling/createMessage", {"messages": []}, {"sampling": {}}, None),
        ("roots/list", {}, {"roots": {}}, None),
    ],
)
def test_a_request_needing_a_mode_the_host_did_not_declare_names_it(
    method: str, params: dict[str, Any], capabilities: dict[str, Any], lacking: str | None
) -> None:
    """Spec (2025-11-25 client capabilities): URL elicitation needs elicitation.url, form
    needs form (``{}`` means form), sampling with tools needs sampling.tools."""
    assert lacking_mode(method, jsonrpc.to_raw(params), capabilities) == lacking


async def test_a_url_elicitations_completion_reaches_only_the_client_that_was_asked() -> None:
    """Spec (2025-11-25 URL elicitation): notifications/elicitation/complete goes to the
    host that got the elicitation, on a shared backend session too."""
    caps = {"elicitation": {"url": {}}}
    one, two = FakeClient("c1", capabilities=caps), FakeClient("c2", capabilities=caps)
    to_clients, _, _, _ = _fan_out(one, two)
    backend = FakeBackend("alpha")
    params = jsonrpc.to_raw({"mode": "url", "url": "https://x", "elicitationId": "e1"})
    await to_clients.backend_request(backend, "elicitation/create", params, "c2")
    complete = jsonrpc.to_raw({"elicitationId": "e1"})
    to_clients.backend_notification(backend, "notifications/elicitation/complete", complete, None)
    assert one.notifications == []
    assert two.notifications == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/elicitation/complete",
            "params": {"elicitationId": "e1"},
        }
    ]


@pytest.mark.parametrize(
    ("method", "params", "required"),
    [
        ("elicitation/create", {"mode": "url", "url": "https://x"}, {"elicitation": {"url": {}}}),
        ("sampling/createMessage", {"tools": [{"name": "t"}]}, {"sampling": {"tools": {}}}),
    ],
)
async def test_a_2026_07_28_request_lacking_a_mode_ends_with_32021_naming_it(
    method: str, params: dict[str, Any], required: dict[str, Any]
) -> None:
    """Spec (2026-07-28 MissingRequiredClientCapability): a backend asking for a mode the
    request did not declare ends the host's call with -32021 and requiredCapabilities
    naming the mode; the backend's own request is refused."""
    caps = {"elicitation": {"form": {}}, "sampling": {}}
    request = ModernRequest(envelope=Envelope(protocol_version=MODERN, client_capabilities=caps))
    to_clients, _, _, _ = _fan_out()
    to_clients.opened(request)
    with pytest.raises(LocalProtocolError):
        await to_clients.backend_request(
            FakeBackend("alpha"), method, jsonrpc.to_raw(params), request.session_id
        )
    assert request.failure is not None
    assert request.failure.code == -32021
    assert request.failure.data == {"requiredCapabilities": required}
