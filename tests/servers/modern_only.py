"""A stdio MCP server that speaks 2026-07-28 only, with no SDK (the strict kind).

It refuses ``initialize`` (-32601: the method does not exist in its revision)
and every request without the per-request envelope (-32602, as
``S/basic/index.mdx`` requires), so a gateway that forgets the envelope on
any request, its own list walks included, fails against it. It answers
``server/discover``, ``tools/list`` in two pages, and ``tools/call`` of
``add``, ``meta`` (which returns the ``_meta`` it got) and ``refuse``
(-32022, as if it disliked the envelope).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Final

VERSION: Final = "2026-07-28"
KEY: Final = "io.modelcontextprotocol/"
TOOLS: Final = [
    {
        "name": "add",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        },
    },
    {"name": "meta", "inputSchema": {"type": "object"}},
    {"name": "refuse", "inputSchema": {"type": "object"}},
]


def error(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": body}


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """The response to one message (None for a notification)."""
    if "id" not in message:
        return None
    msg_id, method = message["id"], message.get("method")
    params = message.get("params") or {}
    meta = params.get("_meta") or {}
    if method == "initialize":
        return error(msg_id, -32601, "Method not found: initialize (2026-07-28 only)")
    if KEY + "protocolVersion" not in meta or KEY + "clientCapabilities" not in meta:
        return error(msg_id, -32602, "Missing the per-request envelope in _meta")
    if meta[KEY + "protocolVersion"] != VERSION:
        data = {"supported": [VERSION], "requested": meta[KEY + "protocolVersion"]}
        return error(msg_id, -32022, "Unsupported protocol version", data)
    hint = {"resultType": "complete", "ttlMs": 60000, "cacheScope": "public"}
    if method == "server/discover":
        result: dict[str, Any] = {
            "supportedVersions": [VERSION],
            "capabilities": {"tools": {}},
            "_meta": {KEY + "serverInfo": {"name": "modern-only", "version": "1"}},
            **hint,
        }
    elif method == "tools/list":
        page = 1 if params.get("cursor") == "p2" else 0
        result = {"tools": TOOLS[1:] if page else TOOLS[:1], **hint}
        if page == 0:
            result["nextCursor"] = "p2"
    elif method == "tools/call" and params.get("name") == "add":
        args = params.get("arguments") or {}
        text = str(args.get("a", 0) + args.get("b", 0))
        result = {"content": [{"type": "text", "text": text}], "resultType": "complete"}
    elif method == "tools/call" and params.get("name") == "meta":
        text = json.dumps(meta)
        result = {"content": [{"type": "text", "text": text}], "resultType": "complete"}
    elif method == "tools/call" and params.get("name") == "refuse":
        # As if it disliked our envelope: the gateway must not relay this.
        data = {"supported": [VERSION], "requested": VERSION}
        return error(msg_id, -32022, "Unsupported protocol version", data)
    else:
        return error(msg_id, -32601, f"Method not found: {method}")
    return {"jsonrpc": "2.0", "id": msg_id, "result": result}


def main() -> None:
    """Serve newline-delimited JSON-RPC on stdin/stdout until EOF."""
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
