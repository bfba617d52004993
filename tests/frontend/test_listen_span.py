"""A listen stream's span sees every notification the stream took, dropped ones too.

A stream whose queue is full drops the message (frontend/listen.py rule 3);
its span still records it, marked, so a trace shows what the host missed.
The span is the real OpenTelemetry tracer's, exported to memory; the SDK
keeps a span's last 128 events, so ``Listener.carried`` (the span's
``mcp_gateway.listen.notifications``) is what counts them all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from gateway.frontend.stateless.listen_stream import LISTENER_QUEUE, Listener
from gateway.protocol import jsonrpc
from gateway.protocol.stateless.envelope import Envelope
from gateway.protocol.stateless.listen import LIST_CHANGED_FIELDS, ListenFilter, honour
from gateway.telemetry import tracing

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

TOOLS: Final = LIST_CHANGED_FIELDS["toolsListChanged"]
PROMPTS: Final = LIST_CHANGED_FIELDS["promptsListChanged"]


async def test_a_dropped_notification_is_an_event_marked_dropped_and_unasked_ones_none(
    spans: InMemorySpanExporter,
) -> None:
    """Issue 18: one event per notification the stream took, ``mcp_gateway.dropped``
    on the one its full queue dropped; a notification it did not ask for is no event."""
    asked = ListenFilter(list_changed=frozenset({TOOLS}))
    envelope = Envelope(protocol_version="2026-07-28", client_capabilities={})
    listener = Listener(honour(1, asked, frozenset(LIST_CHANGED_FIELDS.values()), []), envelope)
    assert tracing.active is not None
    span = tracing.active.server_span(
        "subscriptions/listen", {}, version="2026-07-28", profile="default", incoming=None
    )
    listener.span = span
    for _ in range(LISTENER_QUEUE + 1):
        assert listener.offer(jsonrpc.encode_notification(TOOLS))
    assert not listener.offer(jsonrpc.encode_notification(PROMPTS))
    span.finish("ok", "", None)
    assert listener.dropped == 1
    ((finished),) = spans.get_finished_spans()
    assert listener.carried == LISTENER_QUEUE + 1
    # The SDK keeps the last 128 events and counts the ones it let go.
    events = [dict(e.attributes or {}) for e in finished.events]
    assert len(events) + finished.dropped_events == LISTENER_QUEUE + 1
    assert events[-2] == {"mcp.method.name": TOOLS}
    assert events[-1] == {"mcp.method.name": TOOLS, "mcp_gateway.dropped": True}
