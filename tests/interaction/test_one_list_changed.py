"""One change of a 2026-07-28 HTTP backend's list reaches a host as one ``list_changed``.

The SDK 2.x peer over Streamable HTTP (its ``grow`` tool adds a tool and
announces it on its listen stream); a modern host listens through the
gateway and counts what it hears for a while after the change.
"""

from __future__ import annotations

from typing import Any, Final

import mcp.types as types
import trio

from tests.e2e.test_modern_backend import SDK2_PYTHON, SERVER, text_of
from tests.e2e.test_modern_backend import pytestmark as pytestmark  # skip without .venv-sdk2
from tests.frontend.test_listen_http import listen
from tests.frontend.test_streamable_http import http_client
from tests.harness import gateway_config, open_client, start_gateway, start_up_told
from tests.interaction.era_cells import modern_call
from tests.subprocess_servers import free_port, run_server

# Several debounce windows (0.2 s) and re-list windows: a second
# list_changed for the same change would arrive within this.
QUIET: Final = 1.5


async def test_one_change_of_a_modern_http_backend_is_one_list_changed(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice (E7 family): the backend's notification and the gateway's re-list
    are one change; the host hears ``tools/list_changed`` once."""
    port = free_port()
    with run_server([str(SDK2_PYTHON), str(SERVER), "http", str(port)], port) as server:
        backend = {"name": "b", "transport": "http", "url": server.url("/mcp")}
        running = await start_gateway(nursery, gateway_config([backend]))
        await start_up_told(running.gateway)
        heard: list[dict[str, Any]] = []
        async with (
            http_client(running) as client,
            listen(client, "L1", {"toolsListChanged": True}) as stream,
        ):
            await stream.next()  # the acknowledgement
            grow = {"name": "b__grow", "arguments": {}}
            answer = await modern_call(running, 2, "tools/call", grow)
            assert text_of(answer["result"]).startswith("grown_")
            with trio.move_on_after(QUIET):
                while True:
                    heard.append(await stream.next())
        nursery.cancel_scope.cancel()
    assert [m["method"] for m in heard] == ["notifications/tools/list_changed"]


async def test_one_change_of_a_modern_http_backend_is_one_list_changed_on_a_session(
    nursery: trio.Nursery,
) -> None:
    """Gateway choice: the same for a handshake-era host's session (its GET stream)."""
    port = free_port()
    with run_server([str(SDK2_PYTHON), str(SERVER), "http", str(port)], port) as server:
        backend = {"name": "b", "transport": "http", "url": server.url("/mcp")}
        running = await start_gateway(nursery, gateway_config([backend]))
        await start_up_told(running.gateway)
        heard: list[float] = []

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ServerNotification) and isinstance(
                message.root, types.ToolListChangedNotification
            ):
                heard.append(trio.current_time())

        async with open_client(running.url, message_handler=on_message) as session:
            await session.call_tool("b__grow", {})
            await trio.sleep(QUIET)
        nursery.cancel_scope.cancel()
    assert len(heard) == 1, heard
