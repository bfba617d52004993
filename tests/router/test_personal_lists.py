"""A ``user_consent`` backend refused to the catalog (401), listed and called per principal.

The router's side of ``router.lists`` rule 6 and ``router.calls`` rule 3,
over a fake pool and a fake consent desk; the end-to-end path with a real
backend and authorization server is in
``tests/consent/test_consent_discovery_e2e.py``.
"""

from __future__ import annotations

from typing import Any

import msgspec
import trio

from gateway.backends.state import BackendState
from gateway.catalog.cursor import CursorCodec
from gateway.errors import BackendUnavailable
from gateway.protocol import jsonrpc
from gateway.router import Router
from tests.router.fakes import FakeBackend, FakeClient, FakePool, ask, started


class Desk:
    """Alice has consented at ``tracker``; nobody else has."""

    login_timeout = 1.0

    def acts_for_people(self, backend: str) -> bool:
        """Only the tracker acts for people."""
        return backend == "tracker"

    async def access_token(self, principal: str, backend: str) -> str | None:
        """Alice's token; nobody else's."""
        return "alice-token" if principal == "alice" else None

    async def has_consent(self, principal: str, backend: str) -> bool:
        """Whether that principal signed in."""
        return principal == "alice"

    async def new_link(self, principal: str, backend: str) -> tuple[str, str]:
        """A sign-in link."""
        return f"https://gw.example/oauth/start/{principal}", "e1"

    def expect(self, elicitation_id: str) -> None:
        """Nothing to wait for here."""

    async def completed(self, elicitation_id: str) -> None:
        """Never completes in these tests."""
        await trio.sleep_forever()

    def forget(self, elicitation_id: str) -> None:
        """Nothing to forget."""


async def _whoami(params: dict[str, Any], client: str | None) -> msgspec.Raw:
    return jsonrpc.to_raw({"content": [{"type": "text", "text": f"for {client}"}]})


async def _tools(params: dict[str, Any], client: str | None) -> msgspec.Raw:
    return jsonrpc.to_raw({"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]})


async def _router(nursery: trio.Nursery) -> tuple[Router, FakeBackend]:
    pool = FakePool()
    pool.add(FakeBackend("notes"), tools=({"name": "read", "inputSchema": {"type": "object"}},))
    tracker = pool.add(
        FakeBackend(
            "tracker",
            per_client=True,
            refused_listing=True,
            state=BackendState.DOWN,
            reason="HTTP 401",
            answers={"tools/list": _tools, "tools/call": _whoami},
        )
    )
    router = Router(pool, CursorCodec("test"), 0, consent=Desk())
    return await started(nursery, router), tracker


async def test_a_consented_principal_lists_and_calls_the_backend_on_its_own_session(
    nursery: trio.Nursery,
) -> None:
    """gateway choice: the backend's tools are listed with the caller's own session, under
    its prefix, and a call goes to that session by the name after the prefix."""
    router, tracker = await _router(nursery)
    alice = FakeClient("c-alice", principal="alice")
    listed = await ask(router, alice, "tools/list")
    names = [tool["name"] for tool in listed["result"]["tools"]]
    assert names == ["notes__read", "tracker__whoami"]
    assert "dev.mcp-gateway/consent" not in listed["result"].get("_meta", {})
    called = await ask(router, alice, "tools/call", name="tracker__whoami", arguments={})
    assert called["result"]["content"][0]["text"] == "for c-alice"
    assert [(s.method, s.client) for s in tracker.sent] == [
        ("tools/list", "c-alice"),
        ("tools/call", "c-alice"),
    ]
    assert tracker.sent[1].params["name"] == "whoami"


async def test_a_principal_without_consent_gets_the_hint_and_never_reaches_the_backend(
    nursery: trio.Nursery,
) -> None:
    """gateway choice: no listing is asked for on bob's behalf; his call is the sign-in
    request (-32042), never a forward."""
    router, tracker = await _router(nursery)
    bob = FakeClient("c-bob", principal="bob")
    listed = await ask(router, bob, "tools/list")
    assert [tool["name"] for tool in listed["result"]["tools"]] == ["notes__read"]
    assert listed["result"]["_meta"]["dev.mcp-gateway/consent"] == {
        "required": True,
        "unlisted": ["tracker"],
    }
    refused = await ask(router, bob, "tools/call", name="tracker__whoami", arguments={})
    assert refused["error"]["code"] == -32042
    assert tracker.sent == []


async def test_a_failed_personal_listing_names_the_backend_unavailable(
    nursery: trio.Nursery,
) -> None:
    """gateway choice: a listing on the caller's session that fails is named in
    _meta.unavailable, and the rest of the list is served."""
    router, tracker = await _router(nursery)

    async def lost(params: dict[str, Any], client: str | None) -> msgspec.Raw:
        raise BackendUnavailable("tracker", "the principal's session closed")

    tracker.answers["tools/list"] = lost
    alice = FakeClient("c-alice", principal="alice")
    listed = await ask(router, alice, "tools/list")
    assert [tool["name"] for tool in listed["result"]["tools"]] == ["notes__read"]
    assert listed["result"]["_meta"]["dev.mcp-gateway/unavailable"] == ["tracker"]
