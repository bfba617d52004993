"""Resource subscriptions and list changes of a 2026-07-28 backend, through the gateway.

The backend is the official SDK 2.x ``MCPServer`` (``tests/servers/modern_sdk2.py``),
which has no ``resources/subscribe`` and pushes nothing unasked: it tells only
the listen streams that named what they want. The gateway holds one standing
listen towards it (``gateway/backends/stateless/listen_client.py``) and bridges both
kinds of host onto it: a handshake-era host's ``resources/subscribe`` and a
2026-07-28 host's own ``subscriptions/listen``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio
from mcp import types
from pydantic import AnyUrl

from tests.e2e.test_modern_backend import modern_call, sdk2_stdio, text_of
from tests.e2e.test_modern_backend import pytestmark as pytestmark  # skip without .venv-sdk2
from tests.frontend.test_listen_http import SUB_ID, listen
from tests.frontend.test_streamable_http import http_client
from tests.harness import gateway_config, open_client, start_gateway

if TYPE_CHECKING:
    from tests.harness import Running

WAIT: Final = 10.0  # the bound on anything a real peer does at once (2 shared cores)


async def _note_uri(running: Running) -> str:
    """The public URI of the backend's ``sdk2://note``."""
    listed = (await modern_call(running, 1, "resources/list", {}))["result"]
    (uri,) = [r["uri"] for r in listed["resources"] if r["uri"].endswith("note")]
    assert uri != "sdk2://note"  # namespaced
    return str(uri)


async def test_a_legacy_hosts_subscription_rides_on_the_gateways_listen(
    nursery: trio.Nursery,
) -> None:
    """resources/subscribe is accepted, resources/updated arrives under the public URI,
    and after resources/unsubscribe the backend no longer sends it."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))
    uri = await _note_uri(running)
    updated: list[str] = []
    changed = trio.Event()
    first_update = trio.Event()

    async def on_message(message: Any) -> None:
        if not isinstance(message, types.ServerNotification):
            return
        if isinstance(message.root, types.ResourceUpdatedNotification):
            updated.append(str(message.root.params.uri))
            first_update.set()
        elif isinstance(message.root, types.ToolListChangedNotification):
            changed.set()

    async with open_client(running.url, message_handler=on_message) as session:
        caps = session.get_server_capabilities()
        assert caps is not None and caps.resources is not None and caps.resources.subscribe
        await session.subscribe_resource(AnyUrl(uri))
        await session.call_tool("m__touch_note", {})
        with trio.fail_after(WAIT):
            await first_update.wait()
        assert updated == [uri]
        await session.unsubscribe_resource(AnyUrl(uri))
        await session.call_tool("m__touch_note", {})
        # Control: the same listen carries the next list change, which comes
        # after the touch; an update still sent would have arrived before it.
        await session.call_tool("m__grow", {})
        with trio.fail_after(WAIT):
            await changed.wait()
    assert updated == [uri]


async def test_a_modern_hosts_listen_is_honoured_for_a_modern_backends_resource(
    nursery: trio.Nursery,
) -> None:
    """The ack honours the URI (the backend accepted it), and the update arrives tagged."""
    running = await start_gateway(nursery, gateway_config([sdk2_stdio("m")]))
    uri = await _note_uri(running)
    async with (
        http_client(running) as client,
        listen(client, "L9", {"resourceSubscriptions": [uri, "nope://x"]}) as stream,
    ):
        with trio.fail_after(WAIT):
            ack = await stream.next()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"resourceSubscriptions": [uri]}
        touched = await modern_call(running, 2, "tools/call", {"name": "m__touch_note"})
        assert text_of(touched["result"]) == "touched"
        with trio.fail_after(WAIT):
            update = await stream.next()
    assert update["method"] == "notifications/resources/updated"
    assert update["params"]["uri"] == uri
    assert update["params"]["_meta"] == {SUB_ID: "L9"}
