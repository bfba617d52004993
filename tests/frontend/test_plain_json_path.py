"""Which POSTs take the plain JSON path, seen from outside the endpoint (issue 17).

The endpoint runs in-process (raw ASGI, no socket) in front of a fake router
that tries to send a related message before its answer, as a backend's
progress or question would, and records whether the response took it. A
request with a progress token, or from a client that declared sampling,
elicitation or roots, must still get its related message on an SSE stream;
any other gets one JSON body, and the router is told the stream is not there
(the fallback every caller of an ``Emit`` already has).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import pytest
import trio

from gateway.frontend.asgi import GatewayApp
from gateway.protocol import jsonrpc
from gateway.router.access import AccessControl
from tests.frontend.test_internal_errors import _app as app_and_metrics
from tests.robustness.support import ACCEPT_BOTH, AsgiResponse, asgi_call, sse_messages

if TYPE_CHECKING:
    import msgspec

    from gateway.frontend.clients import ClientSession
    from gateway.protocol.jsonrpc import Request
    from gateway.router import Emit

LATEST: Final = "2025-11-25"
HEADERS: Final = [
    (b"host", b"127.0.0.1:8000"),
    (b"accept", ACCEPT_BOTH.encode()),
    (b"content-type", b"application/json"),
]
PROGRESS: Final = jsonrpc.encode_notification("notifications/progress", None)


class EmittingRouter:
    """Sends one related message before every answer and keeps what ``emit`` said."""

    def __init__(self) -> None:
        self.access = AccessControl()
        self.accepted: list[bool] = []

    def initialize_result(self, version: str, profile: str = "default") -> msgspec.Raw:
        return jsonrpc.to_raw(
            {"protocolVersion": version, "capabilities": {}, "serverInfo": {"name": "fake"}}
        )

    async def handle_request(
        self, client: ClientSession, request: Request, emit: Emit | None = None
    ) -> bytes:
        assert emit is not None
        self.accepted.append(emit(PROGRESS))
        await trio.lowlevel.checkpoint()
        return jsonrpc.encode_response(request.id, jsonrpc.to_raw({"content": []}))

    async def client_notification(
        self, client: ClientSession, method: str, params: msgspec.Raw | None
    ) -> None:
        return None


def _app(router: EmittingRouter) -> GatewayApp:
    """The MCP app over ``router``, built as the internal-errors tests build theirs."""
    app, _ = app_and_metrics(router)  # type: ignore[arg-type]  # any router the endpoint takes
    return app


async def _post(app: GatewayApp, message: dict[str, Any], session: str = "") -> AsgiResponse:
    headers = [*HEADERS, (b"mcp-session-id", session.encode())] if session else HEADERS
    return await asgi_call(app, "POST", "/mcp", headers, json.dumps(message).encode())


async def _open_session(app: GatewayApp, capabilities: dict[str, Any]) -> str:
    params = {"protocolVersion": LATEST, "capabilities": capabilities, "clientInfo": {"name": "t"}}
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
    response = await _post(app, init)
    assert response.status == 200, response
    session = response.header(b"mcp-session-id")
    assert session is not None
    return session.decode()


def _call(params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}


async def test_a_plain_call_from_a_client_without_askable_capabilities_is_one_json_body() -> None:
    router = EmittingRouter()
    app = _app(router)
    session = await _open_session(app, {"experimental": {}})
    response = await _post(app, _call({"name": "echo", "arguments": {}}), session)
    assert response.status == 200
    assert response.header(b"content-type") == b"application/json"
    assert json.loads(response.body) == {"jsonrpc": "2.0", "id": 5, "result": {"content": []}}
    assert router.accepted == [False]  # told to fall back: nothing streamed


async def test_a_call_with_a_progress_token_streams_its_progress_before_the_answer() -> None:
    router = EmittingRouter()
    app = _app(router)
    session = await _open_session(app, {})
    params = {"name": "echo", "_meta": {"progressToken": "p1"}}
    response = await _post(app, _call(params), session)
    assert response.header(b"content-type") == b"text/event-stream"
    messages = sse_messages(response.body)
    assert [m.get("method") for m in messages] == ["notifications/progress", None]
    assert messages[-1]["id"] == 5
    assert router.accepted == [True]


@pytest.mark.parametrize("capability", ["sampling", "elicitation", "roots"])
async def test_a_client_that_can_be_asked_keeps_the_stream_for_a_backends_question(
    capability: str,
) -> None:
    router = EmittingRouter()
    app = _app(router)
    session = await _open_session(app, {capability: {}})
    response = await _post(app, _call({"name": "echo"}), session)
    assert response.header(b"content-type") == b"text/event-stream"
    assert sse_messages(response.body)[0]["method"] == "notifications/progress"
    assert router.accepted == [True]
