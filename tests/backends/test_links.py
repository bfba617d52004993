"""Per-principal and per-client backend sessions (backends/links.py), on virtual time.

A directly built ``Backend`` over the fake server, told who each client
session is (``hosts``) and that auth is on, so ``session: auto`` on stdio
means one backend session per principal and declared capabilities.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from gateway.backends.backend import Backend, BackendState
from gateway.backends.links import SessionLimitReached
from gateway.errors import BackendUnavailable
from gateway.protocol import jsonrpc
from tests.backends.test_supervision import SEED, Transitions, one_backend, tool_call
from tests.fakes import FakeConnector, FakeMcpServer
from tests.fakes.fake_server import AnswerAfter

ASKS = {"roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}}
# client session -> (principal, declared capabilities, roots digest)
HOSTS: dict[str, tuple[str | None, dict[str, Any], str | None]] = {
    "a1": ("alice", ASKS, None),
    "a2": ("alice", ASKS, None),
    "a3": ("alice", {}, None),
    "b1": ("bob", ASKS, None),
}


@asynccontextmanager
async def principal_backend(server: FakeMcpServer, **extra: Any) -> AsyncIterator[Backend]:
    """A backend over ``server`` with auth on and the hosts above; up for the block."""
    transitions = Transitions()
    backend = Backend(
        one_backend("b", **extra),
        on_change=transitions,
        connect=FakeConnector({"b": server}),
        rng=random.Random(SEED),
        hosts=HOSTS.get,
        authenticated=lambda: True,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(backend.run)
        await transitions.wait_for("b", BackendState.UP)
        yield backend
        nursery.cancel_scope.cancel()


def declared_by_links(server: FakeMcpServer) -> list[dict[str, Any]]:
    """The client capabilities each link's initialize declared (the shared session's left out)."""
    return [m.params["capabilities"] for m in server.messages("initialize")[1:]]


async def test_clients_of_one_principal_share_a_session_and_another_principal_gets_its_own(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (DESIGN "Trust between people"): auto on stdio with auth is per
    principal: alice's two hosts share one backend session, bob gets another."""
    server = FakeMcpServer("b")
    async with principal_backend(server) as backend:
        assert backend.session_mode == "per_principal"
        for client in ("a1", "a2", "b1", "a1"):
            await backend.request("tools/call", tool_call("echo"), client=client)
        assert backend.open_links == 2
    calls = server.messages("tools/call")
    assert [c.connection for c in calls] == [2, 2, 3, 2]


async def test_hosts_of_one_principal_that_declare_other_capabilities_get_other_sessions(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice: a session declares the host's own capabilities, so hosts that
    declare different ones never share it."""
    server = FakeMcpServer("b")
    async with principal_backend(server) as backend:
        await backend.request("tools/call", tool_call("echo"), client="a1")
        await backend.request("tools/call", tool_call("echo"), client="a3")
        assert backend.open_links == 2
    assert declared_by_links(server) == [ASKS, {}]


async def test_a_call_past_sessions_max_fails_with_an_error_naming_the_setting(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice: sessions.max bounds the backend sessions; past it a call fails
    with a clear error, and the sessions open keep working."""
    server = FakeMcpServer("b")
    async with principal_backend(server, sessions={"max": 2}) as backend:
        await backend.request("tools/call", tool_call("echo"), client="a1")
        await backend.request("tools/call", tool_call("echo"), client="b1")
        with pytest.raises(SessionLimitReached) as caught:
            await backend.request("tools/call", tool_call("echo"), client="a3")
        assert "sessions.max" in str(caught.value)
        assert caught.value.kind == "session_limit"
        await backend.request("tools/call", tool_call("echo"), client="a2")  # alice's session
        assert backend.open_links == 2


async def test_an_idle_session_closes_after_idle_timeout_and_reopens_on_the_next_call(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice: a backend session without a call for sessions.idle_timeout
    closes; a call in flight keeps it open; the next call opens a new one."""
    server = FakeMcpServer("b", tools={"slow": AnswerAfter(50.0, "done")})
    async with principal_backend(server, sessions={"idle_timeout": 30}) as backend:
        start = trio.current_time()
        await backend.request("tools/call", tool_call("slow"), client="a1")  # 50 s > 30 s
        assert trio.current_time() - start == pytest.approx(50.0)
        await trio.sleep(29)
        assert backend.open_links == 1
        await trio.sleep(2)
        assert backend.open_links == 0
        await backend.request("tools/call", tool_call("slow"), client="a2")
        assert backend.open_links == 1
    assert len(server.messages("initialize")) == 3  # shared, first session, reopened


async def test_a_second_client_of_a_principal_with_a_call_in_flight_gets_a_second_session(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (issue 25 item 2): at any moment a backend session carries the
    calls of one client only, so a backend's question has exactly one asker; a client
    whose principal's session is busy with another client's call gets another."""
    server = FakeMcpServer("b", tools={"slow": AnswerAfter(10.0, "done")})
    async with principal_backend(server, sessions={"idle_timeout": 60}) as backend:
        async with trio.open_nursery() as nursery:
            for client in ("a1", "a1", "a2"):
                nursery.start_soon(
                    lambda c: backend.request("tools/call", tool_call("slow"), client=c), client
                )
                await trio.sleep(1)
            assert backend.open_links == 2
        # both free now: the next calls of either client take the first session
        await backend.request("tools/call", tool_call("slow"), client="a2")
        await trio.sleep(61)
        assert backend.open_links == 0
    calls = server.messages("tools/call")
    assert [c.connection for c in calls] == [2, 2, 3, 2]


async def test_a_session_that_cannot_open_fails_the_call_and_leaves_the_backend_up(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (links rule 6): the call that needed the session gets the reason;
    the backend and the other principals' sessions are untouched; the next call retries."""
    server = FakeMcpServer("b")
    connector = FakeConnector({"b": server})
    transitions = Transitions()
    backend = Backend(
        one_backend("b"),
        on_change=transitions,
        connect=connector,
        rng=random.Random(SEED),
        hosts=HOSTS.get,
        authenticated=lambda: True,
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(backend.run)
        await transitions.wait_for("b", BackendState.UP)
        await backend.request("tools/call", tool_call("echo"), client="b1")
        connector.fail_connects("b", times=1)
        with pytest.raises(BackendUnavailable, match="cannot open a session for this client"):
            await backend.request("tools/call", tool_call("echo"), client="a1")
        assert backend.state is BackendState.UP
        assert backend.open_links == 1
        await backend.request("tools/call", tool_call("echo"), client="a1")
        assert backend.open_links == 2
        nursery.cancel_scope.cancel()


async def test_a_host_whose_roots_change_follows_them_to_the_session_of_its_new_roots(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (links rules 1, 6): hosts of one principal and capabilities share a
    session only with the same roots; a host whose roots change leaves the session it
    shares (the notification does not reach it) and its next call takes a session of its
    new roots; a session that is a host's alone hears the change and moves with it."""
    server = FakeMcpServer("b")
    roots = {"a1": "r1", "a2": "r2", "a3": "r1"}
    transitions = Transitions()
    backend = Backend(
        one_backend("b"),
        on_change=transitions,
        connect=FakeConnector({"b": server}),
        rng=random.Random(SEED),
        hosts=lambda c: ("alice", ASKS, roots[c]) if c in roots else None,
        authenticated=lambda: True,
    )
    changed = "notifications/roots/list_changed"
    async with trio.open_nursery() as nursery:
        await nursery.start(backend.run)
        await transitions.wait_for("b", BackendState.UP)
        for client in ("a1", "a2", "a3"):
            await backend.request("tools/call", tool_call("echo"), client=client)
        assert backend.open_links == 2
        roots["a3"] = "r2"  # a3 shared r1's session with a1: it leaves it
        await backend.notify(changed, None, client="a3")
        backend.rekey_client("a3")
        await backend.request("tools/call", tool_call("echo"), client="a3")
        roots["a1"] = "r3"  # a1 is alone on r1's session now: it hears, and it moves
        await backend.notify(changed, None, client="a1")
        backend.rekey_client("a1")
        await backend.request("tools/call", tool_call("echo"), client="a1")
        assert backend.open_links == 2
        nursery.cancel_scope.cancel()
    calls = server.messages("tools/call")
    assert [c.connection for c in calls] == [2, 3, 2, 3, 2]
    assert [m.connection for m in server.messages(changed)] == [2]


async def test_a_principals_second_session_opens_at_the_log_level_its_first_was_set_to(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (links rule 4): a lane that opens while its key's first lane has an
    acknowledged log level gets logging/setLevel with it before its first call; a key with
    no level set sends none."""
    server = FakeMcpServer(
        "b", tools={"slow": AnswerAfter(10.0, "done")}, capabilities={"logging": {}}
    )
    async with principal_backend(server, sessions={"idle_timeout": 60}) as backend:
        await backend.request("tools/call", tool_call("slow"), client="b1")
        level = jsonrpc.to_raw({"level": "debug"})
        await backend.request("logging/setLevel", level, client="a1")
        async with trio.open_nursery() as nursery:
            for client in ("a1", "a2"):  # a2 overlaps a1: a second lane of alice's key
                nursery.start_soon(
                    lambda c: backend.request("tools/call", tool_call("slow"), client=c), client
                )
                await trio.sleep(1)
        assert backend.open_links == 3
    set_level = server.messages("logging/setLevel")
    calls = server.messages("tools/call")
    assert [m.connection for m in set_level] == [3, 4]  # alice's first lane, then her second
    assert [m.params for m in set_level] == [{"level": "debug"}] * 2
    second = [m for m in server.received if m.connection == 4]
    assert [m.method for m in second][-2:] == ["logging/setLevel", "tools/call"]
    assert [c.connection for c in calls] == [2, 3, 4]
