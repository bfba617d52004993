"""Test peer "bearer": an official-SDK FastMCP Streamable HTTP server that requires a bearer token.

Usage::

    python tests/servers/bearer_backend.py PORT RECORD_FILE [TRANSPORT]

TRANSPORT is ``streamable-http`` (default, endpoint ``/mcp``) or ``sse``
(the legacy HTTP+SSE transport: ``/sse``, posting to ``/messages/``).

Every HTTP request's ``Authorization`` header is appended to RECORD_FILE,
one JSON line each (``{"method": ..., "authorization": ...}``), before
anything else happens, so a test can read exactly what the gateway sent.
A request without ``Bearer <token>`` is answered 401, and so is one whose
token is a line of ``RECORD_FILE.revoked`` (a test writes a token there to
make the backend refuse it, as a resource server does with a revoked or
expired token; a line ``*`` refuses every token). Everything else reaches the SDK's app at ``/mcp``.

Tools: ``echo(text)`` and ``add(a, b)``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.fastmcp import FastMCP

Scope = dict[str, Any]


def build(record: Path, transport: str = "streamable-http") -> Any:
    """The SDK's Streamable HTTP app behind the recording, bearer-requiring middleware."""
    mcp = FastMCP("bearer", log_level="WARNING", stateless_http=False)

    @mcp.tool()
    def echo(text: str) -> str:
        """Echo the text back, prefixed with "bearer: "."""
        return "bearer: " + text

    @mcp.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    inner = mcp.sse_app() if transport == "sse" else mcp.streamable_http_app()
    revoked = record.with_name(record.name + ".revoked")

    async def app(scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        value = headers.get("authorization")
        with record.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"method": scope["method"], "authorization": value}) + "\n")
        token = value[7:] if value and value.startswith("Bearer ") else ""
        refused = set(revoked.read_text().split()) if revoked.exists() else set()
        if not token or token in refused or "*" in refused:
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer error="invalid_token"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b'{"error":"invalid_token"}'})
            return
        await inner(scope, receive, send)

    return app


def main() -> None:
    """Serve on 127.0.0.1:PORT until terminated."""
    port = int(sys.argv[1])
    record = Path(sys.argv[2])
    transport = sys.argv[3] if len(sys.argv) > 3 else "streamable-http"
    uvicorn.run(build(record, transport), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
