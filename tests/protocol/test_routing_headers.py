"""Specification tests for ``gateway.protocol.stateless.routing_headers`` (sans-IO).

2026-07-28 ``basic/transports/streamable-http.mdx`` §Request Metadata:
``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` mirror the body and must
agree with it; every failure is -32020 with HTTP 400.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.errors import HEADER_MISMATCH, http_status_for
from gateway.protocol.stateless.error_codes import HeaderMismatch
from gateway.protocol.stateless.routing_headers import (
    DroppedTool,
    check_param_headers,
    check_standard_headers,
    decode_value,
    encode_value,
    fold_headers,
    header_annotations,
    invalid_reason,
    param_headers,
    standard_headers,
    tools_to_drop,
)

V = "2026-07-28"


def schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


REGION = schema(
    region={"type": "string", "x-mcp-header": "Region"},
    count={"type": "integer", "x-mcp-header": "Count"},
    dry={"type": "boolean", "x-mcp-header": "Dry"},
    query={"type": "string"},
)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ],
)
def test_values_encode_as_the_spec_table_shows(value: str, encoded: str) -> None:
    """Spec: §Value Encoding examples, byte for byte."""
    assert encode_value(value) == encoded
    assert decode_value(encoded, "Mcp-Param-X") == value


@given(st.text())
def test_any_value_survives_encode_then_decode(value: str) -> None:
    """Spec: the sentinel recovers the exact UTF-8 value; encoded output is header-safe."""
    encoded = encode_value(value)
    assert all(0x20 <= ord(c) <= 0x7E for c in encoded)
    assert decode_value(encoded, "Mcp-Name") == value


@pytest.mark.parametrize(
    "raw",
    ["=?base64?!!!?=", "=?base64?/w==?=", "=?base64?SGk=x?=", "=?base64?SGl=?=", "a\x7fb", "é"],
)
def test_malformed_or_non_canonical_values_are_header_mismatch(raw: str) -> None:
    """Spec: bad base64, bad UTF-8 or invalid characters are -32020 (400)."""
    with pytest.raises(HeaderMismatch) as info:
        decode_value(raw, "Mcp-Name")
    assert info.value.code == HEADER_MISMATCH
    assert http_status_for(info.value.code) == 400


def test_a_repeated_routing_header_is_a_mismatch_and_names_fold_to_lowercase() -> None:
    """Gateway choice: first-copy and last-copy readers would route differently."""
    assert fold_headers({"MCP-Method": "tools/call"}) == {"mcp-method": "tools/call"}
    assert fold_headers([("X-A", "1"), ("x-a", "2")]) == {"x-a": "2"}
    with pytest.raises(HeaderMismatch):
        fold_headers([("Mcp-Name", "a"), ("mcp-name", "b")])
    with pytest.raises(HeaderMismatch):
        fold_headers([("Mcp-Param-Region", "a"), ("MCP-PARAM-REGION", "a")])


def test_standard_headers_are_derived_and_checked() -> None:
    """Spec: Mcp-Method on every request; Mcp-Name is name, uri or taskId by method."""
    params = {"name": "get wéather"}
    out = standard_headers("tools/call", params, V)
    assert out["Mcp-Name"] == encode_value("get wéather")
    check_standard_headers("tools/call", params, V, fold_headers(out))
    assert "Mcp-Name" not in standard_headers("tools/list", {}, V)
    assert standard_headers("resources/read", {"uri": "file:///a"}, V)["Mcp-Name"] == "file:///a"
    assert standard_headers("tasks/get", {"taskId": "t1"}, V)["Mcp-Name"] == "t1"


def test_a_body_without_a_name_is_left_to_the_method() -> None:
    """Gateway choice: a tools/call with no ``name`` is the method's -32602, not -32020."""
    check_standard_headers(
        "tools/call", {}, V, {"mcp-protocol-version": V, "mcp-method": "tools/call"}
    )


@pytest.mark.parametrize(
    ("method", "params", "headers"),
    [
        ("tools/list", {}, {"mcp-method": "tools/list"}),
        ("tools/list", {}, {"mcp-protocol-version": "2025-11-25", "mcp-method": "tools/list"}),
        ("tools/list", {}, {"mcp-protocol-version": V}),
        ("tools/list", {}, {"mcp-protocol-version": V, "mcp-method": "Tools/List"}),
        ("tools/call", {"name": "a"}, {"mcp-protocol-version": V, "mcp-method": "tools/call"}),
        (
            "tools/call",
            {"name": "a"},
            {"mcp-protocol-version": V, "mcp-method": "tools/call", "mcp-name": "b"},
        ),
        (
            "resources/read",
            {"uri": "x://é"},
            {"mcp-protocol-version": V, "mcp-method": "resources/read", "mcp-name": "x://é"},
        ),
    ],
)
def test_standard_header_failures_are_minus_32020(
    method: str, params: dict[str, Any], headers: dict[str, str]
) -> None:
    """Spec: missing, different (values are case-sensitive) or invalid → -32020."""
    with pytest.raises(HeaderMismatch):
        check_standard_headers(method, params, V, headers)


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        (schema(a={"type": "number", "x-mcp-header": "A"}), "type"),
        (schema(a={"type": "string", "x-mcp-header": ""}), "token"),
        (schema(a={"type": "string", "x-mcp-header": "A B"}), "token"),
        (schema(a={"type": "string", "x-mcp-header": "A\r\n"}), "token"),
        (schema(a={"type": "string", "x-mcp-header": 7}), "token"),
        (
            schema(
                a={"type": "string", "x-mcp-header": "Dup"},
                b={"type": "string", "x-mcp-header": "dup"},
            ),
            "repeats",
        ),
        (
            schema(a={"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}),
            "reachable",
        ),
        ({"type": "object", "anyOf": [schema(a={"type": "string", "x-mcp-header": "A"})]}, "reach"),
        ({"type": "object", "$defs": {"d": {"type": "string", "x-mcp-header": "A"}}}, "reach"),
        ({"type": "object", "x-mcp-header": "Root"}, "reach"),
        (schema(a={"type": ["string", "null"], "x-mcp-header": "A"}), "type"),
    ],
)
def test_invalid_annotations_make_the_tool_dropped_with_a_reason(bad: Any, why: str) -> None:
    """Spec: token, unique case-insensitively, string/integer/boolean, properties only."""
    reason = invalid_reason(bad)
    assert reason is not None
    assert why in reason
    tools = [{"name": "ok", "inputSchema": REGION}, {"name": "bad", "inputSchema": bad}]
    assert tools_to_drop(tools) == [DroppedTool(name="bad", reason=reason)]


def test_nested_properties_chains_are_valid_and_extracted() -> None:
    """Spec: nested object properties are fine while every step is ``properties``."""
    nested = schema(
        outer={"type": "object", "properties": {"t": {"type": "string", "x-mcp-header": "T"}}}
    )
    assert invalid_reason(nested) is None
    assert [a.path for a in header_annotations(nested)] == [("outer", "t")]
    assert param_headers(nested, {"outer": {"t": "v"}}) == {"Mcp-Param-T": "v"}
    assert param_headers(nested, {"outer": "not an object"}) == {}


def test_param_headers_render_strings_integers_and_booleans_and_omit_null() -> None:
    """Spec: as-is, decimal, true/false; null or absent sends no header."""
    args = {"region": "eu", "count": -7, "dry": False, "query": "SELECT"}
    assert param_headers(REGION, args) == {
        "Mcp-Param-Region": "eu",
        "Mcp-Param-Count": "-7",
        "Mcp-Param-Dry": "false",
    }
    assert param_headers(REGION, {"region": None}) == {}


def test_param_headers_derived_from_arguments_always_check() -> None:
    """Spec: headers built by the client rules validate on the server."""
    args = {"region": " ünïcode ", "count": 2**60, "dry": True}
    check_param_headers(REGION, args, fold_headers(param_headers(REGION, args)))


@pytest.mark.parametrize(
    ("args", "headers"),
    [
        ({"region": "eu"}, {}),
        ({}, {"mcp-param-region": "eu"}),
        ({"region": "eu"}, {"mcp-param-region": "us"}),
        ({"region": "eu"}, {"mcp-param-region": "EU"}),
        ({"count": 42}, {"mcp-param-count": "42.5"}),
        ({"count": 42}, {"mcp-param-count": "4e1"}),
        ({"dry": True}, {"mcp-param-dry": "True"}),
        ({"region": "é"}, {"mcp-param-region": "é"}),
        ({"region": {"x": 1}}, {"mcp-param-region": "x"}),
    ],
)
def test_param_header_failures_are_minus_32020(
    args: dict[str, Any], headers: dict[str, str]
) -> None:
    """Spec: missing while present in body, present while absent, mismatch, bad chars."""
    with pytest.raises(HeaderMismatch):
        check_param_headers(REGION, args, headers)


def test_integers_compare_numerically_and_undeclared_headers_are_ignored() -> None:
    """Spec: ``42.0`` equals ``42``; unknown Mcp-Param-* are forwarded, not judged."""
    check_param_headers(REGION, {"count": 42}, {"mcp-param-count": "42.0"})
    check_param_headers(REGION, {"count": 42.0}, {"mcp-param-count": "42"})
    check_param_headers(REGION, {}, {"mcp-param-other": "anything"})


def test_a_tool_with_an_invalid_annotation_is_never_checked() -> None:
    """Gateway choice: such a tool was dropped; checking it would only fail differently."""
    bad = schema(a={"type": "number", "x-mcp-header": "A"})
    check_param_headers(bad, {"a": 1.5}, {})


scalars = st.text() | st.integers() | st.booleans() | st.none()


@given(st.fixed_dictionaries({}, optional={"region": scalars, "count": scalars, "dry": scalars}))
def test_headers_derived_from_any_arguments_check_against_them(args: dict[str, Any]) -> None:
    """Property: what the client rules emit, the server rules accept."""
    check_param_headers(REGION, args, fold_headers(param_headers(REGION, args)))


@given(st.text(min_size=1), st.text())
def test_a_header_for_a_different_string_never_checks(value: str, other: str) -> None:
    """Property: a string header matches its own argument and no other."""
    if value == other:
        return
    with pytest.raises(HeaderMismatch):
        check_param_headers(REGION, {"region": value}, {"mcp-param-region": encode_value(other)})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["properties", "items", "anyOf", "type", "x-mcp-header", "a", "$defs"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@given(json_values)
def test_any_schema_is_judged_without_crashing(input_schema: Any) -> None:
    """Property: validity is total over JSON; a valid schema's annotations derive headers."""
    if invalid_reason(input_schema) is None:
        param_headers(input_schema, {})
