"""Test peer "traced": tells which W3C trace context each request reached it with.

Usage::

    python tests/servers/traced.py stdio
    python tests/servers/traced.py PORT        # Streamable HTTP at /mcp

An official-SDK FastMCP server. Its tool ``trace_context`` answers with the
``traceparent`` it received, as JSON: ``{"meta": params._meta.traceparent,
"header": the HTTP request's traceparent header}`` (``header`` is null on
stdio), so a test sees what the gateway passed on, on both transports
(issue 18: "a backend records the traceparent it received"). ``fail``
raises, so the SDK answers ``isError: true``.
"""

from __future__ import annotations

import json
import sys

from mcp.server.fastmcp import Context, FastMCP


def build(port: int = 0) -> FastMCP:
    """The server; ``port`` is used by the Streamable HTTP transport only."""
    server = FastMCP("traced", port=port)

    @server.tool()
    def trace_context(ctx: Context) -> str:  # type: ignore[type-arg]  # FastMCP's own generic
        """The trace context this request arrived with."""
        meta = ctx.request_context.meta
        extra = (meta.model_extra or {}) if meta is not None else {}
        request = ctx.request_context.request
        headers = getattr(request, "headers", None)
        header = headers.get("traceparent") if headers is not None else None
        return json.dumps({"meta": extra.get("traceparent"), "header": header})

    @server.tool()
    def fail() -> str:
        """Always raises: a tool error (``isError: true``)."""
        raise ValueError("traced: failing on purpose")

    return server


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        build().run(transport="stdio")
    else:
        build(int(sys.argv[1])).run(transport="streamable-http")
