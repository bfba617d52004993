"""Test peer "broken-listen": a dual-era HTTP server whose 2026-07-28 leg is broken.

Usage::

    python tests/servers/broken_listen.py PORT

The handshake era is the official SDK 1.x (FastMCP, Streamable HTTP at
``/mcp``), with every feature robustness E16 says must survive a fallback:

* ``add(a, b)``: a plain call;
* ``ask_name()``: ``elicitation/create`` (form), answers with what came back;
* ``ask_sample()``: ``sampling/createMessage``, answers with the reply;
* ``grow()``: adds a tool ``grown_<n>`` and sends ``tools/list_changed``;
* ``touch(uri)``: sends ``notifications/resources/updated`` for ``uri`` when a
  client subscribed to it (``resources/subscribe`` is served).

In front of it, a 2026-07-28 leg that does not work, as seen in the field:
a request carrying ``Mcp-Method`` (only 2026-07-28 requests do) is not
passed on; ``server/discover`` answers a DiscoverResult listing 2026-07-28
and declaring list changes and subscriptions, and ``subscriptions/listen``
answers ``200 application/json`` with a body that never ends (a space
every half second), not an event stream.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import uvicorn
from handshake_tools import add_handshake_tools  # type: ignore[import-not-found]
from mcp.server.fastmcp import Context, FastMCP

KEY = "io.modelcontextprotocol/"
server = FastMCP("broken-listen", log_level="WARNING")
add_handshake_tools(server)
_subscribed: set[str] = set()


@server.resource("note://one")
def note() -> str:
    """A resource a client can subscribe to."""
    return "one"


@server._mcp_server.subscribe_resource()  # type: ignore[no-untyped-call,untyped-decorator]
async def _subscribe(uri: Any) -> None:
    _subscribed.add(str(uri))


@server._mcp_server.unsubscribe_resource()  # type: ignore[no-untyped-call,untyped-decorator]
async def _unsubscribe(uri: Any) -> None:
    _subscribed.discard(str(uri))


_capabilities = server._mcp_server.get_capabilities


def _with_subscribe(*args: Any, **kwargs: Any) -> Any:
    """SDK 1.x declares ``resources.subscribe: false`` whatever is served; say true."""
    capabilities = _capabilities(*args, **kwargs)
    if capabilities.resources is not None:
        capabilities.resources.subscribe = True
    return capabilities


server._mcp_server.get_capabilities = _with_subscribe  # type: ignore[method-assign]


@server.tool()
async def touch(uri: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Say ``uri`` changed, if a client subscribed to it; answer whether one had."""
    if uri not in _subscribed:
        return "not subscribed"
    await ctx.session.send_resource_updated(uri)  # type: ignore[arg-type]
    return "sent"


DISCOVER_RESULT = {
    "supportedVersions": ["2026-07-28", "2025-11-25"],
    "capabilities": {
        "tools": {"listChanged": True},
        "resources": {"listChanged": True, "subscribe": True},
    },
    "resultType": "complete",
    "_meta": {KEY + "serverInfo": {"name": "broken-listen", "version": "1"}},
}


async def _read_body(receive: Any) -> bytes:
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


async def _json(send: Any, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def build() -> Any:
    """The ASGI app: the broken 2026-07-28 leg in front of the SDK 1.x server."""
    inner = server.streamable_http_app()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        if scope["type"] != "http" or b"mcp-method" not in headers:
            await inner(scope, receive, send)
            return
        message = json.loads(await _read_body(receive))
        method = message.get("method")
        if method == "server/discover":
            await _json(send, {"jsonrpc": "2.0", "id": message["id"], "result": DISCOVER_RESULT})
            return
        if method == "subscriptions/listen":
            start = {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
            await send(start)
            while True:  # a JSON body that never ends
                await send({"type": "http.response.body", "body": b" ", "more_body": True})
                await anyio.sleep(0.5)
        error = {"code": -32601, "message": f"Method not found: {method}"}
        await _json(send, {"jsonrpc": "2.0", "id": message.get("id"), "error": error})

    return app


if __name__ == "__main__":
    uvicorn.run(build(), host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
