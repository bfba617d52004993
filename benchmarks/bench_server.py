"""A minimal, fast stdio MCP server for benchmarks.

Environment:
    BENCH_TOOLS: how many tools to list (default 1); tool 0 is ``echo``,
        the rest ``tool_0001``... with a small input schema each.
    BENCH_PAYLOAD_BYTES: if set, ``payload`` returns a text of that size.

It answers initialize, ping, tools/list (one page) and tools/call, and does
as little work as it can so that it measures the gateway, not itself.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import msgspec

_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


def _tools(count: int) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    tools = [{"name": "echo", "description": "Echo text back.", "inputSchema": schema}]
    tools += [
        {"name": f"tool_{i:04d}", "description": f"Benchmark tool {i}.", "inputSchema": schema}
        for i in range(1, count)
    ]
    return tools


def main() -> None:
    """Serve until stdin closes."""
    tools_result = _encoder.encode({"tools": _tools(int(os.environ.get("BENCH_TOOLS", "1")))})
    payload_size = int(os.environ.get("BENCH_PAYLOAD_BYTES", "0"))
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
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "bench", "version": "1"},
                }
            )
        elif method == "tools/list":
            body = tools_result
        elif method == "tools/call":
            params = msg.get("params", {})
            if params.get("name") == "payload":
                text = "x" * payload_size
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
