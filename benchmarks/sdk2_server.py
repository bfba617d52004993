"""An official SDK 2.x backend (``MCPServer``, stdio) with ``BENCH_TOOLS`` tools.

Run with the SDK 2.x interpreter (``.venv-sdk2/bin/python``; mcp 2.x cannot
share a virtualenv with the 1.x peers). It serves both eras, as a server
built on the SDK does: the gateway's probe finds 2026-07-28 here. The start-up
benchmark (``benchmarks/startup_sdk2.py``) starts many of them at once.

``sdk2_server.py http PORT [json]`` serves the same tools over Streamable
HTTP instead, the direct baseline of ``benchmarks/single_caller.py``: as the
SDK serves it by default (answers as SSE streams) or, with ``json``, with the
SDK's ``json_response`` option. uvicorn's access log is off (log level
WARNING), so the direct server is not measured writing a line per request.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench-sdk2")


def _echo(text: str = "") -> str:
    """Echo text back."""
    return text


for number in range(int(os.environ.get("BENCH_TOOLS", "50"))):
    server.add_tool(_echo, name=f"echo_{number:02d}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.settings.log_level = "WARNING"
        anyio.run(
            lambda: server.run_streamable_http_async(
                host="127.0.0.1", port=int(sys.argv[2]), json_response=sys.argv[3:4] == ["json"]
            )
        )
    else:
        server.run("stdio")
