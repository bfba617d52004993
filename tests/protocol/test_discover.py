"""Specification tests for ``gateway.protocol.stateless.discover`` (sans-IO).

2026-07-28 ``server/discover.mdx`` and schema.ts ``DiscoverResult``: the
gateway answers from its merged view of the backends.
"""

from __future__ import annotations

import pytest

from gateway.protocol.stateless.cache_hints import CacheHint
from gateway.protocol.stateless.discover import (
    discover_result,
    merge_capabilities,
    merge_instructions,
)
from gateway.protocol.stateless.envelope import SERVER_INFO_KEY

TASKS = "io.modelcontextprotocol/tasks"


def test_capabilities_are_the_union_of_the_backends() -> None:
    """Gateway rule: a flag is true if any backend's is; presence-only caps survive."""
    merged = merge_capabilities(
        [
            {"tools": {"listChanged": False}, "logging": {}},
            {"tools": {"listChanged": True}, "resources": {"subscribe": True}},
            {"prompts": {}, "completions": {}, "resources": {"listChanged": "yes"}},
        ]
    )
    assert merged == {
        "tools": {"listChanged": True},
        "logging": {},
        "resources": {"subscribe": True},
        "prompts": {},
        "completions": {},
    }


def test_extensions_and_experimental_only_when_the_gateway_can_bridge_them() -> None:
    """Gateway choice: an extension the gateway cannot route is not offered."""
    caps = {
        "extensions": {TASKS: {"x": 1}, "com.example/ui": {}},
        "experimental": {"fast": {}, "slow": {}},
    }
    assert merge_capabilities([caps]) == {}
    assert merge_capabilities([caps], allow_extensions=[TASKS], allow_experimental=["fast"]) == {
        "extensions": {TASKS: {"x": 1}},
        "experimental": {"fast": {}},
    }


def test_instructions_are_joined_and_labelled_per_backend() -> None:
    """Gateway choice: one backend's text as is; several under ``## name`` headings."""
    assert merge_instructions([]) is None
    assert merge_instructions([("a", None), ("b", "  ")]) is None
    assert merge_instructions([("a", " Use me. ")]) == "Use me."
    assert merge_instructions([("a", "A."), ("b", None), ("c", "C.")]) == "## a\n\nA.\n\n## c\n\nC."


def test_the_discover_result_has_every_required_field() -> None:
    """Spec: resultType, supportedVersions, capabilities, ttlMs, cacheScope; serverInfo."""
    result = discover_result(
        supported_versions=["2026-07-28", "2025-11-25"],
        capabilities={"tools": {}},
        server_info={"name": "mcp-gateway", "version": "0.1.0"},
        hint=CacheHint(ttl_ms=0, scope="private"),
        instructions="Hi.",
    )
    assert result == {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28", "2025-11-25"],
        "capabilities": {"tools": {}},
        "ttlMs": 0,
        "cacheScope": "private",
        "_meta": {SERVER_INFO_KEY: {"name": "mcp-gateway", "version": "0.1.0"}},
        "instructions": "Hi.",
    }
    bare = discover_result(
        supported_versions=["2026-07-28"], capabilities={}, server_info={}, hint=CacheHint()
    )
    assert "instructions" not in bare


def test_an_empty_version_list_is_refused() -> None:
    """Gateway choice: a discover answer naming no version is a bug, not an answer."""
    with pytest.raises(ValueError, match="version"):
        discover_result(supported_versions=[], capabilities={}, server_info={}, hint=CacheHint())
