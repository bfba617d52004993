"""The legacy HTTP+SSE client transport against real servers over loopback.

Peers: the official Python SDK (FastMCP, ``transport="sse"``) and the Node
reference server (``sse``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio

from gateway.config import SseBackend
from gateway.errors import TransportBroken
from gateway.session.peer import open_session
from gateway.transports.sse import open_sse
from tests.subprocess_servers import RunningServer, run_everything, run_http_alpha
from tests.transports.peer_helpers import (
    RecordingChannel,
    call_tool,
    initialize,
    open_peer,
    progress_then_response,
    text_of,
    tool_names,
)

DEADLINE = 20.0


@pytest.fixture(name="sdk_sse", scope="module")
def _sdk_sse() -> Iterator[RunningServer]:
    with run_http_alpha("sse") as server:
        yield server


@pytest.fixture(name="everything_sse", scope="module")
def _everything_sse() -> Iterator[RunningServer]:
    with run_everything("sse") as server:
        yield server


def backend(server: RunningServer) -> SseBackend:
    return SseBackend(name="peer", url=server.url("/sse"))


async def test_sdk_server_initialize_list_call_and_progress(sdk_sse: RunningServer) -> None:
    """Spec (HTTP+SSE): the endpoint event names where to POST (relative to the SSE
    URL); every answer and notification comes on the stream, progress first."""
    with trio.fail_after(DEADLINE):
        async with open_sse(backend(sdk_sse)) as channel:
            assert channel.endpoint is not None
            assert channel.endpoint.host == "127.0.0.1"
            assert channel.endpoint.path.startswith("/messages")
            recording = RecordingChannel(channel)
            async with open_session(recording) as peer:
                await initialize(peer)
                assert {"echo", "progress"} <= set(await tool_names(peer))
                assert text_of(await call_tool(peer, "echo", {"text": "hi"})) == "alpha: hi"
                result = await call_tool(peer, "progress", {"steps": 2}, progress_token="p-1")
                assert text_of(result) == "done"
    assert progress_then_response(recording.received, "p-1") == (2, True)


@pytest.mark.node
async def test_everything_server_initialize_list_call_and_progress(
    everything_sse: RunningServer,
) -> None:
    """Spec (HTTP+SSE): the reference server's session works end to end, long-running
    progress included."""
    with trio.fail_after(DEADLINE):
        async with open_sse(backend(everything_sse)) as channel:
            recording = RecordingChannel(channel)
            async with open_session(recording) as peer:
                await initialize(peer)
                assert "echo" in await tool_names(peer)
                assert text_of(await call_tool(peer, "echo", {"message": "hi"})) == "Echo: hi"
                result = await call_tool(
                    peer,
                    "trigger-long-running-operation",
                    {"duration": 0.3, "steps": 3},
                    progress_token="long-1",
                )
                assert "completed" in text_of(result)
    assert progress_then_response(recording.received, "long-1") == (3, True)


async def test_server_going_away_breaks_the_channel() -> None:
    """Spec (HTTP+SSE): the session lives as long as its stream; when the server dies
    the stream ends and receive() raises TransportBroken."""
    with run_http_alpha("sse") as server:
        async with open_peer(open_sse(backend(server)), DEADLINE) as (channel, peer):
            await initialize(peer)
            server.process.kill()  # a crash, not a shutdown
            await peer.closed.wait()
            assert isinstance(peer.close_reason, TransportBroken)
            with pytest.raises(TransportBroken):
                await channel.receive()
