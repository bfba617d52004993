"""The list_changed coalescer under an access policy: per effective view, and per session.

With the real ClientRegistry: a change noted with a view's tag reaches only
the sessions of that tag; one noted for a session (a reloaded policy changed
its view) reaches only that session; one noted with neither reaches every
session of the profile, as without a policy.
"""

from __future__ import annotations

import json

import trio
from prometheus_client import CollectorRegistry
from trio.testing import MockClock

from gateway.catalog.snapshot import Kind
from gateway.frontend.clients import ClientRegistry, ClientSession
from gateway.frontend.list_changed import ListChangedCoalescer
from gateway.frontend.stateless.listen_stream import Listener
from gateway.telemetry.metrics import Metrics


def _heard(session: ClientSession) -> list[str]:
    return [json.loads(message)["method"] for _, message in session.outbox.after(0)]


async def test_a_change_reaches_the_sessions_of_its_tag_or_its_session_only(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (issue 16 item 3).

    Three sessions on one profile, two views: each note reaches exactly its own.
    """
    clients = ClientRegistry()
    tags: dict[str, str] = {}
    sessions = []
    for tag in ("view-a", "view-a", "view-b"):
        session = clients.open("2025-11-25", {}, {})
        session.initialized = True
        tags[session.session_id] = tag
        sessions.append(session)
    other = clients.open("2025-11-25", {}, {}, profile="ops")
    other.initialized = True

    def tag_of(peer: ClientSession | Listener) -> str:
        return tags.get(peer.session_id, "")

    coalescer = ListChangedCoalescer(clients, Metrics(CollectorRegistry()), 0.2, tag_of)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coalescer.run)
        coalescer.add(frozenset({Kind.TOOLS}), "default", "view-a")
        await trio.sleep(0.5)
        assert [_heard(s) for s in sessions] == [
            ["notifications/tools/list_changed"],
            ["notifications/tools/list_changed"],
            [],
        ]
        coalescer.add(frozenset({Kind.PROMPTS}), "default", session=sessions[2].session_id)
        await trio.sleep(0.5)
        assert _heard(sessions[2]) == ["notifications/prompts/list_changed"]
        assert len(_heard(sessions[0])) == 1
        coalescer.add(frozenset({Kind.RESOURCES}), "default")
        await trio.sleep(0.5)
        assert all(_heard(s)[-1] == "notifications/resources/list_changed" for s in sessions)
        assert _heard(other) == []
        nursery.cancel_scope.cancel()
