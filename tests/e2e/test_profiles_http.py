"""Profiles on real peers, through the official client (issue 15, steps 3 and 6).

Behind one gateway: the reference server, the official filesystem server and
the SDK test servers alpha and beta, split into two profiles. The official
``mcp`` 1.x client talks to each profile's endpoint as a host would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import httpx
import pytest
import trio
from mcp.shared.exceptions import McpError

from gateway.config import GatewayConfig, parse
from tests.frontend.test_modern_http import modern, modern_headers
from tests.harness import (
    MCP_POST_HEADERS,
    everything_backend,
    initialize_message,
    open_client,
    sdk_backend,
    start_gateway,
    stdio_backend,
)
from tests.servers.paths import everything_command

if TYPE_CHECKING:
    from tests.harness import Running

FILESYSTEM: Final = (
    Path(__file__).resolve().parents[1]
    / "node"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-filesystem"
    / "dist"
    / "index.js"
)

pytestmark = [
    pytest.mark.node,
    pytest.mark.skipif(
        everything_command() is None or not FILESYSTEM.is_file(),
        reason="npm ci --prefix tests/node (make test installs it)",
    ),
]

PROFILES: Final = [
    {
        "name": "coding",
        "backends": {"include": ["files", "alpha"]},
        "tools": {"exclude": ["alpha__fail", "files__write_*"]},
        "resources": {"exclude": ["alpha+alpha://items/secret*"]},
    },
    {"name": "demo", "backends": {"include": ["everything", "beta"]}},
    {
        "name": "renamed",
        "backends": {"include": ["alpha"]},
        "overrides": {
            "tools": {"alpha__echo": {"name": "say", "description": "Say the text back."}},
            "prompts": {"alpha__greet": {"name": "hello"}},
        },
    },
]


def _config(sandbox: Path, page_size: int = 0) -> GatewayConfig:
    document: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": 0},
        "pagination": {"page_size": page_size},
        "backends": [
            everything_backend(),
            stdio_backend("files", ["node", str(FILESYSTEM), str(sandbox)]),
            sdk_backend("alpha", resources={"exclude": ["alpha://items/hidden*"]}),
            sdk_backend("beta"),
        ],
        "profiles": PROFILES,
    }
    return parse(json.dumps(document), env={})


async def _tools(url: str) -> list[str]:
    async with open_client(url) as client:
        names: list[str] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            names += [t.name for t in page.tools]
            cursor = page.nextCursor
            if cursor is None:
                return names


async def _start(nursery: trio.Nursery, tmp_path: Path, page_size: int = 0) -> Running:
    (tmp_path / "notes.txt").write_text("hello")
    return await start_gateway(nursery, _config(tmp_path, page_size))


async def test_each_profile_endpoint_lists_exactly_its_items(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: a host pointed at /mcp/{profile} sees only that profile."""
    running = await _start(nursery, tmp_path)
    everything = await _tools(running.url)
    coding = await _tools(running.url + "/coding")
    demo = await _tools(running.url + "/demo")
    assert coding == sorted(
        n
        for n in everything
        if n.startswith(("files__", "alpha__"))
        and n != "alpha__fail"
        and not n.startswith("files__write_")
    )
    assert "files__read_text_file" in coding and "alpha__echo" in coding
    assert demo == sorted(n for n in everything if n.startswith(("everything__", "beta__")))
    assert "everything__echo" in demo
    assert set(coding) | set(demo) < set(everything)


async def test_a_paginated_walk_on_a_profile_returns_its_items_once_each(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: lists and cursors per profile, with a small page size."""
    running = await _start(nursery, tmp_path, page_size=3)
    walked = await _tools(running.url + "/coding")
    assert len(walked) == len(set(walked)) > 3
    assert all(n.startswith(("files__", "alpha__")) for n in walked)


async def test_calls_outside_the_profile_fail_exactly_like_unknown_names(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: out-of-profile call/get/read is -32602 (or not found) as if unknown, no hint."""
    running = await _start(nursery, tmp_path)

    async def error(coro: Any) -> tuple[int, str]:
        with pytest.raises(McpError) as info:
            await coro
        return info.value.error.code, info.value.error.message

    async with open_client(running.url + "/coding") as client:
        echoed = await client.call_tool("alpha__echo", {"text": "hi"})
        assert echoed.isError is False
        outside = await error(client.call_tool("beta__echo", {"text": "hi"}))
        unknown = await error(client.call_tool("zeta__echo", {"text": "hi"}))
        assert outside == (-32602, "Unknown tool: beta__echo")
        assert unknown == (-32602, "Unknown tool: zeta__echo")
        excluded = await error(client.call_tool("alpha__fail", {}))
        assert excluded == (-32602, "Unknown tool: alpha__fail")
        prompt = await error(client.get_prompt("beta__haiku", {"topic": "x"}))
        assert prompt == (-32602, "Unknown prompt: beta__haiku")
        got = await client.get_prompt("alpha__greet", {"name": "Ada"})
        assert got.messages
        read = await client.read_resource("alpha+alpha://items/1")  # type: ignore[arg-type]
        assert read.contents
        secret = await error(client.read_resource("alpha+alpha://items/secret-1"))  # type: ignore[arg-type]
        # Truly unknown: a URI no backend's prefix claims (under a live
        # prefix a URI goes to its backend, which has the last word).
        nowhere = await error(client.read_resource("zeta+zeta://x"))  # type: ignore[arg-type]
        beta = await error(client.read_resource("beta+beta://config"))  # type: ignore[arg-type]
        assert secret[0] == nowhere[0] == beta[0] == -32002
        assert secret[1] == "Resource not found: alpha+alpha://items/secret-1"
        assert beta[1] == "Resource not found: beta+beta://config"


async def test_a_backends_own_resource_exclude_holds_for_uris_routed_by_prefix(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15 (the known hole): an excluded template instance is not found, not read."""
    running = await _start(nursery, tmp_path)
    async with open_client(running.url) as client:
        assert (await client.read_resource("alpha+alpha://items/7")).contents  # type: ignore[arg-type]
        with pytest.raises(McpError) as info:
            await client.read_resource("alpha+alpha://items/hidden-7")  # type: ignore[arg-type]
    assert info.value.error.code == -32002
    assert info.value.error.message == "Resource not found: alpha+alpha://items/hidden-7"


async def test_progress_reaches_a_host_on_a_profile_endpoint(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: every protocol feature intact on a profile endpoint (progress)."""
    running = await _start(nursery, tmp_path)
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    async with open_client(running.url + "/coding") as client:
        result = await client.call_tool(
            "alpha__progress", {"steps": 3}, progress_callback=on_progress
        )
    assert result.isError is False
    assert seen == sorted(seen) and len(seen) == 3


async def test_a_cursor_or_session_from_one_profile_is_refused_on_another(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: a cursor from one profile is -32602 on another; sessions stay on their path."""
    running = await _start(nursery, tmp_path, page_size=2)
    async with open_client(running.url + "/coding") as client:
        page = await client.list_tools()
        assert page.nextCursor is not None
        cursor = page.nextCursor
    async with open_client(running.url + "/demo") as client:
        with pytest.raises(McpError) as info:
            await client.list_tools(cursor=cursor)
    assert info.value.error.code == -32602
    assert "coding" not in info.value.error.message
    async with open_client(running.url) as client:
        with pytest.raises(McpError) as info:
            await client.list_tools(cursor=cursor)
    assert info.value.error.code == -32602

    headers = MCP_POST_HEADERS
    init = initialize_message(version=None, revision="2025-06-18")
    async with httpx.AsyncClient() as http:
        opened = await http.post(running.url + "/coding", json=init, headers=headers)
        session = opened.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        on_demo = await http.post(
            running.url + "/demo", json=ping, headers={**headers, "mcp-session-id": session}
        )
        assert on_demo.status_code == 404
        on_coding = await http.post(
            running.url + "/coding", json=ping, headers={**headers, "mcp-session-id": session}
        )
        assert on_coding.status_code == 200
        session_headers = {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        get_elsewhere = await http.get(
            running.url + "/demo", headers={**session_headers, "accept": "text/event-stream"}
        )
        assert get_elsewhere.status_code == 404
        assert (await http.delete(running.url, headers=session_headers)).status_code == 404
        assert (
            await http.delete(running.url + "/coding", headers=session_headers)
        ).status_code == 200
        gone = await http.post(
            running.url + "/coding", json=ping, headers={**headers, "mcp-session-id": session}
        )
        assert gone.status_code == 404


async def test_an_unknown_profile_path_is_404_with_a_json_rpc_error(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: unknown profile path → 404 with a JSON-RPC error body."""
    running = await _start(nursery, tmp_path)
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            running.url + "/nope",
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={
                "accept": "application/json, text/event-stream",
                "content-type": "application/json",
            },
        )
    assert answer.status_code == 404
    body = answer.json()
    assert body["jsonrpc"] == "2.0"
    assert body["error"]["code"] == -32600
    assert body["error"]["message"] == "no such profile: nope"


async def test_initialize_and_metrics_speak_per_profile(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: instructions per profile; budget gauges per profile in /metrics."""
    running = await _start(nursery, tmp_path)
    async with open_client(running.url + "/coding") as client:
        listed = await client.list_tools()
    async with httpx.AsyncClient() as http:
        metrics = (await http.get(running.base_url + "/metrics")).text
    gauge = f'mcp_gateway_profile_items{{kind="tools",profile="coding"}} {len(listed.tools)}.0'
    assert gauge in metrics
    assert 'mcp_gateway_profile_tools_list_bytes{profile="demo"}' in metrics
    assert 'mcp_gateway_profile_tools_list_tokens{profile="default"}' in metrics


async def test_an_overridden_item_is_listed_and_called_by_its_new_name_only(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: overrides rename and redescribe; the item still routes to its backend."""
    running = await _start(nursery, tmp_path)
    async with open_client(running.url + "/renamed") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "alpha__echo" not in tools
        assert tools["say"].description == "Say the text back."
        said = await client.call_tool("say", {"text": "hi"})
        assert (said.isError, said.content[0].text) == (False, "alpha: hi")  # type: ignore[union-attr]
        with pytest.raises(McpError) as info:
            await client.call_tool("alpha__echo", {"text": "hi"})
        assert info.value.error.message == "Unknown tool: alpha__echo"
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        assert prompts == ["hello"]
        assert (await client.get_prompt("hello", {"name": "Ada"})).messages
    async with open_client(running.url) as client:
        assert "alpha__echo" in [t.name for t in (await client.list_tools()).tools]


async def test_initialize_and_discover_speak_only_of_the_profiles_backends(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """Issue 15: discover per profile; instructions of backends outside it never shown."""
    running = await _start(nursery, tmp_path)
    headers = MCP_POST_HEADERS
    init = initialize_message(version=None, revision="2025-11-25")
    discover = modern(2, "server/discover")
    async with httpx.AsyncClient(trust_env=False) as http:
        coding = (await http.post(running.url + "/coding", json=init, headers=headers)).json()
        main = (await http.post(running.url, json=init, headers=headers)).json()
        demo = await http.post(
            running.url + "/demo", json=discover, headers=modern_headers(discover)
        )
    coding_text = coding["result"]["instructions"]
    assert "Alpha does arithmetic" in coding_text and "Beta multiplies" not in coding_text
    assert "Beta multiplies" in main["result"]["instructions"]
    assert demo.status_code == 200
    demo_text = demo.json()["result"]["instructions"]
    assert "Beta multiplies" in demo_text and "Alpha does arithmetic" not in demo_text
