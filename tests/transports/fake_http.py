"""A fake MCP-over-HTTP backend: a tiny raw ASGI app served by hypercorn in-process.

It answers just enough of Streamable HTTP (and the legacy SSE endpoint
event) for a test to drive the client transport into a fault: a test swaps
in a handler for a JSON-RPC method or for GET, and reads back every request
the transport made (method, headers, body), so it can assert exactly what
went over the wire.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import hypercorn.config
import hypercorn.trio
import trio

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

SESSION_ID = "sess-1"
INIT_RESULT = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "fake", "version": "1"},
}


@dataclass
class Recorded:
    """One HTTP request as the fake server saw it (``at``: trio's clock on arrival)."""

    method: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytes
    client_port: int = 0
    at: float = 0.0

    def header(self, name: str) -> str | None:
        """The value of one header (first occurrence), by case-insensitive name."""
        return next((v for k, v in self.headers if k == name.lower()), None)

    @property
    def message(self) -> Any:
        """The JSON body, decoded."""
        return json.loads(self.body)


@dataclass
class Reply:
    """What a handler answers: a status, headers and body chunks.

    ``chunks`` may be an async iterator so a test can stream SSE at its own
    pace (or hold the stream open on an event).
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] | AsyncIterator[bytes] = field(default_factory=list)


Handler = Callable[[Recorded], Awaitable[Reply]]


def json_reply(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    """A complete ``application/json`` answer."""
    return Reply(
        status,
        {"content-type": "application/json", **(headers or {})},
        [json.dumps(value).encode()],
    )


def result_of(request: Recorded, result: Any) -> dict[str, Any]:
    """The JSON-RPC success response to ``request``."""
    return {"jsonrpc": "2.0", "id": request.message["id"], "result": result}


def sse_event(data: Any, *, event: str | None = None, event_id: str | None = None) -> bytes:
    """One SSE event carrying ``data`` (JSON-encoded unless already a string)."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = (f"event: {event}\n" if event else "") + (f"id: {event_id}\n" if event_id else "")
    return (head + f"data: {text}\n\n").encode()


async def _initialize(request: Recorded) -> Reply:
    return json_reply(result_of(request, INIT_RESULT), headers={"mcp-session-id": SESSION_ID})


async def _accepted(request: Recorded) -> Reply:
    return Reply(202)


async def _echo(request: Recorded) -> Reply:
    return json_reply(result_of(request, {"method": request.message["method"]}))


async def _no_stream(request: Recorded) -> Reply:
    return Reply(405)


async def _deleted(request: Recorded) -> Reply:
    return Reply(200)


class FakeHttpBackend:
    """The ASGI app. Tests set ``methods[...]``, ``get`` or ``delete`` to change answers.

    Attributes:
        methods: handler per JSON-RPC method of a POSTed request.
        notification: handler for POSTed notifications and responses.
        get: handler for GET (default 405: no server stream).
        delete: handler for DELETE.
        requests: every request received, in arrival order.
        arrived: set whenever a request arrives (replaced after each).
    """

    def __init__(self) -> None:
        self.methods: dict[str, Handler] = {"initialize": _initialize}
        self.default: Handler = _echo
        self.notification: Handler = _accepted
        self.get: Handler = _no_stream
        self.delete: Handler = _deleted
        self.requests: list[Recorded] = []
        self.arrived = trio.Event()

    def of(self, method: str) -> list[Recorded]:
        """The requests made with one HTTP method."""
        return [r for r in self.requests if r.method == method]

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds after some request arrived."""
        while not predicate():
            await self.arrived.wait()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = Recorded(
            method=scope["method"],
            path=scope["path"],
            query=scope["query_string"].decode(),
            headers=[(k.decode().lower(), v.decode()) for k, v in scope["headers"]],
            body=body,
            client_port=scope["client"][1] if scope.get("client") else 0,
            at=trio.current_time(),
        )
        self.requests.append(request)
        self.arrived.set()
        self.arrived = trio.Event()
        reply = await self._handler(request)(request)
        await send(
            {
                "type": "http.response.start",
                "status": reply.status,
                "headers": [(k.encode(), v.encode()) for k, v in reply.headers.items()],
            }
        )
        if isinstance(reply.chunks, list):
            for chunk in reply.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        else:
            async for chunk in reply.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _handler(self, request: Recorded) -> Handler:
        if request.method == "GET":
            return self.get
        if request.method == "DELETE":
            return self.delete
        message = request.message
        if isinstance(message, dict) and "method" in message and "id" in message:
            return self.methods.get(message["method"], self.default)
        return self.notification


@asynccontextmanager
async def serve_fake(
    app: FakeHttpBackend | None = None,
    *,
    certfile: str | None = None,
    keyfile: str | None = None,
    client_ca: str | None = None,
) -> AsyncIterator[tuple[FakeHttpBackend, str]]:
    """Serve ``app`` on 127.0.0.1, port 0, for the block; yield it and its base URL.

    With ``certfile``/``keyfile`` it serves HTTPS; with ``client_ca`` too it
    requires a client certificate signed by that CA (mutual TLS).
    """
    app = app or FakeHttpBackend()
    config = hypercorn.config.Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    config.graceful_timeout = 0.1
    if certfile is not None:
        config.certfile = certfile
        config.keyfile = keyfile
    if client_ca is not None:
        config.ca_certs = client_ca
        config.verify_mode = ssl.CERT_REQUIRED
    async with trio.open_nursery() as nursery:
        # A raw ASGI callable over plain dicts; hypercorn types its events as
        # TypedDicts, which a dict-typed app cannot satisfy nominally.
        serve = partial(hypercorn.trio.serve, app, config)  # type: ignore[arg-type]
        binds: list[str] = await nursery.start(serve)
        try:
            yield app, binds[0]
        finally:
            nursery.cancel_scope.cancel()


class LegacySseFake:
    """Turns a FakeHttpBackend into a legacy HTTP+SSE server (2024-11-05).

    GET opens the stream, whose first event is ``endpoint`` with
    ``endpoint_data``; every POSTed request is answered ``202`` and its
    response is pushed onto the stream. ``end_stream()`` ends the stream.

    Args:
        fake: the app to take over.
        endpoint_data: the data of the endpoint event (relative or absolute URL).
    """

    def __init__(self, fake: FakeHttpBackend, endpoint_data: str = "/messages?session_id=s1"):
        self.fake = fake
        self.endpoint_data = endpoint_data
        self._send, self._receive = trio.open_memory_channel[bytes](100)
        fake.methods = {}
        fake.get = self._stream
        fake.default = self._request
        fake.notification = _accepted

    async def push(self, message: Any) -> None:
        """Send one message event on the stream."""
        await self._send.send(sse_event(message, event="message"))

    def end_stream(self) -> None:
        """End the SSE stream (the server went away)."""
        self._send.close()

    async def _stream(self, request: Recorded) -> Reply:
        async def chunks() -> AsyncIterator[bytes]:
            yield b": hello\n\n"
            yield sse_event(self.endpoint_data, event="endpoint")
            async for chunk in self._receive:
                yield chunk

        return Reply(200, {"content-type": "text/event-stream"}, chunks())

    async def _request(self, request: Recorded) -> Reply:
        method = request.message["method"]
        result = INIT_RESULT if method == "initialize" else {"method": method}
        await self.push(result_of(request, result))
        return Reply(202)
