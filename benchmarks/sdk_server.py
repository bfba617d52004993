"""The official-SDK echo backend for the tool-call benchmark (FastMCP, stdio).

Logging is set to WARNING: at FastMCP's default (INFO) every request writes
a line to stderr, which the gateway reads and the direct baseline does not,
and the benchmark would then measure logging rather than either path.
"""

from __future__ import annotations

from mcp.server.fastmcp import FastMCP

server = FastMCP("bench-sdk", log_level="WARNING")


@server.tool()
def echo(text: str = "") -> str:
    """Echo text back."""
    return text


if __name__ == "__main__":
    server.run()
