"""Issue 6: old hosts on the legacy HTTP+SSE transport (/sse + /messages)."""

from __future__ import annotations

import sys

import pytest
import trio
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.types import TextContent

from tests.harness import gateway_config, sdk_backend, start_gateway, stdio_backend

pytestmark = pytest.mark.usefixtures("engine")


async def test_an_old_host_on_http_sse_lists_and_calls_through_the_gateway(
    nursery: trio.Nursery,
) -> None:
    """Spec (issue 6): the official client's SSE transport works against /sse."""
    config = gateway_config(
        [
            sdk_backend("alpha"),
            stdio_backend("toolbox", [sys.executable, "-m", "mcp_gateway_demo.toolbox"]),
        ]
    )
    running = await start_gateway(nursery, config)
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with (
        sse_client(running.base_url + "/sse") as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert {"alpha__echo", "toolbox__add"} <= names
        result = await session.call_tool("alpha__echo", {"text": "old"})
        assert [b.text for b in result.content if isinstance(b, TextContent)] == ["alpha: old"]
        await session.call_tool("alpha__progress", {"steps": 2}, progress_callback=on_progress)
        assert progress == [1.0, 2.0]
    # The session ends in the server's own task once it sees the disconnect;
    # there is no event to wait on from here, so poll (bounded).
    with trio.fail_after(5):
        while len(running.gateway.clients):  # noqa: ASYNC110
            await trio.sleep(0.01)
