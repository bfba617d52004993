"""A dual-era backend whose 2026-07-28 leg fails is served in the handshake era at once.

Fakes (``tests/fakes``) play the faults a real server does not produce on
cue: a listen refused after discover declared list changes, a listen never
acknowledged. Every test runs in virtual time. Rules:
``backends/stateless/era_fallback.py``; robustness E16. The real HTTP
server with a never-ending JSON listen body is in
``tests/e2e/test_listen_fallback.py``.
"""

from __future__ import annotations

from typing import Final

import trio
from structlog.testing import capture_logs
from trio.testing import MockClock

from gateway.backends.backend import BackendState
from gateway.backends.stateless.era_fallback import RETRY, EraFallback
from gateway.backends.stateless.listen_client import LISTEN_ACK_TIMEOUT
from tests.backends.test_supervision import Transitions, one_backend, running_backend, tool_call
from tests.fakes import FakeConnector, FakeMcpServer

REFUSED: Final = (
    "server/discover declared toolsListChanged but subscriptions/listen answered "
    "-32601: method not found: subscriptions/listen"
)


def warnings(logs: list[dict[str, object]]) -> list[object]:
    """The events of the warning lines captured."""
    return [entry["event"] for entry in logs if entry["log_level"] == "warning"]


async def test_a_listen_refused_after_discover_declared_it_falls_back_at_once_with_one_warning(
    autojump_clock: MockClock,
) -> None:
    """Robustness E16: a discover that lies costs no wait; the backend is up in the
    handshake era at once, its status says why, and its list_changed is followed."""
    server = FakeMcpServer("liar", discover="modern", listen="refuse")
    connector = FakeConnector({"liar": server})
    transitions = Transitions()
    with capture_logs() as logs:
        async with running_backend(one_backend("liar"), connector, transitions) as backend:
            assert await transitions.wait_for("liar", BackendState.UP) == 0.0
            assert backend.info is not None and not backend.info.modern
            assert backend.era_reason == (
                f"handshake era: the 2026-07-28 leg failed ({REFUSED}); retried with backoff"
            )
            assert backend.reason == f"up, {backend.era_reason}"
            await backend.request("tools/call", tool_call("echo"))
            server.tools["grown"] = server.tools["echo"]
            server.push_list_changed()
            await trio.sleep(1)  # the debounced re-listing, in virtual time
            assert backend.listing is not None and len(backend.listing.tools) == 2
            assert BackendState.DOWN not in [s for _, s in transitions.of("liar")]
    assert warnings(logs) == ["backend.era.fallback"]
    [fallback] = [entry for entry in logs if entry["event"] == "backend.era.fallback"]
    assert fallback["problem"] == REFUSED
    [discover] = server.messages("server/discover")
    [initialize] = server.messages("initialize")
    assert (discover.connection, initialize.connection) == (1, 2)


async def test_a_listen_never_acknowledged_falls_back_after_the_ack_wait(
    autojump_clock: MockClock,
) -> None:
    """Robustness E16: an acknowledgement not seen within LISTEN_ACK_TIMEOUT, never the
    backend's whole ``timeouts.initialize``, then the handshake era."""
    server = FakeMcpServer("mute", discover="modern", listen="silent")
    connector = FakeConnector({"mute": server})
    transitions = Transitions()
    with capture_logs() as logs:
        async with running_backend(one_backend("mute"), connector, transitions) as backend:
            assert await transitions.wait_for("mute", BackendState.UP) == LISTEN_ACK_TIMEOUT
            assert backend.info is not None and not backend.info.modern
            assert backend.era_reason is not None
            assert (
                f"no acknowledgement of subscriptions/listen within {LISTEN_ACK_TIMEOUT:g} s"
                in backend.era_reason
            )
    assert warnings(logs) == ["backend.era.fallback"]


async def test_the_2026_07_28_leg_is_tried_again_beside_the_session_and_restored_once_it_holds(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice: a failed try waits longer and says so at info level only; a try that
    holds reopens the session in 2026-07-28 at once, with no backoff and no warning."""
    server = FakeMcpServer("mend", discover="modern", listen="refuse")
    connector = FakeConnector({"mend": server})
    transitions = Transitions()
    with capture_logs() as logs:
        async with running_backend(one_backend("mend"), connector, transitions) as backend:
            await transitions.wait_for("mend", BackendState.UP)
            with trio.fail_after(RETRY.ceiling(0) + 1):
                await connector.wait_for_attempts("mend", 3)  # start, fallback, first try
            first_try = connector.attempts["mend"][2]
            assert 0 < first_try <= RETRY.ceiling(0)
            assert backend.state is BackendState.UP and not backend.info.modern  # type: ignore[union-attr]
            await trio.sleep(1)  # the first try fails at once (virtual time)
            server.listen = "ack"
            with trio.fail_after(RETRY.ceiling(1) + 1):
                await connector.wait_for_attempts("mend", 5)  # the second try, the reopen
            second_try = connector.attempts["mend"][3]
            assert first_try < second_try <= first_try + RETRY.ceiling(1)
            up_again = await transitions.wait_for("mend", BackendState.UP, count=2)
            assert up_again == second_try
            assert backend.info is not None and backend.info.modern
            assert backend.era_reason is None and backend.reason == "up"
            # The fallback, then the reopen: the legacy session ends as on a restart.
            assert [s for _, s in transitions.of("mend")] == [
                BackendState.STARTING,
                BackendState.UP,
                BackendState.DOWN,
                BackendState.STARTING,
                BackendState.UP,
            ]
    assert warnings(logs) == ["backend.era.fallback"]
    events = [entry["event"] for entry in logs]
    assert events.count("backend.era.retry_failed") == 1
    assert events.count("backend.era.restored") == 1


async def test_protocol_modern_keeps_its_session_with_a_broken_listen(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice: ``modern`` has no other era to use, so the listen's failure is
    tolerated (rule 1) and the backend is up in 2026-07-28 at once."""
    server = FakeMcpServer("pinned", discover="modern", listen="refuse")
    connector = FakeConnector({"pinned": server})
    transitions = Transitions()
    config = one_backend("pinned", protocol="modern")
    async with running_backend(config, connector, transitions) as backend:
        assert await transitions.wait_for("pinned", BackendState.UP) == 0.0
        assert backend.info is not None and backend.info.modern
        assert backend.era_reason is None
    assert server.messages("initialize") == []


def test_the_era_choice_falls_back_only_under_auto_and_not_after_the_handshake_failed() -> None:
    """Rules 1, 4 as data: what the next connection speaks after each event."""
    auto = EraFallback("auto")
    assert (auto.protocol(), auto.strict) == ("auto", True)
    delay = auto.leg_failed("broken", now=10.0)
    assert 0 <= delay <= RETRY.ceiling(0) and auto.retry_at == 10.0 + delay
    assert (auto.protocol(), auto.reason()) == (
        "legacy",
        "handshake era: the 2026-07-28 leg failed (broken); retried with backoff",
    )
    auto.handshake_failed()
    assert (auto.protocol(), auto.strict, auto.reason()) == ("auto", False, None)
    modern = EraFallback("modern")
    assert (modern.protocol(), modern.strict) == ("modern", False)
    restored = EraFallback("auto")
    restored.leg_failed("broken", now=0.0)
    restored.restored()
    assert (restored.protocol(), restored.reason(), restored.failures) == ("auto", None, 0)
