"""The Streamable HTTP client transport against real servers over loopback.

Peers: the official Python SDK (FastMCP) answering with SSE streams, with
JSON bodies, and with resumable streams; and the Node reference server
(@modelcontextprotocol/server-everything). Each test opens its own session
on a server shared by the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from gateway.config import HttpBackend
from gateway.session.peer import open_session
from gateway.transports.streamable_http import StreamableHttpChannel, open_streamable_http
from tests.subprocess_servers import RunningServer, run_everything, run_http_alpha
from tests.transports.peer_helpers import (
    LATEST,
    RecordingChannel,
    call_tool,
    initialize,
    open_peer,
    progress_then_response,
    text_of,
    tool_names,
)

# Generous: a real subprocess on a loaded CI machine.
DEADLINE = 20.0


@pytest.fixture(name="sdk_sse", scope="module")
def _sdk_sse() -> Iterator[RunningServer]:
    with run_http_alpha("streamable-http", "sse") as server:
        yield server


@pytest.fixture(name="sdk_json", scope="module")
def _sdk_json() -> Iterator[RunningServer]:
    with run_http_alpha("streamable-http", "json") as server:
        yield server


@pytest.fixture(name="sdk_resumable", scope="module")
def _sdk_resumable() -> Iterator[RunningServer]:
    with run_http_alpha("streamable-http", "resumable") as server:
        yield server


@pytest.fixture(name="everything", scope="module")
def _everything() -> Iterator[RunningServer]:
    with run_everything("streamableHttp") as server:
        yield server


def backend(server: RunningServer, **extra: Any) -> HttpBackend:
    return HttpBackend(name="peer", url=server.url("/mcp"), **extra)


@pytest.mark.parametrize("server_name", ["sdk_sse", "sdk_json"])
async def test_sdk_server_initialize_list_and_call(
    server_name: str, request: pytest.FixtureRequest
) -> None:
    """Spec (Streamable HTTP): the session id from the InitializeResult's response and
    the negotiated version are used afterwards; list and call work over both the SSE
    and the JSON answer styles of the official SDK."""
    server: RunningServer = request.getfixturevalue(server_name)
    async with open_peer(open_streamable_http(backend(server), backend="peer"), DEADLINE) as (
        channel,
        peer,
    ):
        result = await initialize(peer)
        assert result["protocolVersion"] == LATEST
        assert channel.session_id
        assert channel.protocol_version == LATEST
        assert {"echo", "add", "progress"} <= set(await tool_names(peer))
        assert text_of(await call_tool(peer, "echo", {"text": "hi"})) == "alpha: hi"


async def test_sdk_progress_arrives_before_the_response(sdk_sse: RunningServer) -> None:
    """Spec: notifications related to a request travel on its POST's SSE stream, before
    the response; the transport delivers them through receive() in that order."""
    with trio.fail_after(DEADLINE):
        async with open_streamable_http(backend(sdk_sse)) as channel:
            recording = RecordingChannel(channel)
            async with open_session(recording) as peer:
                await initialize(peer)
                result = await call_tool(peer, "progress", {"steps": 3}, progress_token="p-1")
                assert text_of(result) == "done"
    assert progress_then_response(recording.received, "p-1") == (3, True)


async def test_sdk_server_notification_arrives_on_the_get_stream(sdk_sse: RunningServer) -> None:
    """Spec: a message the server sends on its own (no related request) travels on the
    GET stream, which the transport opens after notifications/initialized."""
    notifications: list[str] = []
    arrived = trio.Event()

    def on_notification(method: str, params: object) -> None:
        notifications.append(method)
        arrived.set()

    with trio.fail_after(DEADLINE):
        async with (
            open_streamable_http(backend(sdk_sse)) as channel,
            open_session(channel, on_notification=on_notification) as peer,
        ):
            await initialize(peer)
            # The GET is opened in the background after notifications/initialized,
            # and the SDK drops what it says while no GET stream is connected; so
            # announce until one announcement gets through.
            while not arrived.is_set():
                assert text_of(await call_tool(peer, "announce", {})) == "announced"
                with trio.move_on_after(0.5):
                    await arrived.wait()
    assert set(notifications) == {"notifications/tools/list_changed"}


async def test_long_call_does_not_block_other_sends(sdk_sse: RunningServer, tmp_path: Path) -> None:
    """Gateway choice: send() returns when a POST's headers arrive and each stream is
    read by its own task, so a slow tool call never holds up another request."""
    order: list[str] = []
    started, release = tmp_path / "started", tmp_path / "release"
    held = {"seconds": 0, "started": str(started), "release": str(release)}
    with trio.fail_after(DEADLINE):
        async with (
            open_streamable_http(backend(sdk_sse)) as channel,
            open_session(channel) as peer,
            trio.open_nursery() as nursery,
        ):
            await initialize(peer)

            async def slow() -> None:
                await call_tool(peer, "sleep", held)
                order.append("slow")

            nursery.start_soon(slow)
            # The slow call is in the server, held there until ``release``.
            while not started.exists():  # noqa: ASYNC110 - a file the server writes
                await trio.sleep(0.01)
            assert text_of(await call_tool(peer, "echo", {"text": "x"})) == "alpha: x"
            order.append("fast")
            release.touch()
    assert order == ["fast", "slow"]


async def test_closed_post_stream_is_resumed_with_last_event_id(
    sdk_resumable: RunningServer,
) -> None:
    """Spec (2025-11-25, resumability): a server may close a request's stream after
    priming it with an event id; the client resumes with GET and Last-Event-ID,
    honouring retry, and gets the rest, response included."""
    with trio.fail_after(DEADLINE):
        async with open_streamable_http(backend(sdk_resumable)) as channel:
            recording = RecordingChannel(channel)
            async with open_session(recording) as peer:
                await initialize(peer)
                result = await call_tool(peer, "poll", {}, progress_token="poll-1")
    assert text_of(result) == "polled"
    assert progress_then_response(recording.received, "poll-1") == (2, True)


@pytest.mark.node
async def test_everything_server_initialize_list_and_call(everything: RunningServer) -> None:
    """Spec: the Node reference server's session id and version are picked up and
    its tools can be listed and called."""
    async with open_peer(open_streamable_http(backend(everything)), DEADLINE) as (channel, peer):
        await initialize(peer)
        assert isinstance(channel, StreamableHttpChannel)
        assert channel.session_id
        assert channel.protocol_version == LATEST
        names = await tool_names(peer)
        assert {"echo", "trigger-long-running-operation"} <= set(names)
        assert text_of(await call_tool(peer, "echo", {"message": "hi"})) == "Echo: hi"


@pytest.mark.node
async def test_everything_long_running_progress_arrives_before_the_response(
    everything: RunningServer,
) -> None:
    """Spec: the reference server's long-running tool reports progress for the token in
    _meta; each notification comes through receive() before the response."""
    with trio.fail_after(DEADLINE):
        async with open_streamable_http(backend(everything)) as channel:
            recording = RecordingChannel(channel)
            async with open_session(recording) as peer:
                await initialize(peer)
                result = await call_tool(
                    peer,
                    "trigger-long-running-operation",
                    {"duration": 0.3, "steps": 3},
                    progress_token="long-1",
                )
    assert "completed" in text_of(result)
    assert progress_then_response(recording.received, "long-1") == (3, True)
