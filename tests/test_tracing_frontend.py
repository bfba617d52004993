"""Spans for what the frontend answers itself: ``initialize``, ``server/discover``
and ``subscriptions/listen`` (gateway/telemetry/tracing.py rule 5).

A real gateway, real backends (official-SDK peers), hosts as the official SDK
client or raw ``httpx`` with the 2026-07-28 envelope; spans land in the SDK's
in-memory exporter, as in tests/test_tracing.py. A listen stream is one span
for its whole life with an event per notification it carried.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest
import trio
from opentelemetry.trace import SpanKind

from gateway.errors import INVALID_PARAMS, LocalProtocolError
from gateway.runtime.app import drain
from gateway.telemetry import tracing
from tests.frontend.test_listen_http import call, listen, no_listeners, public_uris
from tests.frontend.test_modern_http import modern, send
from tests.frontend.test_streamable_http import http_client
from tests.harness import gateway_config, sdk_backend, start_gateway, stdio_backend
from tests.servers.paths import python_server_command
from tests.test_tracing import (
    HOST_SPAN_ID,
    HOST_TRACE_ID,
    HOST_TRACEPARENT,
    META_TRACE_ID,
    META_TRACEPARENT,
    _one,
    host,
    serve_stdio,
)

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.harness import Running

LISTEN: Final = "subscriptions/listen"
MODERN: Final = "2026-07-28"


def _servers(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.kind is SpanKind.SERVER and s.name == name]


async def _watched(nursery: trio.Nursery) -> Running:
    backend = stdio_backend("watched", python_server_command("watched"))
    return await start_gateway(nursery, gateway_config([backend]))


async def test_initialize_is_a_server_span_continuing_the_hosts_trace(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """Issue 18: the handshake is traced like a routed request (method, era,
    version, profile, outcome), in the host's trace; no backend serves it."""
    running = await start_gateway(nursery, gateway_config([sdk_backend("alpha")]))
    async with host(running.url, {"traceparent": HOST_TRACEPARENT}) as session:
        await session.list_tools()
    span = _one(list(spans.get_finished_spans()), SpanKind.SERVER, "initialize")
    assert f"{span.context.trace_id:032x}" == HOST_TRACE_ID
    assert span.parent is not None and f"{span.parent.span_id:016x}" == HOST_SPAN_ID
    assert dict(span.attributes or {}) == {
        "mcp.method.name": "initialize",
        "mcp.protocol.version": "2025-11-25",
        "mcp_gateway.era": "legacy",
        "mcp_gateway.profile": "default",
        "mcp_gateway.outcome": "ok",
    }
    assert span.status.is_ok


async def test_server_discover_is_a_server_span_continuing_the_meta_trace(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """Issue 18: a modern host's discover over HTTP, its _meta.traceparent continued."""
    running = await start_gateway(nursery, gateway_config([sdk_backend("alpha")]))
    async with http_client(running) as client:
        message = modern(1, "server/discover", traceparent=META_TRACEPARENT)
        response = await send(client, message)
    assert response.status_code == 200 and "result" in response.json()
    (span,) = _servers(spans, "server/discover")
    assert f"{span.context.trace_id:032x}" == META_TRACE_ID
    assert dict(span.attributes or {}) == {
        "mcp.method.name": "server/discover",
        "mcp.protocol.version": MODERN,
        "mcp_gateway.era": "modern",
        "mcp_gateway.profile": "default",
        "mcp_gateway.outcome": "ok",
    }


async def test_server_discover_over_stdio_is_a_server_span(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """Issue 18: the stdio connection's own discover path is traced the same way."""
    running = await start_gateway(nursery, gateway_config([sdk_backend("alpha")]))
    stdio_host = await serve_stdio(nursery, running)
    answer = await stdio_host.ask(modern(3, "server/discover", traceparent=META_TRACEPARENT))
    assert "result" in answer, answer
    (span,) = _servers(spans, "server/discover")
    assert f"{span.context.trace_id:032x}" == META_TRACE_ID
    assert span.attributes is not None and span.attributes["mcp_gateway.era"] == "modern"
    assert span.attributes["mcp_gateway.outcome"] == "ok"
    await stdio_host.close()


async def test_a_listen_stream_is_one_span_with_an_event_per_notification(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """Issue 18: one span for the stream's life, not one per notification; each
    notification it carried is an event naming its method; the backend subscribe
    the listen caused is a client span under it; the host closing it is "ok"."""
    running = await _watched(nursery)
    async with http_client(running) as client:
        a, _ = await public_uris(client)
        asked = {"toolsListChanged": True, "resourceSubscriptions": [a]}
        async with listen(client, "L1", asked) as stream:
            assert (await stream.next())["method"] == "notifications/subscriptions/acknowledged"
            await call(client, "grow")
            assert (await stream.next())["method"] == "notifications/tools/list_changed"
            await call(client, "touch", uri="watch://a")
            assert (await stream.next())["method"] == "notifications/resources/updated"
            assert _servers(spans, LISTEN) == []  # open while the stream is
        await no_listeners(running)
    (span,) = _servers(spans, LISTEN)
    assert [e.name for e in span.events] == ["notification", "notification"]
    assert [dict(e.attributes or {}) for e in span.events] == [
        {"mcp.method.name": "notifications/tools/list_changed"},
        {"mcp.method.name": "notifications/resources/updated"},
    ]
    assert dict(span.attributes or {}) == {
        "mcp.method.name": LISTEN,
        "mcp.protocol.version": MODERN,
        "mcp_gateway.era": "modern",
        "mcp_gateway.profile": "default",
        "mcp_gateway.outcome": "ok",
        "mcp_gateway.listen.ended": "client",
        "mcp_gateway.listen.dropped": 0,
        "mcp_gateway.listen.notifications": 2,
    }
    subscribe = _one(list(spans.get_finished_spans()), SpanKind.CLIENT, "resources/subscribe")
    assert subscribe.parent is not None and subscribe.parent.span_id == span.context.span_id
    assert subscribe.attributes is not None
    assert subscribe.attributes["mcp_gateway.backend"] == "watched"


async def test_a_listen_stream_the_gateway_ends_says_so_on_its_span(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """Issue 18: a drain ends the stream with the complete result; the span ends then."""
    running = await _watched(nursery)
    async with http_client(running) as client, listen(client, 9, {"toolsListChanged": True}) as s:
        await s.next()
        async with trio.open_nursery() as draining:
            draining.start_soon(drain, running.gateway)
            assert (await s.next())["result"]["resultType"] == "complete"
    await no_listeners(running)
    (span,) = _servers(spans, LISTEN)
    assert span.events == ()
    assert span.attributes is not None
    assert span.attributes["mcp_gateway.listen.ended"] == "gateway"
    assert span.attributes["mcp_gateway.outcome"] == "ok"


@pytest.mark.parametrize(
    ("raised", "cancelled", "outcome", "code"),
    [
        (LocalProtocolError("bad params", INVALID_PARAMS), "cancelled", "error", "-32602"),
        (RuntimeError("a bug"), "cancelled", "error", "-32603"),
        (None, "cancelled", "cancelled", None),
        (None, "ok", "ok", None),
    ],
)
async def test_an_answered_span_ends_with_the_outcome_and_code_the_host_gets(
    spans: InMemorySpanExporter,
    raised: Exception | None,
    cancelled: str,
    outcome: str,
    code: str | None,
) -> None:
    """Gateway choice (tracing rule 5): a ProtocolError is its JSON-RPC code, any other
    exception -32603 (what failures.py answers), a cancellation what the caller says it
    is ("ok" for a listen the host closes)."""

    def answered() -> AbstractContextManager[object]:
        return tracing.answered(
            "initialize", {}, version="2025-11-25", profile="p", cancelled=cancelled
        )

    if raised is not None:
        with pytest.raises(type(raised)), answered():
            raise raised
    else:
        with trio.CancelScope() as scope, answered():
            scope.cancel()
            await trio.sleep_forever()
    (span,) = _servers(spans, "initialize")
    attributes = dict(span.attributes or {})
    assert attributes["mcp_gateway.outcome"] == outcome
    assert attributes.get("rpc.response.status_code") == code
    assert span.status.is_ok is (outcome == "ok")


def test_answered_yields_none_and_makes_nothing_with_tracing_off() -> None:
    """Tracing rule 1: off, the frontend's hook is one check and no span."""
    assert tracing.active is None
    with tracing.answered("server/discover", {}, version=MODERN, profile="default") as span:
        assert span is None


async def test_a_task_call_and_the_tasks_methods_are_server_spans(
    nursery: trio.Nursery, spans: InMemorySpanExporter
) -> None:
    """Issue 18: the call that starts a task, and tasks/get, are traced like a routed
    request (the router does not see them: the task runner answers); the task's own
    call to the backend is a span of its own."""
    from tests.e2e.test_tasks import WITH_TASKS, _ask, _start, _until

    running = await _start(nursery)
    call = {"name": "c__slow_compute", "arguments": {"seconds": 0.1, "label": "x"}}
    created = (await _ask(running, "tools/call", call, **WITH_TASKS))["result"]
    await _until(running, created["taskId"], {"completed"})
    unknown = await _ask(running, "tasks/get", {"taskId": "nope"}, **WITH_TASKS)
    assert unknown["error"]["code"] == INVALID_PARAMS
    gets = _servers(spans, "tasks/get")
    assert gets, "no tasks/get span"
    assert {dict(s.attributes or {}).get("mcp_gateway.outcome") for s in gets} == {"ok", "error"}
    assert dict(gets[0].attributes or {})["mcp_gateway.era"] == "modern"
    calls = _servers(spans, "tools/call c__slow_compute")
    # One for the host's call that started the task, one for the task's call,
    # whose child is the request to the backend.
    assert len(calls) == 2, [dict(s.attributes or {}) for s in calls]
    assert all(dict(s.attributes or {})["mcp_gateway.outcome"] == "ok" for s in calls)
    (backend,) = [s for s in spans.get_finished_spans() if s.kind is SpanKind.CLIENT]
    assert backend.parent is not None
    assert backend.parent.span_id in {s.context.span_id for s in calls}
