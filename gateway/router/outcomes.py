"""The span that records a routed request (its failure's answer is ``errors.to_protocol_error``).

The request's server span (tracing on) is opened here, so the router's
dispatch loop stays about dispatch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.telemetry import tracing

if TYPE_CHECKING:
    from gateway.router.neighbours import ClientPeer


def server_span(
    tracer: tracing.Tracer, client: ClientPeer, method: str, params: dict[str, Any]
) -> tracing.ServerSpan:
    """The host request's span (tracing on): continues the HTTP request's trace headers."""
    return tracer.server_span(
        method,
        params,
        version=client.protocol_version,
        profile=client.profile,
        incoming=tracing.incoming_headers(),
    )


__all__ = ["server_span"]
