"""Test peer "tracker": an official-SDK Streamable HTTP server acting for whoever's token it gets.

Usage::

    python tests/servers/consent_backend.py PORT RECORD_FILE

Listing needs no token (the gateway's catalog session sends none); the
tool ``whoami`` needs the person's bearer token: it answers with the
token's ``sub`` (the person who consented) and appends one JSON line
``{"sub": ..., "token": ...}`` to RECORD_FILE, so a test can check whose
token each call carried. Without a bearer it fails. The token is read, not
verified: the authorization server's signature is not what is tested here.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.fastmcp import Context, FastMCP


def _sub(token: str) -> str:
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return ""
    sub = claims.get("sub") if isinstance(claims, dict) else None
    return sub if isinstance(sub, str) else ""


def build(record: Path) -> Any:
    """The SDK's Streamable HTTP app with the recording tool."""
    mcp = FastMCP("tracker", log_level="WARNING")

    @mcp.tool()
    def whoami(ctx: Context) -> str:  # type: ignore[type-arg]
        """Who this call acts for: the sub of the bearer token it carried."""
        request = ctx.request_context.request
        value = request.headers.get("authorization", "") if request is not None else ""
        token = value[7:] if value.startswith("Bearer ") else ""
        if not token:
            raise ValueError("this tool acts for a person: no bearer token")
        sub = _sub(token)
        with record.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"sub": sub, "token": token}) + "\n")
        return f"acting for {sub}"

    return mcp.streamable_http_app()


def main() -> None:
    """Serve on 127.0.0.1:PORT until terminated."""
    port = int(sys.argv[1])
    uvicorn.run(build(Path(sys.argv[2])), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
