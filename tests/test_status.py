"""The /readyz overview (gateway/runtime/readiness.py, issue 18): each backend's row over its life,
and the client sessions grouped, on virtual time."""

from __future__ import annotations

import time

import msgspec
import trio
from trio.testing import MockClock

from gateway.backends.pool import open_pool
from gateway.backends.state import BackendState
from gateway.frontend.clients import ClientSession
from gateway.protocol.versions import LATEST_VERSION
from gateway.runtime.readiness import backend_status, readiness, session_groups
from gateway.telemetry.overview import Overview, SessionGroup
from tests.backends.test_supervision import (
    RULES,
    Transitions,
    backend_entry,
    make_config,
    one_backend,
    running_backend,
)
from tests.fakes.fake_server import FakeConnector, FakeMcpServer


async def test_a_backends_row_follows_its_life_and_keeps_the_last_error_after_it_is_back(
    autojump_clock: MockClock,
) -> None:
    """Issue 18: uptime counts from the current session's start (virtual clock, exact);
    a crash shows down with its error and wall-clock time; back up, restarts is 1 and
    the last error stays."""
    server = FakeMcpServer("steady")
    connector = FakeConnector({"steady": server})
    transitions = Transitions()
    async with running_backend(one_backend("steady"), connector, transitions) as backend:
        up_at = await transitions.wait_for("steady", BackendState.UP)
        await trio.sleep(10)
        row = backend_status(backend, trio.current_time())
        assert (row.name, row.transport, row.state, row.reason) == ("steady", "stdio", "up", "up")
        assert (row.era, row.protocol_version) == ("legacy", LATEST_VERSION)
        assert row.uptime_seconds == round(trio.current_time() - up_at, 3) == 10.0
        assert (row.restarts, row.in_flight, row.last_error) == (0, 0, None)
        before = time.time()
        server.crash()
        await transitions.wait_for("steady", BackendState.DOWN)
        # After the backoff it is starting again; the failure is what the row says.
        restarting_at = await transitions.wait_for("steady", BackendState.STARTING)
        after = time.time()
        down = backend_status(backend, restarting_at)
        assert (down.state, down.reason, down.uptime_seconds) == ("starting", "restarting", None)
        assert (down.era, down.protocol_version) == (None, None)
        assert down.last_error is not None
        assert down.last_error.message == "peer closed the memory channel (EOF)"
        assert before <= down.last_error.at <= after
        back_at = await transitions.wait_for("steady", BackendState.UP, count=2)
        back = backend_status(backend, back_at)
        assert (back.state, back.restarts, back.uptime_seconds) == ("up", 1, 0.0)
        assert back.last_error == down.last_error


def test_sessions_are_counted_by_revision_and_profile_once_initialized() -> None:
    """Issue 18: sessions by era and profile; a session still in its handshake, or
    closed, is not counted."""

    def session(version: str, profile: str, *, initialized: bool = True) -> ClientSession:
        return ClientSession(
            session_id=f"{version}-{profile}",
            protocol_version=version,
            profile=profile,
            initialized=initialized,
        )

    closed = session("2025-06-18", "default")
    closed.closed = True
    groups = session_groups(
        [
            session("2025-11-25", "default"),
            session("2025-11-25", "default"),
            session("2025-11-25", "ops"),
            session("2024-11-05", "default"),
            session("2025-11-25", "default", initialized=False),
            closed,
        ]
    )
    assert groups == [
        SessionGroup(era="legacy", protocol_version="2024-11-05", profile="default", count=1),
        SessionGroup(era="legacy", protocol_version="2025-11-25", profile="default", count=2),
        SessionGroup(era="legacy", protocol_version="2025-11-25", profile="ops", count=1),
    ]


async def test_readiness_needs_every_required_backend_up_and_no_drain(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (/readyz): not ready while a required backend is not up or while
    draining; the overview says which, with the uptime on the virtual clock."""
    connector = FakeConnector({"must": FakeMcpServer("must"), "may": FakeMcpServer("may")})
    connector.fail_connects("must")
    config = make_config(backend_entry("must", required=True), backend_entry("may"))
    async with open_pool(config.backends, RULES, connector) as pool:
        await pool.settled()
        ready, details = readiness(pool, [], 0.0, draining=False)
        assert ready is False
        assert (details["down"], details["required_down"]) == (["must"], ["must"])
        overview = msgspec.convert(details["overview"], Overview)
        assert overview.uptime_seconds == round(trio.current_time(), 3)
        assert [(b.name, b.required) for b in overview.backends] == [
            ("may", False),
            ("must", True),
        ]
        connector.allow_connects("must")
        with trio.fail_after(60):
            while pool.backends["must"].state is not BackendState.UP:
                await pool.state_changed.wait()
        assert readiness(pool, [], 0.0, draining=False)[0] is True
        ready, details = readiness(pool, [], 0.0, draining=True)
        assert ready is False and details["overview"]["draining"] is True
