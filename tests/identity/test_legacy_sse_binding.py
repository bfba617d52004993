"""A44 on the legacy HTTP+SSE transport: /messages of a stream opened by one principal."""

from __future__ import annotations

import json
from typing import Any, Final

import trio
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from gateway.backends.state import BackendState
from gateway.config import parse
from gateway.frontend.http_util import Message
from gateway.runtime.app import open_gateway
from gateway.transports.framing import SseParser
from tests.fakes import FakeConnector, FakeMcpServer
from tests.harness import unspawned_backend, wait_for_states
from tests.robustness.support import asgi_call, http_scope

HOST: Final = (b"host", b"127.0.0.1:8000")
ALICE: Final = (b"authorization", b"Bearer token-of-alice-0123")
BOB: Final = (b"authorization", b"Bearer token-of-bob-0123")


def _config() -> Any:
    document = {
        "auth": {"tokens": {"alice": "token-of-alice-0123", "bob": "token-of-bob-0123"}},
        "backends": [unspawned_backend("fake")],
    }
    return parse(json.dumps(document), env={})


async def test_another_principal_cannot_post_to_a_legacy_stream(autojump_clock: Any) -> None:
    """A44: Issue 16 item 5 on /sse + /messages: B's POST to A's connection is 404 and
    audited; A's is accepted."""
    connector = FakeConnector({"fake": FakeMcpServer("fake")})
    async with open_gateway(_config(), connect=connector, registry=CollectorRegistry()) as gw:
        await wait_for_states(gw, {"fake": BackendState.UP})
        chunks_in, chunks_out = trio.open_memory_channel[bytes](64)
        gone = trio.Event()

        async def receive() -> Message:
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message.get("body"):
                chunks_in.send_nowait(bytes(message["body"]))

        scope = http_scope("GET", "/sse", [HOST, ALICE, (b"accept", b"text/event-stream")])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(gw.app, scope, receive, send)
            parser = SseParser()
            events: list[Any] = []
            while not events:
                events.extend(parser.feed(await chunks_out.receive()))
            path, _, query = events[0].data.partition("?")
            init = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {}},
            }
            body = json.dumps(init).encode()
            content = (b"content-type", b"application/json")
            with capture_logs() as logs:
                other = await asgi_call(
                    gw.app, "POST", path, [HOST, BOB, content], body, query=query.encode()
                )
            mine = await asgi_call(
                gw.app, "POST", path, [HOST, ALICE, content], body, query=query.encode()
            )
            assert (other.status, mine.status) == (404, 202)
            audit = [e for e in logs if e["event"] == "auth.session.mismatch"]
            assert audit[0]["principal"] == "token:bob"
            assert audit[0]["owner"] == "token:alice"
            unauthenticated = await asgi_call(
                gw.app, "POST", path, [HOST, content], body, query=query.encode()
            )
            assert unauthenticated.status == 401
            challenge = dict(unauthenticated.headers)[b"www-authenticate"].decode()
            # The legacy endpoints serve the same resource as /mcp: its metadata.
            assert "/.well-known/oauth-protected-resource/mcp" in challenge
            gone.set()
