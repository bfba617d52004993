"""Refusing a request, and the one place where a refusal or a failure is answered.

Every check on an HTTP request that carries MCP (``/mcp``, ``/sse``,
``/messages``) refuses by raising :class:`Rejection`; nothing below writes a
refusal itself. :func:`answer` runs a request, and is the single place that
turns a ``Rejection`` into its response (HTTP status plus a JSON-RPC error
body, the same on every path) and counts it by reason, and that turns any
other exception into a logged, counted ``-32603`` instead of a connection
that drops with nothing said (the web server's own error log is off).

:func:`report_internal_error` is how any request path reports such a bug
(this one, and ``client_messages.route_request`` on every transport): one
error line with the traceback, the request's method and its shortened
session, and a count in ``mcp_gateway_internal_errors_total`` an alert can
watch. The host still gets an answer, a JSON-RPC ``-32603``, rather than a
dropped connection.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

import structlog

from gateway.errors import INTERNAL_ERROR, INVALID_REQUEST, GatewayError
from gateway.frontend import http_util as h
from gateway.protocol import jsonrpc
from gateway.protocol.headers import MCP_SESSION_ID_HEADER_RAW

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable

    from gateway.router.call_metrics import RequestObserver
    from gateway.telemetry.metrics import Metrics

logger = structlog.get_logger("gateway.frontend")

# The component label of mcp_gateway_internal_errors_total: where the
# exception came from. "router": raised while a host request was routed
# (client_messages.route_request); "http": raised by the HTTP frontend's own code
# (answer).
ROUTER_COMPONENT: Final = "router"
HTTP_COMPONENT: Final = "http"
# What the host is told: nothing about the gateway's insides.
INTERNAL_ERROR_MESSAGE: Final = "internal error"
SESSION_ID_SHOWN: Final = 8

# The reason label of mcp_gateway_rejected_requests_total, by status. A
# bounded set: a host cannot mint label values.
REJECTION_REASONS: Final = {
    400: "protocol",
    401: "auth",
    403: "origin",
    404: "session",
    405: "protocol",
    406: "protocol",
    409: "protocol",
    413: "size",
    415: "protocol",
    429: "rate",
    503: "unavailable",
}


class Rejection(GatewayError):
    """A request refused before it was routed; :func:`answer` writes the response.

    Args:
        status: the HTTP status (what was wrong, for a host that reads no body).
        message: the JSON-RPC error message (what was wrong, for one that does).
        code: the JSON-RPC error code.
        msg_id: the id of the request refused, when it is known.
        headers: extra response headers (``Allow``, ``Retry-After``, ...).
        data: the JSON-RPC error's ``data`` (2026-07-28 -32022 names the
            supported versions there).
        reason: the metric's reason label, when the status alone would
            mislabel it (an access policy's 403 is ``policy``, not ``origin``).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: int = INVALID_REQUEST,
        msg_id: jsonrpc.RequestId | None = None,
        headers: Iterable[tuple[bytes, bytes]] = (),
        data: Any = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self._reason = reason
        self.data = data
        self.status = status
        self.message = message
        self.code = code
        self.msg_id = msg_id
        self.headers = list(headers)

    @property
    def reason(self) -> str:
        """The metric's reason label for this refusal."""
        if self._reason is not None:
            return self._reason
        return REJECTION_REASONS.get(self.status, "other")

    def body(self) -> bytes:
        """The JSON-RPC error the host receives."""
        return jsonrpc.encode_error(self.msg_id, self.code, self.message, self.data)


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


class _Response:
    """Wraps ``send``: knows whether the response has started, and forgives a host
    that hung up.

    ASGI servers may raise once the client is gone; the call it was for has
    already completed (spec: a disconnect is not a cancel), and there is
    nobody left to tell (robustness B8).
    """

    def __init__(self, send: h.Send) -> None:
        self._send = send
        self.started = False
        self.complete = False
        self._gone = False

    async def send(self, message: h.Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        if self._gone:
            return
        try:
            await self._send(message)
        except OSError:
            self._gone = True


async def answer(
    handler: Callable[[h.Scope, h.Receive, h.Send], Awaitable[None]],
    scope: h.Scope,
    receive: h.Receive,
    send: h.Send,
    metrics: Metrics,
    observer: RequestObserver | None = None,
) -> None:
    """Run ``handler`` for one request; answer its refusal or its failure.

    A :class:`Rejection` becomes its status and JSON-RPC error, counted by
    reason, and told to ``observer`` (the console's recent errors) as
    ``HTTP <method> <path>`` with outcome ``rejected``. Any other exception
    is logged once with its traceback, counted, and answered ``500`` with a
    ``-32603`` error when the response has not started yet, or ended when
    it has (its status is already on the wire).
    """
    response = _Response(send)
    started = time.perf_counter() if observer is not None else 0.0
    try:
        await handler(scope, receive, response.send)
    except Rejection as rejection:
        if response.started:  # a check after the response began is a bug
            await _failed(rejection, scope, response, metrics)
            return
        metrics.rejected.labels(reason=rejection.reason).inc()
        if observer is not None:
            observer.observe(
                f"HTTP {scope.get('method', '')} {scope.get('path', '')[:100]}",
                "",
                "",
                "rejected",
                time.perf_counter() - started,
                rejection.code,
                f"{rejection.status}: {rejection.message}",
            )
        await h.respond(
            response.send, rejection.status, rejection.body(), headers=rejection.headers
        )
    except Exception as exc:
        await _failed(exc, scope, response, metrics)


async def _failed(exc: Exception, scope: h.Scope, response: _Response, metrics: Metrics) -> None:
    session = h.header(scope, MCP_SESSION_ID_HEADER_RAW)
    report_internal_error(
        exc,
        metrics,
        HTTP_COMPONENT,
        method=f"{scope.get('method', '')} {scope.get('path', '')[:100]}",
        session_id=None if session is None else session.decode("latin-1"),
    )
    if not response.started:
        body = jsonrpc.encode_error(None, INTERNAL_ERROR, INTERNAL_ERROR_MESSAGE)
        await h.respond(response.send, 500, body)
    elif not response.complete:
        await response.send({"type": "http.response.body", "body": b"", "more_body": False})
