"""How a routed request's failure reaches the host, and the span that records it.

A backend that is down or too slow is not the host's fault, so the host
gets a JSON-RPC error that names the backend and carries the reason in
``data`` (docs/protocol.md, errors); the request's server span (tracing on)
is opened here too, so the router's dispatch loop stays about dispatch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gateway.errors import (
    INTERNAL_ERROR,
    REQUEST_TIMEOUT_CODE,
    BackendUnavailable,
    LocalProtocolError,
    RequestTimeout,
)
from gateway.telemetry import tracing

if TYPE_CHECKING:
    from gateway.router.neighbours import ClientPeer


def unavailable(exc: BackendUnavailable) -> LocalProtocolError:
    """-32603 naming the backend and why it is unavailable (``data.reason``)."""
    return LocalProtocolError(
        str(exc), INTERNAL_ERROR, data={"reason": exc.kind, "backend": exc.backend}
    )


def timed_out(exc: RequestTimeout) -> LocalProtocolError:
    """The request-timeout code naming the backend and the seconds waited."""
    return LocalProtocolError(
        f"backend {exc.backend!r} did not answer within {exc.seconds:.3g} s",
        REQUEST_TIMEOUT_CODE,
        data={"reason": "timeout", "backend": exc.backend, "seconds": round(exc.seconds, 3)},
    )


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


__all__ = ["server_span", "timed_out", "unavailable"]
