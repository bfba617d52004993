"""The span that records a routed request (its failure's answer is ``errors.to_protocol_error``).

The request's server span (tracing on) is opened here, so the router's
dispatch loop stays about dispatch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import structlog

from gateway.errors import INTERNAL_ERROR, LocalProtocolError
from gateway.telemetry import tracing

if TYPE_CHECKING:
    from gateway.router.call_metrics import RouterMetrics
    from gateway.router.neighbours import ClientPeer

logger = structlog.get_logger("gateway.router")

# What the host is told of a bug: nothing about the gateway's insides
# (the same words as the frontend's ``internal_errors``).
INTERNAL_ERROR_MESSAGE: Final = "internal error"
SESSION_ID_SHOWN: Final = 8


def internal_error(
    exc: Exception, metrics: RouterMetrics, method: str, session_id: str
) -> LocalProtocolError:
    """A bug while routing: logged once with its traceback, counted, -32603 (dispatch rule 1).

    The host learns nothing of the gateway's insides; the operator finds
    the traceback under ``request.internal_error`` (the frontend logs the
    same event for its own code).
    """
    logger.error(
        "request.internal_error",
        component="router",
        method=method[:120],
        client_session=session_id[:SESSION_ID_SHOWN],
        exc_info=exc,
    )
    metrics.internal_errors.labels(component="router").inc()
    return LocalProtocolError(INTERNAL_ERROR_MESSAGE, INTERNAL_ERROR)


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
