"""A minimal, fast stdio MCP server for benchmarks.

Environment:
    BENCH_TOOLS: how many tools to list (default 1); tool 0 is ``echo``,
        the rest ``tool_0001``... with a small input schema each.
    BENCH_PAYLOAD_BYTES: if set, a ``payload`` tool is listed too; it
        returns a text of that many bytes (or of ``arguments.bytes``).
    BENCH_TOOLS_FILE: if set, a JSON list of tool definitions listed after
        ``echo`` instead of the ``tool_NNNN`` ones (realistic names and
        descriptions, for the search-mode benchmark).
    BENCH_CHANGE: if set, a ``change`` tool is listed too. Calling it flips
        the tool list (a tool ``extra`` appears or disappears) and sends
        ``notifications/tools/list_changed`` *before* the result; the
        result's text is the CLOCK_MONOTONIC time of that emission in
        nanoseconds, so a benchmark can time the fan-out from the source.

It answers initialize, ping, tools/list (one page) and tools/call, and does
as little work as it can so that it measures the gateway, not itself.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import msgspec

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()
_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}
_LIST_CHANGED = b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n'


def _tool(name: str, description: str) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": _SCHEMA}


def _tools(count: int, payload: bool = False, change: bool = False) -> list[dict[str, Any]]:
    tools = [_tool("echo", "Echo text back.")]
    if payload:
        tools.append(_tool("payload", "Return a text of BENCH_PAYLOAD_BYTES bytes."))
    if change:
        tools.append(_tool("change", "Flip the tool list and send list_changed."))
    tools += [_tool(f"tool_{i:04d}", f"Benchmark tool {i}.") for i in range(1, count)]
    return tools


def main() -> None:
    """Serve until stdin closes."""
    payload_size = int(os.environ.get("BENCH_PAYLOAD_BYTES", "0"))
    change = bool(os.environ.get("BENCH_CHANGE"))
    base_tools = _tools(int(os.environ.get("BENCH_TOOLS", "1")), payload_size > 0, change)
    tools_file = os.environ.get("BENCH_TOOLS_FILE")
    if tools_file:
        with open(tools_file, "rb") as handle:
            base_tools = [base_tools[0], *_decoder.decode(handle.read())]
    listings = [
        _encoder.encode({"tools": base_tools}),
        _encoder.encode({"tools": [*base_tools, _tool("extra", "Appears and disappears.")]}),
    ]
    flipped = 0
    capabilities = {"tools": {"listChanged": True} if change else {}}
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    for line in stdin:
        if not line.strip():
            continue
        msg = _decoder.decode(line)
        if "id" not in msg or "method" not in msg:
            continue
        method = msg["method"]
        head = b'{"jsonrpc":"2.0","id":' + _encoder.encode(msg["id"]) + b',"result":'
        if method == "initialize":
            version = msg.get("params", {}).get("protocolVersion", "2025-11-25")
            body = _encoder.encode(
                {
                    "protocolVersion": version,
                    "capabilities": capabilities,
                    "serverInfo": {"name": "bench", "version": "1"},
                }
            )
        elif method == "tools/list":
            body = listings[flipped]
        elif method == "tools/call":
            params = msg.get("params", {})
            name = params.get("name")
            if name == "payload":
                size = params.get("arguments", {}).get("bytes", payload_size)
                text = "x" * int(size)
            elif name == "change" and change:
                flipped ^= 1
                stdout.write(_LIST_CHANGED)
                stdout.flush()
                text = str(time.clock_gettime_ns(time.CLOCK_MONOTONIC))
            else:
                text = str(params.get("arguments", {}).get("text", ""))
            body = _encoder.encode({"content": [{"type": "text", "text": text}]})
        elif method == "ping":
            body = b"{}"
        else:
            stdout.write(
                b'{"jsonrpc":"2.0","id":'
                + _encoder.encode(msg["id"])
                + b',"error":{"code":-32601,"message":"method not found"}}\n'
            )
            stdout.flush()
            continue
        stdout.write(head + body + b"}\n")
        stdout.flush()


if __name__ == "__main__":
    main()
