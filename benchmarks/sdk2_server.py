"""An official SDK 2.x backend (``MCPServer``, stdio) with ``BENCH_TOOLS`` tools.

Run with the SDK 2.x interpreter (``.venv-sdk2/bin/python``; mcp 2.x cannot
share a virtualenv with the 1.x peers). It serves both eras, as a server
built on the SDK does: the gateway's probe finds 2026-07-28 here. The start-up
benchmark (``benchmarks/startup_sdk2.py``) starts many of them at once.
"""

from __future__ import annotations

import os

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench-sdk2")


def _echo(text: str = "") -> str:
    """Echo text back."""
    return text


for number in range(int(os.environ.get("BENCH_TOOLS", "50"))):
    server.add_tool(_echo, name=f"echo_{number:02d}")


if __name__ == "__main__":
    server.run("stdio")
