"""A dual-era HTTP backend whose listen answers a JSON body that never ends (robustness E16).

``tests/servers/broken_listen.py`` is the official SDK 1.x server behind a
wrapper whose 2026-07-28 leg is broken: discover lists 2026-07-28 and
declares list changes and subscriptions, and ``subscriptions/listen``
answers ``200 application/json`` with a body that never ends. The gateway
must notice within a few seconds, say so in one warning, serve the backend
in the handshake era, and keep every handshake-era feature: elicitation,
sampling, list changes and resource subscriptions, through the official
SDK 1.x client as host. Rules: ``backends/stateless/era_fallback.py``.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, Final

import pytest
import trio
from mcp import types
from pydantic import AnyUrl
from structlog.testing import capture_logs

from gateway.backends.supervision.supervisor import BackendState
from tests.harness import gateway_config, open_client, start_gateway
from tests.subprocess_servers import SERVERS_DIR, free_port, run_server

if TYPE_CHECKING:
    from collections.abc import Iterator

    from tests.subprocess_servers import RunningServer

# The promise of robustness E16: connected within this many seconds (real time).
CONNECT_BOUND: Final = 5.0
WAIT: Final = 10.0  # the bound on anything a real peer does at once (2 shared cores)


@pytest.fixture(scope="module")
def broken_listen() -> Iterator[RunningServer]:
    """The broken-listen backend on a free port, shared by the module's tests."""
    port = free_port()
    argv = [sys.executable, str(SERVERS_DIR / "broken_listen.py"), str(port)]
    with run_server(argv, port) as server:
        yield server


async def test_a_never_ending_json_listen_costs_seconds_and_one_warning_then_the_handshake_era(
    nursery: trio.Nursery, broken_listen: RunningServer
) -> None:
    """Robustness E16: connected within 5 s, in the handshake era, with one warning that
    names the JSON body; status says why; elicitation, sampling, list changes and
    resource subscriptions all work through the gateway."""
    # Shared: the server tells only the session that ran ``grow`` of its new
    # tool, and the catalog follows the shared session.
    url = broken_listen.url("/mcp")
    backend = {"name": "b", "transport": "http", "url": url, "session": "shared"}
    started = trio.current_time()
    with capture_logs() as logs:
        running = await start_gateway(nursery, gateway_config([backend]))
        connected = trio.current_time() - started
        gateway_backend = running.gateway.pool.backends["b"]
        assert gateway_backend.state is BackendState.UP
        assert gateway_backend.info is not None and not gateway_backend.info.modern
        assert gateway_backend.era_reason is not None
        assert "subscriptions/listen answered 200 application/json, not an event stream" in (
            gateway_backend.era_reason
        )
        await _every_handshake_era_feature(running.url)
    assert connected < CONNECT_BOUND
    gateway_warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert [entry["event"] for entry in gateway_warnings] == ["backend.era.fallback"]
    assert "200 application/json, not an event stream" in str(gateway_warnings[0]["problem"])
    nursery.cancel_scope.cancel()


async def _every_handshake_era_feature(url: str) -> None:
    """Elicitation, sampling, list_changed and resources/updated through the gateway."""
    changed = trio.Event()
    updated = trio.Event()

    async def on_message(message: Any) -> None:
        if not isinstance(message, types.ServerNotification):
            return
        if isinstance(message.root, types.ResourceUpdatedNotification):
            updated.set()
        elif isinstance(message.root, types.ToolListChangedNotification):
            changed.set()

    async def on_elicit(context: Any, params: Any) -> Any:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def on_sample(context: Any, params: Any) -> Any:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="hi"), model="m1"
        )

    async with open_client(
        url,
        message_handler=on_message,
        elicitation_callback=on_elicit,
        sampling_callback=on_sample,
    ) as session:
        added = await session.call_tool("b__add", {"a": 2, "b": 3})
        assert _text(added) == "5"
        asked = json.loads(_text(await session.call_tool("b__ask_name", {})))
        assert asked == {"action": "accept", "content": {"name": "Ada"}}
        sampled = json.loads(_text(await session.call_tool("b__ask_sample", {})))
        assert sampled == {"model": "m1", "text": "hi"}
        resources = (await session.list_resources()).resources
        (uri,) = [str(r.uri) for r in resources if str(r.uri).endswith("one")]
        await session.subscribe_resource(AnyUrl(uri))
        touched = await session.call_tool("b__touch", {"uri": "note://one"})
        assert _text(touched) == "sent"
        with trio.fail_after(WAIT):
            await updated.wait()
        await session.call_tool("b__grow", {})
        with trio.fail_after(WAIT):
            await changed.wait()
        names = [tool.name for tool in (await session.list_tools()).tools]
        assert "b__grown_1" in names


def _text(result: types.CallToolResult) -> str:
    """The first text content of a call's result."""
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text
