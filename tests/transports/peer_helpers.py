"""What the transport tests do over any channel: the MCP handshake and a tool call.

``RecordingChannel`` wraps a real channel and keeps every message that came
through ``receive()`` in order, so a test can assert what the *transport*
delivered (progress before the response) independently of how the session
routes it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TypeVar

import trio

from gateway.protocol import jsonrpc
from gateway.session.peer import Peer, open_session
from gateway.transports.base import MessageChannel

CLIENT_INFO = {"name": "transport-tests", "version": "1"}
LATEST = "2025-11-25"
ChannelT = TypeVar("ChannelT", bound=MessageChannel)


class RecordingChannel:
    """A MessageChannel that records every received message (decoded) in order."""

    def __init__(self, inner: MessageChannel) -> None:
        self.inner = inner
        self.received: list[dict[str, Any]] = []

    async def send(self, message: bytes) -> None:
        await self.inner.send(message)

    async def receive(self) -> bytes:
        message = await self.inner.receive()
        self.received.append(json.loads(message))
        return message

    async def aclose(self) -> None:
        await self.inner.aclose()


def raw(value: Any) -> Any:
    """Encode a plain value as request params."""
    return jsonrpc.to_raw(value)


def decoded(result: Any) -> Any:
    """Decode a Raw result."""
    return json.loads(bytes(result))


async def initialize(peer: Peer, version: str = LATEST) -> dict[str, Any]:
    """initialize, then notifications/initialized; return the InitializeResult."""
    result = decoded(
        await peer.request(
            "initialize",
            raw({"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO}),
        )
    )
    await peer.notify("notifications/initialized")
    assert isinstance(result, dict)
    return result


async def tool_names(peer: Peer) -> list[str]:
    """The names from tools/list (first page)."""
    return [tool["name"] for tool in decoded(await peer.request("tools/list"))["tools"]]


async def call_tool(
    peer: Peer, name: str, arguments: dict[str, Any], *, progress_token: str | None = None
) -> dict[str, Any]:
    """tools/call; with a progress token in ``_meta`` when given."""
    params: dict[str, Any] = {"name": name, "arguments": arguments}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    result = decoded(await peer.request("tools/call", raw(params)))
    assert isinstance(result, dict)
    return result


def text_of(result: dict[str, Any]) -> str:
    """The first text content of a tool result."""
    return str(result["content"][0]["text"])


def progress_then_response(received: list[dict[str, Any]], token: str) -> tuple[int, bool]:
    """How many progress notifications for ``token`` arrived, and whether all of
    them arrived before the response they belong to (the first result carrying
    content after the first such notification)."""
    progress_at = [
        i
        for i, m in enumerate(received)
        if m.get("method") == "notifications/progress"
        and m.get("params", {}).get("progressToken") == token
    ]
    if not progress_at:
        return 0, False
    response_at = next(
        i
        for i, m in enumerate(received)
        if i > progress_at[0] and "result" in m and "content" in m["result"]
    )
    return len(progress_at), max(progress_at) < response_at


@asynccontextmanager
async def open_peer(
    opening: AbstractAsyncContextManager[ChannelT], deadline: float
) -> AsyncIterator[tuple[ChannelT, Peer]]:
    """A session over the channel ``opening`` yields, the whole of it within ``deadline`` s."""
    with trio.fail_after(deadline):
        async with opening as channel, open_session(channel) as peer:
            yield channel, peer
