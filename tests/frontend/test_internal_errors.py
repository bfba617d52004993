"""A bug on a request path is logged once, counted, and answered with -32603.

The endpoint runs in-process (raw ASGI, no socket) in front of a fake router
whose methods raise on cue, so the failure is the frontend's to handle.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final, cast

import trio
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from gateway.frontend.asgi import GatewayApp
from gateway.frontend.clients import ClientRegistry
from gateway.frontend.origin import OriginPolicy
from gateway.frontend.streamable.endpoint import McpEndpoint
from gateway.protocol import jsonrpc
from gateway.router.access import AccessControl
from gateway.telemetry.metrics import Metrics
from tests.robustness.support import ACCEPT_BOTH, AsgiResponse, asgi_call, sse_messages

if TYPE_CHECKING:
    from collections.abc import MutableMapping

    import msgspec

    from gateway.frontend.clients import ClientSession
    from gateway.protocol.jsonrpc import Request
    from gateway.router import Emit, Router

INTERNAL_ERROR: Final = -32603
LATEST: Final = "2025-11-25"
HEADERS: Final = [
    (b"host", b"127.0.0.1:8000"),
    (b"accept", ACCEPT_BOTH.encode()),
    (b"content-type", b"application/json"),
]


class Boom(Exception):
    """The bug the fake router has."""


class FakeRouter:
    """Just what the frontend asks of a router; raises where told to."""

    def __init__(self) -> None:
        self.fail_initialize = False
        self.progress_first = False
        self.access = AccessControl()  # no policy: every profile opens

    def initialize_result(self, version: str, profile: str = "default") -> msgspec.Raw:
        if self.fail_initialize:
            raise Boom("initialize_result is broken")
        return jsonrpc.to_raw(
            {"protocolVersion": version, "capabilities": {}, "serverInfo": {"name": "fake"}}
        )

    async def handle_request(
        self, client: ClientSession, request: Request, emit: Emit | None = None
    ) -> bytes:
        if self.progress_first and emit is not None:
            emit(jsonrpc.encode_notification("notifications/progress", None))
        await trio.lowlevel.checkpoint()
        raise Boom(f"{request.method} is broken")

    async def client_notification(
        self, client: ClientSession, method: str, params: msgspec.Raw | None
    ) -> None:
        raise Boom(f"{method} is broken")


def _app(router: FakeRouter) -> tuple[GatewayApp, Metrics]:
    metrics = Metrics(CollectorRegistry())
    endpoint = McpEndpoint(
        cast("Router", router),
        ClientRegistry(),
        OriginPolicy("127.0.0.1", [], []),
        max_body_bytes=64 * 1024,
        metrics=metrics,
    )
    return GatewayApp("/mcp", endpoint, lambda: (True, {}), metrics), metrics


def _errors(metrics: Metrics, component: str) -> float | None:
    return metrics.registry.get_sample_value(
        "mcp_gateway_internal_errors_total", {"component": component}
    )


async def _post(app: GatewayApp, message: dict[str, Any], session: str = "") -> AsgiResponse:
    headers = [*HEADERS, (b"mcp-session-id", session.encode())] if session else HEADERS
    return await asgi_call(app, "POST", "/mcp", headers, json.dumps(message).encode())


async def _open_session(app: GatewayApp) -> str:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LATEST, "capabilities": {}, "clientInfo": {"name": "t"}},
    }
    response = await _post(app, init)
    assert response.status == 200, response
    session = response.header(b"mcp-session-id")
    assert session is not None
    return session.decode()


def _internal_error_lines(logs: list[MutableMapping[str, Any]]) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == "request.internal_error"]


async def test_a_router_that_raises_is_logged_once_counted_and_answered_minus_32603() -> None:
    """Gateway choice: an unexpected exception while routing is one error line with its
    traceback, method and short session, one count, and a JSON-RPC error with the id."""
    app, metrics = _app(FakeRouter())
    session = await _open_session(app)
    with capture_logs() as logs:
        response = await _post(
            app, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}, session=session
        )
    assert response.status == 200
    body = json.loads(response.body)
    assert body["id"] == 7
    assert body["error"]["code"] == INTERNAL_ERROR
    assert "broken" not in response.body.decode()  # nothing about the gateway's insides
    [line] = _internal_error_lines(logs)
    assert line["log_level"] == "error"
    assert isinstance(line["exc_info"], Boom)
    assert line["method"] == "tools/list"
    assert line["client_session"] == session[:8]
    assert line["component"] == "router"
    assert _errors(metrics, "router") == 1.0


async def test_a_router_that_raises_after_progress_ends_the_sse_stream_with_minus_32603() -> None:
    """Gateway choice: once the answer is an event stream, the error is its last event."""
    router = FakeRouter()
    router.progress_first = True
    app, metrics = _app(router)
    session = await _open_session(app)
    # Progress needs a token: a request without one takes the plain JSON path.
    call = {"jsonrpc": "2.0", "id": "x", "method": "tools/call"}
    call["params"] = {"name": "t", "_meta": {"progressToken": 1}}
    with capture_logs() as logs:
        response = await _post(app, call, session=session)
    assert response.status == 200
    assert response.complete
    messages = sse_messages(response.body)
    assert messages[0]["method"] == "notifications/progress"
    assert messages[-1]["id"] == "x"
    assert messages[-1]["error"]["code"] == INTERNAL_ERROR
    assert len(_internal_error_lines(logs)) == 1
    assert _errors(metrics, "router") == 1.0


async def test_a_notification_the_router_chokes_on_is_logged_and_still_accepted() -> None:
    """Gateway choice: a notification gets no answer, so a failure is only logged and counted."""
    app, metrics = _app(FakeRouter())
    session = await _open_session(app)
    with capture_logs() as logs:
        response = await _post(
            app, {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}, session=session
        )
    assert response.status == 202
    [line] = _internal_error_lines(logs)
    assert line["method"] == "notifications/roots/list_changed"
    assert _errors(metrics, "router") == 1.0


async def test_an_exception_in_the_frontend_itself_is_answered_500_with_minus_32603() -> None:
    """Gateway choice: a failure outside routing still gets a body, a log line and a count,
    never a dropped connection or a bare 500."""
    router = FakeRouter()
    router.fail_initialize = True
    app, metrics = _app(router)
    with capture_logs() as logs:
        response = await _post(
            app,
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}},
        )
    assert response.status == 500
    assert response.complete
    assert json.loads(response.body)["error"]["code"] == INTERNAL_ERROR
    [line] = _internal_error_lines(logs)
    assert isinstance(line["exc_info"], Boom)
    assert line["method"] == "POST /mcp"
    assert line["component"] == "http"
    assert _errors(metrics, "http") == 1.0
