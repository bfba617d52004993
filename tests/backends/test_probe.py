"""The backend leg's probe: ``server/discover`` first, ``initialize`` as the fallback.

Fakes (``tests/fakes``) answer the probe as each kind of server does; every
test runs in virtual time (STYLE rule 9). Rules: ``backends/handshake.py``
and ``docs/eras.md``, "The backend leg". The real peers (SDK 2.x and 1.x)
are in ``tests/e2e/test_modern_backend.py``.
"""

from __future__ import annotations

from typing import Any, Final

import trio
from structlog.testing import capture_logs
from trio.testing import MockClock

from gateway.backends.state import BackendState
from gateway.config import Timeouts
from tests.backends.test_supervision import (
    Transitions,
    one_backend,
    running_alone,
    running_backend,
    tool_call,
)
from tests.fakes import FakeConnector, FakeMcpServer

META: Final = "io.modelcontextprotocol/"
# The default ``timeouts.probe``.
PROBE: Final = Timeouts().probe


def envelope_of(params: dict[str, Any]) -> dict[str, Any]:
    """The ``io.modelcontextprotocol/*`` keys of a request's ``_meta``."""
    meta = params.get("_meta") or {}
    return {k: v for k, v in meta.items() if k.startswith(META)}


async def test_auto_uses_2026_07_28_when_discover_lists_it_and_never_initializes(
    autojump_clock: MockClock,
) -> None:
    """Issue 14 step 5: a DiscoverResult listing 2026-07-28 makes the session modern;
    no initialize, no initialized, and every request carries the envelope."""
    server = FakeMcpServer("m", discover="modern")
    async with running_alone(server) as (backend, _, transitions):
        assert await transitions.wait_for("m", BackendState.UP) == 0.0
        info = backend.info
        assert info is not None and info.modern
        assert (info.name, info.version, info.protocol_version) == ("m", "2", "2026-07-28")
        assert info.instructions == "m speaks 2026-07-28"
        assert info.capabilities == {"tools": {"listChanged": True}}
        await backend.request("tools/call", tool_call("echo"))
    assert server.messages("initialize") == []
    assert server.messages("notifications/initialized") == []
    for method in ("server/discover", "tools/list", "tools/call"):
        [received] = server.messages(method)
        envelope = envelope_of(received.params)
        assert envelope[META + "protocolVersion"] == "2026-07-28"
        assert envelope[META + "clientInfo"]["name"] == "mcp-gateway"
        assert envelope[META + "clientCapabilities"] == {}  # nobody to ask for the gateway
    assert backend.initializations == 0


async def test_auto_falls_back_to_initialize_when_discover_is_refused(
    autojump_clock: MockClock,
) -> None:
    """Issue 14 step 5: a handshake-era server's error costs one round trip, no wait."""
    server = FakeMcpServer("old")
    async with running_alone(server) as (backend, _, transitions):
        assert await transitions.wait_for("old", BackendState.UP) == 0.0
        assert backend.info is not None and not backend.info.modern
        await backend.request("tools/call", tool_call("echo"))
    assert len(server.messages("server/discover")) == 1
    assert len(server.messages("initialize")) == 1
    assert len(server.messages("notifications/initialized")) == 1
    assert envelope_of(server.messages("tools/call")[0].params) == {}  # legacy: no envelope


async def test_a_discover_answered_after_the_old_five_second_deadline_is_still_the_answer(
    autojump_clock: MockClock,
) -> None:
    """Robustness E17: a backend starting on a loaded machine answers discover at 20 s;
    that answer makes it modern on its first connection, and no initialize is sent."""
    server = FakeMcpServer("slow", discover="modern", discover_delay=20.0)
    connector = FakeConnector({"slow": server})
    transitions = Transitions()
    async with running_backend(one_backend("slow"), connector, transitions) as backend:
        assert await transitions.wait_for("slow", BackendState.UP) == 20.0
        assert backend.info is not None and backend.info.modern
        await backend.request("tools/call", tool_call("echo"))
        assert [s for _, s in transitions.of("slow")] == [BackendState.UP]
    assert server.connects == 1
    assert server.messages("initialize") == []


async def test_initialize_is_never_sent_on_a_connection_whose_discover_went_unanswered(
    autojump_clock: MockClock,
) -> None:
    """Robustness E17: silence is no refusal. After ``timeouts.probe`` the connection is
    closed unused, and the next one, a new connection, opens in the handshake era."""
    server = FakeMcpServer("quiet", discover="silent")
    connector = FakeConnector({"quiet": server})
    transitions = Transitions()
    with capture_logs() as logs:
        async with running_backend(one_backend("quiet"), connector, transitions) as backend:
            assert await transitions.wait_for("quiet", BackendState.UP) == PROBE
            assert backend.info is not None and not backend.info.modern
            assert backend.era_reason == (
                "handshake era: the 2026-07-28 leg failed (no answer to server/discover "
                f"within {PROBE:g} s); retried with backoff"
            )
            assert BackendState.DOWN not in [s for _, s in transitions.of("quiet")]
    [discover] = server.messages("server/discover")
    [initialize] = server.messages("initialize")
    assert (discover.connection, initialize.connection) == (1, 2)
    assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == [
        "backend.era.fallback"
    ]


async def test_protocol_legacy_never_probes(autojump_clock: MockClock) -> None:
    """Issue 14 step 5: ``protocol: legacy`` is today's behaviour, initialize only."""
    server = FakeMcpServer("pinned", discover="modern")
    async with running_alone(server, protocol="legacy") as (backend, _, transitions):
        await transitions.wait_for("pinned", BackendState.UP)
        assert backend.info is not None and not backend.info.modern
    assert server.messages("server/discover") == []
    assert len(server.messages("initialize")) == 1


async def test_protocol_modern_fails_the_attempt_when_discover_is_refused(
    autojump_clock: MockClock,
) -> None:
    """Issue 14 step 5: ``modern`` never falls back; the state says why."""
    server = FakeMcpServer("old")
    async with running_alone(server, protocol="modern") as (backend, _, transitions):
        await transitions.wait_for("old", BackendState.INCOMPATIBLE)
        assert backend.reason == (
            "protocol: modern, but server/discover answered -32601: "
            "method not found: server/discover"
        )
    assert server.messages("initialize") == []


async def test_protocol_modern_times_out_clearly_on_silence(autojump_clock: MockClock) -> None:
    """Issue 14 step 5: no answer within ``timeouts.probe`` fails a ``modern`` backend."""
    connector = FakeConnector({"quiet": FakeMcpServer("quiet", discover="silent")})
    transitions = Transitions()
    config = one_backend("quiet", protocol="modern")
    async with running_backend(config, connector, transitions) as backend:
        assert await transitions.wait_for("quiet", BackendState.INCOMPATIBLE) == PROBE
        assert backend.reason == (
            f"protocol: modern, but no answer to server/discover within {PROBE:g} s"
        )


async def test_a_modern_refusal_of_the_envelope_fails_the_attempt_even_in_auto(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice: -32022 naming 2026-07-28 twice is a modern server that dislikes
    our envelope; initialize would not help, so the backend is marked incompatible."""
    server = FakeMcpServer("picky", discover="envelope")
    async with running_alone(server) as (backend, _, transitions):
        await transitions.wait_for("picky", BackendState.INCOMPATIBLE)
        assert backend.reason.startswith("backend speaks 2026-07-28 but refused the gateway's")
    assert server.messages("initialize") == []
    assert len(server.messages("server/discover")) == 2  # the probe and its one retry


async def test_a_single_refusal_of_the_envelope_is_retried_once(
    autojump_clock: MockClock,
) -> None:
    """sep-2575's client retry: a server refusing the first request with -32022 naming
    the version we sent gets the probe again, and the backend comes up modern."""
    server = FakeMcpServer("shy", discover="envelope-once")
    async with running_alone(server) as (backend, _, transitions):
        await transitions.wait_for("shy", BackendState.UP)
        assert backend.info is not None and backend.info.modern
    assert len(server.messages("server/discover")) >= 2
    assert server.messages("initialize") == []


async def test_a_modern_session_is_health_checked_with_discover_not_ping(
    autojump_clock: MockClock,
) -> None:
    """Issue 14 step 5: 2026-07-28 has no ping; discover is the idle probe."""
    server = FakeMcpServer("m", discover="modern")
    async with running_alone(server, health={"ping_interval": 10}) as (
        _backend,
        _connector,
        transitions,
    ):
        await transitions.wait_for("m", BackendState.UP)
        await trio.sleep(25)
    assert server.messages("ping") == []
    times = [r.time for r in server.messages("server/discover")]
    assert times == [0.0, 10.0, 20.0]


async def test_a_per_client_link_speaks_the_shared_sessions_era_without_probing_again(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice: one probe per backend life, not one per client session (a
    legacy backend's links initialize at once; a modern backend has none, below)."""
    server = FakeMcpServer("b")
    async with running_alone(server, session="per_client") as (backend, _, transitions):
        await transitions.wait_for("b", BackendState.UP)
        await backend.request("tools/call", tool_call("echo"), client="c1")
        assert backend.has_link("c1")
    assert len(server.messages("server/discover")) == 1  # the shared session's only
    assert len(server.messages("initialize")) == 2
    [call] = server.messages("tools/call")
    assert envelope_of(call.params) == {}


async def test_a_modern_backend_is_never_per_client(autojump_clock: MockClock) -> None:
    """Gateway choice: no session to keep apart, so one link serves every client."""
    server = FakeMcpServer("m", discover="modern")
    async with running_alone(server, session="per_client") as (backend, _, transitions):
        await transitions.wait_for("m", BackendState.UP)
        assert not backend.per_client
        await backend.request("tools/call", tool_call("echo"), client="c1")
        assert not backend.has_link("c1")
    assert len(server.messages("server/discover")) == 1
