"""The official SDK 2.x host (2026-07-28) on profile endpoints (issue 15, step 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import trio

from gateway.config import GatewayConfig, parse
from tests.harness import NEEDS_SDK2, run_sdk2_host, sdk_backend, start_gateway

ROOT: Final = Path(__file__).resolve().parents[2]
SCRIPT: Final = ROOT / "tests" / "sdk2" / "profile_host.py"
RUN_LIMIT: Final = 60.0

pytestmark = NEEDS_SDK2


def _config() -> GatewayConfig:
    document: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": 0},
        "backends": [sdk_backend("alpha"), sdk_backend("beta")],
        "profiles": [
            {"name": "alpha-only", "backends": {"include": ["alpha"]}},
            {"name": "find", "mode": "search", "pinned": ["beta__echo"]},
        ],
    }
    return parse(json.dumps(document), env={})


async def _host(url: str, tool: str, arguments: dict[str, Any], refused: str) -> dict[str, Any]:
    seen = await run_sdk2_host(SCRIPT, url, tool, json.dumps(arguments), refused, limit=RUN_LIMIT)
    assert seen["protocol_version"] == "2026-07-28"
    assert seen["discovered"] is True
    return seen


async def test_a_modern_host_on_a_profile_sees_and_calls_only_the_profile(
    nursery: trio.Nursery,
) -> None:
    """Issue 15: every method of both eras restricted on a profile endpoint (2026-07-28 here)."""
    running = await start_gateway(nursery, _config())
    seen = await _host(running.url + "/alpha-only", "alpha__add", {"a": 2, "b": 3}, "beta__echo")
    assert seen["tools"] and all(name.startswith("alpha__") for name in seen["tools"])
    assert (seen["text"], seen["is_error"]) == ("5", False)
    assert seen["refused"] == {"code": -32602, "message": "Unknown tool: beta__echo"}


async def test_a_modern_host_searches_and_calls_through_the_gateway_tools(
    nursery: trio.Nursery,
) -> None:
    """Issue 15: search mode on 2026-07-28: the listed tools, search_tools' structuredContent."""
    running = await start_gateway(nursery, _config())
    seen = await _host(
        running.url + "/find",
        "gateway__search_tools",
        {"query": "multiply two numbers", "limit": 2},
        "nope__x",
    )
    assert seen["tools"] == ["beta__echo", "gateway__call_tool", "gateway__search_tools"]
    assert seen["is_error"] is False
    assert seen["structured"]["tools"][0]["name"] == "beta__multiply"
    assert seen["refused"] == {"code": -32602, "message": "Unknown tool: nope__x"}
