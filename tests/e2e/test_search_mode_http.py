"""Search mode on real peers, through the official client (issue 15, step 4)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import pytest
from mcp.shared.exceptions import McpError
from mcp.types import TextContent

from gateway.config import GatewayConfig, parse
from tests.e2e.test_profiles_http import FILESYSTEM
from tests.harness import everything_backend, open_client, sdk_backend, start_gateway, stdio_backend
from tests.servers.paths import everything_command

if TYPE_CHECKING:
    from pathlib import Path

    import trio
    from mcp import ClientSession

    from tests.harness import Running

pytestmark = [
    pytest.mark.node,
    pytest.mark.skipif(
        everything_command() is None or not FILESYSTEM.is_file(),
        reason="npm ci --prefix tests/node (make test installs it)",
    ),
]

SEARCH: Final = {
    "name": "find",
    "mode": "search",
    "backends": {"include": ["everything", "files", "alpha"]},
    "tools": {"exclude": ["alpha__fail"]},
    "pinned": ["alpha__echo"],
    "overrides": {
        "tools": {
            "alpha__add": {"name": "sum_numbers"},
            # alpha's own: "The process id of this server."
            "alpha__pid": {"description": "Which operating-system worker answers, as a number."},
        }
    },
}


def _config(sandbox: Path) -> GatewayConfig:
    document: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": 0},
        "backends": [
            everything_backend(),
            stdio_backend("files", ["node", str(FILESYSTEM), str(sandbox)]),
            sdk_backend("alpha"),
            sdk_backend("beta"),
        ],
        "profiles": [SEARCH, {"name": "full", "backends": {"include": ["alpha"]}}],
    }
    return parse(json.dumps(document), env={})


async def _start(nursery: trio.Nursery, tmp_path: Path) -> Running:
    (tmp_path / "notes.txt").write_text("hello from the sandbox")
    return await start_gateway(nursery, _config(tmp_path))


def _text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def _search(client: ClientSession, query: str, **more: Any) -> Any:
    return await client.call_tool("gateway__search_tools", {"query": query, **more})


async def test_search_mode_lists_the_two_gateway_tools_and_the_pinned_ones(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: tools/list shows gateway__search_tools, gateway__call_tool and pinned tools."""
    running = await _start(nursery, tmp_path)
    async with open_client(running.url + "/find") as client:
        listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    assert names == ["alpha__echo", "gateway__call_tool", "gateway__search_tools"]
    search = next(t for t in listed.tools if t.name == "gateway__search_tools")
    assert search.outputSchema is not None
    assert search.inputSchema["required"] == ["query"]
    assert search.inputSchema["properties"]["limit"]["default"] == 8
    async with open_client(running.url + "/full") as client:
        full = [t.name for t in (await client.list_tools()).tools]
    assert "gateway__search_tools" not in full and "alpha__add" in full


async def test_search_tools_finds_the_profiles_tools_with_their_schemas(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: best matches of the profile, as text and as structuredContent."""
    running = await _start(nursery, tmp_path)
    async with open_client(running.url + "/find") as client:
        await client.list_tools()  # the SDK validates structuredContent against outputSchema
        found = await _search(client, "read the contents of a text file", limit=3)
        multiply = await _search(client, "multiply two numbers")
        bad = await client.call_tool("gateway__search_tools", {"query": "x", "limit": 0})
    assert found.isError is False
    assert found.structuredContent is not None
    tools = found.structuredContent["tools"]
    assert 1 <= len(tools) <= 3
    assert tools[0]["name"] == "files__read_text_file"
    assert tools[0]["inputSchema"]["type"] == "object"
    assert "path" in tools[0]["inputSchema"]["properties"]
    assert json.loads(_text(found)) == found.structuredContent
    # beta (outside the profile) has the only multiply tool: never found.
    assert multiply.structuredContent is not None
    assert all(not t["name"].startswith("beta__") for t in multiply.structuredContent["tools"])
    assert bad.isError is True
    assert _text(bad) == "gateway__search_tools: 'limit' must be between 1 and 50"


async def test_call_tool_routes_like_tools_call_with_progress(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: call_tool routes exactly like tools/call (here: progress and results)."""
    running = await _start(nursery, tmp_path)
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with open_client(running.url + "/find") as client:
        result = await client.call_tool(
            "gateway__call_tool",
            {"name": "alpha__progress", "arguments": {"steps": 3}},
            progress_callback=on_progress,
        )
        read = await client.call_tool(
            "gateway__call_tool",
            {"name": "files__read_text_file", "arguments": {"path": str(tmp_path / "notes.txt")}},
        )
        direct = await client.call_tool("alpha__echo", {"text": "x"})
    assert result.isError is False
    assert len(seen) == 3 and seen == sorted(seen)
    assert "hello from the sandbox" in _text(read)
    assert direct.isError is False and _text(direct) == "alpha: x"


async def test_call_tool_answers_unknown_and_outside_names_alike_as_tool_errors(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Gateway choice (docs/profiles.md): isError, same text for unknown and out-of-profile."""
    running = await _start(nursery, tmp_path)
    async with open_client(running.url + "/find") as client:
        outside = await client.call_tool("gateway__call_tool", {"name": "beta__echo"})
        excluded = await client.call_tool("gateway__call_tool", {"name": "alpha__fail"})
        unknown = await client.call_tool("gateway__call_tool", {"name": "zeta__echo"})
        with pytest.raises(McpError) as info:
            await client.call_tool("beta__echo", {"text": "x"})
    hint = ". Use gateway__search_tools to find the tools this endpoint offers."
    assert (outside.isError, _text(outside)) == (True, "Unknown tool: beta__echo" + hint)
    assert (excluded.isError, _text(excluded)) == (True, "Unknown tool: alpha__fail" + hint)
    assert (unknown.isError, _text(unknown)) == (True, "Unknown tool: zeta__echo" + hint)
    assert (info.value.error.code, info.value.error.message) == (
        -32602,
        "Unknown tool: beta__echo",
    )


async def test_the_gateway_tools_do_not_exist_outside_search_mode(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: only a search-mode profile has them; elsewhere they are unknown tools."""
    running = await _start(nursery, tmp_path)
    async with open_client(running.url + "/full") as client:
        with pytest.raises(McpError) as info:
            await _search(client, "echo")
    assert info.value.error.code == -32602
    assert info.value.error.message == "Unknown tool: gateway__search_tools"


async def test_search_finds_an_overridden_tool_under_its_new_name(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: overrides hold in search mode: found and called by the profile's name."""
    running = await _start(nursery, tmp_path)
    async with open_client(running.url + "/find") as client:
        found = await _search(client, "add two integers", limit=5)
        called = await client.call_tool(
            "gateway__call_tool", {"name": "sum_numbers", "arguments": {"a": 2, "b": 40}}
        )
        old = await client.call_tool("gateway__call_tool", {"name": "alpha__add"})
    assert found.structuredContent is not None
    names = [t["name"] for t in found.structuredContent["tools"]]
    assert "sum_numbers" in names and "alpha__add" not in names
    assert (called.isError, _text(called)) == (False, "42")
    assert old.isError is True


async def test_search_ranks_an_override_by_the_text_the_profile_shows(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15 follow-up: found by the override's words, not by the replaced description."""
    running = await _start(nursery, tmp_path)
    search = running.gateway.router.search
    # Indexed when the snapshot swapped, before any search (no search pays a build).
    assert search.indexed is running.gateway.pool.snapshot
    assert "alpha__pid" in search.index().overrides("find")
    async with open_client(running.url + "/find") as client:
        await client.list_tools()
        found = await _search(client, "which operating-system worker answers", limit=3)
        replaced = await _search(client, "process id of this server", limit=50)
    assert found.structuredContent is not None
    tools = found.structuredContent["tools"]
    assert tools[0]["name"] == "alpha__pid"
    assert tools[0]["description"] == "Which operating-system worker answers, as a number."
    assert replaced.structuredContent is not None
    assert "alpha__pid" not in [t["name"] for t in replaced.structuredContent["tools"]]
