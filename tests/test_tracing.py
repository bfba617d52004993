"""OpenTelemetry traces across the hop (issue 18 item 2; gateway/telemetry/tracing.py).

A real gateway with real backends (the official SDK's FastMCP peer
tests/servers/traced.py, over stdio and Streamable HTTP) and the official
SDK client as the host; spans land in the SDK's in-memory exporter. The
backend tells which ``traceparent`` it received, so the chain is proved on
the wire as well as in the exported spans.
"""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar, Final

import msgspec
import pytest
import trio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import McpError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import AnyUrl

from gateway.config import TracingConfig
from gateway.errors import ConfigError
from gateway.runtime.reload import effective_config, restart_only_changes
from gateway.telemetry import tracing
from tests.frontend.test_stdio_modern import serve as serve_stdio
from tests.frontend.test_streamable_http import initialize_request, request
from tests.harness import gateway_config, sdk_backend, start_gateway, stdio_backend
from tests.servers.paths import SERVERS_DIR
from tests.subprocess_servers import free_port, run_server

TRACED: Final = [sys.executable, str(SERVERS_DIR / "traced.py"), "stdio"]
# A host's trace: W3C Trace Context version 00, sampled.
HOST_TRACE_ID: Final = "4bf92f3577b34da6a3ce929d0e0e4736"
HOST_SPAN_ID: Final = "00f067aa0ba902b7"
HOST_TRACEPARENT: Final = f"00-{HOST_TRACE_ID}-{HOST_SPAN_ID}-01"
META_TRACE_ID: Final = "0af7651916cd43dd8448eb211c80319c"
META_TRACEPARENT: Final = f"00-{META_TRACE_ID}-b7ad6b7169203331-01"


@asynccontextmanager
async def host(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """The official SDK client over Streamable HTTP, sending ``headers`` on every request."""
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _received(result: Any) -> dict[str, str | None]:
    """What tests/servers/traced.py says it received."""
    decoded: dict[str, str | None] = json.loads(result.content[0].text)
    return decoded


def _traceparent(span: ReadableSpan) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{context.trace_flags:02x}"


def _one(spans: list[ReadableSpan], kind: SpanKind, name: str) -> ReadableSpan:
    found = [s for s in spans if s.kind is kind and s.name == name]
    assert len(found) == 1, [(s.kind, s.name) for s in spans]
    return found[0]


async def test_a_stdio_hop_is_a_server_span_with_a_client_child_continuing_the_http_trace(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """Issue 18: host -> gateway SERVER span -> backend CLIENT span, one trace: the host's
    traceparent header is continued, and the stdio backend gets the client span's
    context in _meta.traceparent (SEP-414)."""
    running = await start_gateway(nursery, gateway_config([stdio_backend("traced", TRACED)]))
    async with host(running.url, {"traceparent": HOST_TRACEPARENT}) as session:
        received = _received(await session.call_tool("traced__trace_context", {}))
    finished = list(spans.get_finished_spans())
    server = _one(finished, SpanKind.SERVER, "tools/call traced__trace_context")
    client = _one(finished, SpanKind.CLIENT, "tools/call trace_context")
    assert f"{server.context.trace_id:032x}" == HOST_TRACE_ID
    assert server.parent is not None and f"{server.parent.span_id:016x}" == HOST_SPAN_ID
    assert client.context.trace_id == server.context.trace_id
    assert client.parent is not None and client.parent.span_id == server.context.span_id
    assert received == {"meta": _traceparent(client), "header": None}
    assert dict(server.attributes or {}) == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "traced__trace_context",
        "gen_ai.operation.name": "execute_tool",
        "mcp.protocol.version": "2025-11-25",
        "mcp_gateway.era": "legacy",
        "mcp_gateway.profile": "default",
        "mcp_gateway.outcome": "ok",
        "mcp_gateway.backend": "traced",
    }
    assert dict(client.attributes or {}) == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "trace_context",
        "gen_ai.operation.name": "execute_tool",
        "mcp.protocol.version": "2025-11-25",
        "mcp_gateway.era": "legacy",
        "mcp_gateway.backend": "traced",
        "mcp_gateway.outcome": "ok",
    }
    assert server.status.status_code is StatusCode.UNSET
    assert server.resource.attributes["service.name"] == "mcp-gateway"


async def test_an_http_backend_gets_the_client_span_as_traceparent_header_and_in_meta(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """Issue 18: an HTTP backend receives the client span's traceparent header (and
    _meta.traceparent): its own spans join the hop."""
    port = free_port()
    with run_server([*TRACED[:-1], str(port)], port):
        backend = {"name": "web", "transport": "http", "url": f"http://127.0.0.1:{port}/mcp"}
        running = await start_gateway(nursery, gateway_config([backend]))
        async with host(running.url) as session:
            received = _received(await session.call_tool("web__trace_context", {}))
    finished = list(spans.get_finished_spans())
    server = _one(finished, SpanKind.SERVER, "tools/call web__trace_context")
    client = _one(finished, SpanKind.CLIENT, "tools/call trace_context")
    assert server.parent is None  # no traceparent from the host: a new trace
    assert client.parent is not None and client.parent.span_id == server.context.span_id
    assert received == {"meta": _traceparent(client), "header": _traceparent(client)}
    assert client.attributes is not None and client.attributes["mcp_gateway.backend"] == "web"


async def test_a_traceparent_in_the_requests_meta_wins_over_the_http_header(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """SEP-414: the request's own _meta.traceparent is its trace context; the HTTP
    header is the fallback (gateway choice: the more specific of the two)."""
    running = await start_gateway(nursery, gateway_config([stdio_backend("traced", TRACED)]))
    async with host(running.url, {"traceparent": HOST_TRACEPARENT}) as session:
        await session.call_tool("traced__trace_context", {}, meta={"traceparent": META_TRACEPARENT})
    server = _one(
        list(spans.get_finished_spans()), SpanKind.SERVER, "tools/call traced__trace_context"
    )
    assert f"{server.context.trace_id:032x}" == META_TRACE_ID


async def test_failures_are_recorded_with_their_kind_and_code(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """Semantic conventions for MCP: a tool's isError is error.type tool_error on the
    client span; a JSON-RPC error carries rpc.response.status_code on the server span."""
    running = await start_gateway(nursery, gateway_config([stdio_backend("traced", TRACED)]))
    async with host(running.url) as session:
        failed = await session.call_tool("traced__fail", {})
        assert failed.isError is True
        with pytest.raises(McpError) as refused:
            await session.call_tool("nope__nothing", {})
        assert refused.value.error.code == -32602
    finished = list(spans.get_finished_spans())
    client = _one(finished, SpanKind.CLIENT, "tools/call fail")
    assert client.attributes is not None
    assert client.attributes["error.type"] == "tool_error"
    assert client.attributes["mcp_gateway.outcome"] == "tool_error"
    assert client.status.status_code is StatusCode.ERROR
    unknown = _one(finished, SpanKind.SERVER, "tools/call nope__nothing")
    assert unknown.attributes is not None
    assert unknown.attributes["mcp_gateway.outcome"] == "error"
    assert unknown.attributes["rpc.response.status_code"] == "-32602"
    assert unknown.attributes["error.type"] == "-32602"
    assert unknown.status.status_code is StatusCode.ERROR
    assert not [s for s in finished if s.kind is SpanKind.CLIENT and s.name.endswith("nothing")]


async def test_a_modern_request_continues_its_meta_traceparent(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """2026-07-28 (RequestMetaObject, SEP-414): a stateless request's _meta.traceparent
    is continued, and the span says era modern."""
    import httpx

    running = await start_gateway(nursery, gateway_config([stdio_backend("traced", TRACED)]))
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "traced__trace_context",
            "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "traceparent": META_TRACEPARENT,
            },
        },
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "traced__trace_context",
    }
    async with httpx.AsyncClient() as http:
        response = await http.post(running.url, json=body, headers=headers)
    assert response.status_code == 200, response.text
    result = msgspec.json.decode(response.content)["result"]
    finished = list(spans.get_finished_spans())
    server = _one(finished, SpanKind.SERVER, "tools/call traced__trace_context")
    client = _one(finished, SpanKind.CLIENT, "tools/call trace_context")
    assert f"{server.context.trace_id:032x}" == META_TRACE_ID
    assert server.attributes is not None
    assert server.attributes["mcp_gateway.era"] == "modern"
    assert server.attributes["mcp.protocol.version"] == "2026-07-28"
    assert json.loads(result["content"][0]["text"])["meta"] == _traceparent(client)


async def test_sample_ratio_zero_keeps_no_new_trace_but_follows_a_sampled_host(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: sample_ratio applies to traces the gateway starts; a host's
    sampled traceparent is followed (ParentBased), so its trace is never cut."""
    exporter = InMemorySpanExporter()
    tracing.configure(TracingConfig(enabled=True, sample_ratio=0.0), exporter)
    try:
        running = await start_gateway(nursery, gateway_config([stdio_backend("traced", TRACED)]))
        async with host(running.url) as session:
            unsampled = _received(await session.call_tool("traced__trace_context", {}))
        assert exporter.get_finished_spans() == ()
        # The context still travels (flags 00: not sampled), so the backend may decide alike.
        assert unsampled["meta"] is not None
        assert int(unsampled["meta"].rsplit("-", 1)[1], 16) & 1 == 0  # the sampled bit is off
        async with host(running.url, {"traceparent": HOST_TRACEPARENT}) as session:
            await session.call_tool("traced__trace_context", {})
        kept = exporter.get_finished_spans()
        _one(list(kept), SpanKind.SERVER, "tools/call traced__trace_context")
        _one(list(kept), SpanKind.CLIENT, "tools/call trace_context")
        assert {f"{s.context.trace_id:032x}" for s in kept} == {HOST_TRACE_ID}
    finally:
        tracing.shutdown()


async def test_with_tracing_off_the_backend_gets_the_request_untouched(
    nursery: trio.Nursery,
) -> None:
    """Issue 18: off by default; nothing is added to what a backend receives (the
    host's own _meta.traceparent still passes through, docs/eras.md)."""
    assert tracing.active is None
    running = await start_gateway(nursery, gateway_config([stdio_backend("traced", TRACED)]))
    async with host(running.url, {"traceparent": HOST_TRACEPARENT}) as session:
        plain = _received(await session.call_tool("traced__trace_context", {}))
        passed = _received(
            await session.call_tool(
                "traced__trace_context", {}, meta={"traceparent": META_TRACEPARENT}
            )
        )
    assert plain == {"meta": None, "header": None}
    assert passed == {"meta": META_TRACEPARENT, "header": None}


def test_tracing_off_never_imports_opentelemetry() -> None:
    """Issue 18: no cost when off, import time included: serving with tracing off loads
    no opentelemetry module (a fresh interpreter, as the command starts)."""
    probe = (
        "import sys\n"
        "from gateway.telemetry import tracing\n"
        "from gateway.runtime.app import open_gateway\n"
        "from gateway.config import TracingConfig\n"
        "tracing.configure(TracingConfig())\n"
        "assert tracing.active is None\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_enabled_without_the_otel_extra_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gateway choice: enabled but not installed refuses to start (exit 2), naming the
    extra, rather than run untraced while the operator thinks it traces."""
    import gateway.telemetry

    monkeypatch.setitem(sys.modules, "gateway.telemetry.otel", None)  # as if never installed
    monkeypatch.delattr(gateway.telemetry, "otel", raising=False)
    with pytest.raises(ConfigError, match=r"tracing\.enabled: .*mcp-gateway\[otel\]"):
        tracing.configure(TracingConfig(enabled=True))
    assert tracing.active is None


def test_the_config_block_rejects_a_ratio_outside_zero_to_one() -> None:
    """docs/configuration.md: sample_ratio is 0..1; exporter is otlp or console."""
    with pytest.raises(ConfigError, match="sample_ratio"):
        gateway_config([], tracing={"sample_ratio": 1.5})
    with pytest.raises(ConfigError, match="exporter"):
        gateway_config([], tracing={"exporter": "zipkin"})
    assert gateway_config([]).tracing == TracingConfig()


def test_a_reload_that_changes_tracing_says_it_needs_a_restart_and_keeps_the_old_block() -> None:
    """Gateway choice: the tracer is installed once per process, so a reload reports
    `tracing` under config.reload.needs_restart and the block in force stays the old one."""
    old = gateway_config([])
    new = gateway_config([], tracing={"enabled": True, "exporter": "console"})
    assert restart_only_changes(old, new) == ["tracing"]
    assert effective_config(old, new).tracing == old.tracing


class _Collector(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP collector that keeps what it is sent (path, headers, decoded body)."""

    received: ClassVar[list[tuple[str, dict[str, str], ExportTraceServiceRequest]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.received.append((self.path, headers, ExportTraceServiceRequest.FromString(body)))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        """Quiet: the test reads ``received``."""


@pytest.fixture(name="collector")
def _collector() -> Iterator[str]:
    """A collector on a free loopback port, in a thread; yields its traces URL."""
    _Collector.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    server.shutdown()
    thread.join(timeout=10)


async def test_the_otlp_exporter_sends_the_spans_to_the_endpoint_with_the_headers(
    nursery: trio.Nursery, collector: str
) -> None:
    """Issue 18 config: exporter otlp, endpoint, headers and service_name reach a
    collector; spans are batched off the event loop and flushed when tracing stops."""
    settings = TracingConfig(
        enabled=True,
        exporter="otlp",
        endpoint=collector,
        service_name="gw-under-test",
        headers={"x-api-key": "collector-key"},
    )
    tracing.configure(settings)
    try:
        running = await start_gateway(nursery, gateway_config([stdio_backend("traced", TRACED)]))
        async with host(running.url) as session:
            await session.call_tool("traced__trace_context", {})
    finally:
        # The flush blocks on the exporter's HTTP POST: off the event loop here, as
        # the command does it after trio.run has returned; shielded and bounded,
        # so a cancelled test still flushes and never hangs on it.
        with trio.move_on_after(10, shield=True):
            await trio.to_thread.run_sync(tracing.shutdown)
    assert _Collector.received
    names = set()
    for path, headers, export in _Collector.received:
        assert path == "/v1/traces"
        assert headers["x-api-key"] == "collector-key"
        assert headers["content-type"] == "application/x-protobuf"
        for resource_spans in export.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            assert attributes["service.name"] == "gw-under-test"
            names |= {s.name for scope in resource_spans.scope_spans for s in scope.spans}
    assert {"tools/call traced__trace_context", "tools/call trace_context"} <= names


async def test_a_stdio_host_continues_its_trace_through_meta(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """SEP-414: a stdio host has no HTTP header; its request's _meta.traceparent is
    the trace the server span continues, and the stdio backend gets the client span's."""
    running = await start_gateway(nursery, gateway_config([stdio_backend("traced", TRACED)]))
    stdio_host = await serve_stdio(nursery, running)
    assert "result" in await stdio_host.ask(initialize_request())
    await stdio_host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    params = {
        "name": "traced__trace_context",
        "arguments": {},
        "_meta": {"traceparent": META_TRACEPARENT},
    }
    answer = await stdio_host.ask(request(7, "tools/call", params))
    received = json.loads(answer["result"]["content"][0]["text"])
    finished = list(spans.get_finished_spans())
    server = _one(finished, SpanKind.SERVER, "tools/call traced__trace_context")
    client = _one(finished, SpanKind.CLIENT, "tools/call trace_context")
    assert f"{server.context.trace_id:032x}" == META_TRACE_ID
    assert received == {"meta": _traceparent(client), "header": None}
    await stdio_host.close()


async def test_prompts_resources_and_lists_are_named_and_attributed_per_the_conventions(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """Semantic conventions for MCP: prompts/get names its prompt (gen_ai.prompt.name);
    resources/read carries mcp.resource.uri and keeps it out of the span name; a list
    served from the catalog is a server span with no backend child."""
    running = await start_gateway(nursery, gateway_config([sdk_backend("alpha")]))
    async with host(running.url) as session:
        await session.get_prompt("alpha__greet", {"name": "ada"})
        await session.read_resource(AnyUrl("alpha+alpha://readme"))
        await session.list_tools()
    finished = list(spans.get_finished_spans())
    prompt = _one(finished, SpanKind.SERVER, "prompts/get alpha__greet")
    backend_prompt = _one(finished, SpanKind.CLIENT, "prompts/get greet")
    assert prompt.attributes is not None and backend_prompt.attributes is not None
    assert prompt.attributes["gen_ai.prompt.name"] == "alpha__greet"
    assert backend_prompt.attributes["gen_ai.prompt.name"] == "greet"
    read = _one(finished, SpanKind.SERVER, "resources/read")
    backend_read = _one(finished, SpanKind.CLIENT, "resources/read")
    assert read.attributes is not None and backend_read.attributes is not None
    assert read.attributes["mcp.resource.uri"] == "alpha+alpha://readme"
    assert backend_read.attributes["mcp.resource.uri"] == "alpha://readme"
    assert backend_read.parent is not None
    assert backend_read.parent.span_id == read.context.span_id
    listed = _one(finished, SpanKind.SERVER, "tools/list")
    assert listed.attributes is not None
    assert "mcp_gateway.backend" not in listed.attributes
    assert not [s for s in finished if s.kind is SpanKind.CLIENT and s.name == "tools/list"]


@pytest.mark.parametrize(
    "traceparent",
    [
        "not-a-traceparent",
        f"ff-{HOST_TRACE_ID}-{HOST_SPAN_ID}-01",  # version ff is forbidden
        f"00-{'0' * 32}-{HOST_SPAN_ID}-01",  # an all-zero trace id is invalid
        f"00-{HOST_TRACE_ID}-{HOST_SPAN_ID}",  # no flags
    ],
)
def test_a_malformed_traceparent_starts_a_new_trace_rather_than_failing_the_request(
    spans: InMemorySpanExporter, traceparent: str
) -> None:
    """W3C Trace Context §4.3: a traceparent that does not parse is ignored; the
    request is served under a new trace (gateway choice: never an error for it)."""
    tracer = tracing.active
    assert tracer is not None
    for incoming, meta in (
        ({"traceparent": traceparent}, {}),
        (None, {"traceparent": traceparent}),
    ):
        span = tracer.server_span(
            "ping", {"_meta": meta}, version="2025-11-25", profile="default", incoming=incoming
        )
        span.finish("ok", "", None)
    finished = spans.get_finished_spans()
    assert len(finished) == 2
    assert all(s.parent is None for s in finished)
    assert all(f"{s.context.trace_id:032x}" != HOST_TRACE_ID for s in finished)
