"""How the stdio transport maps pipe failures: to its own error types, never trio's.

A stand-in process whose pipes fail on cue: trio's pipe streams turn every
``OSError`` but EBADF into ``BrokenResourceError``, which must reach the
session as ``TransportBroken`` (the link broke), not as a trio exception
that would tear down the session's nursery.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from gateway.errors import TransportBroken, TransportClosed
from gateway.transports.stdio import StdioChannel


class FailingPipe:
    """A pipe end whose every operation raises ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def send_all(self, data: bytes) -> None:
        raise self.error

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        raise self.error


class FakeProcess:
    """Just what StdioChannel touches of a trio.Process."""

    def __init__(self, error: BaseException) -> None:
        self.stdin = FailingPipe(error)
        self.stdout = FailingPipe(error)
        self.pid = 0


def channel_failing_with(error: BaseException) -> StdioChannel:
    process: Any = FakeProcess(error)
    return StdioChannel(process, 1024)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (trio.BrokenResourceError(), TransportBroken),
        (trio.ClosedResourceError(), TransportClosed),
        (OSError("EIO"), TransportBroken),
    ],
)
async def test_a_failed_read_is_a_transport_error(
    error: BaseException, expected: type[Exception]
) -> None:
    with pytest.raises(expected):
        await channel_failing_with(error).receive()


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (trio.BrokenResourceError(), TransportBroken),
        (trio.ClosedResourceError(), TransportClosed),
        (OSError("EPIPE"), TransportBroken),
    ],
)
async def test_a_failed_write_is_a_transport_error(
    error: BaseException, expected: type[Exception]
) -> None:
    with pytest.raises(expected):
        await channel_failing_with(error).send(b"{}")
