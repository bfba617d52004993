"""A rug pull behind the gateway, caught by the pins: the ``shifting`` peer, hosts of both eras.

The handshake-era host is the official ``mcp`` client; the 2026-07-28 host
speaks raw modern POSTs (the envelope in ``_meta``). Both read the one
catalog the pins judged.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import mcp.types as types
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcp.shared.exceptions import McpError

from gateway.catalog.snapshot import Kind
from gateway.config import GatewayConfig, parse
from gateway.errors import INVALID_PARAMS
from gateway.pinning.baseline import encode_baseline
from tests.frontend.test_modern_http import modern, send, sse_messages
from tests.frontend.test_streamable_http import http_client
from tests.harness import SDK2_PYTHON, open_client, run_sdk2_host, sdk_backend, start_gateway
from tests.servers.shifting import RUG_DESCRIPTION, V1_DESCRIPTION

if TYPE_CHECKING:
    from collections.abc import Callable

    from tests.harness import Running
    from tests.redis_server import RedisServer

WAIT: Final = 20.0
SDK2_PROFILE_HOST: Final = Path(__file__).resolve().parents[1] / "sdk2" / "profile_host.py"
TOOLS_CHANGED: Final = "notifications/tools/list_changed"


def _config(mode: str, store: dict[str, str] | None = None, **pinning: Any) -> GatewayConfig:
    document: dict[str, Any] = {
        "store": store or {},
        "server": {"host": "127.0.0.1", "port": 0},
        "notifications": {"debounce": 0.05},
        "pinning": {"mode": mode, **pinning},
        "backends": [sdk_backend("shifting", "s")],
    }
    return parse(json.dumps(document), env={})


async def _pending(running: Running, count: int = 1) -> list[dict[str, Any]]:
    """Wait (bounded by the caller) until ``count`` changes wait for approval."""
    pins = running.gateway.pins
    assert pins is not None
    await _until(running, lambda: len(pins.pending()) >= count)
    return pins.pending()


async def _until(running: Running, done: Callable[[], bool]) -> None:
    """Wait until ``done()``, re-checked at each listing the pool publishes (judged or not)."""
    while True:
        changed = running.gateway.pool.state_changed
        if done():
            return
        await changed.wait()


def _fetch(tools: list[types.Tool]) -> types.Tool:
    return next(t for t in tools if t.name == "s__fetch")


async def _modern(running: Running, msg_id: int, method: str, params: dict[str, Any]) -> Any:
    """One 2026-07-28 request through the gateway; its JSON-RPC response."""
    async with http_client(running) as client:
        response = await send(client, modern(msg_id, method, params))
    if response.headers["content-type"].startswith("text/event-stream"):
        return sse_messages(response)[-1]
    return response.json()


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_under_hold_hosts_keep_the_pinned_tool_until_approval_then_get_the_new_one(
    nursery: trio.Nursery,
) -> None:
    """spec (issue 27): hold serves the pin; approval sends list_changed and the new definition."""
    running = await start_gateway(nursery, _config("hold"))
    heard = trio.Event()

    async def handler(message: Any) -> None:
        if isinstance(message, types.ServerNotification) and message.root.method == TOOLS_CHANGED:
            heard.set()

    with trio.fail_after(WAIT):
        async with open_client(running.url, message_handler=handler) as host:
            assert _fetch((await host.list_tools()).tools).description == V1_DESCRIPTION
            await host.call_tool("s__shift", {"to": "rug"})
            [change] = await _pending(running)
            assert change["public"] == "s__fetch"
            assert {"addresses_model", "url_added", "schema_widened"} <= set(change["classes"])
            metrics = running.gateway.metrics.registry
            labels = {"backend": "s", "class": "schema_widened"}
            assert metrics.get_sample_value("mcp_gateway_drift_detected_total", labels) == 1
            assert metrics.get_sample_value("mcp_gateway_pins_pending", {"backend": "s"}) == 1
            # The handshake-era host keeps seeing and calling the pinned definition.
            held = _fetch((await host.list_tools()).tools)
            assert held.description == V1_DESCRIPTION
            assert "command" not in held.inputSchema["properties"]
            assert not (await host.call_tool("s__fetch", {"url": "u"})).isError
            # A call the pinned schema does not allow never reaches the backend.
            with pytest.raises(McpError) as outside:
                await host.call_tool("s__fetch", {"url": 5})
            assert outside.value.error.code == INVALID_PARAMS
            assert outside.value.error.data["reason"] == "outside_shown_definition"
            assert "arguments.url" in outside.value.error.message
            answer = await _modern(running, 9, "tools/call", {"name": "s__fetch", "arguments": {}})
            assert answer["error"]["data"]["reason"] == "outside_shown_definition"
            # So does a 2026-07-28 host.
            listed = await _modern(running, 1, "tools/list", {})
            [modern_fetch] = [t for t in listed["result"]["tools"] if t["name"] == "s__fetch"]
            assert modern_fetch["description"] == V1_DESCRIPTION
            pins = running.gateway.pins
            assert pins is not None
            record = pins.find("s__fetch")
            assert record is not None
            heard = trio.Event()
            await pins.decide([record], approved=True, by="test")
            await heard.wait()
            assert _fetch((await host.list_tools()).tools).description == RUG_DESCRIPTION
            listed = await _modern(running, 2, "tools/list", {})
            [modern_fetch] = [t for t in listed["result"]["tools"] if t["name"] == "s__fetch"]
            assert modern_fetch["description"] == RUG_DESCRIPTION
            assert pins.pending() == []


async def test_under_block_calls_to_a_changed_tool_are_refused_in_both_eras(
    nursery: trio.Nursery,
) -> None:
    """spec (issue 27): block refuses calls with -32602 naming the change awaiting approval."""
    running = await start_gateway(nursery, _config("block"))
    with trio.fail_after(WAIT):
        async with open_client(running.url) as host:
            assert _text(await host.call_tool("s__fetch", {"url": "u"})) == "fetched u by v1"
            await host.call_tool("s__shift", {"to": "rug"})
            await _pending(running)
            with pytest.raises(McpError) as refused:
                await host.call_tool("s__fetch", {"url": "u"})
            assert refused.value.error.code == INVALID_PARAMS
            assert "s__fetch changed and awaits approval" in refused.value.error.message
            answer = await _modern(running, 3, "tools/call", {"name": "s__fetch", "arguments": {}})
            assert answer["error"]["code"] == INVALID_PARAMS
            assert answer["error"]["data"]["reason"] == "awaiting_approval"
            pins = running.gateway.pins
            assert pins is not None
            record = pins.find("s__fetch")
            assert record is not None
            await pins.decide([record], approved=True, by="test")
            assert _text(await host.call_tool("s__fetch", {"url": "u"})) == "fetched u by rug"


async def test_key_order_is_no_drift_and_a_new_tool_waits_under_hold_new(
    nursery: trio.Nursery,
) -> None:
    """spec (issue 27): reordered keys are not drift; hold_new hides a new tool until approved."""
    running = await start_gateway(nursery, _config("hold", hold_new=True))
    pins = running.gateway.pins
    assert pins is not None
    with trio.fail_after(WAIT):
        # hold_new from the start: every tool waits, so none is listed yet.
        first = await _pending(running, 2)
        assert {c["public"] for c in first} == {"s__fetch", "s__shift"}
        for change in first:
            record = pins.find(change["public"])
            assert record is not None
            await pins.decide([record], approved=True, by="test")
        async with open_client(running.url) as host:
            await _until(running, lambda: len(running.gateway.pool.snapshot.view(Kind.TOOLS)) == 2)
            await host.call_tool("s__shift", {"to": "reordered"})
            await host.call_tool("s__shift", {"to": "added"})
            [added] = await _pending(running)
            assert added["public"] == "s__extra"  # the reordering before it drifted nothing
            assert added["classes"] == ["added"]
            assert "s__extra" not in {t.name for t in (await host.list_tools()).tools}
            with pytest.raises(McpError):
                await host.call_tool("s__extra", {})


async def test_a_baseline_exported_from_one_gateway_pins_the_same_digests_in_another(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """spec (issue 27): export, sign, import at start: the same digests, pinned by the baseline."""
    key = Ed25519PrivateKey.generate()
    key_file = tmp_path / "signing.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    first = await start_gateway(nursery, _config("record"))
    pins = first.gateway.pins
    assert pins is not None
    with trio.fail_after(WAIT):
        await _until(first, lambda: pins.loaded and len(pins.export({}).items) == 2)
    document = pins.export({})
    baseline = tmp_path / "pins.json"
    baseline.write_bytes(encode_baseline(document, key))
    second = await start_gateway(
        nursery, _config("hold", baseline=str(baseline), signing_key_file=str(key_file))
    )
    other = second.gateway.pins
    assert other is not None and other.book is not None
    with trio.fail_after(WAIT):
        await _until(second, lambda: other.loaded)
    digests = {(i.backend, i.kind, i.name): i.digest for i in document.items}
    assert {
        key: record.pinned.digest
        for key, record in other.book.records.items()
        if record.pinned is not None
    } == digests
    assert {r.pinned.by for r in other.book.records.values() if r.pinned} == {"baseline"}


async def test_an_approval_on_one_replica_reaches_the_hosts_of_another_sharing_redis(
    nursery: trio.Nursery, redis_server: RedisServer
) -> None:
    """spec (issue 27): pins live in the shared store; a decision on one replica re-lists on all."""
    redis_server.flush()
    store = {"url": redis_server.url, "key_prefix": "pins-e2e:"}
    one = await start_gateway(nursery, _config("hold", store=store))
    two = await start_gateway(nursery, _config("hold", store=store))
    with trio.fail_after(WAIT):
        for running in (one, two):
            pins = running.gateway.pins
            assert pins is not None
            await _until(running, lambda pins=pins: pins.loaded and bool(pins.export({}).items))
        heard = trio.Event()

        async def handler(message: Any) -> None:
            if (
                isinstance(message, types.ServerNotification)
                and message.root.method == TOOLS_CHANGED
            ):
                heard.set()

        async with (
            open_client(one.url) as first,
            open_client(two.url, message_handler=handler) as second,
        ):
            # Each replica runs its own backend process; both drift the same way.
            await first.call_tool("s__shift", {"to": "rug"})
            await second.call_tool("s__shift", {"to": "rug"})
            await _pending(one)
            await _pending(two)
            assert _fetch((await second.list_tools()).tools).description == V1_DESCRIPTION
            pins = one.gateway.pins
            assert pins is not None
            record = pins.find("s__fetch")
            assert record is not None
            heard = trio.Event()
            await pins.decide([record], approved=True, by="alice")
            await heard.wait()
            assert _fetch((await second.list_tools()).tools).description == RUG_DESCRIPTION


@pytest.mark.sdk2
@pytest.mark.skipif(not SDK2_PYTHON.exists(), reason="the SDK 2.x venv is not installed")
async def test_under_block_the_sdk2_host_in_the_stateless_era_gets_the_documented_refusal(
    nursery: trio.Nursery,
) -> None:
    """spec (issue 27): the official SDK 2.x host (2026-07-28) gets -32602 awaiting approval."""
    running = await start_gateway(nursery, _config("block"))
    with trio.fail_after(WAIT):
        async with open_client(running.url) as host:
            await host.call_tool("s__shift", {"to": "rug"})
        await _pending(running)
    seen = await run_sdk2_host(
        SDK2_PROFILE_HOST, running.url, "s__shift", '{"to": "rug"}', "s__fetch", limit=60.0
    )
    assert seen["protocol_version"] == "2026-07-28"
    assert "s__fetch" in seen["tools"]  # shown, as pinned
    assert seen["refused"]["code"] == INVALID_PARAMS
    assert "s__fetch changed and awaits approval" in seen["refused"]["message"]
