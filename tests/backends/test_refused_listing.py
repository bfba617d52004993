"""A backend that refused the catalog session (HTTP 401) is known as such between attempts.

``Backend.refused_listing`` decides whether a ``user_consent`` backend's
calls go to each principal's own session (``backends.backend`` rule 3);
it must not flip while the supervisor waits to try again or is trying.
"""

from __future__ import annotations

import random

import trio

from gateway.backends.backend import Backend
from gateway.backends.channel import ChannelOpener
from gateway.backends.state import BackendState
from gateway.config import BackendConfig
from gateway.errors import RemoteProtocolError
from tests.backends.test_supervision import SEED, Transitions, one_backend
from tests.fakes.fake_server import MemoryMessageChannel


class _Refused:
    """A connect the backend answers with an HTTP status (the transport's failure form)."""

    def __init__(self, status: int) -> None:
        self.status = status

    async def __aenter__(self) -> MemoryMessageChannel:
        await trio.lowlevel.checkpoint()
        raise RemoteProtocolError(
            "backend request failed: HTTP refused", data={"httpStatus": self.status}
        )

    async def __aexit__(self, *exc: object) -> None:
        """Nothing was opened."""


def _refusing(status: int) -> ChannelOpener:
    """A channel opener whose every connect is answered with HTTP ``status``."""

    def connect(cfg: BackendConfig, /) -> _Refused:
        return _Refused(status)

    return connect


async def _states(status: int) -> list[tuple[BackendState, bool]]:
    """Each state of the first two attempts, with what ``refused_listing`` said then."""
    seen: list[tuple[BackendState, bool]] = []
    transitions = Transitions()

    def on_change(backend: Backend) -> None:
        transitions(backend)
        seen.append((backend.state, backend.refused_listing))

    backend = Backend(
        one_backend("tracker"),
        on_change=on_change,
        connect=_refusing(status),
        rng=random.Random(SEED),
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(backend.run)
        await transitions.wait_for("tracker", BackendState.DOWN, 2)
        nursery.cancel_scope.cancel()
    return seen


async def test_a_catalog_refused_with_401_stays_refused_while_restarting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """gateway choice: between two refused attempts (restarting, connecting) the last
    attempt's refusal stands, so a principal's calls keep their own session."""
    seen = await _states(401)
    down = seen.index((BackendState.DOWN, True))
    assert all(refused for state, refused in seen[down:] if state is not BackendState.STOPPED)
    assert any(state is BackendState.STARTING for state, _ in seen[down:])


async def test_another_refusal_is_not_a_refused_listing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """gateway choice: only HTTP 401 means "lists only for a person"; a 503 does not."""
    seen = await _states(503)
    assert not any(refused for _, refused in seen)
