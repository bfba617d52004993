"""FastMCP's proxy over the benchmark's stdio backends, on Streamable HTTP.

Runs inside the FastMCP venv that ``benchmarks/peers`` installs (never in
the gateway's ``.venv``: FastMCP pins its own ``mcp``). Each backend is
proxied with ``fastmcp.server.create_proxy`` over a kept-alive stdio
transport and mounted under its name, so its ``echo`` tool is
``<name>_echo``; the whole server listens on 127.0.0.1 at ``/mcp`` with
FastMCP's defaults otherwise (SSE responses, sessions), as a user running
it would get.

Usage::

    python fastmcp_proxy.py PORT NAME=JSON_ARGV [NAME=JSON_ARGV ...]
"""

from __future__ import annotations

import json
import sys

from fastmcp import FastMCP
from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy


def main() -> None:
    """Build the proxy and serve until terminated."""
    port = int(sys.argv[1])
    root = FastMCP("bench-peer-fastmcp")
    for spec in sys.argv[2:]:
        name, _, argv_json = spec.partition("=")
        argv = json.loads(argv_json)
        transport = StdioTransport(command=argv[0], args=argv[1:], keep_alive=True)
        root.mount(create_proxy(transport, name=name), namespace=name)
    root.run(
        transport="http",
        host="127.0.0.1",
        port=port,
        path="/mcp",
        log_level="warning",
        show_banner=False,
    )


if __name__ == "__main__":
    main()
