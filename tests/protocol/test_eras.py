"""Era decisions and modern results (``gateway/protocol/eras.py``), synchronously."""

from __future__ import annotations

from typing import Any, Final

import pytest

from gateway.errors import http_status_for
from gateway.protocol.eras import (
    LEGACY_BACKEND_HINT,
    MODERN_METHODS,
    SERVED_VERSIONS,
    MethodNotFound,
    check_method,
    is_modern_notification,
    is_modern_request,
    is_modern_version_header,
    modern_result,
    parse_modern,
    sessionless_get_or_delete_is_modern,
)
from gateway.protocol.stateless.error_codes import (
    EnvelopeInvalid,
    HeaderMismatch,
    UnsupportedVersion,
)

MODERN: Final = "2026-07-28"
VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY: Final = "io.modelcontextprotocol/clientCapabilities"


def headers(method: str, version: str = MODERN) -> dict[str, str]:
    """Folded headers of a conforming modern POST."""
    return {"mcp-protocol-version": version, "mcp-method": method}


def params(version: str = MODERN) -> dict[str, Any]:
    """Params carrying a minimal envelope."""
    return {"_meta": {VERSION_KEY: version, CAPS_KEY: {}}}


def test_versions_served_are_newest_first_modern_then_handshake() -> None:
    assert SERVED_VERSIONS[0] == MODERN
    assert SERVED_VERSIONS[1] == "2025-11-25"
    assert SERVED_VERSIONS[-1] == "2024-11-05"


def test_an_unsupported_version_names_both_eras_so_a_dual_era_client_falls_back() -> None:
    with pytest.raises(UnsupportedVersion) as caught:
        parse_modern("tools/list", params("2099-01-01"), headers("tools/list", "2099-01-01"))
    assert http_status_for(caught.value.code) == 400
    assert caught.value.data["supported"] == list(SERVED_VERSIONS)
    assert caught.value.data["requested"] == "2099-01-01"


def test_parse_modern_keeps_the_envelope_order_of_checks() -> None:
    with pytest.raises(EnvelopeInvalid):
        parse_modern("tools/list", {"_meta": {VERSION_KEY: MODERN}}, headers("tools/list"))
    with pytest.raises(HeaderMismatch):
        parse_modern("tools/list", params("2099-01-01"), headers("tools/list"))
    envelope = parse_modern("tools/list", params(), headers("tools/list"))
    assert envelope.protocol_version == MODERN


@pytest.mark.parametrize(
    "method", ["ping", "logging/setLevel", "resources/subscribe", "initialize", "x"]
)
def test_removed_and_unknown_methods_are_not_found_with_404(method: str) -> None:
    with pytest.raises(MethodNotFound) as caught:
        check_method(method)
    assert (caught.value.code, http_status_for(caught.value.code)) == (-32601, 404)


def test_every_served_method_passes() -> None:
    for method in MODERN_METHODS:
        check_method(method)
    assert "server/discover" in MODERN_METHODS


def test_modern_version_header() -> None:
    assert is_modern_version_header(MODERN)
    assert not is_modern_version_header("2025-11-25")
    assert not is_modern_version_header(None)


def test_get_and_delete_are_modern_only_without_a_session_and_with_a_modern_header() -> None:
    assert sessionless_get_or_delete_is_modern(None, MODERN)
    assert not sessionless_get_or_delete_is_modern("abc", MODERN)  # a legacy session keeps it
    assert not sessionless_get_or_delete_is_modern(None, None)  # legacy client: 400 as before
    assert not sessionless_get_or_delete_is_modern(None, "2025-11-25")


def test_notifications_are_modern_by_envelope_or_by_header_without_session() -> None:
    assert is_modern_notification(params(), "abc", None)
    assert is_modern_notification({"requestId": 1}, None, MODERN)
    assert not is_modern_notification({"requestId": 1}, "abc", MODERN)
    assert not is_modern_notification(None, None, None)


def test_modern_result_adds_result_type_and_the_legacy_default_hint() -> None:
    result, dropped = modern_result("resources/read", {"contents": []})
    assert result == {"contents": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    assert dropped == []
    assert LEGACY_BACKEND_HINT.as_fields() == {"ttlMs": 0, "cacheScope": "private"}


def test_modern_result_puts_no_hint_on_a_call() -> None:
    result, _ = modern_result("tools/call", {"content": []})
    assert result == {"content": [], "resultType": "complete"}


def test_tools_with_an_invalid_header_annotation_are_dropped_and_reported() -> None:
    good = {"name": "good", "inputSchema": {"type": "object", "properties": {}}}
    bad = {
        "name": "bad",
        "inputSchema": {
            "type": "object",
            "properties": {"n": {"type": "number", "x-mcp-header": "N"}},
        },
    }
    listed = {"tools": [good, bad], "nextCursor": "c"}
    result, dropped = modern_result("tools/list", listed)
    assert [t["name"] for t in result["tools"]] == ["good"]
    assert result["nextCursor"] == "c" and result["ttlMs"] == 0
    assert [d.name for d in dropped] == ["bad"]
    assert listed["tools"] == [good, bad]  # the input is not mutated


def test_requests_are_modern_by_envelope_or_by_header_without_session() -> None:
    assert is_modern_request(params(), "abc", None)  # a session header is then ignored
    assert is_modern_request({}, None, MODERN)  # broken envelope: -32602 follows, not 400
    assert is_modern_request(None, None, MODERN)
    assert not is_modern_request({}, "abc", MODERN)  # a legacy session's request
    assert not is_modern_request({}, None, "2025-11-25")
    assert not is_modern_request(None, None, None)
