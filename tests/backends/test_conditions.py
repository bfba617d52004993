"""Conditions as types: how a backend reacts to the exception that ended its session.

A session that ends with ``SessionExpired`` (an HTTP server forgot our
session) is re-initialized at once and an idempotent call in flight is sent
once more; any other break, even one whose message reads the same, is an
ordinary failure: backoff, and the call fails. The decision is made on the
type, never on the text (issue 13), and the condition travels to the caller
as ``BackendUnavailable.cause``.

Each test breaks the shared session's channel with a chosen exception, in
virtual time.
"""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Final

import msgspec
import pytest
import trio
from trio.testing import MockClock

from gateway.backends.backend import Backend
from gateway.backends.state import BackendState
from gateway.config import BackendConfig, parse
from gateway.errors import BackendUnavailable, SessionExpired, TransportBroken, TransportError
from tests.fakes import FakeConnector, FakeMcpServer, Hang
from tests.fakes.fake_server import MemoryMessageChannel

# Backoff of the first restart after a failure that is not SessionExpired.
INITIAL_DELAY: Final = 10.0


class BreakableChannel:
    """A channel whose next (or pending) receive raises an exception the test chooses."""

    def __init__(self, inner: MemoryMessageChannel) -> None:
        self._inner = inner
        self._error: TransportError | None = None
        self._scope: trio.CancelScope | None = None

    async def send(self, message: bytes) -> None:
        """Send through the fake."""
        await self._inner.send(message)

    async def receive(self) -> bytes:
        """The fake's next message, unless the channel was broken."""
        if self._error is None:
            with trio.CancelScope() as self._scope:
                return await self._inner.receive()
        assert self._error is not None
        raise self._error

    async def aclose(self) -> None:
        """Close the fake's end."""
        await self._inner.aclose()

    def break_with(self, error: TransportError) -> None:
        """Make the session's reader see ``error`` now."""
        self._error = error
        if self._scope is not None:
            self._scope.cancel()


class BreakableConnector:
    """A ``ChannelOpener`` over ``FakeConnector`` that keeps the last channel it opened."""

    def __init__(self, connector: FakeConnector) -> None:
        self._connector = connector
        self.channel: BreakableChannel | None = None
        self.opened = 0

    @asynccontextmanager
    async def __call__(self, cfg: BackendConfig, /) -> AsyncIterator[BreakableChannel]:
        """Open the fake link, wrapped."""
        async with self._connector(cfg) as inner:
            self.channel = BreakableChannel(inner)
            self.opened += 1
            yield self.channel


def http_like_backend() -> BackendConfig:
    """A shared-session backend config with a long first backoff and no idle pings."""
    entry = {
        "name": "alpha",
        "transport": "stdio",
        "command": "fake",
        "health": {"ping_interval": 0},
        "restart": {"initial_delay": INITIAL_DELAY, "max_delay": 60},
    }
    return parse(json.dumps({"backends": [entry]}), env={}).backends[0]


class Changes:
    """An ``on_change`` callback that lets a test wait for a condition on the backend."""

    def __init__(self) -> None:
        self._changed = trio.Event()

    def __call__(self, _backend: Backend) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Return once ``condition()`` holds after some change (bounded in virtual time)."""
        with trio.fail_after(120):
            while not condition():
                await self._changed.wait()


@asynccontextmanager
async def running(
    server: FakeMcpServer,
) -> AsyncIterator[tuple[Backend, BreakableConnector, Changes]]:
    """The backend, up, with its breakable connector and its change feed."""
    connector = BreakableConnector(FakeConnector({"alpha": server}))
    changes = Changes()
    backend = Backend(
        http_like_backend(), on_change=changes, connect=connector, rng=random.Random(0)
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(backend.run)
        await changes.wait_until(lambda: backend.state is BackendState.UP)
        yield backend, connector, changes
        nursery.cancel_scope.cancel()


async def test_session_expired_restarts_at_once_and_repeats_an_idempotent_call_in_flight(
    autojump_clock: MockClock,
) -> None:
    """Robustness D14: after SessionExpired the ping in flight is answered on the new session."""
    server = FakeMcpServer("alpha", answer_pings=False)
    async with running(server) as (backend, connector, _changes), trio.open_nursery() as nursery:
        answered: list[float] = []

        async def ping() -> None:
            await backend.request("ping")
            answered.append(trio.current_time())

        nursery.start_soon(ping)
        await trio.sleep(1)
        assert connector.channel is not None
        server.answer_pings = True
        connector.channel.break_with(SessionExpired("session expired (404)"))
    assert answered == [1.0]  # re-initialized with no backoff, answered at once
    assert [ping.connection for ping in server.messages("ping")] == [1, 2]
    assert backend.restarts == 1


async def test_a_break_that_only_reads_like_session_expired_is_an_ordinary_failure(
    autojump_clock: MockClock,
) -> None:
    """Issue 13: the decision is on the type; the same words in a TransportBroken do not count.

    The call in flight fails with the break as its cause and is not repeated,
    and the restart waits for the backoff, not zero seconds.
    """
    server = FakeMcpServer("alpha", answer_pings=False)
    broken = TransportBroken("session expired (404)")
    async with running(server) as (backend, connector, changes):
        async with trio.open_nursery() as nursery:
            failures: list[BackendUnavailable] = []

            async def ping() -> None:
                with pytest.raises(BackendUnavailable) as caught:
                    await backend.request("ping")
                failures.append(caught.value)

            nursery.start_soon(ping)
            await trio.sleep(1)
            assert connector.channel is not None
            server.answer_pings = True
            connector.channel.break_with(broken)
        [failure] = failures
        assert failure.cause is broken
        assert trio.current_time() == 1.0
        assert backend.state is BackendState.DOWN
        with pytest.raises(BackendUnavailable) as refused:
            await backend.request("ping")
        assert refused.value.cause is broken  # new calls learn the condition too
        await changes.wait_until(lambda: backend.state is BackendState.UP and connector.opened == 2)
        assert 1.0 < trio.current_time() <= 1.0 + INITIAL_DELAY
        assert len(server.messages("ping")) == 1


async def test_a_tools_call_in_flight_is_not_repeated_after_session_expired(
    autojump_clock: MockClock,
) -> None:
    """Robustness B11: a call that may have had effects fails, carrying SessionExpired."""
    server = FakeMcpServer("alpha", tools={"stuck": Hang()})
    expired = SessionExpired("session expired (404)")
    async with running(server) as (backend, connector, _changes), trio.open_nursery() as nursery:
        failures: list[BackendUnavailable] = []

        async def call() -> None:
            params = json.dumps({"name": "stuck", "arguments": {}}).encode()
            with pytest.raises(BackendUnavailable) as caught:
                await backend.request("tools/call", msgspec.Raw(params))
            failures.append(caught.value)

        nursery.start_soon(call)
        await trio.sleep(1)
        assert connector.channel is not None
        connector.channel.break_with(expired)
    [failure] = failures
    assert failure.cause is expired
    assert len(server.messages("tools/call")) == 1
