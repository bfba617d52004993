"""Traces across the hop to a 2026-07-28 backend (issue 18 item 2): the official SDK 2.x
server of tests/servers/modern_sdk2.py reports the ``_meta`` and HTTP headers each
request brought (its ``whoami`` tool), so the trace context the gateway passes on is
seen where the backend reads it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import pytest
import trio
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.e2e.test_modern_backend import SDK2_PYTHON, SERVER, sdk2_stdio
from tests.harness import NEEDS_SDK2, gateway_config, open_client, start_gateway
from tests.subprocess_servers import free_port, run_server

MODERN: Final = "2026-07-28"

pytestmark = NEEDS_SDK2


def _traceparent(span: object) -> str:
    context = span.get_span_context()  # type: ignore[attr-defined]  # a ReadableSpan
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_modern_backend_gets_the_client_span_in_meta_and_the_http_header(
    nursery: trio.Nursery, spans: InMemorySpanExporter, transport: str
) -> None:
    """SEP-414 / 2026-07-28 RequestMetaObject: the modern envelope the gateway builds
    carries the client span's traceparent (and, over HTTP, the header too); the client
    span says era modern and the backend's revision."""
    with _backend(transport) as entry:
        running = await start_gateway(nursery, gateway_config([entry]))
        async with open_client(running.url) as session:
            result = await session.call_tool("m__whoami", {})
    seen = json.loads(result.content[0].text)  # type: ignore[union-attr]  # a TextContent
    finished = list(spans.get_finished_spans())
    (client,) = [s for s in finished if s.kind is SpanKind.CLIENT and s.name.endswith("whoami")]
    (server,) = [s for s in finished if s.kind is SpanKind.SERVER and s.name.endswith("whoami")]
    assert client.parent is not None and client.parent.span_id == server.context.span_id
    assert seen["meta"]["traceparent"] == _traceparent(client)
    if transport == "http":
        assert seen["headers"]["traceparent"] == _traceparent(client)
    assert client.attributes is not None
    assert client.attributes["mcp_gateway.era"] == "modern"
    assert client.attributes["mcp.protocol.version"] == MODERN
    assert server.attributes is not None and server.attributes["mcp_gateway.era"] == "legacy"


@contextmanager
def _backend(transport: str) -> Iterator[dict[str, Any]]:
    """The SDK 2.x backend's entry: over stdio, or over HTTP with its server running."""
    if transport == "stdio":
        yield sdk2_stdio("m")
        return
    port = free_port()
    with run_server([str(SDK2_PYTHON), str(SERVER), "http", str(port)], port):
        yield {"name": "m", "transport": "http", "url": f"http://127.0.0.1:{port}/mcp"}
