"""Robustness row E7: a 2026-07-28 backend that refuses every request after a good
discover is shown as incompatible, never "up" with nothing in it.

A fake answers ``server/discover`` with a good DiscoverResult and every other
request with -32022 (unsupported protocol version); virtual time.
"""

from __future__ import annotations

import trio
from trio.testing import MockClock

from gateway.backends.backend import BackendState
from gateway.runtime.readiness import backend_status
from tests.backends.test_supervision import Transitions, one_backend, running_backend
from tests.fakes import FakeConnector, FakeMcpServer


async def test_a_backend_refusing_every_request_with_minus_32022_is_incompatible(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice (E7): state ``incompatible`` with a reason that says why; not up."""
    server = FakeMcpServer("refuser", discover="modern-refusing")
    connector = FakeConnector({"refuser": server})
    transitions = Transitions()
    async with running_backend(one_backend("refuser"), connector, transitions) as backend:
        await transitions.wait_for("refuser", BackendState.INCOMPATIBLE)
        assert "refuses every 2026-07-28 request with -32022" in backend.reason
        assert backend.listing is None
        status = backend_status(backend, trio.current_time())  # /readyz, status, console
        assert (status.state, status.reason) == ("incompatible", backend.reason)
        assert all(state is not BackendState.UP for _, _, state in transitions.log)
        await trio.sleep(1)
        assert backend.state is BackendState.INCOMPATIBLE  # retried at the longest delay
    assert server.messages("tools/list")
