"""Sans-IO rules of the backend leg (``protocol/backend_leg.py``), without sockets or trio."""

from __future__ import annotations

from typing import Any, Final

import pytest

from gateway.protocol.stateless import backend_leg
from gateway.protocol.stateless.backend_leg import (
    NotModern,
    bridgeable_capabilities,
    for_legacy_host,
    http_headers,
    read_discover,
    read_discover_error,
    with_envelope,
)
from gateway.protocol.stateless.cache_hints import NO_CACHE, CacheHint

META: Final = "io.modelcontextprotocol/"
SCHEMA: Final = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
    },
}


def test_the_envelope_fills_in_version_capabilities_and_client_info() -> None:
    """S/basic/index.mdx §Per-request protocol fields: all three on every request."""
    out = with_envelope({"name": "t"}, capabilities={"sampling": {}})
    assert out["name"] == "t"
    assert out["_meta"] == {
        META + "protocolVersion": "2026-07-28",
        META + "clientCapabilities": {"sampling": {}},
        META + "clientInfo": backend_leg.GATEWAY_CLIENT_INFO,
    }


def test_the_envelope_keeps_what_the_caller_put_in_meta_and_never_mutates() -> None:
    """Gateway choice: progressToken, trace context and earlier envelope keys win."""
    params: dict[str, Any] = {
        "_meta": {
            "progressToken": "gw-1",
            "traceparent": "00-aa-bb-01",
            META + "clientCapabilities": {"roots": {}},
        }
    }
    out = with_envelope(params, capabilities={}, log_level="info")
    assert out["_meta"]["progressToken"] == "gw-1"
    assert out["_meta"]["traceparent"] == "00-aa-bb-01"
    assert out["_meta"][META + "clientCapabilities"] == {"roots": {}}
    assert out["_meta"][META + "logLevel"] == "info"
    assert params["_meta"] == {
        "progressToken": "gw-1",
        "traceparent": "00-aa-bb-01",
        META + "clientCapabilities": {"roots": {}},
    }


def test_no_log_level_is_sent_unless_the_caller_asked() -> None:
    """S/server/utilities/logging.mdx: logs only when the request asks for them."""
    assert META + "logLevel" not in with_envelope(None)["_meta"]


def test_bridgeable_capabilities_keep_roots_sampling_elicitation_with_their_flags() -> None:
    """Gateway choice: the sub-flags say what the host can do; extensions are not bridged."""
    host = {
        "elicitation": {"url": {}},
        "sampling": {"tools": {}},
        "roots": {"listChanged": True},
        "experimental": {"x": {}},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }
    assert bridgeable_capabilities(host) == {
        "elicitation": {"url": {}},
        "sampling": {"tools": {}},
        "roots": {"listChanged": True},
    }
    assert bridgeable_capabilities(None) == {}


def test_read_discover_keeps_what_the_backend_said() -> None:
    """S/server/discover.mdx: versions, capabilities, instructions, serverInfo in _meta."""
    found = read_discover(
        {
            "supportedVersions": ["2026-07-28", "2099-01-01", 7],
            "capabilities": {"tools": {}},
            "instructions": "be kind",
            "_meta": {META + "serverInfo": {"name": "b", "version": "3"}},
        }
    )
    assert found.supported_versions == ("2026-07-28", "2099-01-01")
    assert (found.capabilities, found.instructions) == ({"tools": {}}, "be kind")
    assert (found.name, found.version) == ("b", "3")


@pytest.mark.parametrize(
    "result",
    [None, [], {"supportedVersions": ["2025-11-25"]}, {"supportedVersions": "2026-07-28"}, {}],
)
def test_read_discover_refuses_a_result_without_2026_07_28(result: object) -> None:
    """Issue 14 step 5: only a DiscoverResult listing our version makes a session modern."""
    with pytest.raises(NotModern):
        read_discover(result)


def test_read_discover_tolerates_odd_field_types() -> None:
    """Gateway choice: a wrong type is read as absent, not a failure."""
    found = read_discover(
        {"supportedVersions": ["2026-07-28"], "capabilities": [], "instructions": 5, "_meta": 1}
    )
    assert (found.capabilities, found.instructions, found.name) == ({}, None, "")
    assert found.hint == NO_CACHE


def test_read_discover_keeps_the_backends_cache_hint() -> None:
    """S/server/utilities/caching.mdx: a DiscoverResult is cacheable; its hint is kept
    for the gateway's merged discover (issue 14)."""
    found = read_discover(
        {"supportedVersions": ["2026-07-28"], "ttlMs": 30000.7, "cacheScope": "public"}
    )
    assert found.hint == CacheHint(ttl_ms=30000, scope="public")


def test_only_a_32022_naming_2026_07_28_is_a_modern_refusal() -> None:
    """S/basic/versioning.mdx: -32022's data.supported names the versions the server has."""
    assert read_discover_error(-32022, {"supported": ["2026-07-28"], "requested": "x"})
    assert not read_discover_error(-32022, {"supported": ["2030-01-01"]})
    assert not read_discover_error(-32022, None)
    assert not read_discover_error(-32601, {"supported": ["2026-07-28"]})


def test_http_headers_mint_mcp_param_from_the_backends_schema() -> None:
    """S/basic/transports/streamable-http.mdx: standard headers, Mcp-Name encoded, params."""
    params = with_envelope({"name": "lookup", "arguments": {"region": "eu west ", "count": 2}})
    headers = http_headers("tools/call", params, {"lookup": SCHEMA}.get)
    assert headers["MCP-Protocol-Version"] == "2026-07-28"
    assert headers["Mcp-Method"] == "tools/call"
    assert headers["Mcp-Name"] == "lookup"
    assert headers["Mcp-Param-Region"] == "=?base64?ZXUgd2VzdCA=?="  # trailing space: encoded
    assert headers["Mcp-Param-Count"] == "2"


def test_http_headers_of_other_requests_and_of_legacy_ones() -> None:
    """Mcp-Name from the uri on resources/read; nothing for a request without envelope."""
    read = http_headers("resources/read", with_envelope({"uri": "file:///a"}))
    assert read["Mcp-Name"] == "file:///a" and "Mcp-Param-Region" not in read
    assert http_headers("tools/list", with_envelope(None)) == {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/list",
    }
    assert http_headers("tools/call", {"name": "lookup"}, {"lookup": SCHEMA}.get) == {}
    assert http_headers("tools/call", None) == {}


def test_a_tool_with_a_bad_annotation_gets_no_param_headers() -> None:
    """Gateway choice: such a tool is not listed to hosts; the backend judges a call."""
    bad = {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}
    headers = http_headers(
        "tools/call", with_envelope({"name": "t", "arguments": {"n": 1}}), {"t": bad}.get
    )
    assert not [k for k in headers if k.startswith("Mcp-Param-")]


def test_a_result_for_a_legacy_host_loses_only_the_2026_07_28_fields() -> None:
    """Issue 14 step 4: resultType, ttlMs, cacheScope go; unknown fields stay."""
    result = {"content": [], "resultType": "complete", "ttlMs": 5, "cacheScope": "public", "x": 1}
    assert for_legacy_host(result) == {"content": [], "x": 1}
    assert "resultType" in result
