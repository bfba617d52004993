"""Test peer "watched": resources a client subscribes to, and a tool list that grows.

A low-level official-SDK server declaring ``resources.subscribe`` and
``tools.listChanged``, for the listen tests (``subscriptions/listen`` bridged
to handshake-era backends):

* resources ``watch://a`` and ``watch://b``; ``resources/subscribe`` and
  ``unsubscribe`` are accepted for them and refused for any other URI;
* tool ``touch(uri)`` sends ``notifications/resources/updated`` for ``uri``
  (whether or not it is subscribed: the gateway must filter);
* tool ``grow()`` adds a tool ``grown_<n>`` and sends
  ``notifications/tools/list_changed``.

Run it as ``python tests/servers/watched.py``; it speaks MCP on stdio.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.stdio import stdio_server
from pydantic import AnyUrl

URIS = ("watch://a", "watch://b")
_grown: list[str] = []


class WatchedServer(Server[Any, Any]):
    """Declares ``resources.subscribe`` (implemented below)."""

    def get_capabilities(
        self,
        notification_options: NotificationOptions,
        experimental_capabilities: dict[str, dict[str, Any]],
    ) -> types.ServerCapabilities:
        capabilities = super().get_capabilities(notification_options, experimental_capabilities)
        if capabilities.resources is not None:
            capabilities.resources.subscribe = True
        return capabilities


server = WatchedServer("watched", version="1.0.0")


def _tool(name: str, properties: dict[str, Any] | None = None) -> types.Tool:
    schema = {"type": "object", "properties": properties or {}}
    return types.Tool(name=name, description=f"{name}.", inputSchema=schema)


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    tools = [_tool("touch", {"uri": {"type": "string"}}), _tool("grow")]
    return tools + [_tool(name) for name in _grown]


@server.call_tool()
async def call_tool(name: str, arguments: dict[str, Any]) -> list[types.ContentBlock]:
    session = server.request_context.session
    if name == "touch":
        await session.send_resource_updated(AnyUrl(arguments["uri"]))
    elif name == "grow":
        _grown.append(f"grown_{len(_grown) + 1}")
        await session.send_tool_list_changed()
    return [types.TextContent(type="text", text="ok")]


@server.list_resources()
async def list_resources() -> list[types.Resource]:
    return [types.Resource(uri=AnyUrl(uri), name=uri[len("watch://") :]) for uri in URIS]


@server.read_resource()
async def read_resource(uri: AnyUrl) -> Iterable[ReadResourceContents]:
    return [ReadResourceContents(f"content of {uri}", "text/plain")]


@server.subscribe_resource()
async def subscribe_resource(uri: AnyUrl) -> None:
    if str(uri) not in URIS:
        raise ValueError(f"cannot subscribe to {uri}")


@server.unsubscribe_resource()
async def unsubscribe_resource(uri: AnyUrl) -> None:
    return None


async def main() -> None:
    async with stdio_server() as (read, write):
        options = server.create_initialization_options(
            NotificationOptions(tools_changed=True, resources_changed=True)
        )
        await server.run(read, write, options)


if __name__ == "__main__":
    anyio.run(main)
