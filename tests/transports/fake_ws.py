"""An MCP server built with trio-websocket, for the WebSocket transport tests.

It runs in the test's trio run on a real loopback socket (port 0) and speaks
just enough JSON-RPC: initialize, tools/list, and tools/call of ``echo``
(text frame), ``binary`` (answers in a binary frame) and ``hangup`` (closes
the connection with 1011 instead of answering).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketRequest, serve_websocket

LATEST = "2025-11-25"


@dataclass
class WsMcpServer:
    """What the test server saw, and how it should behave."""

    reject_with: int | None = None
    handshakes: list[dict[str, str]] = field(default_factory=list)
    subprotocols: list[list[str]] = field(default_factory=list)
    frames: list[str | bytes] = field(default_factory=list)

    async def handle(self, request: WebSocketRequest) -> None:
        self.handshakes.append({k.decode().lower(): v.decode() for k, v in request.headers})
        self.subprotocols.append(list(request.proposed_subprotocols))
        if self.reject_with is not None:
            await request.reject(self.reject_with)
            return
        offered = "mcp" if "mcp" in request.proposed_subprotocols else None
        ws = await request.accept(subprotocol=offered)
        while True:
            try:
                frame = await ws.get_message()
            except ConnectionClosed:
                return
            self.frames.append(frame)
            message = json.loads(frame)
            if "id" not in message:
                continue
            reply = {"jsonrpc": "2.0", "id": message["id"], "result": self._result(message)}
            name = message.get("params", {}).get("name")
            if name == "hangup":
                await ws.aclose(code=1011, reason="going away")
                return
            if name == "binary":
                await ws.send_message(json.dumps(reply).encode())
            else:
                await ws.send_message(json.dumps(reply))

    def _result(self, message: dict[str, Any]) -> dict[str, Any]:
        method = message["method"]
        if method == "initialize":
            return {
                "protocolVersion": LATEST,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "ws-fake", "version": "1"},
            }
        if method == "tools/list":
            return {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        arguments = message["params"].get("arguments", {})
        return {"content": [{"type": "text", "text": str(arguments.get("text", "binary"))}]}


@asynccontextmanager
async def serve_ws(server: WsMcpServer) -> AsyncIterator[str]:
    """Serve ``server`` on 127.0.0.1, port 0; yield its ws:// URL."""
    async with trio.open_nursery() as nursery:
        listener = await nursery.start(
            partial(serve_websocket, server.handle, "127.0.0.1", 0, ssl_context=None)
        )
        try:
            yield f"ws://127.0.0.1:{listener.port}/mcp"
        finally:
            nursery.cancel_scope.cancel()
