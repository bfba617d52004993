"""The WebSocket client transport against an MCP server built with trio-websocket.

The server (tests/transports/fake_ws.py) runs in the test's trio run on a
real loopback socket, port 0: a real peer over a real socket.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from gateway.backends.channel import open_channel
from gateway.backends.credentials.provider import ChannelCredential
from gateway.config import WebSocketBackend
from gateway.errors import ConnectError, TransportBroken, TransportClosed
from gateway.session.peer import open_session
from gateway.transports.websocket import WebSocketChannel, open_websocket
from tests.subprocess_servers import free_port
from tests.transports.fake_ws import WsMcpServer, serve_ws
from tests.transports.peer_helpers import LATEST, call_tool, initialize, text_of, tool_names

DEADLINE = 5.0


def backend(url: str, **extra: Any) -> WebSocketBackend:
    return WebSocketBackend(name="ws", url=url, **extra)


async def test_initialize_list_and_call_over_text_frames() -> None:
    """Gateway choice (no spec transport yet): one JSON-RPC message per text frame, the
    `mcp` subprotocol requested and agreed."""
    server = WsMcpServer()
    async with serve_ws(server) as url:
        with trio.fail_after(DEADLINE):
            async with open_websocket(backend(url)) as channel, open_session(channel) as peer:
                assert channel.subprotocol == "mcp"
                assert (await initialize(peer))["protocolVersion"] == LATEST
                assert await tool_names(peer) == ["echo"]
                assert text_of(await call_tool(peer, "echo", {"text": "hi"})) == "hi"
    assert server.subprotocols == [["mcp"]]
    assert all(isinstance(frame, str) for frame in server.frames)
    assert [json.loads(f).get("method") for f in server.frames] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
    ]


async def test_binary_frame_is_read_as_utf8_json() -> None:
    """Gateway choice: a server that answers in binary frames is understood too."""
    async with serve_ws(WsMcpServer()) as url:
        with trio.fail_after(DEADLINE):
            async with open_websocket(backend(url)) as channel, open_session(channel) as peer:
                await initialize(peer)
                assert text_of(await call_tool(peer, "binary", {})) == "binary"


async def test_configured_headers_reach_the_handshake_and_nothing_else_does() -> None:
    """Gateway choice: per-backend headers go on the handshake; no Authorization or
    cookie unless configured."""
    server = WsMcpServer()
    async with serve_ws(server) as url:
        with trio.fail_after(DEADLINE):
            async with open_websocket(backend(url, headers={"X-Backend-Token": "t-1"})):
                pass
    (headers,) = server.handshakes
    assert headers["x-backend-token"] == "t-1"
    assert headers["user-agent"].startswith("mcp-gateway/")
    assert "authorization" not in headers
    assert "cookie" not in headers


async def test_server_closing_the_connection_breaks_the_channel() -> None:
    """MessageChannel: a connection the peer closed is TransportBroken, with its code."""
    async with serve_ws(WsMcpServer()) as url:
        with trio.fail_after(DEADLINE):
            async with open_websocket(backend(url)) as channel, open_session(channel) as peer:
                await initialize(peer)
                with pytest.raises(TransportBroken, match="1011"):
                    await call_tool(peer, "hangup", {})
                assert isinstance(peer.close_reason, TransportBroken)
                with pytest.raises(TransportBroken):
                    await channel.send(b"{}")


async def test_nothing_listening_is_a_connect_error() -> None:
    """MessageChannel: a refused TCP connection is ConnectError, not a trio exception."""
    with trio.fail_after(DEADLINE), pytest.raises(ConnectError, match="WebSocket connect failed"):
        async with open_websocket(backend(f"ws://127.0.0.1:{free_port()}/mcp")):
            pass  # pragma: no cover - never entered


async def test_rejected_handshake_is_a_connect_error_naming_the_status() -> None:
    """MessageChannel: an HTTP refusal of the upgrade is ConnectError with its status."""
    async with serve_ws(WsMcpServer(reject_with=403)) as url:
        with trio.fail_after(DEADLINE), pytest.raises(ConnectError, match="HTTP 403"):
            async with open_websocket(backend(url)):
                pass  # pragma: no cover - never entered


async def test_closed_channel_refuses_use_with_transport_closed() -> None:
    """MessageChannel: after aclose(), send and receive raise TransportClosed."""
    async with serve_ws(WsMcpServer()) as url:
        with trio.fail_after(DEADLINE):
            async with open_websocket(backend(url)) as channel:
                assert isinstance(channel, WebSocketChannel)
                await channel.aclose()
                await channel.aclose()  # idempotent
                with pytest.raises(TransportClosed):
                    await channel.receive()
                with pytest.raises(TransportClosed):
                    await channel.send(b"{}")


async def test_a_credential_goes_on_the_handshake_and_a_refused_one_is_dropped() -> None:
    """Issue 16 item 4: an auth: credential is the handshake's bearer token; a 401 refusal
    drops it, so the next attempt (the supervisor's restart) fetches a fresh one."""
    issued = iter(["ws-token-1", "ws-token-2"])
    current: list[str] = [next(issued)]
    refused: list[str] = []

    async def source() -> str:
        return current[-1]

    def drop(token: str) -> None:
        refused.append(token)
        current.append(next(issued))

    credential = ChannelCredential(source, drop, retry=True)
    accepting = WsMcpServer()
    async with serve_ws(accepting) as url:
        with trio.fail_after(DEADLINE):
            async with open_channel(backend(url), credential):
                pass
    assert accepting.handshakes[0]["authorization"] == "Bearer ws-token-1"
    assert not refused
    rejecting = WsMcpServer(reject_with=401)
    async with serve_ws(rejecting) as url:
        with trio.fail_after(DEADLINE), pytest.raises(ConnectError, match="HTTP 401"):
            async with open_channel(backend(url), credential):
                pass  # pragma: no cover - never entered
    assert refused == ["ws-token-1"]
    assert current[-1] == "ws-token-2"
