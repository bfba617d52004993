"""Specification tests for ``gateway.catalog.search_tools`` (the search-mode tools)."""

from __future__ import annotations

import json

import jsonschema  # type: ignore[import-untyped]  # the SDK brings it; no stubs in the dev deps
import pytest

from gateway.catalog.naming import NamingRules
from gateway.catalog.search import SearchHit, index_snapshot
from gateway.catalog.search_tools import (
    CALL_TOOL_TOOL,
    SEARCH_TOOLS_OUTPUT_SCHEMA,
    SEARCH_TOOLS_TOOL,
    found_tool,
    search_mode_tools,
    search_tools_result,
)
from gateway.catalog.snapshot import BackendListing, build_snapshot


def test_search_mode_lists_two_gateway_tools_under_the_reserved_prefix() -> None:
    """Issue 15: ``gateway{sep}search_tools`` and ``gateway{sep}call_tool``."""
    tools = search_mode_tools("__")
    assert [t["name"] for t in tools] == ["gateway__search_tools", "gateway__call_tool"]
    assert [t["name"] for t in search_mode_tools("-")] == [
        "gateway-search_tools",
        "gateway-call_tool",
    ]
    tools[0]["inputSchema"]["properties"].clear()
    assert SEARCH_TOOLS_TOOL["name"] == "search_tools"
    assert SEARCH_TOOLS_TOOL["inputSchema"]["properties"]


@pytest.mark.parametrize("tool", [SEARCH_TOOLS_TOOL, CALL_TOOL_TOOL])
def test_gateway_tool_schemas_are_valid_json_schema(tool: dict[str, object]) -> None:
    """Spec (tools): inputSchema and outputSchema are JSON Schema objects."""
    for key in ("inputSchema", "outputSchema"):
        schema = tool.get(key)
        if schema is not None:
            jsonschema.Draft202012Validator.check_schema(schema)


def test_search_tools_takes_a_query_and_an_optional_limit_defaulting_to_eight() -> None:
    """Issue 15: arguments ``query``, optional ``limit`` (default 8)."""
    validator = jsonschema.Draft202012Validator(SEARCH_TOOLS_TOOL["inputSchema"])
    assert validator.is_valid({"query": "read a file"})
    assert validator.is_valid({"query": "x", "limit": 50})
    assert not validator.is_valid({"query": "x", "limit": 51})
    assert not validator.is_valid({"limit": 3})
    assert SEARCH_TOOLS_TOOL["inputSchema"]["properties"]["limit"]["default"] == 8
    call = jsonschema.Draft202012Validator(CALL_TOOL_TOOL["inputSchema"])
    assert call.is_valid({"name": "files__read_file", "arguments": {"path": "/x"}})
    assert not call.is_valid({"arguments": {}})


def test_the_result_carries_the_hits_as_structured_content_and_as_text() -> None:
    """Spec (tools, structured content): structuredContent matches the output schema."""
    listing = BackendListing(
        "files",
        "files",
        tools=(
            {
                "name": "read_file",
                "title": "Read File",
                "description": "Read a file.",
                "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
                "annotations": {"readOnlyHint": True},
            },
        ),
    )
    index = index_snapshot(build_snapshot([listing], NamingRules()))
    result = search_tools_result(index.search("read file"))
    jsonschema.validate(result["structuredContent"], SEARCH_TOOLS_OUTPUT_SCHEMA)
    assert result["structuredContent"] == {
        "tools": [
            {
                "name": "files__read_file",
                "title": "Read File",
                "description": "Read a file.",
                "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            }
        ]
    }
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert result["isError"] is False
    assert search_tools_result([])["structuredContent"] == {"tools": []}


def test_a_found_tool_without_a_schema_gets_an_empty_object_schema() -> None:
    """Gateway choice: the output schema's promise holds even for an odd backend item."""
    hit = SearchHit("b__odd", 1.0, {"name": "b__odd", "title": 3})
    assert found_tool(hit.item) == {"name": "b__odd", "inputSchema": {"type": "object"}}
