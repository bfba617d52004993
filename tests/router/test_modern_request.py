"""The router's per-request context for modern calls (``gateway/router/stateless/requests.py``)."""

from __future__ import annotations

import msgspec
import pytest

from gateway.errors import LocalProtocolError
from gateway.protocol import jsonrpc
from gateway.protocol.stateless.envelope import Envelope
from gateway.router.context import ModernRequest
from gateway.router.stateless.requests import backend_params, backend_request


def _envelope() -> Envelope:
    return Envelope(protocol_version="2026-07-28", client_capabilities={"roots": {}})


def test_each_modern_request_has_its_own_id_and_its_own_capabilities() -> None:
    first, second = ModernRequest(envelope=_envelope()), ModernRequest(envelope=_envelope())
    assert first.session_id != second.session_id
    assert first.protocol_version == "2026-07-28"
    assert first.capabilities == {"roots": {}}


def test_only_log_messages_reach_the_request_stream_unasked() -> None:
    sent: list[bytes] = []
    request = ModernRequest(envelope=_envelope(), emit=lambda m: sent.append(m) is None)
    log = jsonrpc.encode_notification(
        "notifications/message", msgspec.Raw(b'{"level":"info","data":"x"}')
    )
    request.notify_nowait(jsonrpc.encode_notification("notifications/tools/list_changed"))
    request.notify_nowait(log)
    assert sent == [log]


async def test_a_backends_own_request_is_refused() -> None:
    request = ModernRequest(envelope=_envelope())
    with pytest.raises(LocalProtocolError) as caught:
        await request.request("roots/list", None, None)
    assert caught.value.code == -32601


def test_envelope_keys_stay_at_the_gateway_progress_and_trace_go_on() -> None:
    params = {
        "name": "t",
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "progressToken": 7,
            "traceparent": "00-abc-def-01",
        },
    }
    raw = backend_params(params)
    assert raw is not None
    assert msgspec.json.decode(raw) == {
        "name": "t",
        "_meta": {"progressToken": 7, "traceparent": "00-abc-def-01"},
    }
    bare = backend_params({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
    assert bare is not None and msgspec.json.decode(bare) == {}
    assert backend_params(None) is None
    rewritten = backend_request(jsonrpc.Request(3, "tools/list"), params)
    assert (rewritten.id, rewritten.method) == (3, "tools/list")
