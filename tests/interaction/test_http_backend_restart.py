"""B11/D14: an HTTP backend that restarts forgets its sessions (404).

The official-SDK server runs over Streamable HTTP as a real process; it is
killed and started again on the same port while the gateway keeps running.
"""

from __future__ import annotations

import contextlib
import sys

import pytest
import trio
from mcp.shared.exceptions import McpError
from mcp.types import TextContent, TextResourceContents
from pydantic import AnyUrl

from gateway.backends.state import BackendState
from gateway.config import GatewayConfig
from tests.harness import gateway_config, open_client, start_gateway, wait_for_states
from tests.servers.paths import EVERYTHING_ENTRY, SERVERS_DIR
from tests.subprocess_servers import free_port, run_server


def _argv(port: int) -> list[str]:
    return [
        sys.executable,
        str(SERVERS_DIR / "http_alpha.py"),
        str(port),
        "streamable-http",
        "json",
    ]


def _http_config(name: str, port: int) -> GatewayConfig:
    """One shared-session HTTP backend on ``port``, without idle pings."""
    backend = {
        "name": name,
        "transport": "http",
        "url": f"http://127.0.0.1:{port}/mcp",
        "session": "shared",
        "health": {"ping_interval": 0},
    }
    return gateway_config([backend])


async def test_a_restarted_http_backend_is_reinitialized_and_idempotent_calls_succeed(
    nursery: trio.Nursery,
) -> None:
    """B11: the backend session is re-initialized transparently; list and read work again."""
    port = free_port()
    config = _http_config("remote", port)
    with run_server(_argv(port), port):
        running = await start_gateway(nursery, config)
        async with open_client(running.url) as client:
            first = await client.call_tool("remote__echo", {"text": "a"})
            assert [b.text for b in first.content if isinstance(b, TextContent)] == ["alpha: a"]
    backend = running.gateway.pool.backends["remote"]
    initializations = backend.initializations
    with run_server(_argv(port), port):
        async with open_client(running.url) as client:
            # The first request after the restart meets the 404; the gateway
            # re-initializes and repeats it once, because a read is safe to repeat.
            read = await client.read_resource(AnyUrl("remote+alpha://readme"))
            assert [c.text for c in read.contents if isinstance(c, TextResourceContents)] == [
                "Alpha readme"
            ]
            await wait_for_states(running.gateway, {"remote": BackendState.UP})
            again = await client.call_tool("remote__echo", {"text": "b"})
            assert [b.text for b in again.content if isinstance(b, TextContent)] == ["alpha: b"]
    assert backend.initializations > initializations


async def test_a_tool_call_that_meets_an_expired_session_is_not_repeated(
    nursery: trio.Nursery,
) -> None:
    """D14: tools/call is never retried after reaching the backend; the host gets an error."""
    port = free_port()
    config = _http_config("remote", port)
    with run_server(_argv(port), port):
        running = await start_gateway(nursery, config)
    with run_server(_argv(port), port):
        async with open_client(running.url) as client:
            with pytest.raises(McpError) as caught:
                await client.call_tool("remote__echo", {"text": "once"})
            assert caught.value.error.code == -32603
            assert "remote" in caught.value.error.message
            await wait_for_states(running.gateway, {"remote": BackendState.UP})
            result = await client.call_tool("remote__echo", {"text": "twice"})
            assert [b.text for b in result.content if isinstance(b, TextContent)] == [
                "alpha: twice"
            ]


@pytest.mark.node
async def test_a_restarted_reference_server_that_answers_400_is_reinitialized(
    nursery: trio.Nursery,
) -> None:
    """D14: the reference server answers a session it forgot with 400, not 404; the
    gateway treats that as a lost session too and serves again after a restart."""
    port = free_port()
    argv = ["node", str(EVERYTHING_ENTRY), "streamableHttp"]
    env = {"PORT": str(port)}
    config = _http_config("ref", port)
    with run_server(argv, port, env=env):
        running = await start_gateway(nursery, config)
        async with open_client(running.url) as client:
            first = await client.call_tool("ref__echo", {"message": "a"})
            assert [b.text for b in first.content if isinstance(b, TextContent)] == ["Echo: a"]
    backend = running.gateway.pool.backends["ref"]
    initializations = backend.initializations
    with run_server(argv, port, env=env):
        async with open_client(running.url) as client:
            # The first call after the restart may meet the 400 (tools/call is
            # never repeated); the one after it runs on a new session.
            with contextlib.suppress(McpError):
                await client.call_tool("ref__echo", {"message": "b"})
            with trio.fail_after(10):
                while True:
                    changed = running.gateway.pool.state_changed
                    fresh = backend.initializations > initializations
                    if fresh and backend.state is BackendState.UP:
                        break
                    await changed.wait()
            again = await client.call_tool("ref__echo", {"message": "c"})
            assert [b.text for b in again.content if isinstance(b, TextContent)] == ["Echo: c"]
