"""Unexpected exceptions on a request path: logged once, counted, never silent.

A bug while a request is handled must leave a trace an operator can find
(the web server's own error log is off): one error line with the traceback,
the request's method and its shortened session, and a count in
``mcp_gateway_internal_errors_total`` an alert can watch. The host still
gets an answer, a JSON-RPC ``-32603``, rather than a dropped connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import structlog

if TYPE_CHECKING:
    from gateway.telemetry.metrics import Metrics

logger = structlog.get_logger("gateway.frontend")

# The component label: where the exception came from. "router": raised
# while a host request was routed (dispatch.route_request); "http": raised
# by the HTTP frontend's own code (rejection.answer).
ROUTER_COMPONENT: Final = "router"
HTTP_COMPONENT: Final = "http"
# What the host is told: nothing about the gateway's insides.
INTERNAL_ERROR_MESSAGE: Final = "internal error"
SESSION_ID_SHOWN: Final = 8


def report_internal_error(
    exc: BaseException,
    metrics: Metrics | None,
    component: str,
    *,
    method: str,
    session_id: str | None,
) -> None:
    """Log one unexpected exception with its traceback, and count it.

    Args:
        exc: the exception.
        metrics: where it is counted (None: only logged, as in unit tests).
        component: ``ROUTER_COMPONENT`` or ``HTTP_COMPONENT``.
        method: the JSON-RPC method, or the HTTP method and path.
        session_id: the client session, shortened in the log; None if unknown.
    """
    logger.error(
        "request.internal_error",
        component=component,
        method=method[:120],
        client_session=None if session_id is None else session_id[:SESSION_ID_SHOWN],
        exc_info=exc,
    )
    if metrics is not None:
        metrics.internal_errors.labels(component=component).inc()
