"""The legacy HTTP+SSE endpoints (/sse + /messages), driven in-process in virtual time.

The gateway is built with ``open_gateway`` (no socket) in front of an
in-memory fake backend; the test speaks raw ASGI to ``/sse`` and
``/messages``, so every status, body and event is seen as a host would.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import pytest
import trio
from prometheus_client import CollectorRegistry

from gateway.backends.state import BackendState
from gateway.config import parse
from gateway.frontend.http_util import Message
from gateway.runtime.app import Gateway, open_gateway
from gateway.transports.framing import SseParser
from tests.fakes import Answer, FakeConnector, FakeMcpServer
from tests.harness import unspawned_backend, wait_for_states
from tests.robustness.support import asgi_call, http_scope

IDLE_TIMEOUT: Final = 60.0
HOST: Final = (b"host", b"127.0.0.1:8000")
INVALID_REQUEST: Final = -32600
STREAM_BUFFER: Final = 64  # SSE chunks the test has not read yet


def _config() -> Any:
    return parse(
        json.dumps(
            {
                "server": {"session_idle_timeout": IDLE_TIMEOUT},
                "backends": [unspawned_backend("fake")],
            }
        ),
        env={},
    )


@asynccontextmanager
async def _gateway(server: FakeMcpServer) -> AsyncIterator[Gateway]:
    connector = FakeConnector({"fake": server})
    async with open_gateway(_config(), connect=connector, registry=CollectorRegistry()) as gateway:
        await wait_for_states(gateway, {"fake": BackendState.UP})
        yield gateway


class LegacyStream:
    """One open ``GET /sse``: its events, read in order, and where to POST."""

    def __init__(self, gateway: Gateway, chunks: trio.MemoryReceiveChannel[bytes]) -> None:
        self._gateway = gateway
        self._chunks = chunks
        self._parser = SseParser()
        self._pending: list[tuple[str, str]] = []
        self.messages_path = ""
        self.query = b""

    async def event(self) -> tuple[str, str]:
        """The next event (name, data); keep-alive comments are skipped."""
        with trio.fail_after(IDLE_TIMEOUT):
            while not self._pending:
                chunk = await self._chunks.receive()
                self._pending.extend((e.event, e.data) for e in self._parser.feed(chunk))
        return self._pending.pop(0)

    async def message(self) -> dict[str, Any]:
        """The next JSON-RPC message on the stream."""
        name, data = await self.event()
        assert name == "message", (name, data)
        message: dict[str, Any] = json.loads(data)
        return message

    async def post(self, message: dict[str, Any]) -> int:
        """POST one message to the endpoint the stream named; the status."""
        response = await asgi_call(
            self._gateway.app,
            "POST",
            self.messages_path,
            [HOST, (b"content-type", b"application/json")],
            json.dumps(message).encode(),
            query=self.query,
        )
        return response.status


@asynccontextmanager
async def open_legacy_stream(gateway: Gateway) -> AsyncIterator[LegacyStream]:
    """Open ``GET /sse`` and read its ``endpoint`` event; hang up when the block ends."""
    chunks_in, chunks_out = trio.open_memory_channel[bytes](STREAM_BUFFER)
    gone = trio.Event()
    started = trio.Event()

    async def receive() -> Message:
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200, message
            started.set()
        elif message.get("body"):
            chunks_in.send_nowait(bytes(message["body"]))

    scope = http_scope("GET", "/sse", [HOST, (b"accept", b"text/event-stream")])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(gateway.app, scope, receive, send)
        stream = LegacyStream(gateway, chunks_out)
        name, data = await stream.event()
        assert name == "endpoint"
        path, _, query = data.partition("?")
        stream.messages_path, stream.query = path, query.encode()
        yield stream
        gone.set()


async def _initialize(stream: LegacyStream) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {}},
    }
    assert await stream.post(init) == 202
    assert (await stream.message())["id"] == 1
    assert await stream.post({"jsonrpc": "2.0", "method": "notifications/initialized"}) == 202


async def test_an_open_legacy_stream_outlives_the_idle_timeout_and_still_gets_notifications(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Gateway choice: the SSE connection is the session's stream, so the session does
    not idle out while it is open, and list_changed still reaches it afterwards."""
    server = FakeMcpServer("fake")
    async with _gateway(server) as gateway, open_legacy_stream(gateway) as stream:
        await _initialize(stream)
        await trio.sleep(IDLE_TIMEOUT * 3)  # virtual time: the stream carries keep-alive comments
        assert gateway.clients.expire_idle(trio.current_time(), IDLE_TIMEOUT) == []
        assert len(gateway.clients) == 1
        server.tools["added"] = Answer("added")
        server.push_list_changed()
        notification = await stream.message()
        assert notification == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}


@pytest.mark.parametrize(
    ("method", "path", "headers", "status"),
    [
        ("POST", "/sse", [(b"accept", b"text/event-stream")], 405),
        ("GET", "/sse", [(b"accept", b"application/json")], 406),
        ("POST", "/messages", [(b"content-type", b"application/json")], 404),
        ("GET", "/messages", [], 405),
    ],
)
async def test_legacy_refusals_carry_the_same_json_rpc_error_body_as_mcp(
    method: str, path: str, headers: list[tuple[bytes, bytes]], status: int
) -> None:
    """Gateway choice: /sse and /messages refuse with a JSON-RPC error body, like /mcp."""
    async with _gateway(FakeMcpServer("fake")) as gateway:
        response = await asgi_call(
            gateway.app, method, path, [HOST, *headers], b"{}", query=b"session_id=unknown"
        )
    assert response.status == status
    assert response.header(b"content-type") == b"application/json"
    body = json.loads(response.body)
    assert body["jsonrpc"] == "2.0"
    assert body["id"] is None
    assert body["error"]["code"] == INVALID_REQUEST
    assert isinstance(body["error"]["message"], str)


async def test_a_too_large_legacy_post_is_refused_with_a_json_rpc_error() -> None:
    """Gateway choice: 413 on /messages says why in the same body as /mcp."""
    async with _gateway(FakeMcpServer("fake")) as gateway, open_legacy_stream(gateway) as stream:
        limit = gateway.config.server.max_body_bytes
        response = await asgi_call(
            gateway.app,
            "POST",
            stream.messages_path,
            [HOST, (b"content-type", b"application/json")],
            b" " * (limit + 1),
            query=stream.query,
        )
    assert response.status == 413
    error = json.loads(response.body)["error"]
    assert error["code"] == INVALID_REQUEST
    assert str(limit) in error["message"]
