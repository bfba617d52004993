"""The backend leg in the 2026-07-28 era: an SDK 2.x server behind the gateway.

``tests/servers/modern_sdk2.py`` runs on the official Python SDK 2.x (in
``.venv-sdk2``) and serves both eras; its ``whoami`` tool reports the
``_meta`` and headers each request brought, so these tests see what the
gateway sent. Hosts: the official SDK 1.x client (legacy) and raw ``httpx``
with the modern envelope. Rules: ``docs/eras.md``, "The backend leg".
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
import trio
from mcp.shared.exceptions import McpError
from prometheus_client import CollectorRegistry

from gateway.backends.state import BackendState
from gateway.runtime.app import serve
from tests.frontend.test_modern_http import MODERN, modern, send, sse_messages
from tests.frontend.test_streamable_http import http_client
from tests.harness import (
    NEEDS_SDK2,
    SDK2_PYTHON,
    gateway_config,
    open_client,
    sdk_backend,
    start_gateway,
    stdio_backend,
)
from tests.subprocess_servers import free_port, run_http_alpha, run_server

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.harness import Running
    from tests.subprocess_servers import RunningServer

ROOT: Final = Path(__file__).resolve().parents[2]
SERVER: Final = ROOT / "tests" / "servers" / "modern_sdk2.py"
META: Final = "io.modelcontextprotocol/"

pytestmark = NEEDS_SDK2


def sdk2_stdio(name: str, **extra: Any) -> dict[str, Any]:
    """The SDK 2.x backend over stdio."""
    return stdio_backend(name, [str(SDK2_PYTHON), str(SERVER)], **extra)


@pytest.fixture(scope="module")
def sdk2_http() -> Iterator[RunningServer]:
    """The SDK 2.x backend over Streamable HTTP, shared by the module's tests."""
    port = free_port()
    with run_server([str(SDK2_PYTHON), str(SERVER), "http", str(port)], port) as server:
        yield server


def text_of(result: dict[str, Any]) -> str:
    """The first text content of a CallToolResult body."""
    first = result["content"][0]
    assert first["type"] == "text"
    text: str = first["text"]
    return text


def assert_progress_then_done(messages: list[dict[str, Any]]) -> None:
    """Progress 1, 2 and 3 under the host's token ``host-7``, then the "done" result."""
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [(p["progressToken"], p["progress"]) for p in progress] == [
        ("host-7", 1),
        ("host-7", 2),
        ("host-7", 3),
    ]
    assert text_of(messages[-1]["result"]) == "done"


async def modern_call(
    running: Running, msg_id: int, method: str, params: dict[str, Any], **meta: Any
) -> dict[str, Any]:
    """One modern request through the gateway; the JSON-RPC response."""
    async with http_client(running) as client:
        response = await send(client, modern(msg_id, method, params, **meta))
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        messages = sse_messages(response)
        return messages[-1]
    body: dict[str, Any] = response.json()
    return body


async def test_auto_picks_modern_for_an_sdk2_server_and_legacy_for_an_sdk1_server(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 5: the probe; ``protocol: legacy`` forces initialize on a dual-era server."""
    config = gateway_config(
        [sdk2_stdio("m"), sdk2_stdio("ml", protocol="legacy"), sdk_backend("alpha")]
    )
    running = await start_gateway(nursery, config)
    backends = running.gateway.pool.backends
    infos = {name: backends[name].info for name in ("m", "ml", "alpha")}
    assert all(info is not None for info in infos.values())
    assert infos["m"] is not None and infos["m"].modern
    assert infos["m"].protocol_version == MODERN
    assert infos["m"].supported_versions == (MODERN,)
    assert infos["m"].name == "sdk2-modern"
    assert infos["m"].instructions == "An SDK 2.x backend for the backend-leg tests."
    assert infos["ml"] is not None and not infos["ml"].modern
    assert infos["ml"].protocol_version == "2025-11-25"
    assert infos["alpha"] is not None and not infos["alpha"].modern
    assert backends["m"].initializations == 0  # no initialize on a modern session
    assert backends["ml"].initializations == 1
    async with open_client(running.url) as session:
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert {"m__add", "m__whoami", "ml__add", "alpha__add"} <= tools
        added = await session.call_tool("m__add", {"a": 20, "b": 22})
        assert added.content[0].text == "42"  # type: ignore[union-attr] # a TextContent
        # What the legacy host gets has nothing of 2026-07-28 left in it.
        assert not set(added.model_extra or {}) & {"resultType", "ttlMs", "cacheScope"}
        seen = json.loads(
            (await session.call_tool("ml__whoami", {})).content[0].text  # type: ignore[union-attr]
        )
        assert seen["protocol_version"] == "2025-11-25"


async def test_a_legacy_host_call_carries_the_envelope_built_from_its_session(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 5: the host's initialize capabilities (bridgeable ones), its log
    level, the gateway's clientInfo; a legacy host gets no -32022 either."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))

    async def on_elicit(context: Any, params: Any) -> Any:  # never asked here
        raise AssertionError("not asked")

    async with open_client(running.url, elicitation_callback=on_elicit) as session:
        await session.set_logging_level("warning")
        result = await session.call_tool("m__whoami", {})
    seen = json.loads(result.content[0].text)  # type: ignore[union-attr] # a TextContent
    meta = seen["meta"]
    assert seen["protocol_version"] == MODERN
    assert meta[META + "protocolVersion"] == MODERN
    assert meta[META + "clientInfo"]["name"] == "mcp-gateway"
    assert set(meta[META + "clientCapabilities"]) == {"elicitation"}
    assert meta[META + "logLevel"] == "warning"


async def test_a_modern_host_call_carries_its_own_capabilities_trace_and_level(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 5: the request's capabilities cut to what the gateway bridges;
    trace context passed through; the gateway's clientInfo, not the host's."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))
    answer = await modern_call(
        running,
        1,
        "tools/call",
        {"name": "m__whoami", "arguments": {}},
        **{
            META + "clientCapabilities": {"sampling": {}, "experimental": {"x": {}}},
            META + "logLevel": "error",
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        },
    )
    result = answer["result"]
    assert result["resultType"] == "complete"
    seen = json.loads(text_of(result))
    meta = seen["meta"]
    assert meta[META + "clientCapabilities"] == {"sampling": {}}
    assert meta[META + "clientInfo"]["name"] == "mcp-gateway"
    assert meta[META + "logLevel"] == "error"
    assert meta["traceparent"] == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def test_prompts_resources_and_progress_through_a_modern_stdio_backend(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 5: prompts/get, resources/read, progress under the host's token."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))
    progress: list[float] = []
    async with open_client(running.url) as session:
        prompt = await session.get_prompt("m__greet", {"name": "Ada"})
        assert prompt.messages[0].content.text == "Hello, Ada!"  # type: ignore[union-attr]
        resources = (await session.list_resources()).resources
        uri = next(str(r.uri) for r in resources if str(r.uri).endswith("note"))
        read = await session.read_resource(uri)  # type: ignore[arg-type]
        assert read.contents[0].text == "a note from sdk2"  # type: ignore[union-attr]

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)

        done = await session.call_tool("m__slow", {"steps": 3}, progress_callback=on_progress)
    assert done.content[0].text == "done"  # type: ignore[union-attr]
    assert progress == [1, 2, 3]


async def test_a_modern_http_backend_gets_its_headers_and_no_session(
    nursery: trio.Nursery, sdk2_http: RunningServer
) -> None:
    """Issue 14 step 5: over HTTP each request is a sessionless POST with
    MCP-Protocol-Version, Mcp-Method, Mcp-Name and Mcp-Param-* from the
    backend's own schema."""
    backend = {"name": "h", "transport": "http", "url": sdk2_http.url("/mcp")}
    running = await start_gateway(nursery, gateway_config([backend]))
    info = running.gateway.pool.backends["h"].info
    assert info is not None and info.modern
    async with open_client(running.url) as session:
        looked = await session.call_tool("h__lookup", {"region": "eu-west"})
        seen = json.loads(
            (await session.call_tool("h__whoami", {})).content[0].text  # type: ignore[union-attr]
        )
    assert json.loads(looked.content[0].text) == {  # type: ignore[union-attr]
        "region": "eu-west",
        "header": "eu-west",
    }
    headers = seen["headers"]
    assert headers["mcp-protocol-version"] == MODERN
    assert headers["mcp-method"] == "tools/call"
    assert headers["mcp-name"] == "whoami"
    assert "mcp-session-id" not in headers
    answer = await modern_call(
        running, 2, "tools/call", {"name": "h__add", "arguments": {"a": 1, "b": 2}}
    )
    assert text_of(answer["result"]) == "3"


async def test_protocol_modern_fails_the_attempt_clearly_against_a_handshake_only_server(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 5: ``modern`` never falls back; the reason names the refusal."""
    config = gateway_config([sdk_backend("alpha", protocol="modern")])
    gateway, _ = await nursery.start(partial(serve, config, registry=CollectorRegistry()))
    backend = gateway.pool.backends["alpha"]
    with trio.fail_after(30):
        await backend.settled.wait()
    assert backend.state is BackendState.INCOMPATIBLE
    assert backend.reason.startswith("protocol: modern, but server/discover answered -32602")


async def _wait_for_text(path: Path, text: str) -> None:
    """Poll the backend's marker file until it says ``text`` (bounded: real I/O)."""
    marker = trio.Path(path)
    with trio.fail_after(20):
        # The peer is another process; its file is the handshake (STYLE rule 9).
        while not (await marker.exists() and await marker.read_text() == text):  # noqa: ASYNC110
            await trio.sleep(0.05)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_closing_the_hosts_stream_cancels_the_call_at_a_modern_backend(
    nursery: trio.Nursery, sdk2_http: RunningServer, tmp_path: Path, transport: str
) -> None:
    """Issue 14 step 5: the host's stream closing reaches the backend: on stdio as
    notifications/cancelled, on HTTP by closing the backend's response stream."""
    if transport == "stdio":
        backend = sdk2_stdio("m")
    else:
        backend = {"name": "m", "transport": "http", "url": sdk2_http.url("/mcp")}
    running = await start_gateway(nursery, gateway_config([backend]))
    marker = tmp_path / "marker"
    message = modern(
        1, "tools/call", {"name": "m__wait_forever", "arguments": {"marker": str(marker)}}
    )
    async with http_client(running) as client, trio.open_nursery() as calls:
        calls.start_soon(send, client, message)
        await _wait_for_text(marker, "started")
        calls.cancel_scope.cancel()  # the host closes the response stream
    await _wait_for_text(marker, "cancelled")


async def test_log_messages_of_a_modern_backend_follow_the_requests_log_level(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 5: the host's logLevel reaches the backend in _meta; the backend
    sends only what is at or above it, and the gateway relays it on the stream."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))
    call = modern(
        1, "tools/call", {"name": "m__chatty", "arguments": {}}, **{META + "logLevel": "warning"}
    )
    async with http_client(running) as client:
        response = await send(client, call)
    assert response.status_code == 200, response.text
    messages = sse_messages(response)
    logs = [m["params"] for m in messages if m.get("method") == "notifications/message"]
    assert [(entry["level"], entry["data"]) for entry in logs] == [("warning", "warning line")]
    assert text_of(messages[-1]["result"]) == "logged"
    # Without logLevel: no log messages at all (S/server/utilities/logging.mdx).
    async with http_client(running) as client:
        quiet = await send(client, modern(2, "tools/call", {"name": "m__chatty", "arguments": {}}))
    if quiet.headers["content-type"].startswith("text/event-stream"):
        bodies = sse_messages(quiet)
    else:
        bodies = [quiet.json()]
    assert [m for m in bodies if m.get("method") == "notifications/message"] == []
    assert text_of(bodies[-1]["result"]) == "logged"


async def test_a_backend_that_speaks_only_2026_07_28_works_for_both_kinds_of_host(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 5: every request carries the envelope (the list walk over two
    pages included, or this strict server would refuse it); no initialize is sent."""
    backend = sdk_backend("modern_only", "strict")
    running = await start_gateway(nursery, gateway_config([backend]))
    info = running.gateway.pool.backends["strict"].info
    assert info is not None and info.modern and info.name == "modern-only"
    async with open_client(running.url) as session:
        names = sorted(tool.name for tool in (await session.list_tools()).tools)
        assert names == ["strict__add", "strict__meta", "strict__refuse"]  # both pages
        added = await session.call_tool("strict__add", {"a": 2, "b": 3})
        assert added.content[0].text == "5"  # type: ignore[union-attr] # a TextContent
    answer = await modern_call(running, 1, "tools/call", {"name": "strict__meta", "arguments": {}})
    meta = json.loads(text_of(answer["result"]))
    assert meta[META + "protocolVersion"] == MODERN
    assert meta[META + "clientCapabilities"] == {}


@pytest.mark.parametrize("mode", ["sse", "json"])
async def test_auto_falls_back_to_initialize_for_an_sdk1_streamable_http_server(
    nursery: trio.Nursery, mode: str
) -> None:
    """Issue 14 step 5: a handshake-era HTTP server refuses the sessionless modern POST;
    the gateway initializes on the same channel and the session works as before."""
    with run_http_alpha("streamable-http", mode) as server:
        backend = {"name": "old", "transport": "http", "url": server.url("/mcp")}
        running = await start_gateway(nursery, gateway_config([backend]))
        gateway_backend = running.gateway.pool.backends["old"]
        assert gateway_backend.info is not None and not gateway_backend.info.modern
        assert gateway_backend.initializations == 1
        async with open_client(running.url) as session:
            added = await session.call_tool("old__add", {"a": 1, "b": 2})
        assert added.content[0].text == "3"  # type: ignore[union-attr] # a TextContent
        nursery.cancel_scope.cancel()


async def test_a_modern_hosts_progress_token_reaches_a_modern_backend_and_back(
    nursery: trio.Nursery, sdk2_http: RunningServer
) -> None:
    """Issue 14 step 5: progress under the host's own token, on the request's stream,
    from a modern backend over HTTP (its SSE response carries the notifications)."""
    backend = {"name": "h", "transport": "http", "url": sdk2_http.url("/mcp")}
    running = await start_gateway(nursery, gateway_config([backend]))
    call = modern(
        1, "tools/call", {"name": "h__slow", "arguments": {"steps": 3}}, progressToken="host-7"
    )
    async with http_client(running) as client:
        response = await send(client, call)
    assert response.status_code == 200, response.text
    assert_progress_then_done(sse_messages(response))


async def test_list_pages_carry_the_merged_hint_of_the_backends_behind_them(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 2/5: a modern backend's ttlMs/cacheScope reach a modern host's
    list; one handshake-era contributor makes it {0, private} (S/server/utilities/caching.mdx)."""
    strict = sdk_backend("modern_only", "strict")
    running = await start_gateway(nursery, gateway_config([strict]))
    alone = (await modern_call(running, 1, "tools/list", {}))["result"]
    assert (alone["ttlMs"], alone["cacheScope"]) == (60000, "public")
    prompts = (await modern_call(running, 2, "prompts/list", {}))["result"]
    assert (prompts["ttlMs"], prompts["cacheScope"]) == (0, "private")  # no contributor
    async with open_client(running.url) as session:  # a legacy host sees no hint
        listed = await session.list_tools()
    assert not set(listed.model_extra or {}) & {"ttlMs", "cacheScope", "resultType"}
    nursery.cancel_scope.cancel()


async def test_a_handshake_era_contributor_makes_the_list_uncacheable(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 2: legacy backends count as {0, private} in the merge."""
    config = gateway_config([sdk_backend("modern_only", "strict"), sdk_backend("alpha")])
    running = await start_gateway(nursery, config)
    mixed = (await modern_call(running, 1, "tools/list", {}))["result"]
    assert (mixed["ttlMs"], mixed["cacheScope"]) == (0, "private")


async def test_a_backends_32022_is_not_relayed_to_either_kind_of_host(
    nursery: trio.Nursery,
) -> None:
    """Issue 14 step 4: -32022 means the gateway's envelope is wrong; relayed, it would
    make a modern host fall back to initialize. Hosts get -32603 naming the backend."""
    running = await start_gateway(nursery, gateway_config([sdk_backend("modern_only", "strict")]))
    answer = await _modern_error(running, {"name": "strict__refuse", "arguments": {}})
    assert answer["code"] == -32603
    assert "backend 'strict' refused the gateway's 2026-07-28 request envelope" in answer["message"]
    async with open_client(running.url) as session:
        with pytest.raises(McpError) as info:
            await session.call_tool("strict__refuse", {})
    assert info.value.error.code == -32603


async def _modern_error(running: Running, params: dict[str, Any]) -> dict[str, Any]:
    async with http_client(running) as client:
        response = await send(client, modern(1, "tools/call", params))
    if response.headers["content-type"].startswith("text/event-stream"):
        error: dict[str, Any] = sse_messages(response)[-1]["error"]
    else:
        error = response.json()["error"]
    return error
