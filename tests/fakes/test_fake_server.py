"""The fakes themselves: a fake that lies would make every test built on it lie."""

from __future__ import annotations

import json

import pytest
import trio
from trio.testing import MockClock

from gateway.config import BackendConfig, parse
from gateway.errors import ConnectError, TransportBroken, TransportClosed
from tests.fakes import FakeConnector, FakeMcpServer, memory_channel_pair


def _config(name: str) -> BackendConfig:
    text = json.dumps({"backends": [{"name": name, "transport": "stdio", "command": "fake"}]})
    return parse(text, env={}).backends[0]


async def test_a_memory_channel_pair_carries_messages_and_reports_closing_as_a_transport_does() -> (
    None
):
    """Gateway choice: our own closed end is TransportClosed, a vanished peer TransportBroken."""
    a, b = memory_channel_pair(1, 1)
    await a.send(b"ping")
    assert await b.receive() == b"ping"
    b.close()
    with pytest.raises(TransportBroken):
        await a.receive()
    with pytest.raises(TransportBroken):
        await a.send(b"lost")
    with pytest.raises(TransportClosed):
        await b.send(b"after close")
    await a.aclose()
    await a.aclose()  # idempotent


async def test_the_connector_fails_as_told_then_serves_the_same_fake_on_each_connect(
    autojump_clock: MockClock,
) -> None:
    """Gateway choice: a fake outlives its connections; connects are counted and timed."""
    server = FakeMcpServer("alpha")
    connector = FakeConnector({"alpha": server})
    connector.fail_connects("alpha", times=1)
    with pytest.raises(ConnectError):
        async with connector(_config("alpha")):
            pass  # pragma: no cover - the connect fails
    for expected in (1, 2):
        await trio.sleep(1)
        async with connector(_config("alpha")) as channel:
            await channel.send(b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
            answer = json.loads(await channel.receive())
            assert answer["result"]["tools"][0]["name"] == "echo"
            server.crash()
            with pytest.raises(TransportBroken):
                await channel.receive()
        assert server.connects == expected
    assert connector.attempts["alpha"] == [0.0, 1.0, 2.0]
    assert [(r.time, r.connection) for r in server.messages("tools/list")] == [(1.0, 1), (2.0, 2)]
    with pytest.raises(ConnectError):
        async with connector(_config("nobody")):
            pass  # pragma: no cover - no such fake
