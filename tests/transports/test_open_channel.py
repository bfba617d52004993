"""``open_channel`` picks the transport from the backend's config type.

Each network transport is opened through the supervisor's entry point and
carries one MCP handshake, against the in-process fakes.
"""

from __future__ import annotations

import json

from gateway.backends.channel import open_channel
from gateway.config import GatewayConfig, parse
from gateway.transports.sse import SseChannel
from gateway.transports.streamable_http import StreamableHttpChannel
from gateway.transports.websocket import WebSocketChannel
from tests.transports.fake_http import LegacySseFake, serve_fake
from tests.transports.fake_ws import WsMcpServer, serve_ws
from tests.transports.peer_helpers import initialize, open_peer

DEADLINE = 5.0


def config(transport: str, url: str) -> GatewayConfig:
    document = {"backends": [{"name": "net", "transport": transport, "url": url}]}
    return parse(json.dumps(document), env={})


async def test_http_backend_opens_streamable_http() -> None:
    """Config: `transport: http` is Streamable HTTP."""
    async with serve_fake() as (_, url):
        (cfg,) = config("http", url + "/mcp").backends
        async with open_peer(open_channel(cfg), DEADLINE) as (channel, peer):
            assert isinstance(channel, StreamableHttpChannel)
            await initialize(peer)


async def test_sse_backend_opens_legacy_sse() -> None:
    """Config: `transport: sse` is the 2024-11-05 HTTP+SSE transport."""
    async with serve_fake() as (fake, url):
        LegacySseFake(fake)
        (cfg,) = config("sse", url + "/sse").backends
        async with open_peer(open_channel(cfg), DEADLINE) as (channel, peer):
            assert isinstance(channel, SseChannel)
            await initialize(peer)


async def test_websocket_backend_opens_a_websocket() -> None:
    """Config: `transport: websocket` is one message per WebSocket frame."""
    async with serve_ws(WsMcpServer()) as url:
        (cfg,) = config("websocket", url).backends
        async with open_peer(open_channel(cfg), DEADLINE) as (channel, peer):
            assert isinstance(channel, WebSocketChannel)
            await initialize(peer)
