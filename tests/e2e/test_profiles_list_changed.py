"""list_changed per profile, to legacy sessions and modern listen streams (issue 15, step 3).

Two profiles over the ``watched`` test peer (whose ``grow`` tool adds a tool
and sends ``tools/list_changed``) and alpha: ``w`` shows watched's tools,
``a`` shows alpha and none of watched's tools. A grown tool changes ``w``'s
view only, so only ``w``'s clients may hear of it.

Absence is shown without waiting on time: the coalescer sends each window's
notices profile by profile in name order ("a" before "w") in one pass, so
when ``w``'s clients have theirs, ``a``'s would already have been counted.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import httpx
import mcp.types as types
import trio

from gateway.config import GatewayConfig, parse
from tests.frontend.test_modern_http import modern, modern_headers
from tests.harness import open_client, sdk_backend, start_gateway, start_up_told
from tests.servers.paths import python_server_command

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from tests.harness import Running

WAIT: Final = 15.0
TOOLS_CHANGED: Final = "notifications/tools/list_changed"


def _config() -> GatewayConfig:
    watched = python_server_command("watched")
    document: dict[str, Any] = {
        "server": {"host": "127.0.0.1", "port": 0},
        "notifications": {"debounce": 0.05},
        "backends": [
            {"name": "watched", "transport": "stdio", "command": watched[0], "args": watched[1:]},
            sdk_backend("alpha"),
        ],
        "profiles": [
            {"name": "w", "backends": {"include": ["watched"]}},
            {
                "name": "a",
                "backends": {"include": ["alpha", "watched"]},
                "tools": {"exclude": ["watched__*"]},
            },
        ],
    }
    return parse(json.dumps(document), env={})


async def _listen_lines(
    http: httpx.AsyncClient, path: str, ready: trio.Event
) -> AsyncIterator[dict[str, Any]]:
    message = modern(0, "subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    message["id"] = f"L-{path}"
    body = json.dumps(message).encode()
    async with http.stream("POST", path, content=body, headers=modern_headers(message)) as answer:
        assert answer.status_code == 200
        async for line in answer.aiter_lines():
            if line.startswith("data: "):
                parsed: dict[str, Any] = json.loads(line[len("data: ") :])
                if parsed["method"] == "notifications/subscriptions/acknowledged":
                    ready.set()
                    continue
                yield parsed  # noqa: ASYNC119 - a test's reader; its stream closes with the test's nursery


def _fanned_out(running: Running) -> float:
    value = running.gateway.metrics.registry.get_sample_value(
        "mcp_gateway_notifications_fanned_out_total", {"kind": TOOLS_CHANGED}
    )
    return value or 0.0


async def test_list_changed_reaches_only_the_profile_whose_view_changed(
    nursery: trio.Nursery,
) -> None:
    """Issue 15: list_changed reaches a profile's clients only when that profile's view changed."""
    running = await start_gateway(nursery, _config())
    # The backends coming up changed both views; a's listener must not count that.
    await start_up_told(running.gateway)
    heard: dict[str, list[str]] = {"w": [], "a": []}
    w_heard = trio.Event()
    w_listened = trio.Event()

    def handler(profile: str) -> Any:
        async def handle(message: Any) -> None:
            if isinstance(message, types.ServerNotification):
                heard[profile].append(message.root.method)
                if profile == "w" and message.root.method == TOOLS_CHANGED:
                    w_heard.set()

        return handle

    async def listen_on(path: str, ready: trio.Event, got: trio.Event | None) -> None:
        async with httpx.AsyncClient(base_url=running.base_url, trust_env=False) as http:
            async for message in _listen_lines(http, path, ready):
                assert message["method"] == TOOLS_CHANGED
                assert got is not None, f"{path} heard {message}"
                got.set()

    with trio.fail_after(WAIT):
        w_ready, a_ready = trio.Event(), trio.Event()
        async with trio.open_nursery() as streams:
            streams.start_soon(listen_on, "/mcp/w", w_ready, w_listened)
            streams.start_soon(listen_on, "/mcp/a", a_ready, None)
            await w_ready.wait()
            await a_ready.wait()
            async with (
                open_client(running.url + "/w", message_handler=handler("w")) as w,
                open_client(running.url + "/a", message_handler=handler("a")),
            ):
                before = _fanned_out(running)
                await w.call_tool("watched__grow", {})
                await w_heard.wait()
                await w_listened.wait()
                # One w session and one w listen stream; nothing for a's two.
                assert _fanned_out(running) - before == 2
                assert TOOLS_CHANGED not in heard["a"]
                assert "watched__grown_1" in [t.name for t in (await w.list_tools()).tools]
            streams.cancel_scope.cancel()
